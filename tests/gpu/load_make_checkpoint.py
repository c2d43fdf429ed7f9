#!/usr/bin/env python3
"""Creates, with the safetensors library, an LLM-like checkpoint for the
`gdunlock load` GPU check:

  DIR/model.safetensors   >= --gib GiB: a Llama-3-8B-shaped stack (hidden
                          4096, 8 KV heads, MLP 14336, vocab 128256), BF16
                          weights, F16 lm_head, F32 norms, the last layers'
                          MLP in F8_E4M3 with F32 scales, I64/I32/BOOL buffers
  DIR/sharded/            the embedding and the first layers split over
                          --shards files, with model.safetensors.index.json

Values are random but finite (no NaN), so torch.equal is a fair test. An
existing DIR with the same parameters (DIR/params.json) is reused."""
import argparse
import json
import os
import sys
import time

import torch
from safetensors.torch import save_file

HIDDEN, KV, MLP, VOCAB = 4096, 1024, 14336, 128256
GIB = 1 << 30


def layer(i, fp8, dev):
    g = torch.Generator(device=dev).manual_seed(1000 + i)

    def w(*shape, dtype=torch.bfloat16):
        return (torch.randn(*shape, generator=g, device=dev, dtype=torch.float32) * 0.02).to(dtype)

    p = f"model.layers.{i}."
    t = {
        p + "input_layernorm.weight": w(HIDDEN, dtype=torch.float32),
        p + "post_attention_layernorm.weight": w(HIDDEN, dtype=torch.float32),
        p + "self_attn.q_proj.weight": w(HIDDEN, HIDDEN),
        p + "self_attn.k_proj.weight": w(KV, HIDDEN),
        p + "self_attn.v_proj.weight": w(KV, HIDDEN),
        p + "self_attn.o_proj.weight": w(HIDDEN, HIDDEN),
        p + "self_attn.q_proj.bias": w(HIDDEN),
        p + "self_attn.k_proj.bias": w(KV),
        p + "self_attn.v_proj.bias": w(KV),
    }
    for name, shape in (("gate_proj", (MLP, HIDDEN)), ("up_proj", (MLP, HIDDEN)),
                        ("down_proj", (HIDDEN, MLP))):
        if fp8:
            t[p + f"mlp.{name}.weight"] = (w(*shape, dtype=torch.float32) * 200).to(torch.float8_e4m3fn)
            t[p + f"mlp.{name}.weight_scale"] = w(shape[0], dtype=torch.float32).abs() + 1e-3
        else:
            t[p + f"mlp.{name}.weight"] = w(*shape)
    return t


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors.values())


def build(target_bytes, dev):
    g = torch.Generator(device=dev).manual_seed(7)
    tensors = {
        "model.embed_tokens.weight": (torch.randn(VOCAB, HIDDEN, generator=g, device=dev) * 0.02).to(torch.bfloat16),
        "lm_head.weight": (torch.randn(VOCAB, HIDDEN, generator=g, device=dev) * 0.02).to(torch.float16),
        "model.norm.weight": torch.ones(HIDDEN, device=dev),
        "model.rotary_emb.position_ids": torch.arange(8192, device=dev, dtype=torch.int64)[None],
        "model.attn_mask.causal": torch.ones(1024, 1024, device=dev).tril().bool(),
        "model.vocab_remap": torch.randperm(VOCAB, generator=g, device=dev).to(torch.int32),
    }
    layers = []
    while nbytes(tensors) < target_bytes:
        i = len(layers)
        layers.append(i)
        tensors.update(layer(i, fp8=False, dev=dev))
    # The last two layers quantised, as FP8 checkpoints are; top up if that fell short.
    for i in layers[-2:]:
        for k in [k for k in tensors if k.startswith(f"model.layers.{i}.")]:
            del tensors[k]
        tensors.update(layer(i, fp8=True, dev=dev))
    while nbytes(tensors) < target_bytes:
        tensors.update(layer(len(layers), fp8=False, dev=dev))
        layers.append(len(layers))
    return {k: v.cpu() for k, v in tensors.items()}, len(layers)


def save_sharded(tensors, folder, shards):
    os.makedirs(folder, exist_ok=True)
    names = [n for n in tensors if n.startswith("model.embed") or
             (n.startswith("model.layers.") and int(n.split(".")[2]) < 6)]
    per = (len(names) + shards - 1) // shards
    weight_map = {}
    for s in range(shards):
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file(part, os.path.join(folder, file), metadata={"format": "pt"})
        weight_map.update({n: file for n in part})
    index = {"metadata": {"total_size": nbytes({n: tensors[n] for n in names})},
             "weight_map": weight_map}
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--gib", type=float, default=8.0)
    ap.add_argument("--shards", type=int, default=4)
    a = ap.parse_args()
    params = {"gib": a.gib, "shards": a.shards, "version": 1}
    stamp = os.path.join(a.dir, "params.json")
    if os.path.exists(stamp) and json.load(open(stamp)) == params:
        print(f"reusing {a.dir}", file=sys.stderr)
        return
    os.makedirs(a.dir, exist_ok=True)
    t0 = time.time()
    dev = "cuda:0" if torch.cuda.is_available() else "cpu"
    tensors, n_layers = build(int(a.gib * GIB), dev)
    save_file(tensors, os.path.join(a.dir, "model.safetensors"), metadata={"format": "pt"})
    save_sharded(tensors, os.path.join(a.dir, "sharded"), a.shards)
    with open(stamp, "w") as f:
        json.dump(params, f)
    dtypes = sorted({str(t.dtype).replace("torch.", "") for t in tensors.values()})
    print(f"created {a.dir}: {len(tensors)} tensors, {n_layers} layers, "
          f"{nbytes(tensors) / GIB:.2f} GiB, dtypes {dtypes}, {time.time() - t0:.1f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
