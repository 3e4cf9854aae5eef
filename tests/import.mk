# tests fragment: see Makefile.am
# tfenc-import: the safetensors reader, imports of small random checkpoints
# (exact content, error cases), and the sentence-transformers parity test.
check_PROGRAMS += tests/import/test_safetensors
TESTS += tests/import/test_safetensors
tests_import_test_safetensors_SOURCES = tests/import/test_safetensors.c
tests_import_test_safetensors_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests
tests_import_test_safetensors_LDADD = tests/harness/libunit.la core/libtfenc.la $(CUNIT_LIBS)
# The torch.save reader's pickle machine: state dicts, and pickles that would
# run code.
check_PROGRAMS += tests/import/test_torch_checkpoint
TESTS += tests/import/test_torch_checkpoint
tests_import_test_torch_checkpoint_SOURCES = tests/import/test_torch_checkpoint.c
tests_import_test_torch_checkpoint_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests
tests_import_test_torch_checkpoint_LDADD = tests/harness/libunit.la core/libtfenc.la $(CUNIT_LIBS)
# tfenc-import's table of Hugging Face names: no name of an architecture or
# head maps to two canonical tensors, no entry is unreachable.
check_PROGRAMS += tests/import/test_tensor_names
TESTS += tests/import/test_tensor_names
tests_import_test_tensor_names_SOURCES = tests/import/test_tensor_names.c \
	drivers/import/tensor_names.c
tests_import_test_tensor_names_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests \
	-I$(top_srcdir)/drivers
tests_import_test_tensor_names_LDADD = tests/harness/libunit.la core/libtfenc.la $(CUNIT_LIBS)

# architectures.sh: every mapped architecture on random weights against
# transformers / the published code; parity_mpnet.sh: the real
# all-mpnet-base-v2 from text and from token ids, fetched once into a cache
# by fetch_mpnet.sh;
# st_features.sh: prompts and Matryoshka widths against sentence-transformers;
# st_chunks.sh: long documents cut into chunks, against the model's windows;
# heads.sh: task heads (*ForSequenceClassification) from transformers;
# head_file.sh: a head in a weights file of its own beside the encoder's;
# pairs.sh: cross-encoders on pairs of texts against CrossEncoder.predict;
# deberta.sh: DeBERTa-v2/v3's disentangled attention, base and classifier;
# gte.sh: GTE v1.5 and mGTE (model_type new), NTK-scaled RoPE, from text;
# checkpoints.sh: legacy tensor names, sharded safetensors, pytorch_model.bin,
# and bad or hostile folders (a pickle that would run code);
# jina_v3.sh: jina-embeddings-v3's rotary XLM-R with a task's LoRA adapter
# merged (--task), against the published code's math, and bad adapters;
# nomic_moe.sh: nomic-embed-text-v2-moe's mixture-of-experts layers against
# contrastors' and megablocks' math, and folders of the wrong experts.
# modernbert_2025.sh: mmBERT, Ettin and granite-embedding-english-r2 from
# text through their own tokenizers, against the reference, and bad folders.
# bge_m3.sh: BGE-M3's colbert, dense and sparse heads in one job, against
# BGEM3FlagModel's formulas over transformers' XLMRobertaModel, and bad .pt files.
dist_check_SCRIPTS += tests/import/import.sh tests/import/parity.sh tests/import/parity_mpnet.sh \
	tests/import/fetch_mpnet.sh tests/import/architectures.sh \
	tests/import/st_features.sh tests/import/st_chunks.sh tests/import/heads.sh \
	tests/import/head_file.sh \
	tests/import/pairs.sh tests/import/deberta.sh tests/import/checkpoints.sh \
	tests/import/jina_v3.sh tests/import/gte.sh tests/import/nomic_moe.sh \
	tests/import/modernbert_2025.sh tests/import/bge_m3.sh
TESTS += tests/import/import.sh tests/import/architectures.sh tests/import/st_features.sh \
	tests/import/st_chunks.sh tests/import/heads.sh tests/import/head_file.sh \
	tests/import/pairs.sh tests/import/deberta.sh \
	tests/import/checkpoints.sh tests/import/jina_v3.sh tests/import/gte.sh tests/import/nomic_moe.sh \
	tests/import/modernbert_2025.sh tests/import/bge_m3.sh
FEWER_CASES_UNDER_SANITIZERS += tests/import/st_features.sh tests/import/st_chunks.sh \
	tests/import/heads.sh tests/import/architectures.sh tests/import/jina_v3.sh \
	tests/import/nomic_moe.sh tests/import/modernbert_2025.sh tests/import/bge_m3.sh
# Reference comparisons of real models, normal build only (tests/local.mk):
# under the sanitizers every architecture's layers and tfenc-import mapping
# run in architectures.sh (small random models: MPNet's relative positions
# included), the real tokenizers in test_tokenizer and the tokenizer
# fuzzers, bf16 and int8 jobs in precision_isa.sh, the int8 gate in
# test_accuracy_gate.
NORMAL_BUILD_ONLY_TESTS += tests/import/parity.sh tests/import/parity_mpnet.sh
EXTRA_DIST += tests/import/make_checkpoint.py tests/import/check_import.py \
	tests/import/st_reference.py tests/import/compare_embeddings.py tests/import/check_precision_attributes.py tests/import/sentences.txt \
	tests/import/architectures.py tests/import/reference_models.py tests/import/st_features.py \
	tests/import/st_chunks.py tests/import/unit_means.py tests/import/heads.py tests/import/head_file.py \
	tests/import/pairs.py \
	tests/import/deberta.py tests/import/checkpoints.py tests/import/jina_v3.py \
	tests/import/gte.py tests/import/nomic_moe.py tests/import/folder_checks.sh \
	tests/import/modernbert_2025.py tests/import/bge_m3.py

# static.sh: model2vec (static-embedding) folders saved by model2vec itself,
# against StaticModel.encode in a venv of its own (tests/setup-model2vec-venv),
# at 1x1 and 2x1, and broken folders.
dist_check_SCRIPTS += tests/import/static.sh
TESTS += tests/import/static.sh
EXTRA_DIST += tests/import/static_models.py tests/setup-model2vec-venv \
	tests/requirements-model2vec.txt
