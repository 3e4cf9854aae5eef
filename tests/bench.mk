# bench: tfenc against the engines a user can install, on real
# models and real text. Not part of `make check`: `make bench` builds the
# GEMM timer, installs the peers into their own venv on first use
# (tests/bench/setup-bench) and runs the harness, which prints the table and
# writes bench/bench.csv and bench/bench.png in the build tree.
# BENCH_ARGS passes options to tests/bench/bench.py (e.g. --repeat 2).

# The GEMM libraries' rates at the model's shapes: the rooflines of the
# table. A check program, so that `make check` builds it (the smoke test
# runs it briefly).
check_PROGRAMS += tests/bench/gemm_rate
tests_bench_gemm_rate_SOURCES = tests/bench/gemm_rate.c
tests_bench_gemm_rate_LDADD = $(OPENBLAS_LIBS) $(ONEDNN_LIBS)
EXTRA_DIST += tests/bench/bench.py tests/bench/run.sh tests/bench/setup-bench \
  tests/bench/peers.py tests/bench/corpus.py tests/bench/outputs.py \
  tests/bench/long_documents.py \
  tests/bench/requirements-onnxruntime.txt \
  tests/bench/requirements-openvino.txt tests/deps/bench.txt

BENCH_ARGS =
bench: all tests/bench/gemm_rate$(EXEEXT)
	abs_top_builddir='$(abs_top_builddir)' MPIEXEC='$(MPIEXEC)' \
	  sh $(top_srcdir)/tests/bench/run.sh --builddir '$(abs_top_builddir)' $(BENCH_ARGS)
.PHONY: bench

# A static-embedding (model2vec) job against tokenizing the same corpus
# alone, in tokens per CPU-second (tests/bench/static.sh; prints, asserts
# nothing). BENCH_STATIC_COPIES: how many times the text is repeated;
# BENCH_STATIC_ROUNDS: runs of each measurement, their medians printed.
BENCH_STATIC_COPIES = 200
BENCH_STATIC_ROUNDS = 3
bench-static: all tests/tokenizer/tokenize_corpus$(EXEEXT)
	sh $(top_srcdir)/tests/bench/static.sh '$(abs_top_builddir)' $(BENCH_STATIC_COPIES) $(BENCH_STATIC_ROUNDS)
.PHONY: bench-static
EXTRA_DIST += tests/bench/static.sh

# Several outputs in one pass against one: all-MiniLM-L6-v2's embedding job
# alone and the same trunk ending in embeddings + a classifier's scores, 1
# rank x 1 thread, the median CPU-seconds of 3 runs of each taken in turns,
# and their ratio (tests/bench/multi_output.sh; prints, asserts nothing;
# issue 44's bar is 1.05). BENCH_MULTI_COPIES: how many times the text is
# repeated.
BENCH_MULTI_COPIES = 40
bench-multi-output: all
	sh $(top_srcdir)/tests/bench/multi_output.sh '$(abs_top_builddir)' $(BENCH_MULTI_COPIES)
.PHONY: bench-multi-output
EXTRA_DIST += tests/bench/multi_output.sh

# The harness itself on a tiny workload (well under a minute; no timing
# asserted; works offline without the peers).
# Normal build only (tests/local.mk): a Python harness, and the tfenc jobs it
# runs are layouts.sh's and precision_isa.sh's.
dist_check_SCRIPTS += tests/bench/smoke.sh
NORMAL_BUILD_ONLY_TESTS += tests/bench/smoke.sh
