# I/O tests: corpus shares and validation, 16-bit floats, SHA-256, the
# output writer (serial), and the same file written by 3 MPI ranks.
check_PROGRAMS += tests/test_corpus tests/test_output tests/io/mpi_output tests/io/node_arena
TESTS += tests/test_corpus tests/test_output tests/io/mpi_output.sh tests/io/node_arena.sh
dist_check_SCRIPTS += tests/io/mpi_output.sh tests/io/node_arena.sh
EXTRA_DIST += tests/io/check_output.py

tests_test_corpus_SOURCES = tests/test_corpus.c
tests_test_corpus_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests
tests_test_corpus_LDADD = tests/harness/libunit.la core/libtfenc.la $(CUNIT_LIBS) $(HDF5_LIBS) $(JANSSON_LIBS)

# Inputs cut short while read: a text corpus cut in the middle of a line and HDF5 corpora
# (contiguous and chunked) cut after they were opened fail the read.
check_PROGRAMS += tests/test_truncated_inputs
TESTS += tests/test_truncated_inputs
tests_test_truncated_inputs_SOURCES = tests/test_truncated_inputs.c
tests_test_truncated_inputs_CFLAGS = $(TEST_CFLAGS)
tests_test_truncated_inputs_LDADD = $(UNIT_TEST_LIBS) $(JANSSON_LIBS)

tests_test_output_SOURCES = tests/test_output.c
tests_test_output_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests
tests_test_output_LDADD = tests/harness/libunit.la core/libtfenc.la $(CUNIT_LIBS) $(HDF5_LIBS) $(MPI_LIBS)

tests_io_mpi_output_SOURCES = tests/io/mpi_output.c
tests_io_mpi_output_LDADD = core/libtfenc.la $(HDF5_LIBS) $(MPI_LIBS)

tests_io_node_arena_SOURCES = tests/io/node_arena.c
tests_io_node_arena_LDADD = core/libtfenc.la $(MPI_LIBS)

# [job] keep_fields: the fields of JSON Lines and Parquet records beside ids, checked
# value by value against the corpus read in Python, bitwise at 1 and 2 ranks and after
# SIGKILL + resume, in --status and tfenc-export's Parquet; each bad input refused.
TESTS += tests/io/keep_fields.sh
dist_check_SCRIPTS += tests/io/keep_fields.sh
EXTRA_DIST += tests/io/make_kept.py tests/io/check_kept.py

# Corpora of many files, compressed (gzip, zstd, xz) or not, by
# directory, glob and list file: outputs bitwise equal to one file's at 1-3
# ranks and after SIGKILL + resume, and bad shards refused naming the line.
TESTS += tests/io/shards.sh
FEWER_CASES_UNDER_SANITIZERS += tests/io/shards.sh
dist_check_SCRIPTS += tests/io/shards.sh
EXTRA_DIST += tests/io/make_shards.py tests/io/make_parquet.py

# A sharded corpus is its files, not their spellings: a 2-rank job stopped by
# SIGKILL or SIGTERM resumes bitwise with the command --status prints, from
# another directory, through '..' and through a symbolic link; one file
# reached twice (links, ./a and a) is refused; names with a tab or a
# newline survive corpus_shards, document_source and --status.
TESTS += tests/io/shard_paths.sh
dist_check_SCRIPTS += tests/io/shard_paths.sh

# [job] null_text: error naming the line, empty, or skip: rows equal to the
# filtered corpus's at 1-3 ranks and after SIGKILL + resume, each traced to
# its shard and line (document_source), JSON Lines and Parquet.
TESTS += tests/io/null_text.sh
dist_check_SCRIPTS += tests/io/null_text.sh
EXTRA_DIST += tests/io/make_null_texts.py tests/io/make_null_parquet.py tests/io/check_sources.py

# The corpus formats' table: --list-formats, docs/job-file.md's table of
# formats checked against it, the file names choosing a format through it,
# and --dry-run saying which reader reads the corpus.
TESTS += tests/io/formats.sh
dist_check_SCRIPTS += tests/io/formats.sh
EXTRA_DIST += tests/formats_doc.py

# The decompression layer: every codec round-trips by line and by seek, and
# a compressed stream cut at any length is an error.
check_PROGRAMS += tests/test_stream
TESTS += tests/test_stream
tests_test_stream_SOURCES = tests/test_stream.c
tests_test_stream_CFLAGS = $(TEST_CFLAGS)
tests_test_stream_LDADD = $(UNIT_TEST_LIBS) $(COMPRESSION_LIBS)

# The corpus's windows (input/windows) and owning an output (output/ownership),
# on one process (the windows on MPI_COMM_SELF).
check_PROGRAMS += tests/test_windows tests/test_ownership
TESTS += tests/test_windows tests/test_ownership
tests_test_windows_SOURCES = tests/test_windows.c
tests_test_windows_CFLAGS = $(TEST_CFLAGS)
tests_test_windows_LDADD = $(UNIT_TEST_LIBS)
tests_test_ownership_SOURCES = tests/test_ownership.c
tests_test_ownership_CFLAGS = $(TEST_CFLAGS)
tests_test_ownership_LDADD = $(UNIT_TEST_LIBS)
