#!/bin/sh
# Bad weights (NaN, Inf, missing datasets, truncated, wrong shapes), HDF5
# token-id corpora, text and JSON Lines corpora, the documented behaviour
# of odd but valid corpora, and broken safetensors checkpoints for
# tfenc-import.
# The rules every case is held to are in common.sh.
set -u
. "$(dirname "$0")/common.sh"

# --- weights
error "missing weights file"    "weights good/absent.h5: cannot open" "$(weights good/absent.h5)" job.ini
error "weights not HDF5"        "weights junk.h5: not an HDF5 file" "$(weights junk.h5)" job.ini
error "truncated weights"       "weights truncated-model.h5: " "$(weights truncated-model.h5)" job.ini
error "NaN in weights"          "dataset /encoder/2/ffn/in_weight holds a non-finite value" "$(weights nan.h5)" job.ini
error "Inf in weights"          "dataset /encoder/4/attention/qkv_weight holds a non-finite value" "$(weights inf.h5)" job.ini
error "weights dataset missing" "/encoder/3/ffn/out_bias" "$(weights no-bias.h5)" job.ini
error "d_model disagrees"       "expected shape \[1000, 32\], found \[1000, 64\]" 's/^d_model = .*/d_model = 32/' job.ini
error "vocab_size disagrees"    "dataset /embeddings/token_embeddings: expected shape \[999, 64\]" 's/^vocab_size = .*/vocab_size = 999/' job.ini

# --- HDF5 token-id corpora
error "id out of vocabulary"    "token id 5000 is outside the vocabulary" "$(hdf5_input big-ids.h5)" job.ini
error "empty corpus"            "the corpus holds no documents" "$(hdf5_input empty-ids.h5)" job.ini
error "input not HDF5"          "text-named.h5: cannot open the HDF5 corpus" "$(hdf5_input text-named.h5)" job.ini
error "truncated HDF5 input"    "truncated-input.h5: cannot open the HDF5 corpus" "$(hdf5_input truncated-input.h5)" job.ini
error "tokens of floats"        "float-tokens.h5: dataset 'tokens' must hold integers" "$(hdf5_input float-tokens.h5)" job.ini
error "tokens of rank 2"        "rank2-tokens.h5: dataset 'tokens' must have rank 1, found rank 2" "$(hdf5_input rank2-tokens.h5)" job.ini
error "offsets missing"         "no-offsets.h5: dataset 'offsets' not found" "$(hdf5_input no-offsets.h5)" job.ini
error "offsets not from 0"      "dataset 'offsets' must start at 0, found 1" "$(hdf5_input offsets-start.h5)" job.ini
error "offsets decrease"        "dataset 'offsets' decreases at entry 2" "$(hdf5_input offsets-decrease.h5)" job.ini
error "offsets end short"       "dataset 'offsets' ends at 3 but 'tokens' holds 4 tokens" "$(hdf5_input offsets-end.h5)" job.ini
error "negative token id"       "dataset 'tokens': document 1 has a negative token id -7" "$(hdf5_input negative-id.h5)" job.ini
error "int64 id beyond int32"   "dataset 'tokens': document 1 has token id 3000000000 at position 0, outside 0..2147483646" "$(hdf5_input huge-id.h5)" job.ini
error "uint64 id beyond int32"  "dataset 'tokens': document 1 has token id 18446744073709551615 at position 1" "$(hdf5_input huge-unsigned-id.h5)" job.ini
error "int64 negative id"       "dataset 'tokens': document 1 has a negative token id -1099511627776 at position 0" "$(hdf5_input huge-negative-id.h5)" job.ini
error "padded id beyond int32"  "dataset 'ids': document 1 has token id 34359738368 at position 1" "$(padded huge-padded-id.h5)" job.ini
error "never-written dataset"   "dataset 'offsets' declares 2400000 bytes of data but stores only 0" "$(hdf5_input unwritten.h5)" job.ini
error "padded length too long"  "dataset 'lengths': entry 1 is 5, outside \[0, 4\]" "$(padded padded-long.h5)" job.ini
error "padded ids of rank 1"    "dataset 'ids' must have rank 2, found rank 1" "$(padded padded-rank1.h5)" job.ini
error "padded half configured"  "needs both ids_dataset and lengths_dataset \(only ids_dataset is set\)" 's/^input_format = .*/input_format = hdf5\nids_dataset = tokens/' job.ini
error "tokenizer with ids"      "job.ini:[0-9]+: \[tokenizer\] is not used: the input holds token ids" '$a [tokenizer]\nvocab = vocab.txt' job.ini
error "truncation refused"      "more than max_seq_len" 's/^max_seq_len = .*/max_seq_len = 8\ntruncation = false/' job.ini

# --- text and JSON Lines corpora
error "text without vocabulary" "text input needs a vocabulary" 's#^input = .*#input = text.txt#; s#^input_format = .*#input_format = text#' job.ini
error "vocabulary missing"      "vocabulary [^ ]*absent.txt: cannot open: No such file" "$(text_input text.txt)" --set tokenizer.vocab=absent.txt job.ini
error "vocabulary lacks [CLS]"  "vocab-no-cls.txt lacks the special token \[CLS\]" "$(text_input text.txt)" --set tokenizer.vocab=vocab-no-cls.txt job.ini
error "vocabulary is /dev/zero" "vocabulary /dev/zero: is a character device" "$(text_input text.txt)" --set tokenizer.vocab=/dev/zero job.ini
error "corpus is an empty directory" "\[job\] input a-directory: the directory holds no file" "$(text_input a-directory)" job.ini
error "empty text corpus"       "the corpus holds no documents" "$(text_input empty.txt)" job.ini
error "NUL byte in a line"      "nul.txt: line 2: NUL byte at byte offset 16" "$(text_input nul.txt)" job.ini
error "UTF-16 text"             "utf16.txt: line 1: NUL byte at byte offset 3 \(is the file UTF-16 or binary\?\)" "$(text_input utf16.txt)" job.ini
error "invalid UTF-8 refused"   "bad-utf8.txt: document 1 \(0-based\): tokenizer: invalid UTF-8 at byte offset 7" \
  "$(text_input bad-utf8.txt 'text\ninvalid_utf8 = error')" job.ini
error "JSON field missing"      "records.jsonl: line 2: text field 'text' is missing" "$(text_input records.jsonl jsonl)" job.ini
error "JSON invalid"            "invalid.jsonl: line 2, column [0-9]+: invalid JSON" "$(text_input invalid.jsonl jsonl)" job.ini
error "JSON blank line"         "blank.jsonl: line 2: blank line" "$(text_input blank.jsonl jsonl)" job.ini
error "JSON not an object"      "array.jsonl: line 2: expected a JSON object, found an array" "$(text_input array.jsonl jsonl)" job.ini
error "JSON text not a string"  "number-text.jsonl: line 1: text field 'text' is an integer, expected a string" "$(text_input number-text.jsonl jsonl)" job.ini
error "JSON id missing"         "no-id.jsonl: line 2: id field 'id' is missing" "$(text_input no-id.jsonl 'jsonl\nid_field = id')" job.ini

# --- keys that cannot apply to the corpus's format or the model's head
# (issue 46, item 9): accepted, they did nothing or wrote nonsense (id_field
# on plain text wrote an `ids` dataset of empty strings).
error "id_field on plain text"  "job.ini:[0-9]+: \[job\] id_field: names a field of JSON Lines records or a Parquet column, but the corpus is text" \
  "$(text_input text.txt 'text\nid_field = id')" job.ini
error "id_field on token ids"   "\[job\] id_field: names a field of JSON Lines records or a Parquet column, but the corpus is hdf5" \
  "$(hdf5_input good/input.h5)" --set job.id_field=id job.ini
error "text_field on plain text" "\[job\] text_field: names a field of JSON Lines records or a Parquet column, but the corpus is text" \
  "$(text_input text.txt 'text\ntext_field = body')" job.ini
error "null_text on plain text" "\[job\] null_text: .*but the corpus is text" "$(text_input text.txt 'text\nnull_text = skip')" job.ini
error "max_id_bytes without id_field" "\[job\] max_id_bytes: applies to the ids of id_field, which is not set" \
  "$(text_input records.jsonl 'jsonl\nmax_id_bytes = 64')" job.ini
error "tokens_dataset on text"  "\[job\] tokens_dataset: names a dataset of an HDF5 token-id corpus, but the corpus is text" \
  "$(text_input text.txt 'text\ntokens_dataset = ids')" job.ini
error "invalid_utf8 on token ids" "\[job\] invalid_utf8: applies to text, but the corpus is hdf5 \(token ids\)" \
  's/^\[job\]/[job]\ninvalid_utf8 = error/' job.ini
error "truncation = false with chunks" "\[job\] truncation: long_documents = chunk cuts every long document into chunks" \
  "$(text_input text.txt 'text\nlong_documents = chunk\ntruncation = false')" job.ini
for key in "query_length = 16" "attend_to_mask_tokens = false" "query_marker = [unused0]" \
    "document_marker = [unused1]" "multivector_mode = document" "skip_punctuation = true"; do
  error "${key%% =*} without a multivector head" \
    "\[job\] ${key%% =*}: applies to a model that ends in a multivector head" \
    "$(text_input text.txt "text\\n$key")" job.ini
done

# --- lines of an @list file (issue 46, item 10): a NUL cut the path short
# (the rest of the line was dropped silently), a line of spaces was
# "cannot open".
printf 'text.txt\000.gz\n' > list-nul.txt
printf 'text.txt\n   \n' > list-spaces.txt
printf ' text.txt\n' > list-leading.txt
printf 'text.txt\t\n' > list-trailing.txt
error "@list line with a NUL"  "\[job\] input list [^ ]*list-nul.txt: line 1: NUL byte at byte 8" "$(text_input @list-nul.txt)" job.ini
error "@list line of spaces"   "\[job\] input list [^ ]*list-spaces.txt: line 2: holds only white space" "$(text_input @list-spaces.txt)" job.ini
error "@list path after a space" "\[job\] input list [^ ]*list-leading.txt: line 1: the path ' text.txt' begins with white space" \
  "$(text_input @list-leading.txt)" job.ini
error "@list path before a tab" "\[job\] input list [^ ]*list-trailing.txt: line 1: the path 'text.txt.' ends with white space" \
  "$(text_input @list-trailing.txt)" job.ini

# --- [prompts] values are JSON strings (issue 46, item 10): an unquoted
# one lost its trailing space.
error "unquoted [prompts] value" "job.ini:[0-9]+: \[prompts\] q = 'query:': a prompt is a JSON string in quotes" \
  "s#^input = .*#input = text.txt#; s#^input_format = .*#input_format = text\nprompt = q#; \$a [tokenizer]\nvocab = vocab.txt\n[prompts]\nq = query: " job.ini
error "unquoted [prompts] value by --set" "--set prompts.q=query:: a prompt is a JSON string in quotes" \
  "$(text_input text.txt 'text\nprompt = q')" --set prompts.q=query: job.ini

# --- odd but valid corpora: the documented behaviour (docs/job-file.md, core/input/corpus.h)
odd "empty lines are empty documents" "list(f['lengths'][:]) == [4, 2, 4, 2]" "$(text_input empty-lines.txt)" job.ini
odd "CRLF line ends"            "list(f['lengths'][:]) == [4, 4]" "$(text_input crlf.txt)" job.ini
odd "10 MB line is truncated"   "list(f['lengths'][:]) == [4, 128, 3] and f['truncated'][1] == 2 * (10 * 1024 * 1024 // 12) - 126" \
  "$(text_input long-line.txt)" job.ini
odd "invalid UTF-8 replaced"    "list(f['lengths'][:]) == [4, 4]" "$(text_input bad-utf8.txt)" job.ini
odd "empty JSON text"           "list(f['lengths'][:]) == [2, 3]" "$(text_input empty-text.jsonl jsonl)" job.ini

# --- safetensors checkpoints (tfenc-import)
import_error "safetensors truncated"     "model.safetensors: tensor '.*' ends at data byte [0-9]+ but the file holds only [0-9]+ data bytes \(truncated file\?\)" st-truncated
import_error "safetensors header length" "model.safetensors: safetensors header length 1099511627776 does not fit the file" st-header-length
import_error "safetensors not JSON"      "model.safetensors: safetensors header is not valid JSON" st-not-json
import_error "safetensors unknown dtype" "model.safetensors: safetensors header: tensor '.*' has unknown dtype 'F31'" st-dtype
import_error "safetensors NaN"           "model.safetensors: tensor '$nan_tensor' holds a non-finite value at element 0" st-nan

finish
