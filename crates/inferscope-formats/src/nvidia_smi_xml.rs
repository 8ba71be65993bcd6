//! Importer for `nvidia-smi -q -x` XML.
//!
//! # Design
//!
//! The XML is the same report as [`crate::nvidia_smi_q`] with snake_case element names
//! (`<fb_memory_usage><total>81920 MiB</total>`), so [`parse`] converts the element tree into
//! the same neutral tree the text importer builds and reads it with the same field rules
//! (alternative paths for renamed elements such as `<clocks_throttle_reasons>` →
//! `<clocks_event_reasons>` and `<power_readings>` → `<gpu_power_readings>`; `N/A` →
//! `not_supported`; absent → `not_captured`; unparsable → [`ParseError`] with line and column).
//! The result type is [`NvidiaSmiReport`], with `driver.source = nvidia_smi_xml`.
//!
//! - Parsing uses `roxmltree` with DTD support on, because drivers since about 450 emit
//!   `<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">`; external DTDs and entities
//!   are never fetched (roxmltree has no resolver unless given one), entity expansion is
//!   bounded by roxmltree's billion-laughs checks, the node count is capped at 4 million,
//!   nesting at 64 levels, and inputs over 64 MiB are refused before parsing.
//! - The root element must be `<nvidia_smi_log>`; XML errors keep roxmltree's position.
//! - A GPU is a `<gpu id="00000000:17:00.0">` child of the root; without `id` the
//!   `<pci><pci_bus_id>` is used, and without either `pci_bus_id` is `None`.
//! - No `<gpu>` element is an error unless `<attached_gpus>0</attached_gpus>`.
//! - NVML indexes are the element order when every attached GPU is listed (as the text
//!   importer does), otherwise `not_captured`.

use crate::ParseError;
use crate::nvidia_smi_common::{self as common, Ctx, Dialect, MAX_DEPTH, MAX_INPUT_BYTES, Node};
pub use crate::nvidia_smi_q::{NvidiaSmiReport, ReportedGpu};
use inferscope_host::PciBusId;

/// Most XML nodes (elements, text, comments) accepted; real reports have a few thousand.
const MAX_NODES: u32 = 4_000_000;

/// Parses `nvidia-smi -q -x` output. See the module docs for the rules.
pub fn parse(text: &str) -> Result<NvidiaSmiReport, ParseError> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(ParseError::new(
            1,
            1,
            "at most 64 MiB of nvidia-smi -q -x output",
            &format!("{} bytes", text.len()),
        ));
    }
    if text.trim().is_empty() {
        return Err(ParseError::new(
            1,
            1,
            "nvidia-smi -q -x XML",
            crate::lex::END_OF_INPUT,
        ));
    }
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        nodes_limit: MAX_NODES,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(text, opts).map_err(|e| {
        if matches!(
            e,
            roxmltree::Error::UnclosedRootNode | roxmltree::Error::UnexpectedEndOfStream
        ) {
            // roxmltree places these at 1:1; the problem is where the text stops.
            return common::error_at(
                text,
                text.len(),
                "the rest of the XML document (the input stops inside <nvidia_smi_log>)",
                crate::lex::END_OF_INPUT,
            );
        }
        let pos = e.pos();
        ParseError::new(
            usize::try_from(pos.row).unwrap_or(usize::MAX),
            usize::try_from(pos.col).unwrap_or(usize::MAX),
            "well-formed nvidia-smi -q -x XML",
            &e.to_string(),
        )
    })?;
    let root_el = doc.root_element();
    if root_el.tag_name().name() != "nvidia_smi_log" {
        return Err(common::error_at(
            text,
            root_el.range().start,
            "an <nvidia_smi_log> root element (nvidia-smi -q -x output)",
            &format!("<{}>", root_el.tag_name().name()),
        ));
    }
    let root = convert(text, root_el, 0)?;
    let mut gpus: Vec<(Option<PciBusId>, &Node)> = Vec::new();
    let gpu_elements = root_el
        .children()
        .filter(|c| c.is_element() && c.tag_name().name() == "gpu");
    let gpu_nodes = root.children.iter().filter(|c| c.key == "gpu");
    for (el, node) in gpu_elements.zip(gpu_nodes) {
        let bus = match el.attribute_node("id") {
            Some(attr) => Some(attr.value().trim().parse::<PciBusId>().map_err(|_| {
                common::error_at(
                    text,
                    attr.range_value().start,
                    "a PCI bus id such as 00000000:17:00.0 in <gpu id>",
                    attr.value(),
                )
            })?),
            None => node
                .child("pci")
                .and_then(|p| p.child("pci_bus_id"))
                .and_then(|b| b.value.as_deref())
                .and_then(|v| v.parse().ok()),
        };
        gpus.push((bus, node));
    }
    crate::nvidia_smi_q::assemble(
        &Ctx {
            src: text,
            dialect: Dialect::Xml,
        },
        &root,
        gpus,
        Vec::new(),
        || {
            common::error_at(
                text,
                root_el.range().start,
                "at least one <gpu> element in <nvidia_smi_log>",
                "none",
            )
        },
    )
}

/// Converts an element and its descendants; the value is the element's own trimmed text.
fn convert(src: &str, el: roxmltree::Node<'_, '_>, depth: usize) -> Result<Node, ParseError> {
    if depth > MAX_DEPTH {
        return Err(common::error_at(
            src,
            el.range().start,
            "elements nested at most 64 deep",
            &format!("<{}>", el.tag_name().name()),
        ));
    }
    let mut value = String::new();
    let mut value_at = None;
    let mut children = Vec::new();
    for c in el.children() {
        if c.is_element() {
            children.push(convert(src, c, depth + 1)?);
        } else if c.is_text() {
            let t = c.text().unwrap_or("");
            if value_at.is_none() && !t.trim().is_empty() {
                // Point at the first non-blank character in the source.
                let r = c.range();
                let raw = src.get(r.clone()).unwrap_or("");
                value_at = Some(r.start + (raw.len() - raw.trim_start().len()));
            }
            value.push_str(t);
        }
    }
    let v = value.trim();
    Ok(Node {
        key: el.tag_name().name().to_owned(),
        value: (!v.is_empty()).then(|| v.to_owned()),
        at: value_at.unwrap_or_else(|| el.range().start),
        children,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal() {
        let r = parse(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v12.dtd\">\n\
             <nvidia_smi_log><attached_gpus>1</attached_gpus><gpu id=\"00000000:17:00.0\">\
             <ecc_mode><current_ecc>N/A</current_ecc><pending_ecc>N/A</pending_ecc></ecc_mode>\
             <processes/></gpu></nvidia_smi_log>",
        )
        .unwrap();
        assert_eq!(r.gpus.len(), 1);
        assert_eq!(r.gpus[0].details.index.known().map(|i| i.0), Some(0));
        assert!(!r.gpus[0].details.ecc.is_known());
    }

    #[test]
    fn errors() {
        assert!(parse("").is_err());
        let e = parse("<a/>").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
        let e = parse("<nvidia_smi_log><gpu id=\"x\"/></nvidia_smi_log>").unwrap_err();
        assert_eq!((e.line, e.column), (1, 26));
    }
}
