//! llama-server start-up failures: fixes from the log's own figures with llama.cpp's arithmetic
//! (issue 28 item 2), on real logs in `fixtures/tools/llama-server/failures/`:
//!
//! * `cpu-c67108864-np2-kv-alloc.log`: the real llama-server on the dev VM, `-c 67108864`: its
//!   own fit projects 98308 MiB against 24105 MiB; the `-c` fix is checked by the same engine in
//!   `cpu-c15083776-np2-fit-check.log` ("successfully fit params to free device memory").
//! * llama.cpp#8101 (CPU, n_ctx 1048576, 128 GiB KV) and llama-cpp-python#1944 (a 200 GiB KV on an
//!   A100 80GB): no free memory printed, so no fix claims to fit; with `--gpu` a fix larger than
//!   the card is said not to fit.
//! * A table in llama.cpp's own wording where the device's free memory is printed (figures
//!   modelled on an RTX 4090, 24080 MiB, serving a ~30B Q4 model): the compute buffer's failure.

use inferscope_formats::startup_log::parse;
use inferscope_mem::startup::{Hints, StartupReport, analyse};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tools/llama-server/failures")
}

fn report(text: &str, gpu: Option<&str>) -> StartupReport {
    analyse(
        &parse(text.as_bytes()).unwrap(),
        &Hints {
            gpu: gpu.map(str::to_string),
            ..Hints::default()
        },
    )
}

fn file(name: &str) -> String {
    std::fs::read_to_string(dir().join(name)).unwrap()
}

#[test]
fn the_real_kv_failure_gets_a_context_the_engine_itself_says_fits() {
    let r = report(&file("cpu-c67108864-np2-kv-alloc.log"), None);
    assert!(r.failed);
    assert!(
        r.diagnosis
            .as_deref()
            .unwrap()
            .contains("KV cache of 64.00 GiB on CPU"),
        "{:?}",
        r.diagnosis
    );
    assert_eq!(r.budget.as_ref().unwrap().shortfall_gib, Some(73.46));
    let c = r
        .fixes
        .iter()
        .find(|f| f.change.starts_with("-c "))
        .unwrap();
    assert!(c.fits, "{c:#?}");
    let cells: u64 = c.change[3..].parse().unwrap();
    assert_eq!(cells % 256, 0);
    // The engine's own check of that value: the same llama-server, -c as computed.
    let check = file("cpu-c15083776-np2-fit-check.log");
    assert!(
        check.contains(&format!("-c {cells} ")),
        "the check is of another -c"
    );
    assert!(check.contains("successfully fit params to free device memory"));
    let log = parse(check.as_bytes()).unwrap();
    let used = log.figure("fit_projected").unwrap().value;
    let total = log.figure("fit_total").unwrap().value;
    assert!(total - used >= 1024.0, "{used} of {total} MiB");
    // 8-bit KV saves 30 of the 73.46 GiB: it cannot close it; fewer slots keep the cells.
    for (flag, why) in [("-ctk q8_0", "short of"), ("-np 1", "cannot help")] {
        let f = r.fixes.iter().find(|f| f.change.starts_with(flag)).unwrap();
        assert!(!f.fits && f.why.contains(why), "{f:#?}");
    }
}

#[test]
fn without_free_memory_no_fix_claims_to_fit_and_a_fix_above_the_card_cannot() {
    let r = report(&file("llama-cpp-8101-cpu-n_ctx-1048576.log"), None);
    assert!(r.failed);
    assert!(r.diagnosis.as_deref().unwrap().contains("128.00 GiB"));
    assert!(!r.fixes.is_empty());
    for f in &r.fixes {
        assert!(!f.fits, "{f:#?}");
        assert!(
            f.why.contains("does not print CPU's free memory"),
            "{}",
            f.why
        );
    }
    // 128 KiB per cell: -c 524288 takes 64 GiB.
    let c = r.fixes.iter().find(|f| f.change == "-c 524288").unwrap();
    assert!(c.why.contains("128.0 KiB per cell"), "{}", c.why);

    let a100 = file("llama-cpp-python-1944-a100-kv-204800mib.log");
    let r = report(&a100, None);
    let q8 = r
        .fixes
        .iter()
        .find(|f| f.change.starts_with("-ctk"))
        .unwrap();
    assert!(
        !q8.fits && q8.why.contains("fits only if at least 106.25 GiB"),
        "{}",
        q8.why
    );
    let r = report(&a100, Some("A100 SXM 80GB"));
    let q8 = r
        .fixes
        .iter()
        .find(|f| f.change.starts_with("-ctk"))
        .unwrap();
    assert!(
        !q8.fits && q8.why.contains("more than the whole card"),
        "{}",
        q8.why
    );
}

/// llama.cpp's wording (`common_param` device list, `load_tensors`, `llama_kv_cache`, ggml-cuda's
/// `cudaMalloc failed`, `graph_reserve`), figures modelled on an RTX 4090: 23500 MiB free, 18000
/// MiB of weights, a 4096 MiB KV cache at 32768 cells, a compute buffer of `compute` MiB that
/// fails to allocate.
fn rtx4090(compute: f64) -> String {
    format!(
        "I cmn  common_param:   - CUDA0   : NVIDIA GeForce RTX 4090 (24080 MiB, 23500 MiB free)\n\
         I load_tensors: offloaded 49/49 layers to GPU\n\
         I load_tensors:        CUDA0 model buffer size = 18000.00 MiB\n\
         I llama_context: n_seq_max             = 1\n\
         I llama_context: n_ctx                 = 32768\n\
         I llama_kv_cache:      CUDA0 KV buffer size =  4096.00 MiB\n\
         I llama_kv_cache: size = 4096.00 MiB ( 32768 cells,  48 layers,  1/1 seqs), K (f16): 2048.00 MiB, V (f16): 2048.00 MiB\n\
         E ggml_backend_cuda_buffer_type_alloc_buffer: allocating {compute:.2} MiB on device 0: cudaMalloc failed: out of memory\n\
         E ggml_gallocr_reserve_n_impl: failed to allocate CUDA0 buffer of size {}\n\
         E graph_reserve: failed to allocate compute buffers\n",
        (compute * 1048576.0) as u64
    )
}

#[test]
fn with_free_memory_printed_the_fix_is_checked_on_the_log() {
    // 18000 + 4096 + 2000 = 24096 MiB against 23500 free: 596 MiB short.
    let r = report(&rtx4090(2000.0), None);
    assert!(r.failed);
    assert_eq!(r.gpu_model.as_deref(), Some("RTX 4090"));
    let c = r
        .fixes
        .iter()
        .find(|f| f.change.starts_with("-c "))
        .unwrap();
    // Room for KV: 23500 − 18000 − 2000 = 3500 MiB → 32768 × 3500 / 4096 → 27904 (÷256).
    assert_eq!(c.change, "-c 27904");
    assert!(c.fits && c.checked_by == "log", "{c:#?}");
    let q8 = r
        .fixes
        .iter()
        .find(|f| f.change.starts_with("-ctk"))
        .unwrap();
    assert!(q8.fits, "{q8:#?}"); // 4096 × 34/64 = 2176 MiB: 22176 ≤ 23500
    // A compute buffer larger than what the weights leave: no context or KV type closes it.
    let r = report(&rtx4090(6000.0), None);
    for f in &r.fixes {
        if f.change.starts_with("-c ") || f.change.starts_with("-ctk") {
            assert!(!f.fits, "{f:#?}");
        }
    }
}
