#!/usr/bin/env python3
"""Write the model-file fixtures under fixtures/tools/safetensors/ and fixtures/tools/gguf/.

Good files are written by the reference writers, bad files are derived from them by
patching or cutting bytes at offsets the reference readers report. Everything is
deterministic (fixed seeds, fixed metadata, no timestamps): running it twice gives
byte-identical files. Each directory gets a SOURCE.md with the generator versions and
the totals the Python readers report, which the Rust tests cross-check against their
`.expected.json` files.

Tested with Python 3.11.7, safetensors 0.8.0, gguf 0.19.0, numpy 2.4.6:

    python3 -m venv /tmp/mfvenv
    /tmp/mfvenv/bin/pip install safetensors==0.8.0 gguf==0.19.0 numpy==2.4.6
    /tmp/mfvenv/bin/python scripts/make_model_file_fixtures.py

Also runs scripts/make_tiny_gguf.py (or /work/shared/recipes/make_tiny_gguf.py; a tiny
random llama with a real SPM vocabulary) when that file exists, with small sizes so the output stays under 200 KB.

The `.expected.json` and `.expected-error.txt` files are written by the Rust test
(`UPDATE_EXPECTED=1 cargo test -p inferscope-formats --test model_files`) and reviewed.
"""

import json
import os
import struct
import subprocess
import sys

import gguf
import numpy as np
import safetensors
from safetensors import TensorSpec, serialize

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ST_DIR = os.path.join(ROOT, "fixtures", "tools", "safetensors")
GG_DIR = os.path.join(ROOT, "fixtures", "tools", "gguf")
# The tiny-llama recipe: the project's copy if present, else the shared one.
RECIPE = next((p for p in (os.path.join(ROOT, "scripts", "make_tiny_gguf.py"),
                           "/work/shared/recipes/make_tiny_gguf.py") if os.path.exists(p)),
              "make_tiny_gguf.py")
MAX_FIXTURE = 200 * 1024

def pkg_version(name):
    from importlib.metadata import version

    return version(name)


def versions():
    return (
        f"Python {sys.version.split()[0]}, safetensors {pkg_version('safetensors')}, "
        f"gguf {pkg_version('gguf')}, numpy {pkg_version('numpy')}"
    )


def write(path, data):
    assert len(data) < MAX_FIXTURE, f"{path}: {len(data)} bytes"
    with open(path, "wb") as f:
        f.write(data)


# --------------------------------------------------------------------------- safetensors


def st_serialize(tensors, metadata):
    """tensors: list of (name, dtype string for TensorSpec, shape, np.ndarray of raw bytes)."""
    keep = []  # the arrays must outlive serialize()
    specs = {}
    for name, dtype, shape, arr in tensors:
        arr = np.ascontiguousarray(arr)
        keep.append(arr)
        specs[name] = TensorSpec(dtype=dtype, shape=list(shape), data_ptr=arr.ctypes.data,
                                 data_len=arr.nbytes)
    return canonical_metadata(bytes(serialize(specs, metadata=metadata)))


def canonical_metadata(data):
    """The reference writer keeps `__metadata__` in a Rust HashMap, so its key order changes from
    run to run; sort it (same JSON, same length) so the output is byte-identical every time."""
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.get("__metadata__")
    if not isinstance(meta, dict) or len(meta) < 2:
        return data
    start = data.index(b'"__metadata__":', 8) + len(b'"__metadata__":')
    end = data.index(b"}", start) + 1
    canon = json.dumps(dict(sorted(meta.items())), separators=(",", ":")).encode()
    assert len(canon) == end - start and json.loads(data[start:end]) == meta
    return data[:start] + canon + data[end:]


def st_reference_totals(data):
    """Totals as the reference reader (safetensors.deserialize) reports them."""
    by_dtype = {}
    total = 0
    items = safetensors.deserialize(data)
    for _name, t in items:
        n = len(t["data"])
        total += n
        by_dtype[t["dtype"]] = by_dtype.get(t["dtype"], 0) + n
    return len(items), total, by_dtype


def llama_tensors(rng, layers, vocab, d, ff, kv, dtype_w, first_layer=0, embed=True, head=True):
    """A llama-shaped tensor list (HF names), weights in `dtype_w`, norms in F32."""
    out = []

    def w(name, shape, dtype):
        n = int(np.prod(shape))
        if dtype == "float32":
            arr = (rng.standard_normal(n) * 0.02).astype(np.float32)
        elif dtype == "float16":
            arr = (rng.standard_normal(n) * 0.02).astype(np.float16)
        elif dtype == "bfloat16":  # truncate f32 to its top 16 bits
            arr = ((rng.standard_normal(n) * 0.02).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        else:
            raise ValueError(dtype)
        out.append((name, dtype, shape, arr))

    if embed:
        w("model.embed_tokens.weight", [vocab, d], "float16")
    for i in range(first_layer, first_layer + layers):
        p = f"model.layers.{i}."
        w(p + "input_layernorm.weight", [d], "float32")
        w(p + "self_attn.q_proj.weight", [d, d], dtype_w)
        w(p + "self_attn.k_proj.weight", [kv, d], dtype_w)
        w(p + "self_attn.v_proj.weight", [kv, d], dtype_w)
        w(p + "self_attn.o_proj.weight", [d, d], dtype_w)
        w(p + "post_attention_layernorm.weight", [d], "float32")
        w(p + "mlp.gate_proj.weight", [ff, d], dtype_w)
        w(p + "mlp.up_proj.weight", [ff, d], dtype_w)
        w(p + "mlp.down_proj.weight", [d, ff], dtype_w)
    if head:
        w("model.norm.weight", [d], "float32")
        w("lm_head.weight", [vocab, d], "float16")
    return out


def st_header_json(data):
    n = struct.unpack("<Q", data[:8])[0]
    return n, json.loads(data[8:8 + n])


def st_with_header(header_obj, data_section):
    h = json.dumps(header_obj, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data_section


def make_safetensors(report):
    os.makedirs(ST_DIR, exist_ok=True)
    rng = np.random.default_rng(20240601)
    files = {}

    # 1. A tiny llama: F16 embeddings/head, BF16 projections, F32 norms.
    t = llama_tensors(rng, layers=2, vocab=128, d=32, ff=64, kv=16, dtype_w="bfloat16")
    files["tiny-llama-f16-bf16-f32.safetensors"] = st_serialize(t, {"format": "pt", "note": "random weights"})

    # 2. Low-precision formats: FP8 e4m3 weight + F32 scale, packed FP4 (two per byte), U8,
    #    I64, BOOL; no __metadata__.
    n = 16 * 32
    t = [
        ("w_fp8.weight", "float8_e4m3fn", [16, 32], rng.integers(0, 256, n, dtype=np.uint8)),
        ("w_fp8.weight_scale", "float32", [], np.array([0.5], np.float32)),
        # TensorSpec takes the storage shape for packed F4 and doubles the last dim.
        ("w_fp4.weight", "float4_e2m1fn_x2", [16, 16], rng.integers(0, 256, 256, dtype=np.uint8)),
        ("w_fp4.weight_scale", "float8_e8m0fnu", [16, 2], rng.integers(0, 256, 32, dtype=np.uint8)),
        ("ids", "int64", [5], np.arange(5, dtype=np.int64)),
        ("mask", "bool", [7], np.array([1, 0, 1, 1, 0, 0, 1], np.uint8)),
        ("bytes", "uint8", [3], np.array([1, 2, 3], np.uint8)),
    ]
    files["fp8-fp4-mixed.safetensors"] = st_serialize(t, None)

    # 3. Two shards + index (the index is written the way transformers writes it).
    shard1 = llama_tensors(rng, layers=1, vocab=96, d=32, ff=64, kv=32, dtype_w="float16", head=False)
    shard2 = llama_tensors(rng, layers=1, vocab=96, d=32, ff=64, kv=32, dtype_w="float16", first_layer=1,
                           embed=False)
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    total_size = 0
    for shard_name, tensors in zip(names, [shard1, shard2]):
        data = st_serialize(tensors, {"format": "pt"})
        files[shard_name] = data
        for name, _, _, arr in tensors:
            weight_map[name] = shard_name
            total_size += arr.nbytes
    index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    index_text = json.dumps(index, indent=2, sort_keys=True) + "\n"

    for name, data in files.items():
        write(os.path.join(ST_DIR, name), data)
        count, total, by_dtype = st_reference_totals(data)
        report.append(f"| `{name}` | {len(data)} | {count} | {total} | "
                      + ", ".join(f"{k} {v}" for k, v in sorted(by_dtype.items())) + " |")
    with open(os.path.join(ST_DIR, "model.safetensors.index.json"), "w") as f:
        f.write(index_text)
    report.append(f"| `model.safetensors.index.json` | {len(index_text)} | {len(weight_map)} | "
                  f"total_size {total_size} | 2 shards |")

    # Bad inputs, derived from the tiny llama.
    good = files["tiny-llama-f16-bf16-f32.safetensors"]
    n, header = st_header_json(good)
    data_section = good[8 + n:]
    bad = {}
    bad["bad-truncated-in-header"] = (good[: 8 + n // 2], "cut in the middle of the JSON header")
    bad["bad-header-len-2-40"] = (struct.pack("<Q", 1 << 40) + good[8:], "header length field set to 2^40")
    garbage = b'{"a": {"dtype": "F16", "shape": [2, 3] "data_offsets": [0, 12]}}'
    garbage += b" " * ((8 - len(garbage) % 8) % 8)
    bad["bad-json-garbage"] = (struct.pack("<Q", len(garbage)) + garbage + bytes(12),
                               "JSON header missing a comma")
    h = json.loads(json.dumps(header))
    h["lm_head.weight"]["data_offsets"][1] += len(data_section)
    h["lm_head.weight"]["data_offsets"][0] += len(data_section)
    bad["bad-tensor-out-of-bounds"] = (st_with_header(h, data_section),
                                       "lm_head.weight data_offsets moved past the end of the file")
    h = json.loads(json.dumps(header))
    h["model.norm.weight"]["dtype"] = "I4"
    bad["bad-dtype-unknown"] = (st_with_header(h, data_section), "dtype \"I4\" (not a safetensors dtype)")
    h = json.loads(json.dumps(header))
    h["model.norm.weight"]["shape"] = [1 << 30, 1 << 30]
    bad["bad-shape-2-60-elements"] = (st_with_header(h, data_section),
                                      "model.norm.weight shape claims 2^60 elements")
    h = json.loads(json.dumps(header))
    h["model.norm.weight"]["shape"] = [33]
    bad["bad-shape-span-mismatch"] = (st_with_header(h, data_section),
                                      "model.norm.weight shape [33] for a 128-byte F32 span")
    for stem, (data, why) in bad.items():
        write(os.path.join(ST_DIR, stem + ".safetensors"), data)
        try:
            safetensors.deserialize(data)
            ref = "accepted (!)"
        except Exception as e:  # noqa: BLE001 - record what the reference says
            ref = str(e).replace("|", "\\|")
        report.append(f"| `{stem}.safetensors` | {len(data)} | {why} | {ref} |")


# --------------------------------------------------------------------------- GGUF


def gguf_reference(path):
    r = gguf.GGUFReader(path)
    by_type = {}
    total = 0
    for t in r.tensors:
        total += int(t.n_bytes)
        by_type[t.tensor_type.name] = by_type.get(t.tensor_type.name, 0) + int(t.n_bytes)
    return r, len(r.tensors), total, by_type


def make_gguf(report):
    os.makedirs(GG_DIR, exist_ok=True)
    rng = np.random.default_rng(20240602)
    main = os.path.join(GG_DIR, "tiny-llama-v3-f32-f16-q8_0-q4_k.gguf")
    w = gguf.GGUFWriter(main, "llama")
    w.add_name("tiny-header-fixture")
    w.add_context_length(256)
    w.add_embedding_length(256)
    w.add_block_count(1)
    w.add_feed_forward_length(512)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    w.add_tokenizer_model("llama")
    # 5000 tokens: above the 4096-element storage cap, so readers must skip this array.
    tokens = [f"tok{i}" for i in range(5000)]
    w.add_token_list(tokens)
    w.add_token_types([1] * 5000)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_array("inferscope.test.small_array", [1.5, -2.0, 3.25])
    w.add_array("inferscope.test.nested", [[1, 2], [3]])
    w.add_int8("inferscope.test.i8", -5)
    w.add_uint16("inferscope.test.u16", 65535)
    w.add_int64("inferscope.test.i64", -(1 << 40))
    w.add_float64("inferscope.test.f64", 0.125)
    w.add_string("inferscope.test.unicode", "héllo ▁wörld")
    d, ff = 256, 512
    w.add_tensor("token_embd.weight",
                 rng.integers(0, 256, (32, d // 256 * 144), dtype=np.uint8),
                 raw_shape=None, raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(d, np.float32))
    w.add_tensor("blk.0.attn_q.weight",
                 gguf.quants.quantize((rng.standard_normal((32, d)) * 0.02).astype(np.float32),
                                      gguf.GGMLQuantizationType.Q8_0),
                 raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("blk.0.ffn_up.weight",
                 rng.integers(0, 256, (ff // 8, d // 256 * 144), dtype=np.uint8),
                 raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    w.add_tensor("blk.0.ffn_gate.weight", (rng.standard_normal((8, d)) * 0.02).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(d, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    goods = [main]

    # Same file with the version field patched to 2 (v2 and v3 have the same little-endian
    # layout; v3 only added big-endian files). The gguf writer only writes v3.
    with open(main, "rb") as f:
        v3 = f.read()
    v2 = v3[:4] + struct.pack("<I", 2) + v3[8:]
    v2_path = os.path.join(GG_DIR, "tiny-llama-v2-patched.gguf")
    write(v2_path, v2)
    goods.append(v2_path)

    if os.path.exists(RECIPE):
        recipe_out = os.path.join(GG_DIR, "tiny-random-llama-recipe.gguf")
        args = [sys.executable, RECIPE, recipe_out, "--layers", "1", "--embd", "8", "--heads", "2",
                "--ff", "16", "--ctx", "256"]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        goods.append(recipe_out)
        report.append(f"\n`tiny-random-llama-recipe.gguf`: `{os.path.basename(RECIPE)} "
                      + " ".join(args[3:]) + "`\n")

    report.append("| file | bytes | tensors | tensor bytes (GGUFReader n_bytes) | by type |")
    report.append("|---|---|---|---|---|")
    for p in goods:
        size = os.path.getsize(p)
        assert size < MAX_FIXTURE, (p, size)
        _, count, total, by_type = gguf_reference(p)
        report.append(f"| `{os.path.basename(p)}` | {size} | {count} | {total} | "
                      + ", ".join(f"{k} {v}" for k, v in sorted(by_type.items())) + " |")

    # Bad inputs, derived from the main file at offsets GGUFReader reports.
    r = gguf.GGUFReader(main)

    def kv_offsets(key):
        f = r.fields[key]
        start = int(f.offset)
        type_at = start + 8 + len(key.encode())
        return start, type_at + 4  # key start, value start

    bad = {}
    bad["bad-magic"] = (b"GGML" + v3[4:4096], "magic GGML (first 4 KiB)")
    bad["bad-version-1"] = (v3[:4] + struct.pack("<I", 1) + v3[8:4096], "version field set to 1 (first 4 KiB)")
    bad["bad-tensor-count-2-60"] = (v3[:8] + struct.pack("<Q", 1 << 60) + v3[16:4096],
                                    "tensor count set to 2^60 (first 4 KiB)")
    _, tok_value = kv_offsets("tokenizer.ggml.tokens")
    arr_len_at = tok_value + 4  # after the element type
    assert struct.unpack("<Q", v3[arr_len_at:arr_len_at + 8])[0] == 5000
    assert arr_len_at + 8 < 4096
    bad["bad-array-len-2-50"] = (v3[:arr_len_at] + struct.pack("<Q", 1 << 50) + v3[arr_len_at + 8:4096],
                                 "tokenizer.ggml.tokens length set to 2^50 (first 4 KiB)")
    _, arch_value = kv_offsets("general.architecture")
    assert struct.unpack("<Q", v3[arch_value:arch_value + 8])[0] == len("llama")
    bad["bad-string-len-2-40"] = (v3[:arch_value] + struct.pack("<Q", 1 << 40) + v3[arch_value + 8:4096],
                                  "general.architecture string length set to 2^40 (first 4 KiB)")
    t2 = r.tensors[2]
    info_at = int(t2.field.offset)
    bad["bad-truncated-tensor-info"] = (v3[:info_at + 30], "cut 30 bytes into the third tensor info")
    ttype_at = info_at + 8 + len(t2.name.encode()) + 4 + 8 * len(t2.shape)
    assert struct.unpack("<I", v3[ttype_at:ttype_at + 4])[0] == int(t2.tensor_type)
    bad["bad-ggml-type-unknown"] = (v3[:ttype_at] + struct.pack("<I", 4) + v3[ttype_at + 4:],
                                    "third tensor's ggml type set to 4 (removed Q4_2)")
    last = r.tensors[-1]
    cut = int(last.data_offset) + int(last.n_bytes) // 2
    bad["bad-truncated-tensor-data"] = (v3[:cut], "cut in the middle of the last tensor's data")

    report.append("\n| bad file | bytes | how | GGUFReader says |")
    report.append("|---|---|---|---|")
    for stem, (data, why) in bad.items():
        path = os.path.join(GG_DIR, stem + ".gguf")
        write(path, data)
        try:
            gguf.GGUFReader(path)
            ref = "accepted"
        except Exception as e:  # noqa: BLE001 - record what the reference says
            ref = (type(e).__name__ + ": " + str(e)).replace("|", "\\|").replace("\n", " ")[:160]
        report.append(f"| `{stem}.gguf` | {len(data)} | {why} | {ref} |")


def main():
    st_report = [
        "# safetensors fixtures",
        "",
        f"Written by `scripts/make_model_file_fixtures.py` with {versions()}.",
        "Good files come from `safetensors.serialize` (the reference writer); the index is",
        "written as transformers writes it; `bad-*` files are derived from",
        "`tiny-llama-f16-bf16-f32.safetensors`. Random weights, deterministic seeds.",
        "Totals below are what `safetensors.deserialize` (the reference reader) reports.",
        "",
        "| file | bytes | tensors | tensor bytes | by dtype |",
        "|---|---|---|---|---|",
    ]
    gg_report = [
        "# GGUF fixtures",
        "",
        f"Written by `scripts/make_model_file_fixtures.py` with {versions()}.",
        "`tiny-llama-v3-f32-f16-q8_0-q4_k.gguf` comes from `gguf.GGUFWriter` (the reference",
        "writer): a header fixture with llama metadata, a 5000-string `tokenizer.ggml.tokens`",
        "(above the 4096-element storage cap, so the skip path runs), nested and typed test",
        "keys, and F32/F16/Q8_0/Q4_K tensors (Q4_K blocks are random bytes; the shapes are not",
        "a loadable model). `tiny-llama-v2-patched.gguf` is the same file with its version",
        "field set to 2. `bad-*` files are derived from the v3 file at offsets `GGUFReader`",
        "reports. Totals below are `GGUFReader` tensor `n_bytes` sums.",
        "",
    ]
    st_bad_header = ["", "| bad file | bytes | how | safetensors.deserialize says |", "|---|---|---|---|"]
    st_rows = []
    make_safetensors(st_rows)
    good_rows = [r for r in st_rows if not r.startswith("| `bad-")]
    bad_rows = [r for r in st_rows if r.startswith("| `bad-")]
    with open(os.path.join(ST_DIR, "SOURCE.md"), "w") as f:
        f.write("\n".join(st_report + good_rows + st_bad_header + bad_rows) + "\n")
    make_gguf(gg_report)
    with open(os.path.join(GG_DIR, "SOURCE.md"), "w") as f:
        f.write("\n".join(gg_report) + "\n")
    print(open(os.path.join(ST_DIR, "SOURCE.md")).read())
    print(open(os.path.join(GG_DIR, "SOURCE.md")).read())


if __name__ == "__main__":
    main()
