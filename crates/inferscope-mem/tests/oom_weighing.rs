//! Issue 17's three cases for `mem oom`: the verdict follows the memory each cause accounts for,
//! and a reserved-unallocated pool that merely covers the request is not fragmentation.

use inferscope_formats::oom;
use inferscope_mem::oom::{Diagnosis, OomAnalysis, diagnose};
use std::path::Path;

fn analyse(name: &str) -> OomAnalysis {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/tools/oom")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let body = &text[text.find("\n---\n").unwrap() + 5..];
    diagnose(&oom::parse(body).unwrap())
}

fn share(a: &OomAnalysis, cause: &str) -> f64 {
    a.causes
        .iter()
        .find(|c| c.cause == cause)
        .unwrap()
        .share_of_capacity
        .unwrap()
}

#[test]
fn a_card_held_by_another_process_is_other_processes_first() {
    let a = analyse("synthetic-issue17-other-process-92pct-small-pool.txt");
    assert_eq!(a.diagnosis, Diagnosis::OtherProcesses, "{}", a.explanation);
    assert_eq!(a.causes[0].cause, "other_processes");
    assert!((share(&a, "other_processes") - 0.92).abs() < 0.005);
    // The pool covers the request (95 MiB vs 64 MiB) and is still not the verdict.
    let pool = a
        .causes
        .iter()
        .find(|c| c.cause == "reserved_unallocated")
        .unwrap();
    assert!(pool.share_of_request.unwrap() > 1.0);
    assert_eq!(a.minor_cause, Some("live_tensors"));
    assert_eq!(a.remedies[0].id, "free_other_process");
    assert!(a.remedies.iter().all(|r| r.id != "expandable_segments"));
}

#[test]
fn a_card_93_percent_allocated_with_a_half_percent_pool_is_exhaustion() {
    let a = analyse("synthetic-issue17-live-tensors-93pct-half-percent-pool.txt");
    assert_eq!(a.diagnosis, Diagnosis::Exhaustion, "{}", a.explanation);
    assert!((share(&a, "live_tensors") - 0.93).abs() < 0.005);
    assert!((share(&a, "reserved_unallocated") - 0.0047).abs() < 0.0005);
    assert_eq!(a.minor_cause, Some("other_processes"));
    assert!(a.remedies.iter().all(|r| r.id != "expandable_segments"));
    assert_eq!(a.remedies[0].id, "reduce_kv_demand");
}

#[test]
fn a_real_tgi_oom_at_99_percent_live_is_exhaustion_not_fragmentation() {
    // Real (TGI issue 1356): 131.85 MiB pool (0.16 % of 79.11 GiB) covers an 18 MiB request.
    let a = analyse("tgi-a100-80gb-prefill-router-process-pid.txt");
    assert_eq!(a.diagnosis, Diagnosis::Exhaustion, "{}", a.explanation);
    assert!(
        a.explanation
            .contains("minor cause: PyTorch holds reserved but unallocated")
    );
}

#[test]
fn a_large_reserved_pool_is_fragmentation() {
    // Real (MGFN issue 35): 2.30 GiB reserved-unallocated on a 6 GiB card, 1.70 GiB requested.
    let a = analyse("torch21-6gb-zero-bytes-free-no-process-clause.txt");
    assert_eq!(a.diagnosis, Diagnosis::Fragmentation, "{}", a.explanation);
    assert!(share(&a, "reserved_unallocated") > 0.38);
    assert_eq!(a.remedies[0].id, "expandable_segments");
}
