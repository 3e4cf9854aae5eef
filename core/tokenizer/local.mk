# tokenizer: tokenizer.json and vocab.txt, normalizer -> pre-tokenizer ->
# model, with PCRE2 for the split patterns (the runner tokenizes corpora).
core_libtfenc_la_SOURCES += \
	core/tokenizer/tokenizer.c core/tokenizer/tokenizer.h core/tokenizer/tokenizer_internal.h \
	core/tokenizer/tokenizer_model.c core/tokenizer/tokenizer_normalize.c \
	core/tokenizer/tokenizer_split.c core/tokenizer/tokenizer_json.c \
	core/tokenizer/tokenizer_store.c
core_libtfenc_la_LIBADD += $(PCRE2_LIBS)
