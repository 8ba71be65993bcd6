#!/usr/bin/env python3
"""Write a tiny random-weight Llama in Hugging Face format (config.json + model.safetensors +
the tokenizer files) for the vLLM end-to-end tests. scripts/setup_vllm_cpu.sh runs it.

Same vocabulary, tokenizer and weight design as scripts/make_tiny_gguf.py (imported from it),
so the two tiny models tokenize alike and behave alike:
* the Hugging Face tokenizer is the one make_tiny_gguf.py writes (997 tokens, Llama-2 style);
* special and byte tokens are never sampled (hidden channel 0 is a constant that no layer reads
  or writes; the final norm amplifies it and lm_head gives those tokens logits ~ -3000), so EOS
  never appears and every request yields exactly max_tokens tokens.
Shapes follow the research recipe (shared/recipes/vllm-cpu.md): hidden 256, 4 heads of 64
(vLLM's CPU attention refuses head_dim 16), 2 KV heads, 2 layers, intermediate 512.
Deterministic: a fixed numpy seed; bf16 safetensors (what the tests serve with --dtype
bfloat16), written here with numpy alone (round to nearest even, as torch casts).

Usage: make_tiny_hf_llama.py OUT_DIR [--seed 1234]   (needs numpy and gguf)
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_gguf as g  # noqa: E402

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, LAYERS, FF, CTX = 256, 4, 2, 64, 2, 512, 2048


def save_bf16(tensors, path):
    """Write `tensors` (float32 arrays) as a bf16 safetensors file (format: an 8-byte
    little-endian header length, a JSON header of dtype/shape/offsets, the raw data)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        u = a.view(np.uint32).astype(np.uint64)
        b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()

    tokens, _scores, types = g.build_vocab()
    n_never = 3 + 256  # <unk> <s> </s> and the byte tokens
    n_vocab, d = len(tokens), HIDDEN
    rng = np.random.default_rng(a.seed)

    def rnd(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    t = {}
    emb = rnd(n_vocab, d, std=1.0)
    emb[:, 0] = 1.0  # constant channel 0 (see make_tiny_gguf.py)
    t["model.embed_tokens.weight"] = emb
    norm = np.ones(d, np.float32)
    norm[0] = 0.0  # layers do not read channel 0
    s_d, s_ff = 1.0 / np.sqrt(d), 1.0 / np.sqrt(FF)
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm.copy()
        t[p + "self_attn.q_proj.weight"] = rnd(HEADS * HEAD_DIM, d, std=s_d)
        t[p + "self_attn.k_proj.weight"] = rnd(KV_HEADS * HEAD_DIM, d, std=s_d)
        t[p + "self_attn.v_proj.weight"] = rnd(KV_HEADS * HEAD_DIM, d, std=s_d)
        wo = rnd(d, HEADS * HEAD_DIM, std=0.5 * s_d)
        wo[0, :] = 0.0  # never write to channel 0
        t[p + "self_attn.o_proj.weight"] = wo
        t[p + "post_attention_layernorm.weight"] = norm.copy()
        t[p + "mlp.gate_proj.weight"] = rnd(FF, d, std=s_d)
        t[p + "mlp.up_proj.weight"] = rnd(FF, d, std=s_d)
        down = rnd(d, FF, std=0.5 * s_ff)
        down[0, :] = 0.0
        t[p + "mlp.down_proj.weight"] = down
    out_norm = np.ones(d, np.float32)
    out_norm[0] = 100.0
    t["model.norm.weight"] = out_norm
    head = rnd(n_vocab, d, std=2.0 * s_d)
    head[:, 0] = 0.0
    head[:n_never, 0] = -30.0
    t["lm_head.weight"] = head

    os.makedirs(a.out, exist_ok=True)
    save_bf16(t, os.path.join(a.out, "model.safetensors"))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": d,
        "intermediate_size": FF,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": CTX,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "vocab_size": n_vocab,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "bfloat16",
    }
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1, sort_keys=True)
    g.write_hf_tokenizer(a.out, tokens, types, CTX)
    print(f"wrote {a.out}: vocab={n_vocab} layers={LAYERS} hidden={d} heads={HEADS}x{HEAD_DIM} "
          f"kv_heads={KV_HEADS} ff={FF}")


if __name__ == "__main__":
    main()
