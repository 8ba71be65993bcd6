#!/usr/bin/env python3
"""Generate fake-but-faithful sysfs/procfs trees of GPU servers.

For every fixtures/hosts/<name>/host.toml this (re)creates fixtures/hosts/<name>/root/
(deleted and rewritten), then checks the tree against the real `nvidia-smi topo -m` matrix
it models (fixtures/hosts/<name>/REAL-topo.txt) using the PCI classification rules
inferscope applies (see fixtures/hosts/README.md).

    python3 scripts/make_hosts.py            # regenerate all trees
    python3 scripts/make_hosts.py NAME ...   # regenerate some
    python3 scripts/make_hosts.py --check    # regenerate into a temp dir; exit 1 if the
                                             # committed trees differ

Python 3.11+, standard library only. Output is deterministic.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOSTS = REPO / "fixtures" / "hosts"

# ---------------------------------------------------------------------------------------------
# small helpers


def parse_cpulist(text: str) -> list[int]:
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return sorted(out)


def format_cpulist(cpus: list[int]) -> str:
    cpus = sorted(set(cpus))
    parts = []
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


class Writer:
    def __init__(self, root: Path):
        self.root = root

    def file(self, rel: str, content: str | bytes) -> None:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode()
        p.write_bytes(content)

    def value(self, rel: str, value) -> None:
        """A sysfs/procfs value file: one value and a trailing newline."""
        self.file(rel, f"{value}\n")

    def symlink(self, rel: str, target_rel: str) -> None:
        """Relative symlink at `rel` pointing to `target_rel` (both relative to root)."""
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        target = os.path.relpath(self.root / target_rel, p.parent)
        os.symlink(target, p)


# ---------------------------------------------------------------------------------------------
# procfs / memory text


def kb_line(label: str, value: int) -> str:
    # Linux show_val_kb(): label padded to 16 columns, value right-aligned in 8.
    return f"{label + ':':<16}{value:>8} kB\n"


def meminfo_text(h: dict) -> str:
    nodes = h["node"]
    mem = h["memory"]
    total = sum(n["mem_total_kb"] for n in nodes)
    free = sum(n["mem_free_kb"] for n in nodes)
    hp2 = sum(n.get("hugepages_2m", [0, 0])[0] for n in nodes)
    hp2_free = sum(n.get("hugepages_2m", [0, 0])[1] for n in nodes)
    hp1g = sum(n.get("hugepages_1g", [0, 0])[0] for n in nodes)
    cached = mem["cached_kb"]
    used = total - free
    swap_total = mem["swap_total_kb"]
    swap_free = mem["swap_free_kb"]
    anon = max(used - cached - hp2 * 2048 - hp1g * 1048576, 0) * 6 // 10
    shmem = mem.get("shmem_kb", cached // 20)
    slab = max(total // 200, 65536)
    lines = [
        ("MemTotal", total),
        ("MemFree", free),
        ("MemAvailable", mem["available_kb"]),
        ("Buffers", mem.get("buffers_kb", cached // 40)),
        ("Cached", cached),
        ("SwapCached", 0 if swap_total == swap_free else (swap_total - swap_free) // 16),
        ("Active", anon // 2 + cached // 2),
        ("Inactive", anon // 2 + cached // 2),
        ("Active(anon)", anon // 2),
        ("Inactive(anon)", anon // 2),
        ("Active(file)", cached // 2),
        ("Inactive(file)", cached // 2),
        ("Unevictable", 30720),
        ("Mlocked", 27648),
        ("SwapTotal", swap_total),
        ("SwapFree", swap_free),
        ("Zswap", 0),
        ("Zswapped", 0),
        ("Dirty", 1204),
        ("Writeback", 0),
        ("AnonPages", anon),
        ("Mapped", cached // 8),
        ("Shmem", shmem),
        ("KReclaimable", slab // 2),
        ("Slab", slab),
        ("SReclaimable", slab // 2),
        ("SUnreclaim", slab - slab // 2),
        ("KernelStack", 4 * 1024 * len(parse_cpulist(h["cpu"]["online"]))),
        ("PageTables", anon // 400),
        ("SecPageTables", 0),
        ("NFS_Unstable", 0),
        ("Bounce", 0),
        ("WritebackTmp", 0),
        ("CommitLimit", (total - hp2 * 2048 - hp1g * 1048576) // 2 + swap_total),
        ("Committed_AS", anon * 2),
        ("VmallocTotal", 34359738367),
        ("VmallocUsed", 262144 + total // 4096),
        ("VmallocChunk", 0),
        ("Percpu", 2048 * len(parse_cpulist(h["cpu"]["online"]))),
        ("HardwareCorrupted", 0),
        ("AnonHugePages", mem.get("anon_hugepages_kb", 0)),
        ("ShmemHugePages", 0),
        ("ShmemPmdMapped", 0),
        ("FileHugePages", 0),
        ("FilePmdMapped", 0),
    ]
    if int(h["osrelease"].split(".")[0]) < 6:  # fields added in 5.19 / 6.0
        lines = [(k, v) for k, v in lines if k not in ("Zswap", "Zswapped", "SecPageTables")]
    out = ""
    for k, v in lines:
        # the kernel prints this one with its own format string
        out += f"HardwareCorrupted: {v:>5} kB\n" if k == "HardwareCorrupted" else kb_line(k, v)
    out += f"HugePages_Total:   {hp2:>5}\n"
    out += f"HugePages_Free:    {hp2_free:>5}\n"
    out += f"HugePages_Rsvd:    {0:>5}\n"
    out += f"HugePages_Surp:    {0:>5}\n"
    out += kb_line("Hugepagesize", 2048)
    out += kb_line("Hugetlb", hp2 * 2048 + hp1g * 1048576)
    out += kb_line("DirectMap4k", 1048576 + total // 512)
    out += kb_line("DirectMap2M", total // 8)
    out += kb_line("DirectMap1G", total - total // 8 - total // 512 + 2097152)
    return out


def node_meminfo_text(h: dict, n: dict) -> str:
    nid = n["id"]
    total = n["mem_total_kb"]
    free = n["mem_free_kb"]
    used = total - free
    hp2 = n.get("hugepages_2m", [0, 0])
    file_pages = used // 3
    anon = used // 3
    slab = max(total // 200, 32768)
    rows = [
        ("MemTotal", total),
        ("MemFree", free),
        ("MemUsed", used),
        ("SwapCached", 0),
        ("Active", anon // 2 + file_pages // 2),
        ("Inactive", anon // 2 + file_pages // 2),
        ("Active(anon)", anon // 2),
        ("Inactive(anon)", anon // 2),
        ("Active(file)", file_pages // 2),
        ("Inactive(file)", file_pages // 2),
        ("Unevictable", 15360),
        ("Mlocked", 13824),
        ("Dirty", 412),
        ("Writeback", 0),
        ("FilePages", file_pages),
        ("Mapped", file_pages // 8),
        ("AnonPages", anon),
        ("Shmem", file_pages // 20),
        ("KernelStack", 24576),
        ("PageTables", anon // 400),
        ("SecPageTables", 0),
        ("NFS_Unstable", 0),
        ("Bounce", 0),
        ("WritebackTmp", 0),
        ("KReclaimable", slab // 2),
        ("Slab", slab),
        ("SReclaimable", slab // 2),
        ("SUnreclaim", slab - slab // 2),
        ("AnonHugePages", 0),
        ("ShmemHugePages", 0),
        ("ShmemPmdMapped", 0),
        ("FileHugePages", 0),
        ("FilePmdMapped", 0),
    ]
    if int(h["osrelease"].split(".")[0]) < 6:
        rows = [(k, v) for k, v in rows if k != "SecPageTables"]
    out = "".join(f"Node {nid} {k + ':':<15} {v:>8} kB\n" for k, v in rows)
    out += f"Node {nid} HugePages_Total: {hp2[0]:>5}\n"
    out += f"Node {nid} HugePages_Free:  {hp2[1]:>5}\n"
    out += f"Node {nid} HugePages_Surp:  {0:>5}\n"
    return out


LIMIT_ROWS = [
    # name, key in [limits] table, default soft, default hard, unit
    ("Max cpu time", "cpu", "unlimited", "unlimited", "seconds"),
    ("Max file size", "fsize", "unlimited", "unlimited", "bytes"),
    ("Max data size", "data", "unlimited", "unlimited", "bytes"),
    ("Max stack size", "stack", "8388608", "unlimited", "bytes"),
    ("Max core file size", "core", "0", "unlimited", "bytes"),
    ("Max resident set", "rss", "unlimited", "unlimited", "bytes"),
    ("Max processes", "nproc", None, None, "processes"),
    ("Max open files", "nofile", "1024", "1048576", "files"),
    ("Max locked memory", "memlock", "8388608", "8388608", "bytes"),
    ("Max address space", "as", "unlimited", "unlimited", "bytes"),
    ("Max file locks", "locks", "unlimited", "unlimited", "locks"),
    ("Max pending signals", "sigpending", None, None, "signals"),
    ("Max msgqueue size", "msgqueue", "819200", "819200", "bytes"),
    ("Max nice priority", "nice", "0", "0", ""),
    ("Max realtime priority", "rtprio", "0", "0", ""),
    ("Max realtime timeout", "rttime", "unlimited", "unlimited", "us"),
]


def limits_text(h: dict) -> str:
    lim = h.get("limits", {})
    # Same layout as fs/proc/base.c proc_pid_limits().
    out = f"{'Limit':<25} {'Soft Limit':<20} {'Hard Limit':<20} {'Units':<10}\n"
    nproc = str(lim.get("nproc_default", 1031176))
    for name, key, soft, hard, unit in LIMIT_ROWS:
        if key in lim:
            soft, hard = (str(x) for x in lim[key])
        if soft is None:
            soft = hard = nproc
        line = f"{name:<25} {soft:<20} {hard:<20} "
        if unit:
            line += f"{unit:<10}"
        out += line + "\n"
    return out


def cpuinfo_text(h: dict, topo: list[tuple[int, int, int, int]]) -> str:
    c = h["cpu"]
    siblings: dict[int, int] = {}
    cores: dict[int, set[int]] = {}
    for _cpu, pkg, core, _thr in topo:
        siblings[pkg] = siblings.get(pkg, 0) + 1
        cores.setdefault(pkg, set()).add(core)
    out = ""
    for cpu, pkg, core, thread in topo:
        apicid = pkg * 128 + core * c.get("threads_per_core", 1) + thread
        rows = [
            ("processor", cpu),
            ("vendor_id", c["vendor_id"]),
            ("cpu family", c["family"]),
            ("model", c["model"]),
            ("model name", c["model_name"]),
            ("stepping", c["stepping"]),
            ("microcode", c["microcode"]),
            ("cpu MHz", c["mhz"]),
            ("cache size", c["cache_size"]),
            ("physical id", pkg),
            ("siblings", siblings[pkg]),
            ("core id", core),
            ("cpu cores", len(cores[pkg])),
            ("apicid", apicid),
            ("initial apicid", apicid),
            ("fpu", "yes"),
            ("fpu_exception", "yes"),
            ("cpuid level", c["cpuid_level"]),
            ("wp", "yes"),
            ("flags", c["flags"]),
            ("bugs", c["bugs"]),
            ("bogomips", c["bogomips"]),
            ("clflush size", 64),
            ("cache_alignment", 64),
            ("address sizes", c["address_sizes"]),
        ]
        # Kernel layout (arch/x86/kernel/cpu/proc.c): short keys get two tabs.
        for k, v in rows:
            out += f"{k}{chr(9) * (2 if len(k) < 8 else 1)}: {v}\n"
        out += "power management:\n\n"
    return out


# ---------------------------------------------------------------------------------------------
# the PCI tree


def build_pci(h: dict) -> dict[str, dict]:
    """bdf -> device record with resolved attributes and sysfs path."""
    hbs = {hb["name"]: hb for hb in h["host_bridge"]}
    kinds = h["kinds"]
    devs: dict[str, dict] = {}
    for entry in h["pci"]["devices"]:
        d = dict(kinds[entry["kind"]])
        d.update(entry)
        bdf = d["bdf"]
        if bdf in devs:
            raise SystemExit(f"duplicate bdf {bdf}")
        parent = d["parent"]
        if parent in hbs:
            d["hb"] = parent
            d["chain"] = []
        else:
            p = devs[parent]  # parents must be listed first
            if p["class"] != "0x060400":
                raise SystemExit(f"{bdf}: parent {parent} is not a bridge")
            d["hb"] = p["hb"]
            d["chain"] = p["chain"] + [parent]
        d["dir"] = "sys/devices/" + "/".join([d["hb"], *d["chain"], bdf])
        devs[bdf] = d
    return devs


def node_cpulist(h: dict, node: int) -> str:
    if node < 0:  # kernel: cpumask_of_node(NUMA_NO_NODE) == all online CPUs
        return h["cpu"]["online"]
    for n in h["node"]:
        if n["id"] == node:
            return n["cpus"]
    raise SystemExit(f"no node {node}")


def write_pci(w: Writer, h: dict) -> None:
    hbs = {hb["name"]: hb for hb in h["host_bridge"]}
    devs = build_pci(h)
    drivers: set[str] = set()
    ib_index = 0
    for bdf in sorted(devs):
        d = devs[bdf]
        node = d.get("numa_node", hbs[d["hb"]]["node"])
        base = d["dir"]
        w.value(f"{base}/vendor", d["vendor"])
        w.value(f"{base}/device", d["device"])
        w.value(f"{base}/class", d["class"])
        w.value(f"{base}/numa_node", node)
        w.value(f"{base}/local_cpulist", node_cpulist(h, node))
        if d.get("speed"):
            w.value(f"{base}/current_link_speed", d["speed"])
            w.value(f"{base}/current_link_width", d["width"])
            w.value(f"{base}/max_link_speed", d.get("max_speed", d["speed"]))
            w.value(f"{base}/max_link_width", d.get("max_width", d["width"]))
        drv = d.get("driver")
        if drv:
            drivers.add(drv)
            w.symlink(f"{base}/driver", f"sys/bus/pci/drivers/{drv}")
        w.symlink(f"sys/bus/pci/devices/{bdf}", base)
        if d.get("nic"):
            _dom, bus, devfn = bdf.split(":")
            slot, fn = devfn.split(".")
            if d.get("ib", True):
                name = d.get("rdma", f"mlx5_{ib_index}")
                ib_index += 1
                w.value(f"{base}/infiniband/{name}/node_type", "1: CA")
            link = d.get("link_layer", "infiniband")
            if link == "infiniband":
                ifname = d.get("ifname", f"ibp{int(bus, 16)}s{int(slot, 16)}")
                w.value(f"{base}/net/{ifname}/type", 32)
            else:
                ifname = d.get("ifname", f"enp{int(bus, 16)}s{int(slot, 16)}f{int(fn)}np0")
                w.value(f"{base}/net/{ifname}/type", 1)
    # Linux also links each bound device back from its driver directory; those links make
    # cycles (device/driver/<bdf>/driver/...) that trip `find -L` and naive walkers, so the
    # driver directory only gets its (write-only, here empty) `uevent` file.
    for drv in sorted(drivers):
        w.file(f"sys/bus/pci/drivers/{drv}/uevent", "")


# ---------------------------------------------------------------------------------------------
# whole host


def cpu_topology(h: dict) -> list[tuple[int, int, int, int]]:
    """(cpu, physical_package_id, core_id, thread) for every online CPU.

    A socket's CPU list is in kernel order: first thread of every core, then the second."""
    c = h["cpu"]
    tpc = c.get("threads_per_core", 1)
    out = []
    for s in c["socket"]:
        cpus = parse_cpulist(s["cpus"])
        ncores = len(cpus) // tpc
        for i, cpu in enumerate(cpus):
            out.append((cpu, s["id"], i % ncores, i // ncores))
    out.sort()
    if [x[0] for x in out] != parse_cpulist(c["online"]):
        raise SystemExit("socket cpu lists do not cover cpu.online")
    return out


def generate(h: dict, root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    w = Writer(root)
    c = h["cpu"]
    s = h["settings"]
    topo = cpu_topology(h)

    # procfs
    w.value("proc/sys/kernel/hostname", h["hostname"])
    w.value("proc/sys/kernel/osrelease", h["osrelease"])
    w.value("proc/sys/kernel/numa_balancing", s["numa_balancing"])
    w.value("proc/sys/vm/swappiness", s["swappiness"])
    w.value("proc/sys/vm/zone_reclaim_mode", s["zone_reclaim_mode"])
    w.value("proc/cmdline", h["cmdline"])
    w.file("proc/cpuinfo", cpuinfo_text(h, topo))
    w.file("proc/meminfo", meminfo_text(h))
    w.file("proc/self/mounts", "".join(m + "\n" for m in s["mounts"]))
    w.file("proc/self/limits", limits_text(h))
    cg = h["cgroup"]
    w.value("proc/self/cgroup", f"0::{cg['path']}")
    w.file("proc/self/environ", "".join(e + "\0" for e in h["environ"]))

    # CPUs
    w.value("sys/devices/system/cpu/online", c["online"])
    w.value("sys/devices/system/cpu/possible", c["online"])
    w.value("sys/devices/system/cpu/present", c["online"])
    for cpu, pkg, core, _thread in topo:
        base = f"sys/devices/system/cpu/cpu{cpu}"
        w.value(f"{base}/topology/physical_package_id", pkg)
        w.value(f"{base}/topology/core_id", core)
        if c.get("governor"):
            w.value(f"{base}/cpufreq/scaling_governor", c["governor"])

    # NUMA nodes
    ids = [n["id"] for n in h["node"]]
    w.value("sys/devices/system/node/online", format_cpulist(ids))
    w.value("sys/devices/system/node/possible", format_cpulist(ids))
    w.value("sys/devices/system/node/has_cpu", format_cpulist(ids))
    w.value("sys/devices/system/node/has_memory", format_cpulist(ids))
    for n in h["node"]:
        base = f"sys/devices/system/node/node{n['id']}"
        w.value(f"{base}/cpulist", n["cpus"])
        w.file(f"{base}/meminfo", node_meminfo_text(h, n))
        w.value(f"{base}/distance", " ".join(str(x) for x in n["distance"]))
        for size, key in (("2048kB", "hugepages_2m"), ("1048576kB", "hugepages_1g")):
            tot, free = n.get(key, [0, 0])
            w.value(f"{base}/hugepages/hugepages-{size}/nr_hugepages", tot)
            w.value(f"{base}/hugepages/hugepages-{size}/free_hugepages", free)
            w.value(f"{base}/hugepages/hugepages-{size}/surplus_hugepages", 0)

    # mm
    w.value("sys/kernel/mm/transparent_hugepage/enabled", s["thp_enabled"])
    w.value("sys/kernel/mm/transparent_hugepage/defrag", s["thp_defrag"])
    for size, key in (("2048kB", "hugepages_2m"), ("1048576kB", "hugepages_1g")):
        tot = sum(n.get(key, [0, 0])[0] for n in h["node"])
        free = sum(n.get(key, [0, 0])[1] for n in h["node"])
        w.value(f"sys/kernel/mm/hugepages/hugepages-{size}/nr_hugepages", tot)
        w.value(f"sys/kernel/mm/hugepages/hugepages-{size}/free_hugepages", free)
        w.value(f"sys/kernel/mm/hugepages/hugepages-{size}/resv_hugepages", 0)
        w.value(f"sys/kernel/mm/hugepages/hugepages-{size}/surplus_hugepages", 0)

    # cgroup v2
    w.value("sys/fs/cgroup/cgroup.controllers", cg["controllers"])
    cgdir = "sys/fs/cgroup" + ("" if cg["path"] == "/" else cg["path"])
    w.value(f"{cgdir}/cpuset.cpus.effective", cg["cpus"])
    w.value(f"{cgdir}/cpuset.mems.effective", cg["mems"])
    w.value(f"{cgdir}/memory.max", cg["memory_max"])

    write_pci(w, h)

    # Sanity: nothing but regular files, dirs and relative symlinks; no empty dirs.
    for dirpath, dirnames, filenames in os.walk(root):
        if not dirnames and not filenames:
            raise SystemExit(f"empty directory {dirpath}")
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                t = os.readlink(p)
                if os.path.isabs(t) or not p.exists():
                    raise SystemExit(f"bad symlink {p} -> {t}")


# ---------------------------------------------------------------------------------------------
# verification against the real matrix, reading the generated tree like inferscope does


def read(p: Path) -> str:
    return p.read_text().strip()


def classify_tree(root: Path):
    """Return (gpus, nics, fn) where fn(a, b) gives the topo relation of two bdfs."""
    devdir = root / "sys/bus/pci/devices"
    info = {}
    for link in sorted(devdir.iterdir()):
        real = (link.parent / os.readlink(link)).resolve()
        rel = real.relative_to((root / "sys/devices").resolve())
        parts = rel.parts
        hb, chain = parts[0], list(parts[1:-1])
        info[link.name] = {
            "hb": hb,
            "chain": chain,
            "class": int(read(real / "class"), 16),
            "vendor": int(read(real / "vendor"), 16),
            "numa": int(read(real / "numa_node")),
            "cpus": read(real / "local_cpulist"),
            "rdma": sorted(x.name for x in (real / "infiniband").iterdir())
            if (real / "infiniband").is_dir()
            else [],
        }
    gpus = [b for b, d in info.items() if d["class"] >> 16 == 0x03 and d["vendor"] == 0x10DE]
    nics = [b for b, d in info.items() if d["class"] >> 16 == 0x02]

    def unit(chain_to: list[str], idx: int) -> str:
        # depth 0 = root port (its own unit); then (upstream, downstream) pairs: a downstream
        # port belongs to the switch of the upstream port above it.
        if idx == 0 or idx % 2 == 1:
            return chain_to[idx]
        return chain_to[idx - 1]

    def rel(a: str, b: str) -> str:
        da, db = info[a], info[b]
        if da["hb"] != db["hb"]:
            if da["numa"] < 0 or db["numa"] < 0:
                return "?"
            return "NODE" if da["numa"] == db["numa"] else "SYS"
        ca, cb = da["chain"], db["chain"]
        k = 0
        while k < len(ca) and k < len(cb) and ca[k] == cb[k]:
            k += 1
        if k == 0:
            return "PHB"
        units = {unit(ca, i) for i in range(k - 1, len(ca))} | {unit(cb, i) for i in range(k - 1, len(cb))}
        return "PIX" if len(units) <= 1 else "PXB"

    return gpus, nics, rel, info


def verify(name: str, root: Path, real_topo: Path) -> list[str]:
    text = real_topo.read_text()
    body = text.split("\n---\n", 1)[1].splitlines()
    header_i = next(i for i, l in enumerate(body) if l.split()[:1] == ["GPU0"])
    header = body[header_i].split()
    labels = header[: header.index("CPU")]
    legend = {}
    for line in body:
        t = line.split()
        if len(t) == 2 and t[0].startswith("NIC") and t[0].endswith(":"):
            legend[t[0][:-1]] = t[1]
    gpus, nics, rel, info = classify_tree(root)
    errors = []

    def resolve(label: str) -> str | None:
        if label.startswith("GPU"):
            i = int(label[3:])
            return gpus[i] if i < len(gpus) else None
        if label.startswith("NIC"):
            i = int(label[3:])
            if i >= len(nics):
                return None
            if label in legend and legend[label] not in info[nics[i]]["rdma"]:
                errors.append(f"{label}: legend says {legend[label]}, tree has {info[nics[i]]['rdma']}")
            return nics[i]
        for b in nics:
            if label in info[b]["rdma"]:
                return b
        return None

    bdf = {l: resolve(l) for l in labels}
    n_gpu = sum(1 for l in labels if l.startswith("GPU"))
    if len(gpus) != n_gpu or len(nics) != len(labels) - n_gpu:
        errors.append(f"tree has {len(gpus)} GPUs/{len(nics)} NICs, matrix {n_gpu}/{len(labels) - n_gpu}")
    for line in body[header_i + 1 :]:
        t = line.split()
        if not t or t[0] not in bdf:
            continue
        me = bdf[t[0]]
        if me is None:
            errors.append(f"{t[0]} not found in tree")
            continue
        for j, other in enumerate(labels):
            want = t[1 + j]
            got = "X" if other == t[0] else rel(me, bdf[other])
            if want != got:
                errors.append(f"{t[0]}-{other}: real {want}, tree {got}")
        rest = t[1 + len(labels) :]
        if t[0].startswith("GPU") and rest:
            if parse_cpulist(rest[0]) != parse_cpulist(info[me]["cpus"]):
                errors.append(f"{t[0]} CPU affinity real {rest[0]}, tree {info[me]['cpus']}")
            if len(rest) > 1:
                want_node = -1 if rest[1] == "N/A" else int(rest[1])
                if want_node != info[me]["numa"]:
                    errors.append(f"{t[0]} NUMA real {rest[1]}, tree {info[me]['numa']}")
    return [f"{name}: {e}" for e in errors]


# ---------------------------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", "")
            else:
                out[rel] = ("file", p.read_bytes())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if committed trees are stale")
    ap.add_argument("names", nargs="*", help="hosts to regenerate (default: all)")
    args = ap.parse_args()
    names = args.names or sorted(p.parent.name for p in HOSTS.glob("*/host.toml"))
    failed = False
    tmp = Path(tempfile.mkdtemp(prefix="make_hosts-")) if args.check else None
    try:
        for name in names:
            hdir = HOSTS / name
            with open(hdir / "host.toml", "rb") as f:
                h = tomllib.load(f)
            root = (tmp / name / "root") if tmp else (hdir / "root")
            generate(h, root)
            real = hdir / "REAL-topo.txt"
            errs = verify(name, root, real) if real.exists() else []
            for e in errs:
                print(f"MISMATCH {e}", file=sys.stderr)
            failed |= bool(errs)
            if tmp:
                committed = hdir / "root"
                if not committed.is_dir() or snapshot(committed) != snapshot(root):
                    print(f"STALE {name}: fixtures/hosts/{name}/root differs from host.toml "
                          f"(run python3 scripts/make_hosts.py)", file=sys.stderr)
                    failed = True
                else:
                    print(f"ok {name}")
            else:
                print(f"wrote {root.relative_to(REPO)}")
    finally:
        if tmp:
            shutil.rmtree(tmp)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
