#!/usr/bin/env python3
"""Write the test pickles in fixtures/tools/torch-snapshots/ (deterministic; plain `pickle`).

The layout mirrors what `torch.cuda.memory._snapshot()` returns and `_dump_snapshot()` pickles,
as documented in PyTorch's "Understanding CUDA Memory Usage" page
(https://pytorch.org/docs/stable/torch_cuda_memory.html, `_snapshot` docstring in
torch/cuda/memory.py): a dict with `segments` (each with device, address, total_size,
allocated_size, active_size, requested_size, stream, segment_type 'small'/'large',
segment_pool_id, is_expandable, frames, and `blocks` with address, size, requested_size, state
'active_allocated'/'active_pending_free'/'inactive' and `frames` of {filename, line, name}),
`device_traces` (one list per device of {action, addr, size, stream, time_us, frames, and
device_free on 'oom'}) and `allocator_settings`. Frame lists are shared between blocks with the
same traceback, as PyTorch's symbolizer does, so the pickles use memo references.

Hostile pickles are written next to them; none of them is ever loaded here.

    python3 scripts/make_torch_snapshots.py
"""
import os
import pickle
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "tools", "torch-snapshots")
MiB = 1 << 20
KiB = 1 << 10


def frames(*sites):
    return [{"filename": f, "line": l, "name": n} for (f, l, n) in sites]


LOAD = frames(("/opt/vllm/model_executor/model_loader/loader.py", 412, "load_weights"),
              ("/opt/vllm/worker/model_runner.py", 1003, "load_model"))
KV = frames(("/opt/vllm/worker/cache_engine.py", 88, "_allocate_kv_cache"),
            ("/opt/vllm/worker/worker.py", 265, "_init_cache_engine"))
ACT = frames(("/opt/vllm/model_executor/layers/activation.py", 34, "forward"),
             ("/opt/vllm/model_executor/models/llama.py", 221, "forward"))
SAMPLER = frames(("/opt/vllm/model_executor/layers/sampler.py", 301, "_sample"),)
GRAPH = frames(("/opt/vllm/worker/model_runner.py", 1650, "capture"),)


def segment(address, total, blocks, segment_type="large", pool=(0, 0), stream=0):
    """blocks: list of (size, state, frames or None); addresses follow in order."""
    out = []
    addr = address
    for size, state, fr in blocks:
        out.append({
            "address": addr,
            "size": size,
            "requested_size": size if state != "inactive" else 0,
            "state": state,
            "frames": fr if fr is not None else [],
        })
        addr += size
    assert addr - address == total, (addr - address, total)
    allocated = sum(b["size"] for b in out if b["state"] == "active_allocated")
    active = sum(b["size"] for b in out if b["state"] != "inactive")
    return {
        "device": 0,
        "address": address,
        "total_size": total,
        "allocated_size": allocated,
        "active_size": active,
        "requested_size": allocated,
        "stream": stream,
        "segment_type": segment_type,
        "segment_pool_id": pool,
        "is_expandable": False,
        "frames": [],
        "blocks": out,
    }


def snapshot():
    base = 0x7F0000000000
    segs = [
        # Small pool: 2 MiB segments for allocations of at most 1 MiB.
        segment(base, 2 * MiB, [(512 * KiB, "active_allocated", SAMPLER), (512 * KiB, "inactive", None),
                                (512 * KiB, "active_allocated", SAMPLER), (512 * KiB, "inactive", None)],
                segment_type="small"),
        segment(base + 2 * MiB, 2 * MiB, [(1 * MiB, "active_pending_free", ACT), (1 * MiB, "inactive", None)],
                segment_type="small"),
        # Weights: one large segment, fully used.
        segment(base + 0x1000000, 256 * MiB, [(256 * MiB, "active_allocated", LOAD)]),
        # KV cache, one big block, plus a free tail.
        segment(base + 0x20000000, 512 * MiB, [(448 * MiB, "active_allocated", KV), (64 * MiB, "inactive", None)]),
        # Activations: fragmented: free holes of 20, 12 and 30 MiB between live blocks.
        segment(base + 0x40000000, 128 * MiB, [(20 * MiB, "inactive", None), (24 * MiB, "active_allocated", ACT),
                                                (12 * MiB, "inactive", None), (42 * MiB, "active_allocated", ACT),
                                                (30 * MiB, "inactive", None)]),
        # A CUDA Graphs private pool.
        segment(base + 0x50000000, 64 * MiB, [(48 * MiB, "active_allocated", GRAPH), (16 * MiB, "inactive", None)],
                pool=(1, 3)),
    ]
    traces = [
        {"action": "segment_alloc", "addr": base + 0x40000000, "size": 128 * MiB, "stream": 0, "time_us": 1000, "frames": ACT},
        {"action": "alloc", "addr": base + 0x41400000, "size": 24 * MiB, "stream": 0, "time_us": 1001, "frames": ACT},
        {"action": "free_requested", "addr": base + 0x40000000, "size": 20 * MiB, "stream": 0, "time_us": 1002, "frames": ACT},
        {"action": "free_completed", "addr": base + 0x40000000, "size": 20 * MiB, "stream": 0, "time_us": 1003, "frames": ACT},
        {"action": "oom", "addr": 0, "size": 40 * MiB, "stream": 0, "time_us": 1004, "device_free": 6 * MiB, "frames": ACT},
    ]
    return {
        "segments": segs,
        "device_traces": [traces],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                               "garbage_collection_threshold": 0.0, "expandable_segments": False},
        "external_annotations": [],
    }


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def main():
    os.makedirs(OUT, exist_ok=True)
    s = snapshot()
    for proto in (2, 4):
        with open(os.path.join(OUT, f"vllm-like-protocol{proto}.pickle"), "wb") as f:
            pickle.dump(s, f, protocol=proto)
    empty = {"segments": [], "device_traces": [[]]}
    with open(os.path.join(OUT, "empty-protocol4.pickle"), "wb") as f:
        pickle.dump(empty, f, protocol=4)
    # Hostile and broken inputs.
    with open(os.path.join(OUT, "hostile-reduce-os-system.pickle"), "wb") as f:
        pickle.dump({"segments": [Evil()]}, f, protocol=2)
    import collections
    with open(os.path.join(OUT, "hostile-unknown-global.pickle"), "wb") as f:
        pickle.dump({"segments": [], "settings": collections.OrderedDict(a=1)}, f, protocol=4)
    full = pickle.dumps(s, protocol=4)
    with open(os.path.join(OUT, "truncated.pickle"), "wb") as f:
        f.write(full[: len(full) // 2])
    # Claims a 2**60-byte string (BINUNICODE8) in a 40-byte file.
    with open(os.path.join(OUT, "bomb-claimed-length.pickle"), "wb") as f:
        f.write(b"\x80\x04" + b"\x8d" + struct.pack("<Q", 1 << 60) + b"abc" + b".")
    # Billion laughs: 40 levels of a list holding its predecessor twice (2**40 copies when
    # shared references are expanded).
    x = ["x" * 64]
    for _ in range(40):
        x = [x, x]
    with open(os.path.join(OUT, "bomb-shared-references.pickle"), "wb") as f:
        pickle.dump({"segments": x}, f, protocol=4)
    with open(os.path.join(OUT, "not-a-pickle.pickle"), "wb") as f:
        f.write(b"segments,blocks\n1,2\n")


if __name__ == "__main__":
    main()
