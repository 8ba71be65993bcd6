//! Property tests for the round trips (issue 10), on inputs from a fixed-seed generator so every
//! run checks the same thousands of cases and a failure prints the case that broke:
//!
//! * cpulist parse/print: `parse(print(s)) == s` and `print(parse(text))` is canonical;
//! * Snapshot JSON: fixture snapshots mutated at random either load, and then write → load →
//!   write is byte-identical, or are refused with an error (never a panic);
//! * `topo` render/parse: a generated matrix rendered by `write_matrix` parses back to itself;
//! * SSE: the events of a generated stream do not depend on how it is cut into chunks.
//!
//! (No proptest dependency: a 20-line generator is enough and keeps `cargo test` fast.)

mod common;

use inferscope_bench::sse::{SseEvent, SseParser};
use inferscope_host::topology::{GpuPlacement, LinkClass, NicEntry, TopoMatrix};
use inferscope_host::{CpuSet, NodeSet, NumaNodeId};
use std::str::FromStr;

/// splitmix64: tiny, fixed-seed, good enough to spread cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

// ---------------------------------------------------------------- cpulists

fn random_ranges(rng: &mut Rng) -> Vec<(u32, u32)> {
    let n = rng.below(6);
    (0..n)
        .map(|_| {
            let a = match rng.below(4) {
                0 => rng.below(8) as u32,
                1 => rng.below(512) as u32,
                2 => u32::MAX - rng.below(4) as u32,
                _ => rng.next() as u32,
            };
            let len = if rng.chance(50) {
                0
            } else {
                rng.below(64) as u32
            };
            (a, a.saturating_add(len))
        })
        .collect()
}

#[test]
fn cpulist_print_parse_round_trip() {
    let mut rng = Rng(1);
    for _ in 0..20_000 {
        let ranges = random_ranges(&mut rng);
        let set = CpuSet::from_ranges(ranges.clone());
        let printed = set.to_string();
        let back = CpuSet::from_str(&printed)
            .unwrap_or_else(|e| panic!("{ranges:?} printed as {printed:?} does not parse: {e}"));
        assert_eq!(back, set, "{ranges:?} → {printed:?}");
        // Any way of writing the same ranges (unsorted, overlapping, single CPUs as a-a)
        // prints canonically.
        let messy: Vec<String> = ranges
            .iter()
            .rev()
            .map(|(a, b)| {
                if a == b && rng.chance(50) {
                    format!("{a}")
                } else {
                    format!("{a}-{b}")
                }
            })
            .collect();
        if let Ok(parsed) = CpuSet::from_str(&messy.join(",")) {
            assert_eq!(parsed.to_string(), printed, "{messy:?}");
        }
        let nodes = NodeSet::from_ranges(ranges);
        assert_eq!(NodeSet::from_str(&nodes.to_string()).unwrap(), nodes);
    }
}

// ---------------------------------------------------------------- Snapshot JSON

fn mutate(v: &mut serde_json::Value, rng: &mut Rng) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            if keys.is_empty() {
                return;
            }
            let k = &keys[rng.below(keys.len() as u64) as usize];
            if rng.chance(10) {
                map.remove(k);
            } else if let Some(child) = map.get_mut(k) {
                mutate(child, rng);
            }
        }
        Value::Array(items) => {
            if items.is_empty() {
                return;
            }
            let i = rng.below(items.len() as u64) as usize;
            match rng.below(10) {
                0 => {
                    items.remove(i);
                }
                1 => {
                    let dup = items[i].clone();
                    items.push(dup);
                }
                _ => mutate(&mut items[i], rng),
            }
        }
        Value::Number(_) => {
            *v = match rng.below(4) {
                0 => Value::from(0),
                1 => Value::from(rng.below(1 << 20)),
                2 => Value::from(u64::MAX),
                _ => Value::from(-1),
            }
        }
        Value::String(s) => {
            *v = Value::from(match rng.below(5) {
                0 => String::new(),
                1 => format!("{}-{}", rng.below(64), rng.below(64)),
                2 => "0000:17:00.0".to_string(),
                3 => s.chars().rev().collect(),
                _ => format!("{s}é"),
            })
        }
        Value::Bool(b) => *b = !*b,
        Value::Null => *v = Value::from(1),
    }
}

#[test]
fn mutated_snapshots_load_and_write_back_identically_or_are_refused() {
    let mut rng = Rng(2);
    let mut loaded = 0;
    for name in common::host_fixtures() {
        let snap = common::capture_fixture(&name);
        let base = serde_json::to_value(&snap).unwrap();
        for _ in 0..300 {
            let mut v = base.clone();
            for _ in 0..=rng.below(3) {
                mutate(&mut v, &mut rng);
            }
            let text = serde_json::to_string_pretty(&v).unwrap();
            let Ok(s1) = inferscope::load::parse_snapshot(&text, "mutated") else {
                continue;
            };
            loaded += 1;
            let j1 = serde_json::to_string_pretty(&s1).unwrap();
            let s2 = inferscope::load::parse_snapshot(&j1, "written")
                .unwrap_or_else(|e| panic!("a snapshot inferscope wrote does not load: {e}"));
            let j2 = serde_json::to_string_pretty(&s2).unwrap();
            assert_eq!(j1, j2, "{name}: write → load → write changed the JSON");
            assert_eq!(s1, s2);
        }
    }
    assert!(
        loaded > 100,
        "only {loaded} mutated snapshots loaded: the mutations are too harsh"
    );
}

// ---------------------------------------------------------------- topo render/parse

// Symmetric fill: both matrix[i][j] and matrix[j][i] are written, so index loops are clearer.
#[allow(clippy::needless_range_loop)]
fn random_matrix(rng: &mut Rng) -> TopoMatrix {
    let n_gpus = 1 + rng.below(8) as usize;
    let n_nics = rng.below(5) as usize;
    let n = n_gpus + n_nics;
    let mut devices: Vec<String> = (0..n_gpus).map(|i| format!("GPU{i}")).collect();
    devices.extend((0..n_nics).map(|i| format!("NIC{i}")));
    let mut matrix = vec![vec![LinkClass::SelfLink; n]; n];
    for i in 0..n {
        for j in i + 1..n {
            let both_gpus = i < n_gpus && j < n_gpus;
            let l = match rng.below(if both_gpus { 6 } else { 5 }) {
                0 => LinkClass::Pix,
                1 => LinkClass::Pxb,
                2 => LinkClass::Phb,
                3 => LinkClass::Node,
                4 => LinkClass::Sys,
                _ => LinkClass::NvLink(1 + rng.below(18) as u32),
            };
            matrix[i][j] = l;
            matrix[j][i] = l;
        }
    }
    let with_gpu_numa = rng.chance(20);
    let gpus = (0..n_gpus)
        .map(|i| {
            let node = rng.below(4) as u32;
            let known = rng.chance(85);
            let base = node * 32;
            GpuPlacement {
                name: format!("GPU{i}"),
                pci_bus_id: None,
                cpu_affinity: known.then(|| {
                    if rng.chance(50) {
                        CpuSet::from_ranges(vec![(base, base + 15), (base + 64, base + 79)])
                    } else {
                        CpuSet::from_ranges(vec![(base, base + 31)])
                    }
                }),
                numa_affinity: known.then(|| vec![NumaNodeId(node)]),
                gpu_numa_id: with_gpu_numa.then(|| vec![NumaNodeId(8 + i as u32)]),
                usable_cpus: None,
            }
        })
        .collect();
    let nics = (0..n_nics)
        .map(|i| NicEntry {
            name: format!("NIC{i}"),
            device: format!("mlx5_{i}"),
            pci_bus_id: None,
        })
        .collect();
    TopoMatrix {
        devices,
        matrix,
        gpus,
        nics,
        notes: Vec::new(),
    }
}

#[test]
fn topo_render_then_parse_is_the_same_matrix() {
    let mut rng = Rng(3);
    for case in 0..2_000 {
        let m = random_matrix(&mut rng);
        let mut out = Vec::new();
        inferscope::render::topo::write_matrix(&m, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let back = inferscope_formats::nvidia_smi_topo::parse(&text)
            .unwrap_or_else(|e| panic!("case {case}: rendered matrix does not parse: {e}\n{text}"));
        assert_eq!(back.devices, m.devices, "case {case}\n{text}");
        assert_eq!(back.matrix, m.matrix, "case {case}\n{text}");
        assert_eq!(back.nics, m.nics, "case {case}\n{text}");
        for (a, b) in back.gpus.iter().zip(&m.gpus) {
            assert_eq!(a.name, b.name);
            assert_eq!(a.cpu_affinity, b.cpu_affinity, "case {case}\n{text}");
            assert_eq!(a.numa_affinity, b.numa_affinity, "case {case}\n{text}");
            assert_eq!(a.gpu_numa_id, b.gpu_numa_id, "case {case}\n{text}");
        }
    }
}

// ---------------------------------------------------------------- SSE chunk splits

fn random_stream(rng: &mut Rng) -> Vec<u8> {
    let mut s = Vec::new();
    let eol = |rng: &mut Rng| -> &'static [u8] {
        match rng.below(3) {
            0 => b"\n",
            1 => b"\r\n",
            _ => b"\r",
        }
    };
    for _ in 0..rng.below(12) {
        match rng.below(7) {
            0 => s.extend_from_slice(b": keep-alive"),
            1 => s.extend_from_slice(b"event: error"),
            2 => s.extend_from_slice(b"id: 7"),
            3 => s.extend_from_slice("data: é{\"x\":1}".as_bytes()),
            4 => s.extend_from_slice(b"data:[DONE]"),
            5 => s.extend_from_slice(b"data"),
            _ => {}
        }
        s.extend_from_slice(eol(rng));
    }
    s
}

fn parse_in_chunks(stream: &[u8], cuts: &[usize]) -> (Result<(), String>, Vec<String>) {
    let mut p = SseParser::new();
    let mut events = Vec::new();
    let mut sink = |e: SseEvent<'_>| events.push(format!("{e:?}"));
    let mut at = 0;
    for &c in cuts.iter().chain(std::iter::once(&stream.len())) {
        if let Err(e) = p.feed(&stream[at..c], &mut sink) {
            return (Err(e.to_string()), events);
        }
        at = c;
    }
    let r = p.finish(&mut sink).map_err(|e| e.to_string());
    (r, events)
}

#[test]
fn sse_events_do_not_depend_on_chunk_boundaries() {
    let mut rng = Rng(4);
    for _ in 0..5_000 {
        let stream = random_stream(&mut rng);
        let whole = parse_in_chunks(&stream, &[]);
        // Random cuts, and every single byte its own chunk.
        let mut cuts: Vec<usize> = (0..rng.below(6))
            .map(|_| rng.below(stream.len() as u64 + 1) as usize)
            .collect();
        cuts.sort_unstable();
        let split = parse_in_chunks(&stream, &cuts);
        assert_eq!(
            whole,
            split,
            "stream {:?} cut at {cuts:?}",
            String::from_utf8_lossy(&stream)
        );
        let bytewise: Vec<usize> = (1..stream.len()).collect();
        assert_eq!(whole, parse_in_chunks(&stream, &bytewise));
    }
}
