# tests fragment: see Makefile.am
# Issue 28 item 3: compact pooled vectors (output_dtype = int8, uint8,
# binary, ubinary) against sentence-transformers' quantize_embeddings, at
# several layouts and after a resume, with calibrated and given ranges, and
# their bad inputs; minilm.sh does the same on all-MiniLM-L6-v2 and real text.
dist_check_SCRIPTS += tests/compact/compact.sh tests/compact/minilm.sh
TESTS += tests/compact/compact.sh tests/compact/minilm.sh
EXTRA_DIST += tests/compact/compare_quantized.py tests/compact/unfinish.py
