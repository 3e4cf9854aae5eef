# End-to-end comparisons with PyTorch: the reference models (tests/reference/)
# and the example jobs (jobs/), each run by tfenc-batch alone and under
# mpiexec -n 1. The PyTorch side runs with $(REFERENCE_PYTHON) (Debian's torch);
# jobs/bert-text's tokenization uses the venv's Hugging Face tokenizers when
# present. Generated data goes to tests/data/generated/{reference,jobs}/.
dist_check_SCRIPTS += tests/reference/run_reference.sh tests/reference/run_jobs.sh
TESTS += tests/reference/run_reference.sh tests/reference/run_jobs.sh
EXTRA_DIST += tests/environment.sh tests/reference/make_reference.py tests/reference/compare.py \
	tests/reference/wordpiece.py \
	jobs/original-postnorm/README jobs/original-postnorm/job.ini jobs/original-postnorm/make-model \
	jobs/prenorm-gpt/README jobs/prenorm-gpt/job.ini jobs/prenorm-gpt/make-model \
	jobs/bert-text/README jobs/bert-text/job.ini jobs/bert-text/make-model \
	jobs/bert-text/corpus.txt jobs/bert-text/vocab.txt \
	jobs/shards/README jobs/shards/job.ini jobs/shards/make-model
