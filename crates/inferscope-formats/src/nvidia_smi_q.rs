//! Importer for `nvidia-smi -q` text: the report users paste into issues and chats.
//!
//! # Design
//!
//! The text is an indentation tree of `Key : Value` lines and bare section headers:
//!
//! ```text
//! GPU 00000000:18:00.0
//!     FB Memory Usage
//!         Total                             : 81559 MiB
//! ```
//!
//! [`parse`] first builds that tree (a line indented deeper than the previous one is its
//! child; any indentation step is accepted, tabs count as 4 columns), then reads each
//! [`GpuDetails`] field by path with the XML importer's shared reader, where every field is a
//! list of alternative paths because NVIDIA renamed sections between drivers ("Clocks
//! Throttle Reasons" → "Clocks Event Reasons", "Power Readings" → "GPU Power Readings",
//! "Power Draw" → "Average Power Draw" / "Instantaneous Power Draw", "Enforced Power Limit"
//! → "Current Power Limit"). Keys match ignoring ASCII case.
//!
//! - Only `Key : Value` (a space before the colon, as `nvidia-smi` pads its keys) splits a
//!   line, so a pasted shell prompt such as `jesse@Jesse:~$ nvidia-smi -q -i 0` is not a
//!   field: unindented lines without ` : ` that mention `nvidia-smi` are skipped with a note.
//!   The `====NVSMI LOG====` banner and blank lines are skipped.
//! - A GPU section is an unindented `GPU <bus id>` header; the id is parsed with
//!   [`PciBusId::from_str`](std::str::FromStr) (NVML's 8-digit domain is accepted).
//! - Input without any GPU section is an error at its first line (a `-d MEMORY | tail`
//!   fragment says nothing about any identified GPU), unless `Attached GPUs : 0` says the
//!   machine has none.
//! - `nvidia-smi -q` prints no NVML index. It prints all GPUs in index order, so when the
//!   number of GPU sections equals `Attached GPUs` the position is the index; otherwise
//!   (`-i N`, a partial paste) the index is `not_captured` and a note says why.
//! - Values: `N/A`/`[Not Supported]` → `not_supported`; absent fields → `not_captured`;
//!   anything unparsable (`Total : lots MiB`) → [`ParseError`] at its line and column.
//!   Memory in MiB/GiB becomes bytes, power in W becomes milliwatts, compute mode becomes
//!   snake_case, active clock event reasons become NVML-style names (`gpu_idle`).
//! - NVLink state, CPU/NUMA affinity and the GPU NUMA ID are not in this report: always
//!   `not_captured`. So are the NVML version and MIG device UUIDs/profile names.
//! - Inputs over 64 MiB are refused; sections nest at most 64 deep.

use crate::ParseError;
use crate::nvidia_smi_common::{self as common, Ctx, Dialect, MAX_DEPTH, MAX_INPUT_BYTES, Node};
use inferscope_host::UnknownReason;
use inferscope_host::{DriverInfo, DriverSource, GpuDetails, NvmlIndex, PciBusId, Reading};

/// What an `nvidia-smi -q` report (text or XML) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvidiaSmiReport {
    /// Driver-wide facts; `source` tells text from XML.
    pub driver: DriverInfo,
    /// GPU sections, in input order.
    pub gpus: Vec<ReportedGpu>,
    /// What the importer skipped or inferred (prompt lines, partial reports, ...).
    pub notes: Vec<String>,
}

/// One GPU section of a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedGpu {
    /// PCI address from the section header (`GPU 00000000:17:00.0`, `<gpu id="...">`);
    /// `None` only for an XML `<gpu>` without an id and without `<pci_bus_id>`.
    pub pci_bus_id: Option<PciBusId>,
    /// Everything the section says.
    pub details: GpuDetails,
}

/// Parses `nvidia-smi -q` text (whole report, `-i N`, or `-d` selections that keep the GPU
/// header). See the module docs for the rules.
pub fn parse(text: &str) -> Result<NvidiaSmiReport, ParseError> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(ParseError::new(
            1,
            1,
            "at most 64 MiB of nvidia-smi -q output",
            &format!("{} bytes", text.len()),
        ));
    }
    let mut notes = Vec::new();
    let (root, first) = tree(text, &mut notes)?;
    let Some((first_at, first_line)) = first else {
        return Err(ParseError::new(
            1,
            1,
            "nvidia-smi -q output",
            crate::lex::END_OF_INPUT,
        ));
    };
    let mut gpus = Vec::new();
    for n in &root.children {
        let Some(id) = n.key.strip_prefix("GPU ") else {
            continue;
        };
        if n.value.is_some() || !id.contains(':') || id.contains(char::is_whitespace) {
            continue;
        }
        let bus: PciBusId = id.parse().map_err(|_| {
            common::error_at(
                text,
                n.at + 4,
                "a PCI bus id such as 00000000:17:00.0 after GPU",
                id,
            )
        })?;
        gpus.push((Some(bus), n));
    }
    assemble(
        &Ctx {
            src: text,
            dialect: Dialect::Text,
        },
        &root,
        gpus,
        notes,
        || {
            common::error_at(
                text,
                first_at,
                "a `GPU <bus id>` section (this is a fragment of nvidia-smi -q output without one)",
                first_line,
            )
        },
    )
}

/// Byte offset and text of the first non-blank line.
type FirstLine<'t> = (usize, &'t str);

/// Builds the indentation tree. Returns the root and the first non-blank line (its byte
/// offset and text, for the "no GPU section" error).
fn tree<'t>(
    text: &'t str,
    notes: &mut Vec<String>,
) -> Result<(Node, Option<FirstLine<'t>>), ParseError> {
    // (indent, node); the root sits below every real indent.
    let mut stack: Vec<(Option<usize>, Node)> = vec![(None, Node::default())];
    let mut first = None;
    let mut offset = 0usize;
    for (i, full) in text.split_inclusive('\n').enumerate() {
        let line_start = offset;
        offset += full.len();
        let raw = full.trim_end_matches(['\n', '\r']);
        let body = raw.trim_start();
        let content = body.trim_end();
        if content.is_empty() {
            continue;
        }
        let lead = raw.get(..raw.len() - body.len()).unwrap_or("");
        let indent: usize = lead.chars().map(|c| if c == '\t' { 4 } else { 1 }).sum();
        let content_at = line_start + lead.len();
        if first.is_none() {
            first = Some((content_at, content));
        }
        if content.chars().all(|c| c == '=') || content.trim_matches('=').trim() == "NVSMI LOG" {
            continue;
        }
        let (key, value, at) = if let Some(sep) = content.find(" : ") {
            let rest = content.get(sep + 3..).unwrap_or("");
            let value = rest.trim();
            let value_at = content_at + sep + 3 + (rest.len() - rest.trim_start().len());
            (
                content.get(..sep).unwrap_or("").trim_end(),
                Some(value),
                value_at,
            )
        } else if let Some(k) = content.strip_suffix(" :") {
            (k.trim_end(), Some(""), content_at + content.len())
        } else {
            (content, None, content_at)
        };
        if indent == 0 && value.is_none() && content.contains("nvidia-smi") {
            let shown: String = content.chars().take(80).collect();
            notes.push(format!("line {}: skipped shell prompt `{shown}`", i + 1));
            continue;
        }
        while stack
            .last()
            .is_some_and(|(ind, _)| ind.is_some_and(|d| d >= indent))
        {
            close(&mut stack);
        }
        if stack.len() > MAX_DEPTH {
            return Err(common::error_at(
                text,
                content_at,
                "sections nested at most 64 deep",
                content,
            ));
        }
        stack.push((
            Some(indent),
            Node {
                key: key.to_owned(),
                value: value.map(str::to_owned),
                at,
                children: Vec::new(),
            },
        ));
    }
    while stack.len() > 1 {
        close(&mut stack);
    }
    let root = stack.pop().map(|(_, n)| n).unwrap_or_default();
    Ok((root, first))
}

/// Pops the innermost open section into its parent.
fn close(stack: &mut Vec<(Option<usize>, Node)>) {
    if stack.len() > 1
        && let Some((_, node)) = stack.pop()
        && let Some((_, parent)) = stack.last_mut()
    {
        parent.children.push(node);
    }
}

/// Builds the report from the root node and the GPU sections (shared with the XML importer).
pub(crate) fn assemble(
    ctx: &Ctx<'_>,
    root: &Node,
    gpus: Vec<(Option<PciBusId>, &Node)>,
    mut notes: Vec<String>,
    no_gpu_error: impl FnOnce() -> ParseError,
) -> Result<NvidiaSmiReport, ParseError> {
    let (tool, source) = match ctx.dialect {
        Dialect::Text => ("nvidia-smi -q", DriverSource::NvidiaSmiQ),
        Dialect::Xml => ("nvidia-smi -q -x", DriverSource::NvidiaSmiXml),
    };
    let gpu_count = ctx.attached_gpus(root)?;
    if gpus.is_empty() {
        if gpu_count.known() != Some(&0) {
            return Err(no_gpu_error());
        }
        notes.push("the report says no GPUs are attached".to_owned());
    }
    let driver = DriverInfo {
        source,
        driver_version: ctx.read_string(root, &[&["Driver Version"]], &[&["driver_version"]])?,
        cuda_driver_version: ctx.read_string(root, &[&["CUDA Version"]], &[&["cuda_version"]])?,
        nvml_version: Reading::unknown(
            UnknownReason::NotCaptured,
            format!("{tool} does not print the NVML library version"),
        ),
        gpu_count,
    };
    if let Reading::Value(ts) = ctx.read_string(root, &[&["Timestamp"]], &[&["timestamp"]])? {
        notes.push(format!("report timestamp: {ts}"));
    }
    let whole = match driver.gpu_count.known() {
        Some(&n) if usize::try_from(n).ok() == Some(gpus.len()) => true,
        Some(&n) => {
            if !gpus.is_empty() {
                notes.push(format!(
                    "the report lists {} of {n} attached GPUs (nvidia-smi -i, or a partial \
                     paste), so NVML indexes are not known",
                    gpus.len()
                ));
            }
            false
        }
        None => false,
    };
    let mut out = Vec::with_capacity(gpus.len());
    for (i, (bus, node)) in gpus.into_iter().enumerate() {
        let label = match bus {
            Some(b) => format!("GPU {b}"),
            None => format!("GPU section {}", i + 1),
        };
        let index = match (whole, u32::try_from(i)) {
            (true, Ok(i)) => Reading::value(NvmlIndex(i)),
            _ => Reading::unknown(
                UnknownReason::NotCaptured,
                format!(
                    "{tool} prints no NVML index, and this report does not list every \
                     attached GPU in index order"
                ),
            ),
        };
        let details = ctx.gpu_details(node, index, &label, &mut notes)?;
        out.push(ReportedGpu {
            pci_bus_id: bus,
            details,
        });
    }
    Ok(NvidiaSmiReport {
        driver,
        gpus: out,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_report() {
        let r = parse(
            "GPU 00000000:17:00.0\n    FB Memory Usage\n        Total : 80 GiB\n        \
             Used : 1 MiB\n        Free : 2 MiB\n    Processes : None\n",
        )
        .unwrap();
        assert_eq!(r.gpus.len(), 1);
        let g = &r.gpus[0];
        assert_eq!(g.pci_bus_id.unwrap().to_string(), "0000:17:00.0");
        let m = g.details.memory.known().unwrap();
        assert_eq!(m.total_bytes, 80 << 30);
        assert_eq!(g.details.processes.known().map(Vec::len), Some(0));
        assert!(!g.details.index.is_known());
    }

    #[test]
    fn garbage_value_is_located() {
        let e = parse("GPU 00000000:17:00.0\n    FB Memory Usage\n        Total : lots MiB\n")
            .unwrap_err();
        assert_eq!((e.line, e.column), (3, 17));
        assert_eq!(e.found, "lots MiB");
    }

    #[test]
    fn empty_and_fragment() {
        assert_eq!(parse("").unwrap_err().found, "end of input");
        let e =
            parse("    Conf Compute Protected Memory Usage\n        Total : N/A\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 5));
        assert!(parse("Attached GPUs : 0\n").unwrap().gpus.is_empty());
    }
}
