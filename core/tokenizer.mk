# The WordPiece tokenizer is part of libtfenc (the runner tokenizes corpora).
core_libtfenc_la_SOURCES += core/tokenizer.c core/tokenizer.h
