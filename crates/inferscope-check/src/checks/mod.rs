//! The registry: one module per check, listed once in [`ALL`] in code order.

pub mod support;

pub mod cpu001;
pub mod cpu002;
pub mod env001;
pub mod env002;
pub mod env003;
pub mod env004;
pub mod env005;
pub mod env006;
pub mod env007;
pub mod gpu001;
pub mod gpu002;
pub mod gpu003;
pub mod gpu004;
pub mod gpu005;
pub mod gpu006;
pub mod gpu007;
pub mod gpu008;
pub mod gpu010;
pub mod gpu011;
pub mod gpu012;
pub mod gpu013;
pub mod gpu014;
pub mod gpu015;
pub mod gpu016;
pub mod mem001;
pub mod mem002;
pub mod mem003;
pub mod mem004;
pub mod mem005;
pub mod mem006;
pub mod mem007;
pub mod mem008;
pub mod mem009;
pub mod mem010;
pub mod mem011;
pub mod plan001;
pub mod plan002;
pub mod proc001;
pub mod proc002;

use crate::CheckDef;

/// Every check, in code order. Add a check: write `checks/<code>.rs` with `pub const CHECK`
/// and its tests, add `pub mod <code>;` above and its `CHECK` here.
pub static ALL: &[CheckDef] = &[
    cpu001::CHECK,
    cpu002::CHECK,
    env001::CHECK,
    env002::CHECK,
    env003::CHECK,
    env004::CHECK,
    env005::CHECK,
    env006::CHECK,
    env007::CHECK,
    gpu001::CHECK,
    gpu002::CHECK,
    gpu003::CHECK,
    gpu004::CHECK,
    gpu005::CHECK,
    gpu006::CHECK,
    gpu007::CHECK,
    gpu008::CHECK,
    gpu010::CHECK,
    gpu011::CHECK,
    gpu012::CHECK,
    gpu013::CHECK,
    gpu014::CHECK,
    gpu015::CHECK,
    gpu016::CHECK,
    mem001::CHECK,
    mem002::CHECK,
    mem003::CHECK,
    mem004::CHECK,
    mem005::CHECK,
    mem006::CHECK,
    mem007::CHECK,
    mem008::CHECK,
    mem009::CHECK,
    mem010::CHECK,
    mem011::CHECK,
    plan001::CHECK,
    plan002::CHECK,
    proc001::CHECK,
    proc002::CHECK,
];

/// The documentation page of a check (docs/checks/<CODE>.md), embedded for `inferscope explain`.
pub fn doc(code: &str) -> Option<&'static str> {
    Some(match code.to_ascii_uppercase().as_str() {
        "CPU001" => include_str!("../../../../docs/checks/CPU001.md"),
        "CPU002" => include_str!("../../../../docs/checks/CPU002.md"),
        "ENV001" => include_str!("../../../../docs/checks/ENV001.md"),
        "ENV002" => include_str!("../../../../docs/checks/ENV002.md"),
        "ENV003" => include_str!("../../../../docs/checks/ENV003.md"),
        "ENV004" => include_str!("../../../../docs/checks/ENV004.md"),
        "ENV005" => include_str!("../../../../docs/checks/ENV005.md"),
        "ENV006" => include_str!("../../../../docs/checks/ENV006.md"),
        "ENV007" => include_str!("../../../../docs/checks/ENV007.md"),
        "GPU001" => include_str!("../../../../docs/checks/GPU001.md"),
        "GPU002" => include_str!("../../../../docs/checks/GPU002.md"),
        "GPU003" => include_str!("../../../../docs/checks/GPU003.md"),
        "GPU004" => include_str!("../../../../docs/checks/GPU004.md"),
        "GPU005" => include_str!("../../../../docs/checks/GPU005.md"),
        "GPU006" => include_str!("../../../../docs/checks/GPU006.md"),
        "GPU007" => include_str!("../../../../docs/checks/GPU007.md"),
        "GPU008" => include_str!("../../../../docs/checks/GPU008.md"),
        "GPU010" => include_str!("../../../../docs/checks/GPU010.md"),
        "GPU011" => include_str!("../../../../docs/checks/GPU011.md"),
        "GPU012" => include_str!("../../../../docs/checks/GPU012.md"),
        "GPU013" => include_str!("../../../../docs/checks/GPU013.md"),
        "GPU014" => include_str!("../../../../docs/checks/GPU014.md"),
        "GPU015" => include_str!("../../../../docs/checks/GPU015.md"),
        "GPU016" => include_str!("../../../../docs/checks/GPU016.md"),
        "MEM001" => include_str!("../../../../docs/checks/MEM001.md"),
        "MEM002" => include_str!("../../../../docs/checks/MEM002.md"),
        "MEM003" => include_str!("../../../../docs/checks/MEM003.md"),
        "MEM004" => include_str!("../../../../docs/checks/MEM004.md"),
        "MEM005" => include_str!("../../../../docs/checks/MEM005.md"),
        "MEM006" => include_str!("../../../../docs/checks/MEM006.md"),
        "MEM007" => include_str!("../../../../docs/checks/MEM007.md"),
        "MEM008" => include_str!("../../../../docs/checks/MEM008.md"),
        "MEM009" => include_str!("../../../../docs/checks/MEM009.md"),
        "MEM010" => include_str!("../../../../docs/checks/MEM010.md"),
        "MEM011" => include_str!("../../../../docs/checks/MEM011.md"),
        "PLAN001" => include_str!("../../../../docs/checks/PLAN001.md"),
        "PLAN002" => include_str!("../../../../docs/checks/PLAN002.md"),
        "PROC001" => include_str!("../../../../docs/checks/PROC001.md"),
        "PROC002" => include_str!("../../../../docs/checks/PROC002.md"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::ALL;

    #[test]
    fn codes_are_unique_sorted_and_documented() {
        let codes: Vec<&str> = ALL.iter().map(|c| c.code).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(codes, sorted, "codes must be unique and in order");
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/checks");
        for c in ALL {
            assert!(
                docs.join(format!("{}.md", c.code)).exists(),
                "docs/checks/{}.md is missing",
                c.code
            );
            assert!(!c.title.is_empty() && !c.why.is_empty(), "{}", c.code);
            assert!(
                super::doc(c.code).is_some(),
                "{} has no embedded doc",
                c.code
            );
        }
    }
}
