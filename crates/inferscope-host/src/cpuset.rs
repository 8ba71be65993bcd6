//! Linux cpulists (`0-3,8-11`) as sets: [`CpuSet`] for CPUs, [`NodeSet`] for NUMA nodes.
//!
//! Stored as sorted, merged, inclusive ranges rather than bitmaps, so a hostile or odd list such
//! as `0-4294967295` costs 8 bytes, not 512 MiB, and printing gives back the kernel's own
//! canonical form. Serialised in JSON as the cpulist string users already know.

use std::fmt;
use std::str::FromStr;

/// Error for a cpulist that does not parse, with the 1-based column of the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: expected {expected}, found {found:?}")]
pub struct ListError {
    /// 1-based column within the list text.
    pub column: usize,
    /// What the parser wanted.
    pub expected: &'static str,
    /// The offending text (truncated).
    pub found: String,
}

/// Sorted, merged, inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct RangeSet {
    ranges: Vec<(u32, u32)>,
}

impl RangeSet {
    fn from_ranges(mut ranges: Vec<(u32, u32)>) -> Self {
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        RangeSet { ranges: merged }
    }

    fn parse(text: &str) -> Result<Self, ListError> {
        let trimmed = text.trim_end_matches(['\n', '\r', ' ', '\t', '\0']);
        let lead = trimmed.len() - trimmed.trim_start().len();
        let body = trimmed.trim_start();
        let mut ranges = Vec::new();
        if body.is_empty() {
            return Ok(RangeSet::default());
        }
        let mut offset = lead;
        for item in body.split(',') {
            let col = offset + 1;
            offset += item.len() + 1;
            let item_t = item.trim();
            let num = |s: &str, at: usize| -> Result<u32, ListError> {
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(ListError {
                        column: at,
                        expected: "a CPU or node number",
                        found: s.chars().take(20).collect(),
                    });
                }
                s.parse::<u32>().map_err(|_| ListError {
                    column: at,
                    expected: "a number below 2^32",
                    found: s.chars().take(20).collect(),
                })
            };
            if item_t.is_empty() {
                return Err(ListError {
                    column: col,
                    expected: "a number or range between commas",
                    found: String::new(),
                });
            }
            if item_t.contains(':') {
                return Err(ListError {
                    column: col,
                    expected: "N or N-M (stride lists like 0-7:2/4 are not supported)",
                    found: item_t.chars().take(20).collect(),
                });
            }
            match item_t.split_once('-') {
                None => {
                    let n = num(item_t, col)?;
                    ranges.push((n, n));
                }
                Some((a, b)) => {
                    let lo = num(a, col)?;
                    let hi = num(b, col + a.len() + 1)?;
                    if hi < lo {
                        return Err(ListError {
                            column: col,
                            expected: "a range whose end is not below its start",
                            found: item_t.chars().take(20).collect(),
                        });
                    }
                    ranges.push((lo, hi));
                }
            }
        }
        Ok(RangeSet::from_ranges(ranges))
    }

    fn len(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(lo, hi)| u64::from(hi - lo) + 1)
            .sum()
    }

    fn contains(&self, x: u32) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= x && x <= hi)
    }

    fn intersection(&self, other: &RangeSet) -> RangeSet {
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        while let (Some(&(a0, a1)), Some(&(b0, b1))) = (self.ranges.get(i), other.ranges.get(j)) {
            let lo = a0.max(b0);
            let hi = a1.min(b1);
            if lo <= hi {
                out.push((lo, hi));
            }
            if a1 < b1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        RangeSet { ranges: out }
    }

    fn union(&self, other: &RangeSet) -> RangeSet {
        let mut all = self.ranges.clone();
        all.extend_from_slice(&other.ranges);
        RangeSet::from_ranges(all)
    }

    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|&(lo, hi)| lo..=hi)
    }
}

impl fmt::Display for RangeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(lo, hi)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

macro_rules! list_type {
    ($(#[$doc:meta])* $name:ident, $item:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
        pub struct $name(RangeSet);

        impl $name {
            /// The empty set.
            pub fn new() -> Self {
                Self::default()
            }
            /// Number of members.
            pub fn len(&self) -> u64 {
                self.0.len()
            }
            /// True when there are no members.
            pub fn is_empty(&self) -> bool {
                self.0.ranges.is_empty()
            }
            /// Membership test.
            pub fn contains(&self, id: u32) -> bool {
                self.0.contains(id)
            }
            /// Members in both sets.
            pub fn intersection(&self, other: &Self) -> Self {
                $name(self.0.intersection(&other.0))
            }
            /// Members in either set.
            pub fn union(&self, other: &Self) -> Self {
                $name(self.0.union(&other.0))
            }
            /// True when the sets share no member.
            pub fn is_disjoint(&self, other: &Self) -> bool {
                self.0.intersection(&other.0).ranges.is_empty()
            }
            /// True when every member of `self` is in `other`.
            pub fn is_subset(&self, other: &Self) -> bool {
                self.0.intersection(&other.0) == self.0
            }
            /// Members in ascending order (lazy: safe on huge ranges).
            pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
                self.0.iter()
            }
            /// Inclusive ranges in ascending order.
            pub fn ranges(&self) -> &[(u32, u32)] {
                &self.0.ranges
            }
            /// Build from inclusive ranges (merged and sorted).
            pub fn from_ranges(ranges: Vec<(u32, u32)>) -> Self {
                let ranges = ranges.into_iter().map(|(a, b)| (a.min(b), a.max(b))).collect();
                $name(RangeSet::from_ranges(ranges))
            }
        }

        impl FromIterator<u32> for $name {
            fn from_iter<I: IntoIterator<Item = u32>>(it: I) -> Self {
                $name(RangeSet::from_ranges(it.into_iter().map(|x| (x, x)).collect()))
            }
        }

        impl FromStr for $name {
            type Err = ListError;
            /// Parse a Linux list (`0-3,8-11`); empty text is the empty set.
            fn from_str(s: &str) -> Result<Self, ListError> {
                RangeSet::parse(s).map($name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        serde_as_string!($name);
    };
}

list_type!(
    /// A set of logical CPU numbers, as in `/sys/devices/system/node/node0/cpulist`.
    CpuSet,
    u32
);
list_type!(
    /// A set of NUMA node numbers, as in `cpuset.mems.effective`.
    NodeSet,
    u32
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_kernel_lists() {
        for (text, canon, n) in [
            ("0-3,8-11\n", "0-3,8-11", 8),
            ("0-51,104-155", "0-51,104-155", 104),
            ("0,2,4,6,8,10", "0,2,4,6,8,10", 6),
            ("3,1,2,0", "0-3", 4),
            ("", "", 0),
            ("\n", "", 0),
            ("5", "5", 1),
        ] {
            let s: CpuSet = text.parse().unwrap();
            assert_eq!(s.to_string(), canon, "{text:?}");
            assert_eq!(s.len(), n);
        }
    }

    #[test]
    fn huge_range_is_cheap() {
        let s: CpuSet = "0-4294967295".parse().unwrap();
        assert_eq!(s.len(), 1 << 32);
        assert_eq!(s.ranges().len(), 1);
    }

    #[test]
    fn errors_carry_columns() {
        let e = "0-3,x".parse::<CpuSet>().unwrap_err();
        assert_eq!(e.column, 5);
        let e = "0-3,,5".parse::<CpuSet>().unwrap_err();
        assert_eq!(e.column, 5);
        let e = "7-3".parse::<CpuSet>().unwrap_err();
        assert_eq!(e.column, 1);
        let e = "0-99999999999".parse::<CpuSet>().unwrap_err();
        assert_eq!(e.column, 3);
        assert!("0-7:2/4".parse::<CpuSet>().is_err());
        assert!("-1".parse::<CpuSet>().is_err());
    }

    #[test]
    fn set_algebra() {
        let a: CpuSet = "0-7,16-23".parse().unwrap();
        let b: CpuSet = "4-19".parse().unwrap();
        assert_eq!(a.intersection(&b).to_string(), "4-7,16-19");
        assert_eq!(a.union(&b).to_string(), "0-23");
        assert!(!a.is_disjoint(&b));
        let c: CpuSet = "8-15".parse().unwrap();
        assert!(a.is_disjoint(&c));
        assert!("4-5".parse::<CpuSet>().unwrap().is_subset(&a));
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"0-7,16-23\"");
    }
}
