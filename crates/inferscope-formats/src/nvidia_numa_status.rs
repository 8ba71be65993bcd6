//! `/proc/driver/nvidia/gpus/<bus id>/numa_status`: the NUMA node that holds a coherent GPU's
//! own memory (POWER9 + NVLink V100, Grace Hopper), as the NVIDIA kernel driver prints it:
//!
//! ```text
//! Node:      255
//! Status:    online
//! ```
//!
//! hwloc reads the `Node:` line the same way (topology-linux.c, `look_sysfsnode`) to tell GPU
//! memory nodes from other CPU-less nodes.

use crate::error::ParseError;

/// The `Node:` value: `Some(node)`, or `None` when the driver prints a negative node (the GPU's
/// memory is not a NUMA node).
pub fn parse(text: &str) -> Result<Option<u32>, ParseError> {
    for (i, line) in text.lines().enumerate() {
        let Some(rest) = line.strip_prefix("Node:") else {
            continue;
        };
        let value = rest.trim();
        let column = line.len() - rest.trim_start().len() + 1;
        if let Some(neg) = value.strip_prefix('-') {
            if !neg.is_empty() && neg.bytes().all(|b| b.is_ascii_digit()) {
                return Ok(None);
            }
        } else if let Ok(n) = value.parse::<u32>() {
            return Ok(Some(n));
        }
        return Err(ParseError::new(i + 1, column, "a node number", value));
    }
    Err(ParseError::new(
        text.lines().count().max(1),
        1,
        "a `Node:` line",
        "end of input",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_line_from_a_power9_v100() {
        // /proc/driver/nvidia/gpus/0035:05:00.0/numa_status of hwloc's nvidiagpunumanodes tree.
        let text =
            "Node:      255\nStatus:    online\nAddress:   40000000000\nSize:      3f0000000\n";
        assert_eq!(parse(text).unwrap(), Some(255));
        assert_eq!(parse("Node: -1\n").unwrap(), None);
    }

    #[test]
    fn garbage_names_line_and_column() {
        let e = parse("Status: online\nNode:   x1\n").unwrap_err();
        assert_eq!((e.line, e.column, e.found.as_str()), (2, 9, "x1"));
        assert!(parse("").is_err());
    }
}
