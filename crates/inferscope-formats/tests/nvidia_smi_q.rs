//! `nvidia-smi -q` text and `-q -x` XML importers against real reports
//! (`fixtures/tools/nvidia-smi-q/`): golden JSON or golden error per input, semantic facts
//! asserted directly, and no panic on truncated or byte-flipped inputs.
//!
//! `UPDATE_EXPECTED=1 cargo test -p inferscope-formats --test nvidia_smi_q` rewrites the
//! expected files; review every change against its input.

use inferscope_formats::nvidia_smi_q::{self, NvidiaSmiReport};
use inferscope_formats::{ParseError, nvidia_smi_xml};
use inferscope_host::{DriverSource, Reading, UnknownReason};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tools/nvidia-smi-q")
}

/// The input without the `# Source:` provenance header (bad-* inputs have none).
fn body(text: &str) -> &str {
    if !text.starts_with("# Source:") {
        return text;
    }
    match text.find("\n---\n") {
        Some(i) => &text[i + 5..],
        None => text,
    }
}

fn is_xml(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("<?xml") || t.contains("<nvidia_smi_log")
}

fn parse_any(text: &str) -> Result<NvidiaSmiReport, ParseError> {
    if is_xml(text) {
        nvidia_smi_xml::parse(text)
    } else {
        nvidia_smi_q::parse(text)
    }
}

fn load(name: &str) -> NvidiaSmiReport {
    let text = fs::read_to_string(dir().join(name)).unwrap();
    parse_any(body(&text)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn to_json(r: &NvidiaSmiReport) -> Value {
    json!({
        "driver": serde_json::to_value(&r.driver).unwrap(),
        "gpus": r.gpus.iter().map(|g| json!({
            "pci_bus_id": g.pci_bus_id.map(|b| b.to_string()),
            "details": serde_json::to_value(&g.details).unwrap(),
        })).collect::<Vec<_>>(),
        "notes": r.notes,
    })
}

fn inputs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.ends_with(".txt") && !n.ends_with(".expected-error.txt")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn goldens() {
    let update = std::env::var_os("UPDATE_EXPECTED").is_some();
    let mut failures = Vec::new();
    let all = inputs();
    assert!(all.len() >= 11, "fixtures missing: {all:?}");
    for path in all {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let json_path = dir().join(format!("{stem}.expected.json"));
        let err_path = dir().join(format!("{stem}.expected-error.txt"));
        let text = fs::read_to_string(&path).unwrap();
        let (actual, actual_path, other) = match parse_any(body(&text)) {
            Ok(r) => (
                serde_json::to_string_pretty(&to_json(&r)).unwrap() + "\n",
                &json_path,
                &err_path,
            ),
            Err(e) => (format!("{e}\n"), &err_path, &json_path),
        };
        if update {
            fs::write(actual_path, &actual).unwrap();
            let _ = fs::remove_file(other);
            continue;
        }
        match fs::read_to_string(actual_path) {
            Ok(expected) if expected == actual => {}
            Ok(_) => failures.push(format!("{stem}: differs from {}", actual_path.display())),
            Err(_) => failures.push(format!(
                "{stem}: no {} (the other outcome was expected?)",
                actual_path.display()
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn l4_link_is_gen1_x8_of_gen4_x16() {
    let r = load("l4-single-q-pcie-gen1-x8-of-x16.txt");
    assert_eq!(r.driver.source, DriverSource::NvidiaSmiQ);
    assert_eq!(r.driver.driver_version.known().unwrap(), "550.90.07");
    assert_eq!(r.driver.cuda_driver_version.known().unwrap(), "12.4");
    let g = &r.gpus[0].details;
    let p = g.pcie.known().unwrap();
    assert_eq!(p.gen_current.known(), Some(&1));
    assert_eq!(p.gen_max.known(), Some(&4));
    assert_eq!(p.width_current.known(), Some(&8));
    assert_eq!(p.width_max.known(), Some(&16));
    assert_eq!(g.power_draw_mw.known(), Some(&16_470));
    assert_eq!(g.power_limit_mw.known(), Some(&72_000));
    assert_eq!(g.compute_mode.known().unwrap(), "default");
    assert_eq!(g.persistence_mode.known(), Some(&true));
    // MIG Mode: N/A on an L4 — not supported, not "disabled".
    assert!(matches!(&g.mig, Reading::Unknown(u) if u.reason == UnknownReason::NotSupported));
    let clocks = g.clocks.known().unwrap();
    assert_eq!(
        clocks.event_reasons.known().unwrap(),
        &vec!["gpu_idle".to_string()]
    );
}

#[test]
fn h100_has_eight_gpus_in_bus_order() {
    let r = load("h100-sxm-8gpu-q-full-driver565.txt");
    assert_eq!(r.gpus.len(), 8);
    assert_eq!(r.driver.gpu_count.known(), Some(&8));
    assert_eq!(r.gpus[0].pci_bus_id.unwrap().to_string(), "0000:18:00.0");
    let g0 = &r.gpus[0].details;
    assert_eq!(g0.index.known().map(|i| i.0), Some(0));
    assert_eq!(r.gpus[7].details.index.known().map(|i| i.0), Some(7));
    assert_eq!(g0.memory.known().unwrap().total_bytes, 81_559 * 1024 * 1024);
    assert_eq!(
        g0.memory.known().unwrap().reserved_bytes.known(),
        Some(&(454 << 20))
    );
    let ecc = g0.ecc.known().unwrap();
    assert_eq!(
        ecc.mode.known().map(|m| (m.current, m.pending)),
        Some((true, true))
    );
    assert_eq!(ecc.volatile_uncorrected.known(), Some(&0));
    assert_eq!(g0.pcie.known().unwrap().replay_counter.known(), Some(&7));
    assert_eq!(g0.processes.known().map(Vec::len), Some(0));
    assert!(matches!(&g0.nvlinks, Reading::Unknown(u) if u.reason == UnknownReason::NotCaptured));
    let mig = g0.mig.known().unwrap();
    assert!(!mig.mode.current && mig.instances.is_empty());
    for w in r.gpus.windows(2) {
        assert!(w[0].pci_bus_id < w[1].pci_bus_id);
    }
}

#[test]
fn a100_xml_with_dtd() {
    let r = load("a100-sxm4-80gb-q-x-xml-dtd-v12.txt");
    assert_eq!(r.driver.source, DriverSource::NvidiaSmiXml);
    assert_eq!(r.driver.gpu_count.known(), Some(&4));
    assert_eq!(r.gpus.len(), 1, "the file lists one of four GPUs");
    let g = &r.gpus[0].details;
    assert!(!g.index.is_known());
    assert_eq!(
        g.uuid.known().unwrap().0,
        "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    );
    let ecc = g.ecc.known().unwrap();
    assert_eq!(
        ecc.mode.known().map(|m| (m.current, m.pending)),
        Some((true, true))
    );
    assert_eq!(ecc.aggregate_uncorrected.known(), Some(&0));
    let mig = g.mig.known().unwrap();
    assert!(mig.mode.current && mig.mode.pending);
    assert_eq!(mig.instances.len(), 4);
    assert_eq!(
        mig.instances[0].memory_total_bytes.known(),
        Some(&(19_968 << 20))
    );
    // <remapped_rows>N/A</remapped_rows>: every remap field is not supported, not zero.
    let repair = g.memory_repair.known().unwrap();
    assert!(matches!(&repair.remapped_rows_correctable,
        Reading::Unknown(u) if u.reason == UnknownReason::NotSupported));
    assert_eq!(g.power_draw_mw.known(), Some(&67_030));
    assert_eq!(g.temperature_c.known(), Some(&27));
    assert_eq!(g.processes.known().map(Vec::len), Some(0));
}

#[test]
fn gtx1660ti_old_xml_ecc_is_not_supported_not_zero() {
    let r = load("gtx1660ti-q-x-xml-driver418-graphics-device.txt");
    let g = &r.gpus[0].details;
    assert_eq!(g.index.known().map(|i| i.0), Some(0));
    assert!(matches!(&g.ecc, Reading::Unknown(u) if u.reason == UnknownReason::NotSupported));
    assert!(matches!(&g.serial, Reading::Unknown(u) if u.reason == UnknownReason::NotSupported));
    assert_eq!(g.name.known().unwrap(), "Graphics Device");
    // Old <power_readings> with <enforced_power_limit>.
    assert_eq!(g.power_draw_mw.known(), Some(&8_930));
    assert_eq!(g.power_limit_mw.known(), Some(&130_000));
    let clocks = g.clocks.known().unwrap();
    assert_eq!(
        clocks.event_reasons.known().unwrap(),
        &vec!["gpu_idle".to_string()]
    );
    let m = g.memory.known().unwrap();
    assert!(
        matches!(&m.reserved_bytes, Reading::Unknown(u) if u.reason == UnknownReason::NotCaptured)
    );
    assert!(matches!(&g.mig, Reading::Unknown(u) if u.reason == UnknownReason::NotCaptured));
}

#[test]
fn wsl_4070_bar1_nearly_full() {
    let r = load("rtx4070-laptop-wsl-wddm-q-driver566.txt");
    let bar1 = r.gpus[0].details.bar1.known().unwrap();
    assert_eq!(bar1.used_bytes, 8164 << 20);
    assert_eq!(bar1.total_bytes, 8192 << 20);
    assert!(r.notes.iter().any(|n| n.contains("skipped shell prompt")));
    assert!(matches!(&r.gpus[0].details.ecc,
        Reading::Unknown(u) if u.reason == UnknownReason::NotSupported));
    assert_eq!(r.gpus[0].details.index.known().map(|i| i.0), Some(0));
}

#[test]
fn fragment_without_gpu_section_is_an_error_at_line_1() {
    let text = fs::read_to_string(dir().join("rtx4070-laptop-q-d-memory-tail5.txt")).unwrap();
    let e = nvidia_smi_q::parse(body(&text)).unwrap_err();
    assert_eq!((e.line, e.column), (1, 1));
    assert!(e.expected.contains("fragment"), "{e}");
}

#[test]
fn processes_old_and_new_layouts() {
    let new = "Attached GPUs : 1\nGPU 00000000:01:00.0\n    Processes\n        \
               GPU instance ID : N/A\n        Compute instance ID : N/A\n        \
               Process ID : 2348\n            Type : G\n            Name : /usr/lib/xorg/Xorg\n            \
               Used GPU Memory : 4 MiB\n        GPU instance ID : N/A\n        \
               Compute instance ID : N/A\n        Process ID : 99\n            Type : C\n            \
               Name : python\n            Used GPU Memory : 1234 MiB\n";
    let r = nvidia_smi_q::parse(new).unwrap();
    let p = r.gpus[0].details.processes.known().unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].pid, 99);
    assert_eq!(p[0].name.known().unwrap(), "python");
    assert_eq!(p[0].used_memory_bytes.known(), Some(&(1234 << 20)));
    assert!(r.notes.iter().any(|n| n.contains("graphics-only")));

    let flat = "GPU 00000000:01:00.0\n    Processes\n        Process ID : 7\n        Type : C\n        \
                Name : a.out\n        Used GPU Memory : Not available in WDDM driver model\n";
    let r = nvidia_smi_q::parse(flat).unwrap();
    let p = r.gpus[0].details.processes.known().unwrap();
    assert_eq!(p[0].pid, 7);
    assert!(matches!(&p[0].used_memory_bytes,
        Reading::Unknown(u) if u.reason == UnknownReason::NotSupported));

    let xml = "<nvidia_smi_log><attached_gpus>1</attached_gpus><gpu id=\"00000000:01:00.0\">\
               <processes><process_info><pid>42</pid><type>C</type>\
               <process_name>vllm</process_name><used_memory>70000 MiB</used_memory>\
               </process_info></processes></gpu></nvidia_smi_log>";
    let r = nvidia_smi_xml::parse(xml).unwrap();
    let p = r.gpus[0].details.processes.known().unwrap();
    assert_eq!(
        (p[0].pid, p[0].name.known().unwrap().as_str()),
        (42, "vllm")
    );
}

#[test]
fn renamed_fields_of_older_drivers() {
    let old = "Attached GPUs : 1\nGPU 0000:3B:00.0\n    Clocks Throttle Reasons\n        \
               Idle : Not Active\n        SW Power Cap : Active\n        HW Slowdown : Active\n    \
               Power Readings\n        Power Draw : 250.5 W\n        Power Limit : 300.00 W\n        \
               Enforced Power Limit : 280.00 W\n    Compute Mode : Exclusive_Process\n";
    let r = nvidia_smi_q::parse(old).unwrap();
    let g = &r.gpus[0].details;
    assert_eq!(
        g.clocks.known().unwrap().event_reasons.known().unwrap(),
        &vec!["sw_power_cap".to_string(), "hw_slowdown".to_string()]
    );
    assert_eq!(g.power_draw_mw.known(), Some(&250_500));
    assert_eq!(g.power_limit_mw.known(), Some(&280_000));
    assert_eq!(g.compute_mode.known().unwrap(), "exclusive_process");

    let newer = "GPU 00000000:3B:00.0\n    GPU Power Readings\n        Average Power Draw : N/A\n        \
                 Instantaneous Power Draw : 99.00 W\n        Current Power Limit : [Not Supported]\n";
    let g = &nvidia_smi_q::parse(newer).unwrap().gpus[0].details;
    assert_eq!(g.power_draw_mw.known(), Some(&99_000));
    assert!(matches!(&g.power_limit_mw,
        Reading::Unknown(u) if u.reason == UnknownReason::NotSupported
            && u.detail.contains("Current Power Limit")));
}

#[test]
fn oversized_input_is_refused() {
    let big = " ".repeat(64 * 1024 * 1024 + 1);
    assert!(nvidia_smi_q::parse(&big).is_err());
    assert!(nvidia_smi_xml::parse(&big).is_err());
}

#[test]
fn entity_expansion_is_bounded() {
    let mut dtd = String::from(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE nvidia_smi_log [\n<!ENTITY a \"aaaaaaaaaa\">\n",
    );
    let mut prev = 'a';
    for c in 'b'..='k' {
        dtd.push_str(&format!(
            "<!ENTITY {c} \"{}\">\n",
            format!("&{prev};").repeat(10)
        ));
        prev = c;
    }
    dtd.push_str("]>\n<nvidia_smi_log><driver_version>&k;</driver_version></nvidia_smi_log>");
    assert!(nvidia_smi_xml::parse(&dtd).is_err());
    let external = "<?xml version=\"1.0\"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n\
                    <nvidia_smi_log><driver_version>&x;</driver_version></nvidia_smi_log>";
    assert!(nvidia_smi_xml::parse(external).is_err());
}

/// Tiny xorshift so the mutations are the same on every run.
struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn truncated_and_flipped_fixtures_never_panic() {
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    for path in inputs() {
        let text = fs::read_to_string(&path).unwrap();
        let text = body(&text);
        let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        let step = (bounds.len() / 150).max(1);
        for &i in bounds.iter().step_by(step) {
            let _ = nvidia_smi_q::parse(&text[..i]);
            let _ = nvidia_smi_xml::parse(&text[..i]);
            let _ = parse_any(&text[i..]);
        }
        let bytes = text.as_bytes();
        if bytes.is_empty() {
            continue;
        }
        for _ in 0..60 {
            let mut m = bytes.to_vec();
            for _ in 0..(1 + rng.next() % 8) {
                let at = (rng.next() % m.len() as u64) as usize;
                m[at] ^= 1 << (rng.next() % 8);
            }
            let s = String::from_utf8_lossy(&m);
            let _ = nvidia_smi_q::parse(&s);
            let _ = nvidia_smi_xml::parse(&s);
        }
    }
}
