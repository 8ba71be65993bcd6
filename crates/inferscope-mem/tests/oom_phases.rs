//! `mem oom` beyond the allocator's figures (issue 28 items 4–5, issue 33 item 13): the phase an
//! engine's OOM happened in (real vLLM and SGLang messages in `fixtures/tools/oom/`, each with its
//! source), free memory barely above the request, memory outside the allocator in the old
//! message format, PyTorch 2.1's process list that includes the failing process, and figures no
//! card can have.

use inferscope_formats::oom;
use inferscope_mem::oom::{Diagnosis, OomAnalysis, diagnose};
use std::path::Path;

fn analyse(name: &str) -> OomAnalysis {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/tools/oom")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let body = &text[text.find("\n---\n").unwrap() + 5..];
    diagnose(&oom::parse(body).unwrap_or_else(|e| panic!("{name}: {e}")))
}

#[test]
fn vllms_sampler_warm_up_wording_is_an_oom_with_its_phase() {
    let a = analyse("vllm-v1-sampler-warmup-1024-wrapper.txt");
    assert_eq!(a.phase, Some("sampler_warmup"));
    assert_eq!(a.wrapper.as_deref(), Some("vllm_sampler_warmup"));
    assert_eq!(a.wrapper_tokens, Some(1024));
    assert_eq!(a.diagnosis, Diagnosis::NotEnoughInformation);
    assert_eq!(a.remedies[0].id, "lower_max_num_seqs");
    assert!(a.phase_term.as_deref().unwrap().contains("1024 requests"));
}

#[test]
fn an_oom_inside_the_dummy_sampler_run_gets_the_samplers_remedy_first() {
    let a = analyse("vllm-v1-gpt-oss-sampler-logits-float32-h100.txt");
    assert_eq!(a.phase, Some("sampler_warmup"));
    assert_eq!(a.remedies[0].id, "lower_max_num_seqs");
    // Process 3270336 holds all PyTorch reserved: it is this process, so live tensors hold the
    // card, not another process.
    assert_eq!(a.diagnosis, Diagnosis::Exhaustion, "{}", a.explanation);
}

#[test]
fn graph_capture_ooms_get_eager_first() {
    for f in [
        "vllm-v0-cudagraph-capture-44gb-2mib.txt",
        "sglang-capture-cuda-graph-failed-448mib.txt",
    ] {
        let a = analyse(f);
        assert_eq!(a.phase, Some("graph_capture"), "{f}");
        assert_eq!(a.remedies[0].id, "enforce_eager", "{f}");
        assert!(
            a.explanation.starts_with("during CUDA-graph capture"),
            "{f}"
        );
    }
}

#[test]
fn free_barely_above_the_request_is_a_full_card_not_fragmentation() {
    // 21.06 MiB free for a 20 MiB request: the caching allocator asks the driver for a 20 MiB
    // segment in 2 MiB pages, more than is free.
    let a = analyse("synthetic-torch1x-cached-json-escaped.txt");
    assert_eq!(a.diagnosis, Diagnosis::Exhaustion, "{}", a.explanation);
    assert!(a.remedies.iter().all(|r| r.id != "expandable_segments"));
    assert_eq!(inferscope_mem::oom::driver_ask(20 << 20), 22 << 20);
    assert_eq!(inferscope_mem::oom::driver_ask(4 << 20), 22 << 20);
    assert_eq!(inferscope_mem::oom::driver_ask(33 << 20), 36 << 20);
}

#[test]
fn memory_outside_the_allocator_in_the_old_format_is_first_this_process() {
    // Real (PyTorch < 2.0): 1.53 GiB outside the allocator was "other processes" (minor cause);
    // up to 1.5 GiB of it is this process's CUDA context and libraries.
    let a = analyse("legacy-8gb-runtimeerror-wrapped.txt");
    assert_ne!(a.minor_cause, Some("other_processes"), "{}", a.explanation);
    assert!(
        a.notes
            .iter()
            .any(|n| n.contains("most likely this process's own CUDA context")),
        "{:?}",
        a.notes
    );
}

#[test]
fn pytorch_2_1s_process_list_includes_this_process() {
    let a = analyse("tgi-torch21-capacty-process-is-self-40gb.txt");
    assert_ne!(a.diagnosis, Diagnosis::OtherProcesses, "{}", a.explanation);
    assert!(
        a.notes
            .iter()
            .any(|n| n.contains("process 862944 is probably"))
    );
    // Two listed processes: the one holding at least PyTorch's reserved is this one.
    let r = oom::parse(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 222.00 MiB. GPU 0 has a total capacty of 39.39 GiB of which 217.94 MiB is free. Process 1 has 3.00 GiB memory in use. Process 862944 has 36.17 GiB memory in use. Of the allocated memory 34.10 GiB is allocated by PyTorch, and 1.57 GiB is reserved by PyTorch but unallocated.",
    )
    .unwrap();
    let a = diagnose(&r);
    assert_eq!(
        a.causes
            .iter()
            .find(|c| c.cause == "other_processes")
            .unwrap()
            .bytes,
        Some(3 << 30)
    );
}

#[test]
fn no_share_above_the_whole_card_and_zero_sizes_are_not_exhaustion() {
    // Real: allocated 10.73 GiB on an 8 GiB card (Windows shared memory).
    let a = analyse("torch20-allocated-exceeds-capacity-8gb.txt");
    assert!(
        a.causes
            .iter()
            .all(|c| c.share_of_capacity.is_none_or(|s| s <= 1.0)),
        "{:?}",
        a.causes
    );
    let r = oom::parse(
        "RuntimeError: CUDA out of memory. Tried to allocate 0 bytes (GPU 0; 0 bytes total capacity; 0 bytes already allocated; 0 bytes free; 0 bytes reserved in total by PyTorch)",
    )
    .unwrap();
    assert_eq!(diagnose(&r).diagnosis, Diagnosis::NotEnoughInformation);
}

#[test]
fn a_process_list_cut_at_256_says_so() {
    let mut msg = String::from(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.00 GiB is free.",
    );
    for pid in 0..300 {
        msg.push_str(&format!(" Process {pid} has 100.00 MiB memory in use."));
    }
    let a = diagnose(&oom::parse(&msg).unwrap());
    assert_eq!(a.other_processes.len(), 256);
    assert!(
        a.notes
            .iter()
            .any(|n| n.contains("300 processes") && n.contains("other 44")),
        "{:?}",
        a.notes
    );
}

/// The driver's bare `RuntimeError: CUDA error: out of memory` (issue 28 item 5), on real pastes:
/// no allocator figures, so none are invented; the phase comes from the traceback when it names
/// one (vLLM's `capture_model`, vllm#6746) and stays unknown when nothing does (IIM#28).
#[test]
fn a_bare_driver_oom_has_unknown_figures_and_the_phase_its_traceback_shows() {
    let a = analyse("vllm-v0-capture-bare-cuda-error-405b-8xh100.txt");
    assert_eq!(a.diagnosis, Diagnosis::NotEnoughInformation);
    assert_eq!((a.free_bytes, a.requested_bytes), (None, None));
    assert_eq!(a.phase, Some("graph_capture"));
    assert_eq!(a.phase_evidence, Some("capture_model"));
    assert_eq!(a.remedies[0].id, "enforce_eager");
    let b = analyse("torch-bare-cuda-error-no-context.txt");
    assert_eq!(b.diagnosis, Diagnosis::NotEnoughInformation);
    assert_eq!(
        (b.free_bytes, b.requested_bytes, b.phase),
        (None, None, None)
    );
    assert!(
        b.explanation.contains("no allocator figures"),
        "{}",
        b.explanation
    );
}
