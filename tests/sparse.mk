# tests fragment: see Makefile.am
# SPLADE sparse output: the splade head and the CSR writer against
# transformers' masked-LM models through SpladePooling's formula, imports of
# *ForMaskedLM checkpoints and a SparseEncoder folder, layouts, a resume
# after SIGKILL, bf16 and int8, top-k and threshold, and its bad inputs.
dist_check_SCRIPTS += tests/sparse/sparse.sh
TESTS += tests/sparse/sparse.sh
EXTRA_DIST += tests/sparse/sparse.py
