# The tokenizers are part of libtfenc (the runner tokenizes corpora):
# tokenizer.json and vocab.txt, with PCRE2 for the split patterns.
core_libtfenc_la_SOURCES += core/tokenizer.c core/tokenizer.h core/tokenizer_internal.h \
	core/tokenizer_model.c core/tokenizer_normalize.c core/tokenizer_split.c \
	core/tokenizer_json.c core/tokenizer_store.c
core_libtfenc_la_LIBADD += $(PCRE2_LIBS)
