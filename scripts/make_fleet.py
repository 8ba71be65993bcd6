#!/usr/bin/env python3
"""Write fixtures/fleet/node-{a,b,c}.json: three snapshots of the same 8x H100 SXM host model,
node-b with planted differences (see fixtures/fleet/README.md).

    cargo build -p inferscope && python3 scripts/make_fleet.py [path/to/inferscope]

GPU details come from the real `nvidia-smi -q` in fixtures/tools/nvidia-smi-q/, matched in bus-id
order. Standard library only; output is deterministic.
"""
import copy
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TREE = "fixtures/hosts/h100-sxm8-2s-switch-12nic/root"
SMI_Q = "fixtures/tools/nvidia-smi-q/h100-sxm-8gpu-q-full-driver565.txt"
OUT = REPO / "fixtures/fleet"


def snapshot(binary, *args):
    out = subprocess.run([binary, "snapshot", *args], cwd=REPO, check=True, capture_output=True)
    return json.loads(out.stdout)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(REPO / "target/debug/inferscope")
    base = snapshot(binary, "--root", TREE)
    imported = snapshot(binary, "--import", SMI_Q)
    base["captured_at"] = "2026-12-02T00:00:00Z"
    base["source"] = {"root": TREE, "tool": "inferscope fixture (scripts/make_fleet.py)"}
    base["settings"]["vm_swappiness"] = {"value": 10}
    # Driver facts: the real `nvidia-smi -q` of an 8x H100 SXM host (same bus ids as the tree),
    # plus what `-q` does not print: 18 NVLinks per GPU (NVSwitch) and P2P OK between every pair.
    # GPUs are matched in bus-id order (the real host's bus numbers differ from the tree's).
    base["driver"] = imported["driver"]
    for g, src in zip(base["gpus"], imported["gpus"], strict=True):
        d = copy.deepcopy(src["details"])
        d["value"]["nvlinks"] = {
            "value": [
                {
                    "link": i,
                    "active": True,
                    "version": {"value": 4},
                    "remote_pci_bus_id": {
                        "unknown": {"reason": "not_captured", "detail": "NVSwitch port"}
                    },
                }
                for i in range(18)
            ]
        }
        g["details"] = d
    ids = [g["pci_bus_id"] for g in base["gpus"]]
    base["gpu_pairs"] = [
        {
            "a": a,
            "b": b,
            "common_ancestor": {
                "unknown": {"reason": "not_captured", "detail": "synthetic fleet fixture"}
            },
            "nvlinks": {"value": 18},
            "p2p_read": {"value": "ok"},
            "p2p_write": {"value": "ok"},
        }
        for i, a in enumerate(ids)
        for b in ids[i + 1 :]
    ]
    nodes = {}
    for name in "abc":
        n = copy.deepcopy(base)
        n["host"]["hostname"] = {"value": f"gpu-node-{name}"}
        nodes[name] = n
    # The planted differences of node-b.
    b = nodes["b"]
    b["settings"]["thp_enabled"] = {"value": "always"}
    b["settings"]["vm_swappiness"] = {"value": 60}
    gpu3 = b["gpus"][3]
    for dev in b["pci_devices"]:
        if dev["bus_id"] == gpu3["pci_bus_id"]:
            dev["link"]["current_width"] = {"value": 8}
    gpu3["details"]["value"]["pcie"]["value"]["width_current"] = {"value": 8}
    for name, n in nodes.items():
        (OUT / f"node-{name}.json").write_text(json.dumps(n, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
