"""The peers of the benchmark: ONNX Runtime and OpenVINO, run as their users run them.

usage: peers.py prepare ENGINE --model-dir DIR --onnx MODEL.onnx --out PATH
                        [--calibration TEXTS.txt]
       peers.py encode ENGINE --model-dir DIR --model PATH --corpus TEXTS.txt
                        --warmup TEXTS.txt --out EMBEDDINGS.npy [--threads 2]
       peers.py versions

Runs in the bench's own venv (tests/bench/setup-bench), never in the tests'
venv: the peers want a newer numpy than Debian's, and the tests keep
Debian's torch. tests/bench/bench.py calls it, one process per engine run,
so that each run's peak RSS is its own.

ENGINE is one of
  onnxruntime-fp32   the model as torch.onnx exported it (bench.py does that);
  onnxruntime-int8   sentence-transformers' onnx-qint8 recipe
                     (export_dynamic_quantized_onnx_model with the
                     "avx512_vnni" config: dynamic quantization, s8 weights
                     per channel and symmetric, u8 activations, no reduced
                     range, every operator ONNX Runtime can quantize);
  openvino-f32       INFERENCE_PRECISION_HINT f32;
  openvino-default   OpenVINO's default precision (bf16 on a CPU with
                     AVX512_BF16 or AMX);
  openvino-int8      sentence-transformers' export_static_quantized_openvino_model
                     recipe: NNCF post-training static quantization, preset
                     mixed, model type transformer, fast bias correction, no
                     overflow fix, 128 calibration texts padded to 384 tokens;
                     the calibration texts are a sample of the benchmark's own
                     corpus (the recipe's default is GLUE SST-2, which is not
                     here); run at OpenVINO's default precision, as that
                     recipe's users run it.
`prepare` makes the int8 models (the others use the exported model as is).

`encode` does what sentence-transformers' encode() does: sorts the texts by
length, longest first, tokenizes each batch of 32 (padding to the batch's
longest, truncating at the model's max_seq_length) with Hugging Face
`tokenizers`, runs the model (whose graph ends in the pooling and the L2
normalisation), and puts the vectors back in corpus order. It encodes the
warm-up texts first, then times the corpus, and prints one JSON line:
seconds (monotonic clock), CPU seconds of the process, peak RSS (VmHWM), the
precision the engine ran at.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

BATCH = 32  # sentence-transformers' default batch_size
# export_static_quantized_openvino_model leaves OVQuantizationConfig's
# num_samples unset, so NNCF's subset_size is optimum-intel's default, 128.
CALIBRATION_TEXTS = 128
CALIBRATION_LENGTH = 384  # its padding="max_length", max_length=384


def max_seq_length(model_dir):
    with open(os.path.join(model_dir, "sentence_bert_config.json")) as f:
        return int(json.load(f)["max_seq_length"])


def tokenizer_for(model_dir, pad_to=None):
    """The model's fast tokenizer, truncating at its max_seq_length (or
    pad_to) and padding to the batch's longest (or to pad_to)."""
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    with open(os.path.join(model_dir, "special_tokens_map.json")) as f:
        pad = json.load(f)["pad_token"]
    pad = pad["content"] if isinstance(pad, dict) else pad
    tokenizer.enable_truncation(max_length=pad_to or max_seq_length(model_dir))
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id(pad), pad_token=pad, length=pad_to)
    return tokenizer


def tokenize(tokenizer, texts):
    encodings = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    return ids, mask


def read_texts(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


# ----------------------------------------------------------------- prepare

def quantize_onnxruntime(onnx_path, out):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(onnx_path, out, per_channel=True, reduce_range=False,
                     weight_type=QuantType.QInt8,
                     extra_options={"WeightSymmetric": True, "ActivationSymmetric": False})


def quantize_openvino(onnx_path, out, model_dir, calibration_path, threads):
    import nncf
    import openvino as ov
    core = ov.Core()
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads})
    model = core.read_model(onnx_path)
    tokenizer = tokenizer_for(model_dir, pad_to=CALIBRATION_LENGTH)
    texts = read_texts(calibration_path)[:CALIBRATION_TEXTS]
    samples = []
    for text in texts:
        ids, mask = tokenize(tokenizer, [text])
        samples.append({"input_ids": ids, "attention_mask": mask})
    quantized = nncf.quantize(
        model, nncf.Dataset(samples), preset=nncf.QuantizationPreset.MIXED,
        subset_size=len(samples), fast_bias_correction=True, model_type=nncf.ModelType.TRANSFORMER,
        advanced_parameters=nncf.AdvancedQuantizationParameters(
            overflow_fix=nncf.OverflowFix.DISABLE))
    ov.save_model(quantized, out)


# ------------------------------------------------------------------ encode

def onnxruntime_session(path, threads):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def run(ids, mask):
        return session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    return run


def openvino_request(path, threads, precision):
    import openvino as ov
    core = ov.Core()
    # optimum-intel's defaults (sentence-transformers' OpenVINO backend):
    # the latency hint, one stream.
    config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": threads}
    if precision is not None:
        config["INFERENCE_PRECISION_HINT"] = precision
    compiled = core.compile_model(core.read_model(path), "CPU", config)
    request = compiled.create_infer_request()

    def run(ids, mask):
        request.infer({"input_ids": ids, "attention_mask": mask})
        return request.get_output_tensor(0).data.copy()
    ran_at = str(compiled.get_property("INFERENCE_PRECISION_HINT"))
    return run, ran_at.replace("<Type: '", "").replace("'>", "")


def encode_texts(run, tokenizer, texts):
    """sentence-transformers' encode(): longest first, batches of 32."""
    order = np.argsort([-len(text) for text in texts], kind="stable")
    result = [None] * len(texts)
    for first in range(0, len(texts), BATCH):
        chosen = order[first:first + BATCH]
        vectors = run(*tokenize(tokenizer, [texts[i] for i in chosen]))
        for row, i in enumerate(chosen):
            result[i] = vectors[row]
    return np.stack(result).astype(np.float32)


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def encode(args):
    if args.engine.startswith("onnxruntime"):
        run = onnxruntime_session(args.model, args.threads)
        ran_at = "int8 + fp32" if args.engine == "onnxruntime-int8" else "fp32"
    else:
        precision = "f32" if args.engine == "openvino-f32" else None
        run, ran_at = openvino_request(args.model, args.threads, precision)
        if args.engine == "openvino-int8":
            ran_at = f"int8 + {ran_at}"
    tokenizer = tokenizer_for(args.model_dir)
    encode_texts(run, tokenizer, read_texts(args.warmup))
    texts = read_texts(args.corpus)
    start, cpu_start = time.perf_counter(), time.process_time()
    vectors = encode_texts(run, tokenizer, texts)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    np.save(args.out, vectors)
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "rss_mib": peak_rss_mib(),
                      "ran_at": ran_at}))


def versions():
    found = {}
    for name in ("onnxruntime", "openvino", "nncf", "tokenizers", "numpy"):
        try:
            module = __import__(name)
            found[name] = getattr(module, "__version__", None) or module.get_version()
        except ImportError:
            pass
    print(json.dumps(found))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("prepare", "encode", "versions"))
    parser.add_argument("engine", nargs="?")
    parser.add_argument("--model-dir", help="the model's Hugging Face folder (tokenizer)")
    parser.add_argument("--onnx")
    parser.add_argument("--model")
    parser.add_argument("--calibration")
    parser.add_argument("--corpus")
    parser.add_argument("--warmup")
    parser.add_argument("--out")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.action == "versions":
        versions()
    elif args.action == "prepare":
        if args.engine == "onnxruntime-int8":
            quantize_onnxruntime(args.onnx, args.out)
        elif args.engine == "openvino-int8":
            quantize_openvino(args.onnx, args.out, args.model_dir, args.calibration, args.threads)
        else:
            sys.exit(f"peers.py: {args.engine} needs no preparation")
    else:
        encode(args)


if __name__ == "__main__":
    main()
