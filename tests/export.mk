# tests fragment: see Makefile.am
# tfenc-export (drivers/export/): outputs of every kind, complete, from 2
# ranks and SIGKILLed part-way, exported as Parquet and checked column by
# column against h5py with pyarrow, then read by pandas, Polars and DuckDB;
# several --rows-per-file; its bad inputs (and, in a build without Arrow,
# its one line).
dist_check_SCRIPTS += tests/export/export.sh
TESTS += tests/export/export.sh
# (its memory bound is the normal build's: see the script)
FEWER_CASES_UNDER_SANITIZERS += tests/export/export.sh
EXTRA_DIST += tests/export/make_outputs.py tests/export/check_parquet.py tests/export/enlarge.py
