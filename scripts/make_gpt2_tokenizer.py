#!/usr/bin/env python3
"""Rebuild GPT-2's Hugging Face tokenizer.json from llama.cpp's vocab-only GGUF, for the
`inferscope bench --tokenizer` tests (fixtures/tokenizers/gpt-2/).

Source: llama.cpp's models/ggml-vocab-gpt-2.gguf (converted by llama.cpp from Hugging Face's
openai-community/gpt2 tokenizer) with its .inp/.out test files, whose token ids were written by
Hugging Face `tokenizers` (`tokenizer.encode(text, add_special_tokens=False)` in llama.cpp's
convert_hf_to_gguf_update.py). We take them from the llama.cpp sources vendored in the
llama-cpp-python 0.3.36 sdist (scripts/setup_llama_server.sh unpacks it into WORKDIR/src).

GPT-2's tokenizer is byte-level BPE: the GGUF keeps the byte-level vocabulary and the merges
exactly as in the original tokenizer.json; the pre-tokenizer, decoder and post-processor are
GPT-2's fixed ByteLevel settings written out below.

Usage: venv/bin/python scripts/make_gpt2_tokenizer.py LLAMA_SRC OUT_DIR   (needs `gguf`)
"""
import gzip
import json
import os
import shutil
import sys

from gguf import GGUFReader


def field_strings(reader, key):
    f = reader.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def main():
    src, out = sys.argv[1], sys.argv[2]
    gguf_path = os.path.join(src, "models", "ggml-vocab-gpt-2.gguf")
    r = GGUFReader(gguf_path)
    tokens = field_strings(r, "tokenizer.ggml.tokens")
    merges = field_strings(r, "tokenizer.ggml.merges")
    assert len(tokens) == 50257 and len(merges) == 50000, (len(tokens), len(merges))
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": True,
                          "special": True}],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": merges},
    }
    os.makedirs(out, exist_ok=True)
    data = json.dumps(tok, ensure_ascii=False).encode("utf-8")
    # mtime=0: the same input gives the same bytes.
    with open(os.path.join(out, "tokenizer.json.gz"), "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as g:
            g.write(data)
    for ext in ("inp", "out"):
        shutil.copyfile(gguf_path + "." + ext, os.path.join(out, "ggml-vocab-gpt-2.gguf." + ext))
    print(f"wrote {out}: {len(tokens)} tokens, {len(merges)} merges, {len(data)} bytes of JSON")


if __name__ == "__main__":
    main()
