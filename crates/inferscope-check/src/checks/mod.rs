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
        }
    }
}
