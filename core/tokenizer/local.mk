# tokenizer: tokenizer.json and vocab.txt, normalizer -> pre-tokenizer ->
# model, with PCRE2 for the split patterns (the runner tokenizes corpora).
# Inside, files depend only downward in the order the pipeline runs: the
# leaves (text: scratch text, UTF-8, character classes; pattern: literal and
# regex matching) <- normalize <- split <- model <- tokenizer (encode), json
# and store (reading and writing the description). Internal names start
# with tok_ (tokenizer_internal.h).
# may use: base
core_libtfenc_la_SOURCES += \
	core/tokenizer/tokenizer.c core/tokenizer/tokenizer.h core/tokenizer/tokenizer_types.h \
	core/tokenizer/tokenizer_internal.h \
	core/tokenizer/tokenizer_text.c core/tokenizer/tokenizer_pattern.c \
	core/tokenizer/tokenizer_normalize.c core/tokenizer/tokenizer_split.c \
	core/tokenizer/tokenizer_model.c core/tokenizer/tokenizer_json.c \
	core/tokenizer/tokenizer_store.c
core_libtfenc_la_LIBADD += $(PCRE2_LIBS)
