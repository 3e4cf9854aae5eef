"""Long documents (`bench.py --texts long`): issue 25's ModernBERT rows.

A ModernBERT-base-shaped model with random weights (hidden 768, 22 layers,
12 heads, intermediate 1152, a global layer every 3rd and the others local
with a 128-token window, 8,192 positions, vocabulary 50,368), written as a
Hugging Face folder (config.json, model.safetensors in transformers' names)
from tests/import/reference_models.py's ModernBert (transformers 4.40 has
no ModernBERT class), weights as tests/import/architectures.py's sharpen()
sets them. The corpus is token ids, not text (no tokenizer is needed): for
each length of LENGTHS, random ids in documents of exactly that length, as
many as make --scale x 8,192 tokens (at least one), one HDF5 file per length
for tfenc (input_format hdf5) and the same ids as .npy for the peer.

Rows, each engine in its own process, warm (a 512-token document first),
best of --repeat runs taken in turns:

- tfenc at fp32, bf16 and int8 (a refusal is a row that says so), 1 rank x
  2 threads, at 512, 2,048 and 8,192 tokens: tokens/s of the encoding phase
  (tfenc's own summary), its ratio to the same precision at 512 (target
  >= 0.5 at 8,192), and the peak RSS per rank minus the weights' size
  (model.h5; target <= 256 MiB).
- The local layers' cost: the same weights with every layer global
  (global_attn_every_n_layers = 1) at 2,048, fp32, beside the
  alternation; the table also gives the speed-up the FLOPs predict if the
  local layers visit only the keys in their window (O(n x window)) and if
  they computed every score (O(n^2): no speed-up).
- The peer: OpenVINO (the bench venv, tests/bench/peers.py's
  openvino_request) on a torch.onnx export of the reference with its
  padding and sliding-window masks as transformers 4.48 builds them
  (global: padding; local: padding and |i - j| > local_attention / 2),
  mean pooling and L2 normalisation in the graph; f32, and its default
  precision where the CPU has bf16 (on AVX2 its default is f32). Batches of
  PEER_BATCH_TOKENS tokens (one document at 8,192). A child whose RSS passes
  PEER_MEMORY_LIMIT is stopped and its row says so. Its vectors' cosine to
  tfenc fp32's (mean-pooled, normalised) is reported: an export that lost
  the window or the positions shows there.

Ratios and times are reported, never asserted. Writes OUT/long.csv.

Child actions (run by the parent in the right venv):
  long_documents.py model DIR [--all-global]   the folder (tests' venv)
  long_documents.py export DIR OUT.onnx         the ONNX graph (tests' venv)
  long_documents.py openvino MODEL.onnx IDS.npy WARMUP.npy OUT.npy PRECISION
                                                one peer run (bench venv)
"""

import csv
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.path.join(HERE, "..", ".."))
LENGTHS = (512, 2048, 8192)
TOKENS_PER_LENGTH = 8192
# Where the all-global model runs beside the alternation: at 8,192 it costs
# ~3x the alternation (20 CPU-minutes on 2 AVX2 cores).
GLOBAL_LENGTHS = (2048,)
PEER_BATCH_TOKENS = 8192
# The peer's RSS above this ends its run: its global attention at 8,192
# holds [heads, n, n] float32 scores per document (3 GiB a layer), and the
# machine is shared.
PEER_MEMORY_LIMIT = 12 * 1024  # MiB
THREADS = 2
WARMUP_LENGTH = 512
SEED = 25
CONFIG = {
    "model_type": "modernbert", "architectures": ["ModernBertModel"],
    "hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 22,
    "intermediate_size": 1152, "vocab_size": 50368, "max_position_embeddings": 8192,
    "norm_eps": 1e-5, "norm_bias": False, "attention_bias": False, "mlp_bias": False,
    "global_rope_theta": 160000.0, "local_rope_theta": 10000.0, "local_attention": 128,
    "global_attn_every_n_layers": 3, "hidden_activation": "gelu", "pad_token_id": 50283,
    "bos_token_id": 50281, "eos_token_id": 50282, "cls_token_id": 50281,
    "sep_token_id": 50282,
}
# Token ids drawn for the corpus: ModernBERT's ordinary tokens (its special
# ones are 50,277 and above).
ID_RANGE = (100, 50000)


def log(message):
    print(f"bench: {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------ child actions

def make_model(directory, all_global):
    """The ModernBERT-base-shaped folder: config.json, model.safetensors
    (reference_models.ModernBert's state_dict: transformers' names),
    sentence-transformers' mean pooling and Normalize."""
    import torch
    from safetensors.torch import save_file
    sys.path.insert(0, os.path.join(SRCDIR, "tests", "import"))
    import architectures
    import reference_models
    config = dict(CONFIG)
    if all_global:
        config["global_attn_every_n_layers"] = 1
    torch.manual_seed(SEED)
    model = reference_models.ModernBert(config)
    architectures.sharpen(model, torch.Generator().manual_seed(SEED))
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    save_file(state, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    architectures.write_head(directory, config["hidden_size"], "mean")
    with open(os.path.join(directory, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": config["max_position_embeddings"],
                   "do_lower_case": False}, f)


def export(directory, out):
    """reference_models.ModernBert with transformers 4.48's masks (a batch
    of padded sequences), mean pooling and L2 normalisation, as one ONNX
    graph; torch 1.13's exporter, as bench.py's export_onnx."""
    import warnings

    import torch
    from safetensors.torch import load_file
    sys.path.insert(0, os.path.join(SRCDIR, "tests", "import"))
    import reference_models as r
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    width = config["hidden_size"]
    # reference_models' norm takes its width from x.shape, which the
    # exporter traces as a tensor that layer_norm cannot take: a constant.
    r.BiasFreeLayerNorm.forward = lambda self, x: torch.nn.functional.layer_norm(
        x, (width,), self.weight, None, self.eps)
    model = r.ModernBert(config)
    model.load_state_dict(load_file(os.path.join(directory, "model.safetensors")))
    model.eval()

    class Pooled(torch.nn.Module):
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask):
            m, c = self.encoder, self.encoder.c
            heads = c["num_attention_heads"]
            head_dim = c["hidden_size"] // heads
            x = m.embeddings.norm(m.embeddings.tok_embeddings(input_ids))
            # ModernBertModel._update_attention_mask: the padding mask, and
            # the sliding-window mask on top of it for the local layers.
            minimum = torch.finfo(torch.float32).min
            keep = attention_mask[:, None, None, :].to(torch.bool)
            padding = torch.zeros(keep.shape, dtype=torch.float32).masked_fill(~keep, minimum)
            rows = torch.arange(input_ids.shape[1])
            distance = (rows[None, :] - rows[:, None]).abs()
            outside = (distance > c["local_attention"] // 2)[None, None]
            window = padding.masked_fill(outside, minimum)
            for i, layer in enumerate(m.layers):
                is_global = i % c["global_attn_every_n_layers"] == 0
                base = c["global_rope_theta"] if is_global else c["local_rope_theta"]
                h = layer.attn_norm(x)
                q, k, v = (r.split_heads(part, heads)
                           for part in layer.attn.Wqkv(h).chunk(3, dim=-1))
                q, k = r.rotary(q, base, head_dim), r.rotary(k, base, head_dim)
                x = x + layer.attn.Wo(r.attend(q, k, v, padding if is_global else window))
                activated, gate = layer.mlp.Wi(layer.mlp_norm(x)).chunk(2, dim=-1)
                x = x + layer.mlp.Wo(torch.nn.functional.gelu(activated) * gate)
            tokens = m.final_norm(x)
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    warnings.filterwarnings("ignore")
    import bench
    bench.export_traced(Pooled(model), ID_RANGE, 160, 100, out)


def openvino_child(model, ids_path, warmup_path, out, precision):
    """One OpenVINO run (bench venv): the warm-up ids, then the corpus in
    batches of PEER_BATCH_TOKENS tokens, timed; one JSON line."""
    sys.path.insert(0, HERE)
    from peers import openvino_request, peak_rss_mib
    run, ran_at = openvino_request(model, THREADS, None if precision == "default" else precision)

    def encode(ids):
        batch = max(1, PEER_BATCH_TOKENS // ids.shape[1])
        return np.concatenate([run(ids[i:i + batch], np.ones_like(ids[i:i + batch]))
                               for i in range(0, len(ids), batch)])
    encode(np.load(warmup_path))
    ids = np.load(ids_path)
    start, cpu_start = time.perf_counter(), time.process_time()
    vectors = encode(ids)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    np.save(out, vectors.astype(np.float32))
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "rss_mib": peak_rss_mib(),
                      "ran_at": ran_at}))


# ------------------------------------------------------------------ parent

def rss_mib(pid):
    """The resident MiB of a process and its children (0 once gone)."""
    total = 0
    try:
        children = subprocess.run(["ps", "-o", "rss=", "--ppid", str(pid)], capture_output=True,
                                  text=True).stdout.split()
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        total += sum(int(x) for x in children)
    except (OSError, ValueError):
        pass
    return total / 1024.0


def watched(command, env, limit_mib):
    """Runs command; stops it (SIGKILL) when its RSS passes limit_mib.
    (returncode, stdout, stderr, peak MiB seen, stopped)."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    peak, stopped = 0.0, False
    import threading
    result = {}
    reader = threading.Thread(target=lambda: result.update(
        zip(("out", "err"), process.communicate())))
    reader.start()
    while reader.is_alive():
        peak = max(peak, rss_mib(process.pid))
        if peak > limit_mib and process.poll() is None:
            process.kill()
            stopped = True
        reader.join(0.2)
    return process.returncode, result.get("out", ""), result.get("err", ""), peak, stopped


def write_ids(path_h5, path_npy, documents, length, generator):
    import h5py
    ids = generator.integers(ID_RANGE[0], ID_RANGE[1], size=(documents, length), dtype=np.int64)
    with h5py.File(path_h5, "w") as f:
        f["tokens"] = ids.reshape(-1).astype(np.int32)
        f["offsets"] = np.arange(documents + 1, dtype=np.int64) * length
    np.save(path_npy, ids)


ENGINE_IDS = {("tfenc", "alternating"): "tfenc", ("tfenc", "all-global"): "tfenc-global",
              ("openvino", "alternating"): "ov"}


def selected(spec, engine):
    """Whether --engines (ids or prefixes, comma-separated; empty: all)
    names engine: tfenc-fp32, tfenc-bf16, tfenc-int8, tfenc-global-fp32,
    ov-f32, ov-default."""
    kind, model, precision = engine
    name = f"{ENGINE_IDS[(kind, model)]}-{precision}"
    return not spec or any(name == s or name.startswith(s + "-") for s in spec.split(","))


def flops_per_token(config, length, all_global=False):
    """FLOPs per token of the encoder at `length`: the linear maps, and
    attention's two products over the keys each layer visits (all of them
    in a global layer, 2 x (local_attention / 2) + 1 in a local one if it
    visits only its window); (with window, every score computed)."""
    d, f, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    linear = 2 * (3 * d * d + d * d + d * 2 * f + f * d) * layers
    every = 1 if all_global else config["global_attn_every_n_layers"]
    n_global = sum(1 for i in range(layers) if i % every == 0)
    keys_local = min(length, config["local_attention"] + 1)
    windowed = linear + 4 * d * (n_global * length + (layers - n_global) * keys_local)
    dense = linear + 4 * d * layers * length
    return windowed, dense


def measure_long(run):
    """Every row of --texts long; (rows, context) for report_long."""
    import bench as b
    args = run.args
    work = os.path.join(run.work, "long")
    os.makedirs(work, exist_ok=True)
    # The folders depend on the config, the seed and the reference's code;
    # the export also on this file's (its forward).
    key = json.dumps([CONFIG, SEED], sort_keys=True) + "".join(
        b.digest(os.path.join(SRCDIR, "tests", "import", name))
        for name in ("reference_models.py", "architectures.py"))
    models = {}
    for name, all_global in (("alternating", False), ("all-global", True)):
        directory = os.path.join(work, name)
        log(f"ModernBERT-base-shaped model ({name}): {directory}")
        b.cached(os.path.join(directory, "config.json"), key, lambda d=directory, g=all_global:
                 subprocess.run([sys.executable, os.path.abspath(__file__), "model", d]
                                + (["--all-global"] if g else []), check=True))
        # Beside the folder, not in it: tfenc-import reads every file there.
        imported = directory + "-tfenc"
        os.makedirs(imported, exist_ok=True)
        job, refusal = b.tfenc_import(run.builddir, directory, imported)
        if refusal:
            sys.exit(f"bench: the {name} ModernBERT: {refusal}")
        models[name] = {"dir": directory, "job": job,
                        "weights_mib": os.path.getsize(os.path.join(imported, "model.h5"))
                        / 2 ** 20}

    # The corpus: exact lengths, random ids.
    generator = np.random.default_rng(SEED)
    warm = {"h5": os.path.join(work, "ids-warmup.h5"), "npy": os.path.join(work, "ids-warmup.npy"),
            "length": WARMUP_LENGTH, "documents": 1}
    write_ids(warm["h5"], warm["npy"], 1, WARMUP_LENGTH, generator)
    corpora = {}
    for length in LENGTHS:
        documents = max(1, int(round(TOKENS_PER_LENGTH * args.scale)) // length)
        h5, npy = os.path.join(work, f"ids-{length}.h5"), os.path.join(work, f"ids-{length}.npy")
        write_ids(h5, npy, documents, length, generator)
        corpora[str(length)] = {"h5": h5, "npy": npy, "length": length, "documents": documents}

    # The peer's graph.
    cpu_name, cpu_flags = b.cpu_description()
    peers = b.peers_available()
    peer_precisions = []
    wanted = any(selected(args.engines, ("openvino", "alternating", p))
                 for p in ("f32", "default"))
    if "openvino" in peers and wanted:
        onnx = os.path.join(work, "modernbert.onnx")
        log("exporting the reference to ONNX")
        b.cached(onnx, key + b.digest(os.path.abspath(__file__))
                 + json.dumps(run.versions, sort_keys=True), lambda: subprocess.run(
            [sys.executable, os.path.abspath(__file__), "export",
             models["alternating"]["dir"], onnx], check=True))
        peer_precisions = ["f32"]
        if "bf16" in cpu_flags:
            peer_precisions.append("default")
        else:
            log("OpenVINO default precision left out: f32 on a CPU without bf16 instructions")
    elif wanted:
        log(f"OpenVINO left out: not in {b.BENCH_VENV} (tests/bench/setup-bench)")

    # (engine, model, precision) in turns, each at every length.
    engines = [("tfenc", "alternating", p) for p in ("fp32", "bf16", "int8")]
    engines += [("tfenc", "all-global", "fp32")]
    engines += [("openvino", "alternating", p) for p in peer_precisions]
    engines = [e for e in engines if selected(args.engines, e)]
    if not any(e == ("tfenc", "alternating", "fp32") for e in engines):
        engines.insert(0, ("tfenc", "alternating", "fp32"))  # every cosine's reference
    best = {}
    refused = {}
    for turn in range(max(args.repeat, 1)):
        for engine, model_name, precision in engines:
            model = models[model_name]
            lengths = GLOBAL_LENGTHS if model_name == "all-global" else LENGTHS
            if (engine, model_name, precision) in refused:
                continue
            if engine == "tfenc" and turn == 0:
                output = os.path.join(work, "out.h5")
                warm_result = b.tfenc_job(run.builddir, model["job"], warm["h5"], output,
                                          precision, 1, THREADS)
                if warm_result["status"] != "ok":
                    log(f"tfenc {precision} ({model_name}): {warm_result['reason']}")
                    refused[(engine, model_name, precision)] = warm_result
                    continue
            for length in lengths:
                corpus = corpora[str(length)]
                log(f"{engine} {precision} ({model_name}), {length} tokens (run {turn + 1})")
                if engine == "tfenc":
                    result = tfenc_run(b, run, model, corpus, precision)
                else:
                    result = openvino_run(b, run, work, corpus, warm, precision)
                if result["status"] != "ok":
                    log(f"  {result['status']}: {result['reason']}")
                else:
                    log(f"  {result['tokens_per_s']:,.0f} tokens/s, peak RSS "
                        f"{result['rss_mib']:,.0f} MiB")
                where = (engine, model_name, precision, length)
                previous = best.get(where)
                if previous is None or previous["status"] != "ok" or (
                        result["status"] == "ok"
                        and result["tokens_per_s"] > previous["tokens_per_s"]):
                    best[where] = result
    for (engine, model_name, precision), result in refused.items():
        for length in (GLOBAL_LENGTHS if model_name == "all-global" else LENGTHS):
            best[(engine, model_name, precision, length)] = result

    rows = []
    for engine, model_name, precision in engines:
        for length in (GLOBAL_LENGTHS if model_name == "all-global" else LENGTHS):
            r = best[(engine, model_name, precision, length)]
            corpus = corpora[str(length)]
            label = (f"tfenc {precision}, 1 rank x 2 threads" if engine == "tfenc"
                     else f"OpenVINO {precision}")
            if model_name == "all-global":
                label += ", every layer global"
            row = {"engine": engine, "model": model_name, "label": label,
                   "precision": precision, "length": length, "documents": corpus["documents"],
                   "tokens": corpus["documents"] * length, "status": r["status"],
                   "reason": r.get("reason", ""), "ran_at": r.get("ran_at", ""),
                   "seconds": r.get("seconds"), "timed": r.get("timed", ""),
                   "tokens_per_s": r.get("tokens_per_s"),
                   "tokens_per_cpu_s": r.get("tokens_per_cpu_s"),
                   "peak_rss_mib": r.get("rss_mib"),
                   "weights_mib": models[model_name]["weights_mib"]}
            row["rss_over_weights_mib"] = (None if row["peak_rss_mib"] is None
                                           else row["peak_rss_mib"] - row["weights_mib"])
            row["vectors"] = r.get("vectors")
            rows.append(row)
    # Ratios: to the same engine and precision at 512; the peer's to tfenc
    # at the same length and precision; cosines to tfenc fp32 (alternating).
    for row in rows:
        base = next((o for o in rows if o["engine"] == row["engine"]
                     and o["model"] == row["model"] and o["precision"] == row["precision"]
                     and o["length"] == LENGTHS[0]), None)
        row["x_512"] = b.ratio(row["tokens_per_s"], base and base["tokens_per_s"])
        peer = next((o for o in rows if o["engine"] == "openvino" and o["length"] == row["length"]
                     and same_precision(o["ran_at"]) == row["precision"]), None)
        row["x_openvino"] = (b.ratio(row["tokens_per_s"], peer and peer["tokens_per_s"])
                             if row["engine"] == "tfenc" and row["model"] == "alternating"
                             else None)
        reference = next((o for o in rows if o["engine"] == "tfenc"
                          and o["model"] == "alternating" and o["precision"] == "fp32"
                          and o["length"] == row["length"]), None)
        row["cos_to_tfenc_fp32"] = None
        if row["vectors"] is not None and reference and reference["vectors"] is not None \
                and row["model"] == "alternating":
            row["cos_to_tfenc_fp32"] = b.cosines(row["vectors"], reference["vectors"])[0]
        if row["model"] == "all-global":
            alternating = next((o for o in rows if o["engine"] == "tfenc"
                                and o["model"] == "alternating" and o["precision"] == "fp32"
                                and o["length"] == row["length"]), None)
            row["alternating_x_all_global"] = b.ratio(
                alternating and alternating["tokens_per_s"], row["tokens_per_s"])
            windowed, _ = flops_per_token(CONFIG, row["length"])
            global_flops, _ = flops_per_token(CONFIG, row["length"], all_global=True)
            row["flops_window"] = global_flops / windowed
            row["flops_dense"] = 1.0
    return rows, {"cpu": cpu_name, "flags": cpu_flags, "peers": peers}


def same_precision(ran_at):
    """OpenVINO's name of the precision it ran at (float32, f32, bf16,
    bfloat16) as tfenc's (fp32, bf16)."""
    return {"f32": "fp32", "float32": "fp32", "bfloat16": "bf16"}.get(ran_at, ran_at)


def tfenc_run(b, run, model, corpus, precision):
    import h5py
    output = os.path.join(os.path.dirname(corpus["h5"]), "out.h5")
    r = b.tfenc_job(run.builddir, model["job"], corpus["h5"], output, precision, 1, THREADS)
    if r["status"] != "ok":
        return r
    with h5py.File(output, "r") as f:
        vectors = f["embeddings"][:]
    os.remove(output)
    tokens = corpus["documents"] * corpus["length"]
    if r["tokens"] != tokens:
        return {"status": "failed", "reason": f"tfenc counted {r['tokens']} tokens, not {tokens}"}
    return {"status": "ok", "seconds": r["encoding"], "timed": "encoding",
            "tokens_per_s": b.ratio(tokens, r["encoding"]),
            "tokens_per_cpu_s": b.ratio(tokens, r["encoding_cpu"]), "rss_mib": r["rss_mib"],
            "vectors": vectors, "ran_at": precision}


def openvino_run(b, run, work, corpus, warm, precision):
    out = os.path.join(work, f"openvino-{precision}.npy")
    command = [b.peer_python(), os.path.abspath(__file__), "openvino",
               os.path.join(work, "modernbert.onnx"), corpus["npy"], warm["npy"], out, precision]
    code, stdout, stderr, peak, stopped = watched(command, b.thread_environment(THREADS),
                                                  PEER_MEMORY_LIMIT)
    if stopped:
        return {"status": "out of memory",
                "reason": f"stopped at {peak:,.0f} MiB of RSS (the bench's limit is "
                          f"{PEER_MEMORY_LIMIT:,} MiB)"}
    if code != 0:
        return {"status": "failed", "reason": b.last_line(stderr)}
    data = json.loads(stdout.strip().splitlines()[-1])
    tokens = corpus["documents"] * corpus["length"]
    return {"status": "ok", "seconds": data["seconds"], "timed": "loop",
            "tokens_per_s": tokens / data["seconds"],
            "tokens_per_cpu_s": b.ratio(tokens, data["cpu_seconds"]), "rss_mib": data["rss_mib"],
            "vectors": np.load(out), "ran_at": data["ran_at"]}


CSV_FIELDS = ("date", "cpu", "cpu_flags", "load_start", "load_end", "label", "engine", "model",
              "precision", "ran_at", "length", "documents", "tokens", "status", "reason",
              "seconds", "timed", "tokens_per_s", "tokens_per_cpu_s", "x_512", "x_openvino",
              "peak_rss_mib",
              "weights_mib", "rss_over_weights_mib", "cos_to_tfenc_fp32",
              "alternating_x_all_global", "flops_window", "flops_dense", "versions")


def report_long(run, rows, context, load_start):
    import bench as b
    load_end = os.getloadavg()
    common = {"date": str(datetime.date.today()), "cpu": context["cpu"],
              "cpu_flags": context["flags"], "load_start": f"{load_start[0]:.2f}",
              "load_end": f"{load_end[0]:.2f}", "versions": json.dumps(run.versions)}
    path = os.path.join(run.out, "long.csv")
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, **common})

    def fig(value, digits=0):
        return "-" if value is None else f"{value:,.{digits}f}"
    print(f"{common['date']}, {context['cpu']}, {os.cpu_count()} cores; flags: {context['flags']}")
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load_start)} at the "
          f"start, {' '.join(f'{x:.2f}' for x in load_end)} at the end (other work on the "
          f"machine takes its share of every figure)")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in run.versions.items()))
    c = CONFIG
    print(f"ModernBERT-base-shaped, random weights: d {c['hidden_size']}, "
          f"{c['num_hidden_layers']} layers, {c['num_attention_heads']} heads, ffn "
          f"{c['intermediate_size']} (GEGLU), global every {c['global_attn_every_n_layers']}, "
          f"local window {c['local_attention']}; weights {rows[0]['weights_mib']:,.0f} MiB "
          f"(model.h5). Random token ids at exact lengths, "
          f"{rows[0]['tokens']:,} tokens per length; {THREADS} threads per engine; tokens/s "
          f"of the encoding (tfenc's summary; OpenVINO's loop, batches of "
          f"{PEER_BATCH_TOKENS:,} tokens), warm, best of {max(run.args.repeat, 1)}")
    print()
    header = ("engine", "length", "tokens/s", "tokens/CPU-s", "x at 512", "x OpenVINO",
              "peak RSS MiB",
              "RSS - weights MiB", "cos to tfenc fp32")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        if r["model"] != "alternating":
            continue
        if r["status"] != "ok":
            print(f"| {r['label']} | {r['length']:,} | {r['status']}: {r['reason']} |"
                  + " |" * (len(header) - 3))
            continue
        label = r["label"] + (f" (ran at {r['ran_at']})" if r["engine"] == "openvino" else "")
        print(f"| {label} | {r['length']:,} | {fig(r['tokens_per_s'])} | "
              f"{fig(r['tokens_per_cpu_s'])} | {fig(r['x_512'], 2)} "
              f"| {fig(r['x_openvino'], 2)} | {fig(r['peak_rss_mib'])} | "
              f"{fig(r['rss_over_weights_mib']) if r['engine'] == 'tfenc' else '-'} | "
              f"{fig(r['cos_to_tfenc_fp32'], 6)} |")
    print()
    print("Local layers, O(n x window) or O(n^2): tfenc fp32, the same weights with every "
          "layer global beside the alternation (one layer in 3 global)")
    header = ("length", "every layer global tokens/s", "alternating tokens/s",
              "alternating / all global", "FLOPs predict if local = O(n x window)",
              "if local = O(n^2)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        if r["model"] != "all-global":
            continue
        alternating = next(o for o in rows if o["model"] == "alternating"
                           and o["engine"] == "tfenc" and o["precision"] == "fp32"
                           and o["length"] == r["length"])
        if r["status"] != "ok":
            print(f"| {r['length']:,} | {r['status']}: {r['reason']} | | | | |")
            continue
        print(f"| {r['length']:,} | {fig(r['tokens_per_s'])} | "
              f"{fig(alternating['tokens_per_s'])} | {fig(r['alternating_x_all_global'], 2)} | "
              f"{fig(r['flops_window'], 2)} | {fig(r['flops_dense'], 2)} |")
    print()
    print(f"bench: wrote {path}")


def main():
    action = sys.argv[1]
    if action == "model":
        make_model(sys.argv[2], "--all-global" in sys.argv[3:])
    elif action == "export":
        export(sys.argv[2], sys.argv[3])
    elif action == "openvino":
        openvino_child(*sys.argv[2:7])
    else:
        sys.exit(f"long_documents.py: unknown action {action}")


if __name__ == "__main__":
    main()
