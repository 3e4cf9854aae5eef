#!/usr/bin/env python3
"""Writes a small random Hugging Face checkpoint directory for tfenc-import's
tests: config.json, model.safetensors (written here from the format's
specification, not by tfenc code), tokenizer files and, for the BERT kind,
sentence-transformers modules. The float32 value of every tensor is also
saved to reference.pt for the comparison script.

usage: make_checkpoint.py KIND OUT_DIR [--dtype F32|F16|BF16] [--prefix P]
                          [--drop TENSOR] [--extra TENSOR] [--seed N]
KIND: bert (sentence-transformers layout, no name prefix) or roberta."""
import argparse
import json
import os
import struct

import torch

D, HEADS, LAYERS, FFN = 16, 4, 2, 24

WORDS = ("the of and to in a is that for it as was with be by on not he this are or his "
         "from at which but have an they you were her she there one all we their been has "
         "would when if more no out so said what up its about into than them can only other "
         "new some could time these two may then do first any my now such like our over man "
         "me even most made after also did many before must through back years where much "
         "your way well down should because each just those people how too little state good "
         "very make world still own see men work long get here between both life being under "
         "never day same another know while last might us great old year off come since against "
         "go came right used take three").split()


def vocabulary():
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += WORDS
    tokens += ["##s", "##ed", "##ing", "##ly", "é", "日", "本", "，", "."]
    return tokens


def state_dict(kind, vocab_size, positions, types, generator):
    def randn(*shape):
        return torch.randn(*shape, generator=generator) * 0.5

    tensors = {
        "embeddings.word_embeddings.weight": randn(vocab_size, D),
        "embeddings.position_embeddings.weight": randn(positions, D),
        "embeddings.token_type_embeddings.weight": randn(types, D),
        "embeddings.LayerNorm.weight": 1 + 0.1 * randn(D),
        "embeddings.LayerNorm.bias": randn(D),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            tensors[p + f"attention.self.{name}.weight"] = randn(D, D)
            tensors[p + f"attention.self.{name}.bias"] = randn(D)
        tensors[p + "attention.output.dense.weight"] = randn(D, D)
        tensors[p + "attention.output.dense.bias"] = randn(D)
        tensors[p + "attention.output.LayerNorm.weight"] = 1 + 0.1 * randn(D)
        tensors[p + "attention.output.LayerNorm.bias"] = randn(D)
        tensors[p + "intermediate.dense.weight"] = randn(FFN, D)
        tensors[p + "intermediate.dense.bias"] = randn(FFN)
        tensors[p + "output.dense.weight"] = randn(D, FFN)
        tensors[p + "output.dense.bias"] = randn(D)
        tensors[p + "output.LayerNorm.weight"] = 1 + 0.1 * randn(D)
        tensors[p + "output.LayerNorm.bias"] = randn(D)
    # Tensors a real checkpoint carries that tfenc does not use.
    tensors["pooler.dense.weight"] = randn(D, D)
    tensors["pooler.dense.bias"] = randn(D)
    return tensors


DTYPES = {"F32": (torch.float32, 4), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2),
          "I64": (torch.int64, 8)}


def write_safetensors(path, tensors, metadata):
    """The format: u64 little-endian header length, JSON header, data bytes."""
    header = {"__metadata__": metadata}
    chunks, offset = [], 0
    for name, (dtype_name, tensor) in tensors.items():
        tensor = tensor.contiguous()
        # Raw little-endian bytes via an int view (numpy has no bfloat16).
        if tensor.dtype in (torch.float16, torch.bfloat16):
            raw = tensor.view(torch.int16).numpy().astype("<i2").tobytes()
        elif tensor.dtype == torch.float32:
            raw = tensor.numpy().astype("<f4").tobytes()
        else:
            raw = tensor.numpy().astype("<i8").tobytes()
        header[name] = {"dtype": dtype_name, "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the reference writer pads to 8 bytes
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for raw in chunks:
            out.write(raw)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["bert", "roberta"])
    parser.add_argument("out")
    parser.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    parser.add_argument("--prefix", default=None)
    parser.add_argument("--drop", action="append", default=[])
    parser.add_argument("--extra", action="append", default=[],
                        help="add a float tensor [D] that no architecture has")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    generator = torch.Generator().manual_seed(args.seed)

    tokens = vocabulary()
    if args.kind == "bert":
        vocab_size, positions, types, pad = len(tokens) + 3, 48, 2, 0
        prefix = "" if args.prefix is None else args.prefix
        config = {"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
                  "layer_norm_eps": 1e-12, "type_vocab_size": types, "pad_token_id": pad}
    else:
        vocab_size, positions, types, pad = 50, 66, 1, 1
        prefix = "roberta." if args.prefix is None else args.prefix
        config = {"architectures": ["RobertaForMaskedLM"], "model_type": "roberta",
                  "hidden_act": "gelu_new", "layer_norm_eps": 1e-5, "type_vocab_size": types,
                  "pad_token_id": pad, "bos_token_id": 0, "eos_token_id": 2}
    config.update({"hidden_size": D, "num_attention_heads": HEADS, "num_hidden_layers": LAYERS,
                   "intermediate_size": FFN, "max_position_embeddings": positions,
                   "vocab_size": vocab_size, "position_embedding_type": "absolute",
                   "hidden_dropout_prob": 0.1, "transformers_version": "4.40.2"})
    with open(os.path.join(args.out, "config.json"), "w") as out:
        json.dump(config, out, indent=2)

    source = state_dict(args.kind, vocab_size, positions, types, generator)
    stored = {}
    for name, tensor in source.items():
        # Mixed dtypes in one file happen (fp16 checkpoints keep some fp32).
        dtype_name = args.dtype if not name.endswith("LayerNorm.bias") else "F32"
        stored[prefix + name] = (dtype_name, tensor.to(DTYPES[dtype_name][0]))
    stored[prefix + "embeddings.position_ids"] = ("I64", torch.arange(positions).unsqueeze(0))
    if args.kind == "roberta":
        stored["lm_head.dense.weight"] = ("F32", torch.zeros(D, D))
    for name in args.drop:
        del stored[name]
    for name in args.extra:
        stored[name] = ("F32", torch.ones(D))
    write_safetensors(os.path.join(args.out, "model.safetensors"), stored, {"format": "pt"})
    # What tfenc must reproduce: the stored values widened to float32.
    torch.save({name: tensor.float() for name, (_, tensor) in stored.items()
                if tensor.is_floating_point()},
               os.path.join(args.out, "reference.pt"))

    if args.kind == "bert":
        with open(os.path.join(args.out, "vocab.txt"), "w", encoding="utf-8") as out:
            out.write("".join(token + "\n" for token in tokens))
        with open(os.path.join(args.out, "tokenizer_config.json"), "w") as out:
            # model_max_length 1e30 is how HF writes "no limit"; tokens as objects
            # is how newer transformers versions write them.
            out.write('{"do_lower_case": false, "strip_accents": null, '
                      '"tokenize_chinese_chars": true, '
                      '"cls_token": {"content": "[CLS]", "lstrip": false}, '
                      '"model_max_length": 1000000000000000019884624838656}')
        with open(os.path.join(args.out, "special_tokens_map.json"), "w") as out:
            json.dump({"sep_token": "[SEP]", "unk_token": "[UNK]", "pad_token": "[PAD]"}, out)
        with open(os.path.join(args.out, "sentence_bert_config.json"), "w") as out:
            json.dump({"max_seq_length": 40, "do_lower_case": False}, out)
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ]
        with open(os.path.join(args.out, "modules.json"), "w") as out:
            json.dump(modules, out)
        os.makedirs(os.path.join(args.out, "1_Pooling"), exist_ok=True)
        with open(os.path.join(args.out, "1_Pooling", "config.json"), "w") as out:
            json.dump({"word_embedding_dimension": D, "pooling_mode_cls_token": True,
                       "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
                       "pooling_mode_mean_sqrt_len_tokens": False}, out)
    else:
        # RoBERTa's byte-level BPE files: not something tfenc's WordPiece reads.
        with open(os.path.join(args.out, "vocab.json"), "w") as out:
            json.dump({"<s>": 0, "<pad>": 1, "</s>": 2}, out)


if __name__ == "__main__":
    main()
