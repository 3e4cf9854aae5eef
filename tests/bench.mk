# bench: tfenc against ONNX Runtime and PyTorch (issue 6). Not part of
# `make check`: `make bench` builds the sgemm timer and runs the harness,
# which prints the table and writes bench/bench.csv and bench/bench.png.
# BENCH_ARGS passes options to tests/bench/bench.py (e.g. --bf16).

# OpenBLAS sgemm at the model's GEMM shapes: the roofline of the table.
# A check program, so `make check` keeps it compiling; no test runs it.
check_PROGRAMS += tests/bench/sgemm_rate
tests_bench_sgemm_rate_SOURCES = tests/bench/sgemm_rate.c
tests_bench_sgemm_rate_LDADD = $(OPENBLAS_LIBS)
EXTRA_DIST += tests/bench/bench.py tests/bench/run.sh

BENCH_ARGS =
bench: all tests/bench/sgemm_rate$(EXEEXT)
	abs_top_builddir='$(abs_top_builddir)' MPIEXEC='$(MPIEXEC)' \
	  sh $(top_srcdir)/tests/bench/run.sh --builddir '$(abs_top_builddir)' $(BENCH_ARGS)
.PHONY: bench

# The harness itself, on a tiny model (seconds; no timing asserted).
dist_check_SCRIPTS += tests/bench/smoke.sh
TESTS += tests/bench/smoke.sh
