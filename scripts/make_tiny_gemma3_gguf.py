#!/usr/bin/env python3
"""Write a tiny random-weight *gemma3* GGUF (sliding-window attention: 5 of every 6 layers see
only the last `--window` tokens) that llama.cpp's llama-server loads, so its start-up log shows
how llama.cpp sizes the sliding-window KV cache. For scripts/capture_llama_server_logs.sh.

It is not a usable model (random weights); it reuses make_tiny_gguf.py's SentencePiece-style
vocabulary. Tensor names and shapes follow llama.cpp's gemma3 loader (src/models/gemma3.cpp):
token_embd, output_norm, and per layer attn_norm, attn_q/k/v, attn_output, post_attention_norm,
attn_q_norm, attn_k_norm, ffn_norm, ffn_gate/up/down, post_ffw_norm.

Usage: make_tiny_gemma3_gguf.py OUT.gguf [--layers 7] [--embd 128] [--heads 4] [--kv-heads 2]
                                [--head-dim 64] [--ff 256] [--ctx 4096] [--window 128]
Needs numpy and gguf (PyPI).
"""
import argparse
import os
import sys

import gguf
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tiny_gguf import build_vocab  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=7)
    ap.add_argument("--embd", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--ff", type=int, default=256)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--window", type=int, default=128)
    a = ap.parse_args()
    tokens, scores, types = build_vocab()
    n_vocab, d, hd = len(tokens), a.embd, a.head_dim
    rng = np.random.default_rng(1234)

    def rnd(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    w = gguf.GGUFWriter(a.out, "gemma3")
    w.add_name("tiny-random-gemma3")
    w.add_context_length(a.ctx)
    w.add_embedding_length(d)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1000000.0)
    w.add_sliding_window(a.window)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    ones = lambda n: np.ones(n, np.float32)  # noqa: E731
    w.add_tensor("token_embd.weight", rnd(n_vocab, d))
    for i in range(a.layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(d))
        w.add_tensor(p + "attn_q.weight", rnd(a.heads * hd, d))
        w.add_tensor(p + "attn_k.weight", rnd(a.kv_heads * hd, d))
        w.add_tensor(p + "attn_v.weight", rnd(a.kv_heads * hd, d))
        w.add_tensor(p + "attn_output.weight", rnd(d, a.heads * hd))
        w.add_tensor(p + "post_attention_norm.weight", ones(d))
        w.add_tensor(p + "attn_q_norm.weight", ones(hd))
        w.add_tensor(p + "attn_k_norm.weight", ones(hd))
        w.add_tensor(p + "ffn_norm.weight", ones(d))
        w.add_tensor(p + "ffn_gate.weight", rnd(a.ff, d))
        w.add_tensor(p + "ffn_up.weight", rnd(a.ff, d))
        w.add_tensor(p + "ffn_down.weight", rnd(d, a.ff))
        w.add_tensor(p + "post_ffw_norm.weight", ones(d))
    w.add_tensor("output_norm.weight", ones(d))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: gemma3 vocab={n_vocab} layers={a.layers} embd={d} heads={a.heads}/"
          f"{a.kv_heads}x{hd} window={a.window} ctx={a.ctx}")


if __name__ == "__main__":
    main()
