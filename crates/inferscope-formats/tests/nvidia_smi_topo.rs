//! `nvidia_smi_topo::parse` against every file in `fixtures/tools/nvidia-smi-topo/`.
//!
//! Each `<name>.txt` is either a real paste (a `# Source:` header, a `---` line, then the text
//! as found; the test parses what follows `---`, so error line numbers count from there) or a
//! raw `bad-*.txt` input. Its expectation is `<name>.expected.json` (the pretty JSON of the
//! matrix) or `<name>.expected-error.txt` (first line: the error; further `# ` lines say why).
//! `UPDATE_EXPECTED=1 cargo test -p inferscope-formats --test nvidia_smi_topo` rewrites them
//! (keeping the `# ` lines); review the diff by eye before committing.

use inferscope_formats::nvidia_smi_topo::parse;
use inferscope_host::topology::{LinkClass, TopoMatrix};
use inferscope_host::{CpuSet, NodeSet, NumaNodeId};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tools/nvidia-smi-topo")
}

/// The text to parse: after the `---` line when the file starts with a `# ` header.
fn body(text: &str) -> &str {
    if !text.starts_with("# ") {
        return text;
    }
    let mut off = 0;
    for line in text.split_inclusive('\n') {
        off += line.len();
        if line.trim_end() == "---" {
            return &text[off..];
        }
    }
    text
}

/// Input fixtures, sorted by name.
fn inputs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir()).expect("fixture dir") {
        let p = e.expect("entry").path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".txt") && !name.ends_with(".expected-error.txt") {
            let stem = name.trim_end_matches(".txt").to_string();
            out.push((stem, fs::read_to_string(&p).expect("read fixture")));
        }
    }
    out.sort();
    out
}

fn fixture(stem: &str) -> String {
    fs::read_to_string(dir().join(format!("{stem}.txt"))).expect("fixture")
}

fn parsed(stem: &str) -> TopoMatrix {
    let text = fixture(stem);
    parse(body(&text)).unwrap_or_else(|e| panic!("{stem}: {e}"))
}

#[test]
fn every_fixture_matches_its_expectation() {
    let update = std::env::var("UPDATE_EXPECTED").is_ok_and(|v| v == "1");
    let all = inputs();
    assert!(all.len() >= 19, "fixtures missing: {}", all.len());
    let mut failures = Vec::new();
    for (stem, text) in &all {
        let json_path = dir().join(format!("{stem}.expected.json"));
        let err_path = dir().join(format!("{stem}.expected-error.txt"));
        let (actual, path, stale) = match parse(body(text)) {
            Ok(m) => (
                serde_json::to_string_pretty(&m).unwrap() + "\n",
                &json_path,
                &err_path,
            ),
            Err(e) => (e.to_string() + "\n", &err_path, &json_path),
        };
        if update {
            let reasons: String = fs::read_to_string(path)
                .unwrap_or_default()
                .lines()
                .skip(1)
                .filter(|l| l.starts_with("# "))
                .map(|l| format!("{l}\n"))
                .collect();
            let content = if path == &err_path {
                actual.clone() + &reasons
            } else {
                actual.clone()
            };
            fs::write(path, content).unwrap();
            let _ = fs::remove_file(stale);
            continue;
        }
        if stale.exists() {
            failures.push(format!("{stem}: {} should not exist", stale.display()));
        }
        match fs::read_to_string(path) {
            Ok(expected) => {
                let expected = if path == &err_path {
                    expected.lines().next().unwrap_or("").to_string() + "\n"
                } else {
                    expected
                };
                if expected != actual {
                    failures.push(format!(
                        "{stem}: differs from {}\n--- expected\n{expected}--- actual\n{actual}",
                        path.display()
                    ));
                }
            }
            Err(_) => failures.push(format!("{stem}: {} missing", path.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every expectation file belongs to an input.
#[test]
fn no_orphan_expectations() {
    let stems: Vec<String> = inputs().into_iter().map(|(s, _)| s).collect();
    for e in fs::read_dir(dir()).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(stem) = name
            .strip_suffix(".expected.json")
            .or_else(|| name.strip_suffix(".expected-error.txt"))
        {
            assert!(stems.iter().any(|s| s == stem), "orphan {name}");
        }
    }
}

fn cell(m: &TopoMatrix, a: &str, b: &str) -> LinkClass {
    let i = m.devices.iter().position(|d| d == a).unwrap();
    let j = m.devices.iter().position(|d| d == b).unwrap();
    m.matrix[i][j]
}

fn cpus(s: &str) -> Option<CpuSet> {
    Some(s.parse().unwrap())
}

fn nodes(ids: &[u32]) -> Option<Vec<NumaNodeId>> {
    Some(ids.iter().copied().map(NumaNodeId).collect())
}

#[test]
fn h100_topo_mp_facts() {
    let m = parsed("h100-8gpu-topo-mp-pcie-only-12nic-comma-affinity");
    assert_eq!(m.devices.len(), 20);
    assert_eq!(cell(&m, "GPU0", "NIC0"), LinkClass::Pix);
    assert_eq!(cell(&m, "GPU0", "GPU4"), LinkClass::Sys);
    assert_eq!(cell(&m, "GPU0", "GPU1"), LinkClass::Node);
    assert_eq!(m.gpus[4].cpu_affinity, cpus("1,3,5,7,9,11"));
    assert_eq!(m.gpus[0].cpu_affinity, cpus("0,2,4,6,8,10"));
    assert_eq!(m.gpus[4].numa_affinity, nodes(&[1]));
    assert_eq!(m.gpus[4].gpu_numa_id, None);
    assert_eq!(m.nics[11].device, "mlx5_11");
    assert!(
        m.notes.iter().any(|n| n.contains("topo -mp")),
        "{:?}",
        m.notes
    );
}

/// The GB200 paste stops inside the GPU3 row, so it is rejected as a whole (a row is missing).
/// Its affinity cells are still checked here on the complete 3-GPU matrix left after cutting
/// the GPU3 and NIC columns (screen columns 32..88 of each line, tabs already expanded).
#[test]
fn gb200_numa_affinity_list_and_gpu_numa_id() {
    let text = fixture("gb200-4gpu-nv18-numa-affinity-list-gpu-numa-id-PARTIAL");
    assert!(parse(body(&text)).is_err());
    let cut: String = body(&text)
        .lines()
        .map(|l| {
            if l.len() > 88 && l.is_ascii() {
                format!("{}{}\n", &l[..32], &l[88..])
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let m = parse(&cut).unwrap_or_else(|e| panic!("{e}\n{cut}"));
    assert_eq!(m.devices, ["GPU0", "GPU1", "GPU2"]);
    assert_eq!(cell(&m, "GPU0", "GPU2"), LinkClass::NvLink(18));
    let list = |s: &str| {
        Some(
            s.parse::<NodeSet>()
                .unwrap()
                .iter()
                .map(NumaNodeId)
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(m.gpus[0].numa_affinity, list("0,3-9,11-17"));
    assert_eq!(m.gpus[0].numa_affinity.as_ref().unwrap().len(), 15);
    assert_eq!(m.gpus[2].numa_affinity, list("1,19-25,27-33"));
    assert_eq!(m.gpus[0].gpu_numa_id, nodes(&[2]));
    assert_eq!(m.gpus[1].gpu_numa_id, nodes(&[10]));
    assert_eq!(m.gpus[2].gpu_numa_id, nodes(&[18]));
    assert_eq!(m.gpus[2].cpu_affinity, cpus("72-143"));
}

#[test]
fn a100_collect_env_empty_affinity() {
    let m = parsed("a100-2gpu-nv12-8nic-empty-affinity-collect-env");
    assert_eq!(m.devices.len(), 10);
    assert_eq!(cell(&m, "GPU0", "GPU1"), LinkClass::NvLink(12));
    assert_eq!(cell(&m, "GPU1", "NIC6"), LinkClass::Pxb);
    for g in &m.gpus {
        assert_eq!(g.cpu_affinity, None);
        assert_eq!(g.numa_affinity, None);
        assert_eq!(g.gpu_numa_id, None);
    }
    // The lone N/A belongs to GPU NUMA ID; CPU and NUMA affinity are blank.
    assert!(
        m.notes
            .contains(&"CPU Affinity empty for every GPU".to_string())
    );
    assert!(
        m.notes
            .contains(&"NUMA Affinity empty for every GPU".to_string())
    );
    assert!(
        m.notes
            .contains(&"GPU NUMA ID is N/A for every GPU".to_string())
    );
    assert!(m.nics.iter().all(|n| n.device.is_empty()));
}

#[test]
fn old_format_dgx1_names_nics_in_header_order() {
    let m = parsed("dgx1-v100-8gpu-nv1-nv2-hybrid-cube-mesh-old-format");
    let devs: Vec<_> = m.nics.iter().map(|n| n.device.as_str()).collect();
    assert_eq!(devs, ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"]);
    assert_eq!(m.devices[8..], ["NIC0", "NIC1", "NIC2", "NIC3"]);
    assert_eq!(cell(&m, "GPU0", "GPU3"), LinkClass::NvLink(2));
    assert_eq!(cell(&m, "GPU0", "GPU5"), LinkClass::Sys);
    assert_eq!(cell(&m, "GPU2", "NIC2"), LinkClass::Pix); // mlx5_1
    assert_eq!(m.gpus[7].cpu_affinity, cpus("20-39,60-79"));
    assert_eq!(m.gpus[7].numa_affinity, None);
    assert!(m.notes.contains(&"NUMA Affinity column absent".to_string()));
}

#[test]
fn markdown_polaris_reads_columns_by_name() {
    let m = parsed("polaris-4x-a100-nv4-epyc-nps4-markdown-table");
    assert_eq!(m.gpus[0].numa_affinity, nodes(&[3]));
    assert_eq!(m.gpus[3].numa_affinity, nodes(&[0]));
    assert_eq!(m.gpus[0].cpu_affinity, cpus("24-31,56-63"));
    assert_eq!(cell(&m, "GPU3", "NIC0"), LinkClass::Phb);
    assert_eq!(m.nics[1].device, "mlx5_1");
}

#[test]
fn small_facts_of_other_fixtures() {
    let m = parsed("a100-sxm-4gpu-nv4-slurm-single-core-numa-range");
    assert_eq!(m.gpus[0].numa_affinity, nodes(&[0, 1]));
    assert_eq!(m.gpus[0].cpu_affinity, cpus("0"));
    assert_eq!(m.nics[1].device, "mlx5_1");
    assert_eq!(m.nics[2].device, "");
    let m = parsed("2gpu-nv2-workstation-numa-na");
    assert_eq!(m.gpus[1].numa_affinity, None);
    assert_eq!(cell(&m, "GPU0", "GPU1"), LinkClass::NvLink(2));
    let m = parsed("2gpu-node-indented-wrapped-mangled");
    assert_eq!(cell(&m, "GPU0", "GPU1"), LinkClass::Node);
    assert_eq!(m.gpus[1].cpu_affinity, cpus("0-15"));
    let m = parsed("5gpu-dual-socket-asymmetric-numa");
    assert_eq!(m.gpus[0].numa_affinity, nodes(&[1]));
    assert_eq!(m.gpus[0].cpu_affinity, cpus("8-15,24-31"));
    let m = parsed("rtx4090-8gpu-all-sys-2socket-tabs");
    assert_eq!(cell(&m, "GPU6", "NIC1"), LinkClass::Phb);
    assert_eq!(m.gpus[7].numa_affinity, nodes(&[1]));
}

#[test]
fn not_a_link_matrix_is_said_so() {
    let e = parse(body(&fixture("error-topo-m-with-i-flag-rejected"))).unwrap_err();
    assert!(e.expected.contains("`nvidia-smi topo -m` matrix"), "{e}");
    assert!(e.found.starts_with("The -i command line argument"), "{e}");
    let e = parse(body(&fixture("rtx5090-2gpu-threadripper-p2p-rw-matrix"))).unwrap_err();
    assert!(e.expected.contains("topo -p2p"), "{e}");
    let e = parse(body(&fixture("a800-8gpu-nv8-terminal-cut-columns"))).unwrap_err();
    assert!(e.found.starts_with("NIC0"), "{e}");
}

/// The merged-cell repairs on a small complete matrix (the real pastes with lost tabs are
/// PARTIAL/EXCERPT and miss their NIC rows).
#[test]
fn merged_cells_are_split_and_noted() {
    let text = "\tGPU0\tGPU1\tNIC0NIC1\tCPU Affinity\tNUMA Affinity\n\
                GPU0\t X \tSYS\tNODENODE\t0-7\t0\n\
                GPU1\tSYS\t X \tSYSSYS\t8-15\t1\n\
                NIC0\tNODE\tSYS\t X \tPIX\n\
                NIC1\tNODESYSPIX\t X\n";
    let m = parse(text).unwrap();
    assert_eq!(m.devices, ["GPU0", "GPU1", "NIC0", "NIC1"]);
    assert_eq!(cell(&m, "GPU0", "NIC1"), LinkClass::Node);
    assert_eq!(cell(&m, "NIC1", "NIC0"), LinkClass::Pix);
    let notes = m.notes.join("\n");
    assert!(notes.contains("header: repaired merged cell 'NIC0NIC1' into 'NIC0 NIC1'"));
    assert!(notes.contains("GPU0 row: repaired merged cell 'NODENODE' into 'NODE NODE'"));
    assert!(notes.contains("NIC1 row: repaired merged cell 'NODESYSPIX' into 'NODE SYS PIX'"));
    // A merged cell that would give a row too many cells is not split.
    let e = parse("\tGPU0\tGPU1\nGPU0\t X \tSYSSYS\nGPU1\tSYS\t X\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.expected.starts_with("2 link cells for GPU0"), "{e}");
}

#[test]
fn crlf_prompt_and_indent_do_not_change_the_result() {
    for (stem, text) in inputs() {
        let b = body(&text);
        let Ok(m) = parse(b) else { continue };
        let crlf = b.replace('\n', "\r\n");
        let indented: String = format!("$ nvidia-smi topo -m\n\n{b}")
            .lines()
            .map(|l| format!("  {l}\n"))
            .collect();
        for variant in [crlf, indented] {
            let v = parse(&variant).unwrap_or_else(|e| panic!("{stem}: {e}"));
            assert_eq!(
                (&v.devices, &v.matrix, &v.gpus, &v.nics),
                (&m.devices, &m.matrix, &m.gpus, &m.nics),
                "{stem}"
            );
        }
    }
}

use inferscope_host::topology::NVIDIA_SMI_LEGEND as LEGEND;

fn list(ids: &Option<Vec<NumaNodeId>>) -> String {
    match ids {
        Some(v) => v.iter().map(|n| n.0).collect::<NodeSet>().to_string(),
        None => "N/A".to_string(),
    }
}

/// Renders a matrix the way `nvidia-smi topo -m` prints it (tabs, ` X `, legend, NIC legend).
fn render(m: &TopoMatrix) -> String {
    let mut s = String::new();
    for d in &m.devices {
        write!(s, "\t{d}").unwrap();
    }
    s.push_str("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n");
    for (i, d) in m.devices.iter().enumerate() {
        s.push_str(d);
        for c in &m.matrix[i] {
            match c {
                LinkClass::SelfLink => s.push_str("\t X "),
                c => write!(s, "\t{c}").unwrap(),
            }
        }
        if let Some(g) = m.gpus.iter().find(|g| &g.name == d) {
            let cpu = g
                .cpu_affinity
                .as_ref()
                .map_or("N/A".to_string(), |c| c.to_string());
            write!(
                s,
                "\t{cpu}\t{}\t\t{}",
                list(&g.numa_affinity),
                list(&g.gpu_numa_id)
            )
            .unwrap();
        }
        s.push('\n');
    }
    s.push_str("\nLegend:\n\n");
    for (code, text) in LEGEND {
        writeln!(s, "  {code:<4} = {text}").unwrap();
    }
    if !m.nics.is_empty() {
        s.push_str("\nNIC Legend:\n\n");
        for n in m.nics.iter().filter(|n| !n.device.is_empty()) {
            writeln!(s, "  {}: {}", n.name, n.device).unwrap();
        }
    }
    s
}

#[test]
fn render_then_parse_round_trips() {
    let mut count = 0;
    for (stem, text) in inputs() {
        let Ok(m) = parse(body(&text)) else { continue };
        let rendered = render(&m);
        let again = parse(&rendered).unwrap_or_else(|e| panic!("{stem}: {e}\n{rendered}"));
        assert_eq!(again.devices, m.devices, "{stem}");
        assert_eq!(again.matrix, m.matrix, "{stem}");
        assert_eq!(again.gpus, m.gpus, "{stem}");
        assert_eq!(again.nics, m.nics, "{stem}");
        count += 1;
    }
    assert!(count >= 10, "only {count} fixtures parse");
}

#[test]
fn truncations_and_byte_flips_never_panic() {
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for (_, text) in inputs() {
        let b = body(&text);
        for cut in (0..=b.len()).step_by(7) {
            if b.is_char_boundary(cut) {
                let _ = parse(&b[..cut]);
            }
        }
        let bytes = b.as_bytes();
        for _ in 0..300 {
            let mut v = bytes.to_vec();
            if v.is_empty() {
                break;
            }
            for _ in 0..1 + next() % 6 {
                let i = (next() % v.len() as u64) as usize;
                let choice = next() % 4;
                v[i] = match choice {
                    0 => b'\t',
                    1 => b' ',
                    2 => b"XNSIOD0-,\n|"[(next() % 11) as usize],
                    _ => (next() & 0xff) as u8,
                };
            }
            let s = String::from_utf8_lossy(&v);
            let _ = parse(&s);
        }
    }
}

#[test]
fn hostile_sizes_are_refused() {
    let mut header = String::new();
    for i in 0..1025 {
        write!(header, "\tGPU{i}").unwrap();
    }
    let e = parse(&(header + "\n")).unwrap_err();
    assert!(e.expected.contains("1024"), "{e}");
    let e = parse("\tGPU0\tNUMA Affinity\nGPU0\t X \t0-4294967295\n").unwrap_err();
    assert!(e.expected.contains("at most 1024 NUMA nodes"), "{e}");
    assert!(parse("").is_err());
    assert!(parse("\u{feff}").is_err());
}

/// The real pastes with lost tabs (DGX H100, H20) lack their NIC rows, so they are rejected as
/// a whole. To check the repairs on their real, mangled GPU rows, NIC rows are appended here:
/// GPU cells copied from the GPU rows as read independently (merged tokens split by the given
/// table, not by the parser), NIC–NIC cells made up (`SYS`, `X` on the diagonal).
fn completed(
    stem: &str,
    gpus: usize,
    nics: usize,
    fixes: &[(&str, &str)],
) -> (String, Vec<Vec<LinkClass>>) {
    let text = fixture(stem);
    let mut out = String::new();
    let mut gpu_rows: Vec<Vec<String>> = Vec::new();
    for line in body(&text).lines() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        let is_row = toks.first().is_some_and(|t| t.starts_with("GPU"))
            && toks.get(1).is_some_and(|t| !t.starts_with("GPU"));
        if line.starts_with("[...") {
            continue; // the fixture's omission marker
        }
        out.push_str(line);
        out.push('\n');
        if is_row {
            let cells: Vec<String> = toks[1..]
                .iter()
                .flat_map(|t| {
                    let fixed = fixes.iter().find(|(m, _)| m == t).map_or(*t, |(_, f)| *f);
                    fixed.split(' ').map(str::to_string).collect::<Vec<_>>()
                })
                .take(gpus + nics)
                .collect();
            gpu_rows.push(cells);
            if gpu_rows.len() == gpus {
                for j in 0..nics {
                    let mut row = format!("NIC{j}");
                    for r in &gpu_rows {
                        write!(row, "\t{}", r[gpus + j]).unwrap();
                    }
                    for k in 0..nics {
                        row.push_str(if k == j { "\t X " } else { "\tSYS" });
                    }
                    out.push_str(&row);
                    out.push('\n');
                }
            }
        }
    }
    let expected = gpu_rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|c| LinkClass::parse_cell(c).unwrap())
                .collect()
        })
        .collect();
    (out, expected)
}

#[test]
fn lost_tab_repairs_on_the_real_gpu_rows() {
    let (text, rows) = completed(
        "dgx-h100-8gpu-12nic-lost-tabs-header-and-cells-PARTIAL",
        8,
        12,
        &[("NODENODE", "NODE NODE"), ("NODEPXB", "NODE PXB")],
    );
    let m = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(m.devices.len(), 20);
    assert_eq!(m.matrix[..8], rows[..]);
    assert_eq!(cell(&m, "GPU5", "NIC9"), LinkClass::Pxb);
    assert_eq!(cell(&m, "GPU4", "NIC8"), LinkClass::Node);
    assert_eq!(m.gpus[4].cpu_affinity, cpus("56-111,168-223"));
    assert!(
        m.notes
            .contains(&"header: repaired merged cell 'NIC8NIC9' into 'NIC8 NIC9'".to_string())
    );
    assert!(
        m.notes
            .contains(&"GPU5 row: repaired merged cell 'NODEPXB' into 'NODE PXB'".to_string())
    );
    assert_eq!(m.notes.iter().filter(|n| n.contains("repaired")).count(), 5);

    let fixes = [
        ("NODENODE", "NODE NODE"),
        ("PIXPIX", "PIX PIX"),
        ("SYSSYS", "SYS SYS"),
        ("NODEPIX", "NODE PIX"),
        ("PIXNODE", "PIX NODE"),
    ];
    let (text, rows) = completed(
        "h20-8gpu-nv18-36nic-bond-merged-columns-EXCERPT",
        8,
        36,
        &fixes,
    );
    let m = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(m.devices.len(), 44);
    assert_eq!(m.matrix[..8], rows[..]);
    // Counted cell by cell, the last merged cell is NIC34+NIC35 (the bonds): each bond sits on
    // the PCIe switch of one of GPU0/2/4/6, as NIC0-7, 8-15, 16-23 and 24-31 do.
    assert_eq!(cell(&m, "GPU0", "NIC34"), LinkClass::Node);
    assert_eq!(cell(&m, "GPU0", "NIC35"), LinkClass::Pix);
    assert_eq!(cell(&m, "GPU2", "NIC34"), LinkClass::Pix);
    assert_eq!(cell(&m, "GPU4", "NIC32"), LinkClass::Pix);
    assert_eq!(cell(&m, "GPU6", "NIC33"), LinkClass::Pix);
    assert_eq!(cell(&m, "GPU2", "NIC13"), LinkClass::Pix);
    assert_eq!(m.gpus[7].cpu_affinity, cpus("70-99,102-107"));
    assert_eq!(m.nics[35].device, "mlx5_bond_3");
    assert_eq!(
        m.notes.iter().filter(|n| n.contains("repaired")).count(),
        16
    );
}
