//! hwloc XML (`lstopo --of xml`) importer: the host, NUMA and PCI parts of a Snapshot.
//!
//! Many clusters already keep `lstopo` output for their nodes; importing it lets inferscope
//! reason about a machine it cannot run on. What hwloc records is mapped onto the model, and
//! everything it does not record is a [`Reading`] with reason `not_captured`, never a zero.
//!
//! # Two layouts
//!
//! * **hwloc 2.x** (`<topology version="2.0">`; `3.0` is read the same way, with a note): NUMA
//!   nodes are *memory children* of the object whose CPUs they serve (a `Package`, `Group`,
//!   the `Machine`, or a `MemCache` below one of those). A node's CPUs are therefore the PUs
//!   under that parent, not under the node. NUMA distances are one `<distances2
//!   type="NUMANode">` element at the end of the document, indexed by `os_index` (or
//!   `gp_index` with `indexing="gp"`); the latency matrix (`name="NUMALatency"`, or `kind` with
//!   the latency bit 4) is preferred when several exist.
//! * **hwloc 1.x** (`<topology>` without a version): `NUMANode` is an ordinary level of the tree
//!   and holds its `Package`s and PUs; distances are `<distances nbobjs relative_depth
//!   latency_base>` inside the object they cover, with `<latency value>` children, normalised
//!   (the real distance is `value × latency_base`), in logical (document) order of the objects
//!   `relative_depth` levels down. Only a matrix whose objects are the NUMA nodes is imported.
//!
//! # Cpuset bitmasks
//!
//! hwloc writes a cpuset as comma-separated 32-bit hex words, most significant first:
//! `0x000000ff,0xffffffff` is CPUs 0-39. An empty word (`0x00000303,,0x0`) is zero. A leading
//! `0xf...f` means "and every higher bit set" (an infinite set); such sets, and any set wider
//! than 65,536 CPUs (2,048 words), are refused before anything is allocated for them. Every
//! `cpuset` attribute in the document is decoded and checked, so garbage anywhere is reported
//! with its line and column.
//!
//! # PCI
//!
//! Every `PCIDev` and every `Bridge` with a `pci_busid` becomes a [`PciDevice`]. Host bridges
//! (`bridge_type="0-1"`) carry no bus id; they name the root complex the way sysfs does,
//! `pci{domain}:{secondary bus}`, from their `bridge_pci="0000:[2b-3b]"` range. The
//! `pci_type="0302 [10de:1db8] [10de:131d] a1"` attribute gives the 16-bit class and subclass,
//! vendor and device; its last field is the *revision*, not the programming interface, so the
//! stored 24-bit class ends in `00`. `pci_link_speed` is a bandwidth in GB/s (hwloc multiplies
//! speed, width and encoding overhead together), which cannot be split back into GT/s and
//! lanes, so link speed and width are `not_captured` with the bandwidth quoted in the detail.
//! A device's local CPUs are the cpuset of its closest non-I/O ancestor (where hwloc attached
//! the host bridge), and its NUMA node is the only node whose CPUs contain that set (unknown
//! when none or several do).
//!
//! # Limits
//!
//! Input over 64 MiB is refused, as are documents of over 2,000,000 XML nodes, more than
//! 65,536 PUs, more than 4,096 NUMA nodes, and PCI trees more than 256 levels deep. Nothing in
//! this module recurses, so deep nesting cannot exhaust the stack.

use crate::error::ParseError;
use inferscope_host::{
    CpuSet, Host, HugePagePool, LinkSpeed, NumaNode, NumaNodeId, PciBusId, PciClass, PciDevice,
    PciId, PcieLink, Reading, UnknownReason,
};
use roxmltree::{Document, Node, NodeId};
use std::collections::{BTreeMap, HashMap};

/// Largest input accepted, in bytes.
pub const MAX_INPUT_BYTES: usize = 64 * 1024 * 1024;
/// Largest number of XML nodes (elements, text, comments) accepted.
pub const MAX_XML_NODES: u32 = 2_000_000;
/// Largest CPU number + 1 a cpuset may describe, and the largest number of PUs.
pub const MAX_CPUS: usize = 65_536;
/// Largest number of NUMA nodes.
pub const MAX_NUMA_NODES: usize = 4_096;
/// Deepest chain of I/O objects (bridges) above a PCI device.
pub const MAX_PCI_DEPTH: usize = 256;

/// What an hwloc XML file says about a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwlocTopology {
    /// Hostname (`HostName` info), kernel (`OSRelease` info), CPU model (`CPUModel` info),
    /// Package, Core and PU counts, and the PUs' `os_index`es as the online CPUs.
    pub host: Host,
    /// NUMA nodes in ascending `os_index` order.
    pub numa_nodes: Vec<NumaNode>,
    /// PCI functions and bridges, in bus-id order.
    pub pci_devices: Vec<PciDevice>,
    /// OS devices under PCI functions: bus id, name (`mlx5_0`, `cuda0`, `nvml0`, `eth0`) and
    /// hwloc's `osdev_type`, in document order.
    pub os_devices: Vec<(PciBusId, String, u32)>,
    /// Assumptions made and facts hwloc XML does not carry.
    pub notes: Vec<String>,
}

fn not_captured<T>(detail: impl Into<String>) -> Reading<T> {
    Reading::unknown(UnknownReason::NotCaptured, detail)
}

/// Error positioned at byte offset `byte` of the document.
fn err_at(doc: &Document, byte: usize, expected: impl Into<String>, found: &str) -> ParseError {
    let p = doc.text_pos_at(byte);
    ParseError::new(p.row as usize, p.col as usize, expected, found)
}

/// Error at the value of attribute `attr` of `node` (at the node if the attribute is absent).
fn err_attr(
    doc: &Document,
    node: Node,
    attr: &str,
    expected: impl Into<String>,
    found: &str,
) -> ParseError {
    let byte = node
        .attribute_node(attr)
        .map(|a| a.range_value().start)
        .unwrap_or_else(|| node.range().start);
    err_at(doc, byte, expected, found)
}

fn err_node(doc: &Document, node: Node, expected: impl Into<String>, found: &str) -> ParseError {
    err_at(doc, node.range().start, expected, found)
}

fn is_object(n: &Node) -> bool {
    n.is_element() && n.tag_name().name() == "object"
}

fn obj_type<'a>(n: &Node<'a, '_>) -> &'a str {
    n.attribute("type").unwrap_or("")
}

/// I/O objects have no cpuset; their locality is their closest non-I/O ancestor.
fn is_io(n: &Node) -> bool {
    matches!(obj_type(n), "Bridge" | "PCIDev" | "OSDev" | "Misc")
}

fn is_pci(n: &Node) -> bool {
    matches!(obj_type(n), "PCIDev" | "Bridge") && n.attribute("pci_busid").is_some()
}

fn is_host_bridge(n: &Node) -> bool {
    obj_type(n) == "Bridge"
        && n.attribute("bridge_type")
            .is_some_and(|t| t.trim_start().starts_with("0-"))
}

fn show(s: &str) -> String {
    s.chars().take(40).collect()
}

/// A cpuset bitmask that does not decode: where, what was expected, what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {}: expected {expected}, found {found:?}", .offset + 1)]
pub struct CpusetError {
    /// 0-based character offset within the text of the bad word.
    pub offset: usize,
    /// What the decoder wanted.
    pub expected: &'static str,
    /// The offending word (truncated).
    pub found: String,
}

fn cpuset_error(offset: usize, expected: &'static str, found: String) -> CpusetError {
    CpusetError {
        offset,
        expected,
        found,
    }
}

/// Decodes an hwloc cpuset bitmask (`0x000000ff,0xffffffff`).
pub fn decode_cpuset(s: &str) -> Result<CpuSet, CpusetError> {
    const MAX_WORDS: usize = MAX_CPUS / 32;
    let words = s.split(',').count();
    if words > MAX_WORDS {
        return Err(cpuset_error(
            0,
            "a cpuset of at most 65536 CPUs (2048 words)",
            format!("{words} words"),
        ));
    }
    let mut cpus = Vec::new();
    let mut offset = 0usize;
    for (k, raw) in s.split(',').enumerate() {
        let at = offset;
        offset += raw.chars().count() + 1;
        let w = raw.trim();
        if w.eq_ignore_ascii_case("0xf...f") || w.contains("...") {
            return Err(cpuset_error(
                at,
                "a finite cpuset of at most 65536 CPUs",
                show(raw.trim()),
            ));
        }
        if w.is_empty() {
            continue; // hwloc writes zero words as nothing: `0x00000303,,0x0`
        }
        let digits = w
            .strip_prefix("0x")
            .or_else(|| w.strip_prefix("0X"))
            .unwrap_or(w);
        if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(cpuset_error(
                at,
                "a 32-bit hex word like 0x000000ff",
                show(w),
            ));
        }
        let value = u32::from_str_radix(digits, 16)
            .map_err(|_| cpuset_error(at, "a 32-bit hex word like 0x000000ff", show(w)))?;
        // `words` <= 2048, so the base fits comfortably in u32.
        let base = ((words - 1 - k) * 32) as u32;
        for bit in 0..32u32 {
            if value & (1 << bit) != 0 {
                cpus.push(base + bit);
            }
        }
    }
    Ok(cpus.into_iter().collect())
}

/// Parses the `version` attribute of `<topology>`: absent → 1.
fn format_major(doc: &Document, root: Node) -> Result<u32, ParseError> {
    let Some(v) = root.attribute("version") else {
        return Ok(1);
    };
    let major = v.split('.').next().unwrap_or("").trim();
    match major.parse::<u32>() {
        Ok(m @ 1..=3) => Ok(m),
        _ => Err(err_attr(
            doc,
            root,
            "version",
            "hwloc XML version 1.x, 2.x or 3.x",
            &show(v),
        )),
    }
}

fn parse_u64_attr(doc: &Document, node: Node, attr: &str, what: &str) -> Result<u64, ParseError> {
    let v = node
        .attribute(attr)
        .ok_or_else(|| err_node(doc, node, format!("attribute {attr} ({what})"), "nothing"))?;
    let t = v.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err_attr(
            doc,
            node,
            attr,
            format!("{what} (a number)"),
            &show(v),
        ));
    }
    t.parse::<u64>()
        .map_err(|_| err_attr(doc, node, attr, format!("{what} below 2^64"), &show(v)))
}

fn parse_u32_attr(doc: &Document, node: Node, attr: &str, what: &str) -> Result<u32, ParseError> {
    let v = parse_u64_attr(doc, node, attr, what)?;
    u32::try_from(v).map_err(|_| {
        err_attr(
            doc,
            node,
            attr,
            format!("{what} below 2^32"),
            node.attribute(attr).unwrap_or(""),
        )
    })
}

/// `<info name=... value=...>` children of `node`.
fn info<'a>(node: Node<'a, '_>, name: &str) -> Option<&'a str> {
    node.children()
        .filter(|c| c.is_element() && c.tag_name().name() == "info")
        .find(|c| c.attribute("name") == Some(name))
        .and_then(|c| c.attribute("value"))
}

/// Host bridge `bridge_pci="0000:[2b-3b]"` → `pci0000:2b`.
fn root_complex_name(doc: &Document, hb: Node) -> Result<Option<String>, ParseError> {
    let Some(v) = hb.attribute("bridge_pci") else {
        return Ok(None);
    };
    let bad = || {
        err_attr(
            doc,
            hb,
            "bridge_pci",
            "a bus range like 0000:[00-0f]",
            &show(v),
        )
    };
    let (dom, rest) = v.trim().split_once(':').ok_or_else(bad)?;
    let rest = rest.strip_prefix('[').ok_or_else(bad)?;
    let (sec, _) = rest.split_once('-').ok_or_else(bad)?;
    let hex = |x: &str, max: usize| {
        if x.is_empty() || x.len() > max || !x.bytes().all(|b| b.is_ascii_hexdigit()) {
            None
        } else {
            u32::from_str_radix(x, 16).ok()
        }
    };
    let domain = hex(dom, 8).ok_or_else(bad)?;
    let bus = hex(sec, 2).ok_or_else(bad)?;
    Ok(Some(format!("pci{domain:04x}:{bus:02x}")))
}

/// `pci_type="0604 [8086:2030] [8086:0000] 07"` → (class+subclass, vendor, device).
fn parse_pci_type(s: &str) -> Option<(u16, u16, u16)> {
    let mut it = s.split_whitespace();
    let class = it.next()?;
    let ids = it.next()?.strip_prefix('[')?.strip_suffix(']')?;
    let (v, d) = ids.split_once(':')?;
    let hex16 = |x: &str| {
        if x.is_empty() || x.len() > 4 || !x.bytes().all(|b| b.is_ascii_hexdigit()) {
            None
        } else {
            u16::from_str_radix(x, 16).ok()
        }
    };
    Some((hex16(class)?, hex16(v)?, hex16(d)?))
}

/// Parses whitespace-separated unsigned numbers of an element's text.
fn numbers(doc: &Document, el: Node, what: &str, out: &mut Vec<u64>) -> Result<(), ParseError> {
    let text = el.text().unwrap_or("");
    for tok in text.split_whitespace() {
        let v = tok
            .parse::<u64>()
            .map_err(|_| err_node(doc, el, what.to_owned(), &show(tok)))?;
        out.push(v);
    }
    Ok(())
}

/// A decimal such as `1.000000` or `10.5`, as a float, refusing anything else.
fn decimal(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() || t.len() > 40 || !t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    t.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// The NUMA distance matrix as found: node key (os or gp index) per row, values row-major.
struct Matrix {
    keys: Vec<u64>,
    by_gp: bool,
    values: Vec<u64>,
    what: String,
    /// Byte offset of the matrix element, for errors.
    pos: usize,
}

fn distances_v2(doc: &Document, root: Node) -> Result<Option<Matrix>, ParseError> {
    let cands: Vec<Node> = root
        .children()
        .filter(|c| c.is_element() && c.tag_name().name() == "distances2")
        .filter(|c| c.attribute("type") == Some("NUMANode"))
        .collect();
    let kind_latency = |c: &Node| {
        c.attribute("kind")
            .and_then(|k| k.trim().parse::<u64>().ok())
            .is_some_and(|k| k & 4 != 0)
    };
    let chosen = cands
        .iter()
        .find(|c| c.attribute("name") == Some("NUMALatency"))
        .or_else(|| cands.iter().find(|c| kind_latency(c)))
        .or_else(|| cands.first());
    let Some(&el) = chosen else {
        return Ok(None);
    };
    let n = parse_u64_attr(doc, el, "nbobjs", "the number of objects of the matrix")?;
    if n == 0 || n > MAX_NUMA_NODES as u64 {
        return Err(err_attr(
            doc,
            el,
            "nbobjs",
            "between 1 and 4096 objects",
            &n.to_string(),
        ));
    }
    let n = n as usize;
    let by_gp = match el.attribute("indexing") {
        None | Some("os") => false,
        Some("gp") => true,
        Some(other) => {
            return Err(err_attr(
                doc,
                el,
                "indexing",
                "indexing \"os\" or \"gp\"",
                &show(other),
            ));
        }
    };
    let mut keys = Vec::new();
    let mut values = Vec::new();
    for c in el.children().filter(|c| c.is_element()) {
        match c.tag_name().name() {
            "indexes" => numbers(doc, c, "an object index", &mut keys)?,
            "u64values" => numbers(doc, c, "a distance value", &mut values)?,
            _ => {}
        }
        if keys.len() > n || values.len() > n * n {
            break;
        }
    }
    if keys.len() != n || values.len() != n * n {
        return Err(err_node(
            doc,
            el,
            format!("{n} indexes and {} values in the distance matrix", n * n),
            &format!("{} indexes and {} values", keys.len(), values.len()),
        ));
    }
    let name = el.attribute("name").unwrap_or("unnamed");
    Ok(Some(Matrix {
        keys,
        by_gp,
        values,
        what: format!("<distances2> \"{}\"", show(name)),
        pos: el.range().start,
    }))
}

/// Objects `depth` levels of `<object>` children below `parent`, in document order.
fn level_below<'a, 'i>(parent: Node<'a, 'i>, depth: u64) -> Vec<Node<'a, 'i>> {
    let mut level = vec![parent];
    for _ in 0..depth {
        let next: Vec<Node> = level
            .iter()
            .flat_map(|p| p.children().filter(is_object))
            .collect();
        if next.is_empty() {
            return next;
        }
        level = next;
    }
    level
}

fn distances_v1(doc: &Document, top: Node) -> Result<Option<Matrix>, ParseError> {
    // Real 1.x files have one to three matrices; looking at 64 at most keeps a file of many
    // `<distances>` from costing a walk of the tree each.
    for el in top
        .descendants()
        .filter(|d| d.is_element() && d.tag_name().name() == "distances")
        .take(64)
    {
        let Some(parent) = el.parent().filter(is_object) else {
            continue;
        };
        let depth = parse_u64_attr(doc, el, "relative_depth", "the depth of the objects")?;
        let n = parse_u64_attr(doc, el, "nbobjs", "the number of objects of the matrix")?;
        if n == 0 || n > MAX_NUMA_NODES as u64 || depth > 1024 {
            continue;
        }
        let objs = level_below(parent, depth);
        if objs.len() as u64 != n || !objs.iter().all(|o| obj_type(o) == "NUMANode") {
            continue;
        }
        let n = n as usize;
        let base_txt = el.attribute("latency_base").unwrap_or("1");
        let base = decimal(base_txt).ok_or_else(|| {
            err_attr(
                doc,
                el,
                "latency_base",
                "a decimal like 10.000000",
                &show(base_txt),
            )
        })?;
        let mut values = Vec::new();
        for lat in el
            .children()
            .filter(|c| c.is_element() && c.tag_name().name() == "latency")
        {
            if values.len() >= n * n {
                values.push(0);
                break;
            }
            let txt = lat.attribute("value").unwrap_or("");
            let v = decimal(txt)
                .map(|v| (v * base).round())
                .filter(|v| *v >= 0.0 && *v <= f64::from(u32::MAX))
                .ok_or_else(|| {
                    err_attr(
                        doc,
                        lat,
                        "value",
                        "a latency like 1.000000 (below 2^32 times latency_base)",
                        &show(txt),
                    )
                })?;
            values.push(v as u64);
        }
        if values.len() != n * n {
            return Err(err_node(
                doc,
                el,
                format!("{} <latency> values", n * n),
                &values.len().to_string(),
            ));
        }
        let mut keys = Vec::with_capacity(n);
        for o in &objs {
            keys.push(parse_u64_attr(doc, *o, "os_index", "the NUMA node number")?);
        }
        return Ok(Some(Matrix {
            keys,
            by_gp: false,
            values,
            what: "<distances> (hwloc 1.x, latency × latency_base)".to_owned(),
            pos: el.range().start,
        }));
    }
    Ok(None)
}

/// Parses `lstopo --of xml` output (hwloc 1.x, 2.x or 3.x).
pub fn parse(text: &str) -> Result<HwlocTopology, ParseError> {
    let doc = parse_document(text)?;
    let (major, root, top) = topology_root(&doc)?;
    let mut notes = vec![match major {
        1 => "hwloc 1.x XML: NUMA nodes are tree levels that hold their CPUs".to_owned(),
        2 => "hwloc 2.x XML: NUMA nodes are memory children; their CPUs are their parent's PUs"
            .to_owned(),
        _ => "hwloc 3.x XML, read with the 2.x layout; osdev_type is a bitmask in 3.x".to_owned(),
    }];
    let objects = Objects::collect(&doc, root)?;
    let host = host(&objects, root, top, &mut notes);
    let mut nodes = numa_nodes(&doc, major, &objects, &mut notes)?;
    let matrix = if major >= 2 {
        distances_v2(&doc, root)?
    } else {
        distances_v1(&doc, top)?
    };
    apply_distances(&doc, matrix, &mut nodes, &mut notes)?;
    let numa_nodes: Vec<NumaNode> = nodes.into_values().map(|(_, n)| n).collect();
    let pci_devices = pci_devices(&doc, &objects, &numa_nodes, &mut notes)?;
    let os_devices = os_devices(&doc, &objects.osdevs)?;
    Ok(HwlocTopology {
        host,
        numa_nodes,
        pci_devices,
        os_devices,
        notes,
    })
}

/// The XML document, within the size and node limits; XML errors with line and column.
fn parse_document(text: &str) -> Result<Document<'_>, ParseError> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(ParseError::new(
            1,
            1,
            "at most 64 MiB of hwloc XML",
            &format!("{} bytes", text.len()),
        ));
    }
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        nodes_limit: MAX_XML_NODES,
        ..Default::default()
    };
    Document::parse_with_options(text, opts).map_err(|e| {
        use roxmltree::Error as X;
        match e {
            // roxmltree gives these no position: the problem is at the end of the text.
            X::UnexpectedEndOfStream | X::UnclosedRootNode | X::NoRootNode => {
                let line = text.matches('\n').count() + 1;
                let last = text.rsplit('\n').next().unwrap_or("");
                let msg = e.to_string();
                ParseError::new(line, last.chars().count() + 1, "well-formed XML", &msg)
            }
            X::NodesLimitReached => {
                ParseError::new(1, 1, "at most 2000000 XML nodes", "a larger document")
            }
            _ => {
                let p = e.pos();
                let msg = e.to_string();
                let msg = msg
                    .strip_suffix(&format!(" at {p}"))
                    .map(str::to_owned)
                    .unwrap_or(msg);
                ParseError::new(p.row as usize, p.col as usize, "well-formed XML", &msg)
            }
        }
    })
}

/// The format's major version, the `<topology>` element and its top-level object (the Machine).
fn topology_root<'a, 'i>(
    doc: &'a Document<'i>,
) -> Result<(u32, Node<'a, 'i>, Node<'a, 'i>), ParseError> {
    let root = doc.root_element();
    if root.tag_name().name() != "topology" {
        return Err(err_node(
            doc,
            root,
            "a <topology> root element (hwloc XML)",
            &format!("<{}>", show(root.tag_name().name())),
        ));
    }
    let major = format_major(doc, root)?;
    let Some(top) = root.children().find(is_object) else {
        return Err(err_node(
            doc,
            root,
            "a top-level <object> (the Machine) in <topology>",
            "none",
        ));
    };
    Ok((major, root, top))
}

/// Every object of interest, from one pass over the document (every cpuset decoded and checked).
struct Objects<'a, 'i> {
    cpusets: HashMap<NodeId, CpuSet>,
    /// (byte offset, os_index), in document order.
    pus: Vec<(usize, u32)>,
    numa: Vec<Node<'a, 'i>>,
    pci: Vec<Node<'a, 'i>>,
    osdevs: Vec<Node<'a, 'i>>,
    packages: u32,
    cores: u32,
}

impl<'a, 'i> Objects<'a, 'i> {
    fn collect(doc: &'a Document<'i>, root: Node<'a, 'i>) -> Result<Self, ParseError> {
        let mut o = Objects {
            cpusets: HashMap::new(),
            pus: Vec::new(),
            numa: Vec::new(),
            pci: Vec::new(),
            osdevs: Vec::new(),
            packages: 0,
            cores: 0,
        };
        for n in root.descendants().filter(is_object) {
            if let Some(cs) = n.attribute("cpuset") {
                let set = decode_cpuset(cs).map_err(|e| {
                    let byte = n
                        .attribute_node("cpuset")
                        .map(|a| a.range_value().start)
                        .unwrap_or_else(|| n.range().start);
                    let p = doc.text_pos_at(byte);
                    ParseError::new(
                        p.row as usize,
                        p.col as usize + e.offset,
                        e.expected,
                        &e.found,
                    )
                })?;
                o.cpusets.insert(n.id(), set);
            }
            match obj_type(&n) {
                "PU" => {
                    if o.pus.len() >= MAX_CPUS {
                        return Err(err_node(doc, n, "at most 65536 PUs", "more"));
                    }
                    let idx = parse_u32_attr(doc, n, "os_index", "the PU's CPU number")?;
                    o.pus.push((n.range().start, idx));
                }
                "NUMANode" => {
                    if o.numa.len() >= MAX_NUMA_NODES {
                        return Err(err_node(doc, n, "at most 4096 NUMA nodes", "more"));
                    }
                    o.numa.push(n);
                }
                "Package" | "Socket" => o.packages = o.packages.saturating_add(1),
                "Core" => o.cores = o.cores.saturating_add(1),
                "OSDev" => o.osdevs.push(n),
                _ => {}
            }
            if is_pci(&n) {
                o.pci.push(n);
            }
        }
        Ok(o)
    }

    /// PUs under an object: those whose start lies inside the object's text range. `cache`
    /// keeps each range's set, so thousands of NUMA nodes under one parent (a hostile file)
    /// cost one set, not thousands.
    fn pus_under(&self, n: Node, cache: &mut HashMap<(usize, usize), CpuSet>) -> CpuSet {
        let r = n.range();
        let lo = self.pus.partition_point(|&(b, _)| b < r.start);
        let hi = self.pus.partition_point(|&(b, _)| b < r.end);
        cache
            .entry((lo, hi))
            .or_insert_with(|| {
                self.pus
                    .get(lo..hi)
                    .unwrap_or_default()
                    .iter()
                    .map(|&(_, i)| i)
                    .collect()
            })
            .clone()
    }
}

/// The host: name, kernel and CPU model from info attributes, counts of packages, cores and PUs.
fn host(objects: &Objects, root: Node, top: Node, notes: &mut Vec<String>) -> Host {
    let pus = &objects.pus;
    let all_pus: CpuSet = pus.iter().map(|&(_, i)| i).collect();
    let count = |n: u32, what: &str| {
        if n == 0 {
            not_captured(format!("no {what} objects in the hwloc XML"))
        } else {
            Reading::value(n)
        }
    };
    let models: Vec<&str> = root
        .descendants()
        .filter(|o| is_object(o) && matches!(obj_type(o), "Package" | "Socket"))
        .filter_map(|p| info(p, "CPUModel"))
        .collect();
    let cpu_model = models.first().copied().or_else(|| info(top, "CPUModel"));
    if models.iter().any(|m| Some(*m) != models.first().copied()) {
        notes.push("packages report different CPU models; cpu_model is the first".to_owned());
    }
    let text = |v: Option<&str>, attr: &str| {
        v.map_or_else(
            || not_captured(format!("the hwloc XML has no {attr} info")),
            |h| Reading::value(h.to_owned()),
        )
    };
    let host = Host {
        hostname: text(info(top, "HostName"), "HostName"),
        kernel: text(info(top, "OSRelease"), "OSRelease"),
        cpu_model: text(cpu_model, "CPUModel"),
        sockets: count(objects.packages, "Package"),
        cores: count(objects.cores, "Core"),
        threads: count(pus.len() as u32, "PU"),
        online_cpus: if pus.is_empty() {
            not_captured("no PU objects in the hwloc XML")
        } else {
            Reading::value(all_pus)
        },
    };
    if !pus.is_empty() {
        notes.push(
            "online CPUs are the PUs in the XML; lstopo leaves out CPUs outside its cgroup \
             unless run with --disallowed"
                .to_owned(),
        );
    }
    host
}

/// NUMA nodes by `os_index`, with the XML object each came from (distances are keyed by it).
type NodesById<'a, 'i> = BTreeMap<u32, (Node<'a, 'i>, NumaNode)>;

/// NUMA nodes: CPUs (2.x: the parent's PUs), memory and huge-page pools; distances come later.
fn numa_nodes<'a, 'i>(
    doc: &'a Document<'i>,
    major: u32,
    objects: &Objects<'a, 'i>,
    notes: &mut Vec<String>,
) -> Result<NodesById<'a, 'i>, ParseError> {
    let mut nodes: NodesById = BTreeMap::new();
    let mut parents: HashMap<NodeId, Vec<u32>> = HashMap::new();
    let mut pu_cache = HashMap::new();
    for &o in &objects.numa {
        let id = parse_u32_attr(doc, o, "os_index", "the NUMA node number")?;
        let owner = if major >= 2 {
            o.ancestors()
                .skip(1)
                .find(|a| is_object(a) && !matches!(obj_type(a), "MemCache" | "NUMANode"))
                .unwrap_or(o)
        } else {
            o
        };
        let mut cpus = objects.pus_under(owner, &mut pu_cache);
        if cpus.is_empty()
            && major >= 2
            && let Some(cs) = objects.cpusets.get(&o.id())
        {
            cpus = cs.clone();
        }
        if owner != o {
            parents.entry(owner.id()).or_default().push(id);
        }
        let memory_total_bytes = if o.attribute("local_memory").is_some() {
            Reading::value(parse_u64_attr(
                doc,
                o,
                "local_memory",
                "the node's memory in bytes",
            )?)
        } else {
            not_captured("no local_memory attribute on this NUMANode")
        };
        let node = NumaNode {
            id: NumaNodeId(id),
            cpus,
            memory_total_bytes,
            memory_free_bytes: not_captured("hwloc XML gives total memory per node, not free"),
            distances: not_captured("the hwloc XML has no NUMA distance matrix"),
            hugepages: hugepage_pools(doc, o)?,
        };
        if nodes.insert(id, (o, node)).is_some() {
            return Err(err_attr(
                doc,
                o,
                "os_index",
                "a NUMA node number not used before",
                &id.to_string(),
            ));
        }
    }
    let mut shared: Vec<String> = parents
        .values()
        .filter(|ids| ids.len() > 1)
        .map(|ids| {
            let list: Vec<String> = ids.iter().map(u32::to_string).collect();
            list.join(", ")
        })
        .collect();
    shared.sort();
    for s in shared {
        notes.push(format!(
            "NUMA nodes {s} share one parent, so hwloc gives each its CPUs; the kernel may \
             list some of them as CPU-less"
        ));
    }
    Ok(nodes)
}

/// A NUMA node's huge-page pools from its `<page_type>` children.
fn hugepage_pools(doc: &Document, o: Node) -> Result<Vec<HugePagePool>, ParseError> {
    let mut hugepages = Vec::new();
    let page_types: Vec<Node> = o
        .children()
        .filter(|c| c.is_element() && c.tag_name().name() == "page_type")
        .collect();
    // The first page_type is the base page size (hwloc's Linux backend writes normal pages
    // first, then one entry per huge page size).
    for pt in page_types.iter().skip(1) {
        let size = parse_u64_attr(doc, *pt, "size", "the page size in bytes")?;
        let cnt = parse_u64_attr(doc, *pt, "count", "the number of pages")?;
        if size % 1024 != 0 {
            return Err(err_attr(
                doc,
                *pt,
                "size",
                "a page size that is a whole number of KiB",
                &size.to_string(),
            ));
        }
        hugepages.push(HugePagePool {
            page_size_kib: size / 1024,
            total: Reading::value(cnt),
            free: not_captured("hwloc XML gives the pool size, not its free pages"),
        });
    }
    Ok(hugepages)
}

/// Give each node its row of the distance matrix, when the matrix covers exactly the nodes.
fn apply_distances(
    doc: &Document,
    matrix: Option<Matrix>,
    nodes: &mut NodesById,
    notes: &mut Vec<String>,
) -> Result<(), ParseError> {
    let m = match matrix {
        None if nodes.len() > 1 => {
            notes.push("the hwloc XML has no NUMA distance matrix".to_owned());
            return Ok(());
        }
        None => return Ok(()),
        Some(m) => m,
    };
    let n = m.keys.len();
    let key_of = |o: &Node| -> Option<u64> {
        if m.by_gp {
            o.attribute("gp_index")?.trim().parse().ok()
        } else {
            o.attribute("os_index")?.trim().parse().ok()
        }
    };
    let rows: Option<Vec<usize>> = nodes
        .values()
        .map(|(o, _)| key_of(o).and_then(|k| m.keys.iter().position(|x| *x == k)))
        .collect();
    let Some(rows) = rows.filter(|r| r.len() == n) else {
        notes.push(format!(
            "the NUMA distance matrix {} does not cover exactly the {} NUMA nodes; \
             distances not imported",
            m.what,
            nodes.len()
        ));
        return Ok(());
    };
    let mut table = Vec::with_capacity(rows.len());
    for &i in &rows {
        let mut row = Vec::with_capacity(rows.len());
        for &j in &rows {
            // cannot fail: i, j < n (positions in m.keys) and values.len() == n * n
            #[allow(clippy::indexing_slicing)]
            let v = m.values[i * n + j];
            let Ok(v) = u32::try_from(v) else {
                return Err(err_at(
                    doc,
                    m.pos,
                    "NUMA distances below 2^32",
                    &v.to_string(),
                ));
            };
            row.push(v);
        }
        table.push(row);
    }
    for ((_, node), row) in nodes.values_mut().zip(table) {
        node.distances = Reading::value(row);
    }
    notes.push(format!("NUMA distances from {}", m.what));
    Ok(())
}

/// Local CPUs and NUMA node of the PCI trees under one non-I/O object.
type Locality = (Reading<CpuSet>, Reading<NumaNodeId>);

/// Every PCI function and bridge, in bus-id order.
fn pci_devices(
    doc: &Document,
    objects: &Objects,
    numa_nodes: &[NumaNode],
    notes: &mut Vec<String>,
) -> Result<Vec<PciDevice>, ParseError> {
    let mut locality: HashMap<NodeId, Locality> = HashMap::new();
    let mut by_bus: BTreeMap<PciBusId, PciDevice> = BTreeMap::new();
    let mut fallback_rc = false;
    for &d in &objects.pci {
        let busid_txt = d.attribute("pci_busid").unwrap_or("");
        let bus_id = bus_id_attr(doc, d)?;
        let up = upstream(doc, d, bus_id)?;
        let root_complex = match up.host_bridge {
            Some(hb) => root_complex_name(doc, hb)?,
            None => None,
        }
        .unwrap_or_else(|| {
            fallback_rc = true;
            format!("pci{:04x}:{:02x}", up.top_pci.domain, up.top_pci.bus)
        });
        let (vendor_id, device_id, class) = pci_ids(doc, d)?;
        let (local_cpus, numa_node) = match up.anchor {
            None => (
                not_captured("the PCI tree hangs off no CPU object"),
                not_captured("the PCI tree hangs off no CPU object"),
            ),
            Some(a) => locality
                .entry(a.id())
                .or_insert_with(|| anchor_locality(objects, a, numa_nodes))
                .clone(),
        };
        let dev = PciDevice {
            bus_id,
            root_complex,
            upstream_bridges: up.bridges,
            vendor_id,
            device_id,
            class,
            driver: not_captured("hwloc XML does not record the bound kernel driver"),
            numa_node,
            local_cpus,
            link: pci_link(d),
        };
        if by_bus.insert(bus_id, dev).is_some() {
            return Err(err_attr(
                doc,
                d,
                "pci_busid",
                "a PCI bus id not used before",
                busid_txt,
            ));
        }
    }
    if fallback_rc {
        notes.push(
            "some PCI devices have no host bridge with a bus range above them; their root \
             complex is named from the topmost bus"
                .to_owned(),
        );
    }
    if !by_bus.is_empty() {
        notes.push(
            "PCI link speed and width are not captured: hwloc XML gives a bandwidth in GB/s"
                .to_owned(),
        );
        notes.push(
            "PCI classes end in 00: hwloc XML gives class and subclass, not the programming \
             interface"
                .to_owned(),
        );
    }
    Ok(by_bus.into_values().collect())
}

/// An object's `pci_busid` attribute.
fn bus_id_attr(doc: &Document, d: Node) -> Result<PciBusId, ParseError> {
    let t = d.attribute("pci_busid").unwrap_or("");
    t.parse().map_err(|_| {
        err_attr(
            doc,
            d,
            "pci_busid",
            "a PCI bus id like 0000:17:00.0",
            &show(t),
        )
    })
}

/// What lies above a PCI object.
struct Upstream<'a, 'i> {
    /// PCI bridges from the root down.
    bridges: Vec<PciBusId>,
    host_bridge: Option<Node<'a, 'i>>,
    /// The topmost PCI bus id (the device itself when no bridge is above it).
    top_pci: PciBusId,
    /// The first non-I/O ancestor (where hwloc attached the host bridge).
    anchor: Option<Node<'a, 'i>>,
}

/// Climb the I/O ancestors up to the first non-I/O object.
fn upstream<'a, 'i>(
    doc: &Document,
    d: Node<'a, 'i>,
    bus_id: PciBusId,
) -> Result<Upstream<'a, 'i>, ParseError> {
    let mut up = Upstream {
        bridges: Vec::new(),
        host_bridge: None,
        top_pci: bus_id,
        anchor: None,
    };
    for (steps, a) in d.ancestors().skip(1).filter(is_object).enumerate() {
        if steps > MAX_PCI_DEPTH {
            return Err(err_node(
                doc,
                d,
                "a PCI tree at most 256 levels deep",
                "a deeper one",
            ));
        }
        if !is_io(&a) {
            up.anchor = Some(a);
            break;
        }
        if is_host_bridge(&a) {
            if up.host_bridge.is_none() {
                up.host_bridge = Some(a);
            }
        } else if up.host_bridge.is_none() && is_pci(&a) {
            let b = bus_id_attr(doc, a)?;
            up.bridges.push(b);
            up.top_pci = b;
        }
    }
    up.bridges.reverse();
    Ok(up)
}

/// Vendor, device and class.
type PciIds = (Reading<PciId>, Reading<PciId>, Reading<PciClass>);

/// Vendor, device and class from `pci_type`.
fn pci_ids(doc: &Document, d: Node) -> Result<PciIds, ParseError> {
    let Some(t) = d.attribute("pci_type") else {
        return Ok((
            not_captured("no pci_type attribute"),
            not_captured("no pci_type attribute"),
            not_captured("no pci_type attribute"),
        ));
    };
    let (c, v, dv) = parse_pci_type(t).ok_or_else(|| {
        err_attr(
            doc,
            d,
            "pci_type",
            "a PCI type like 0302 [10de:1db8] [10de:131d] a1",
            &show(t),
        )
    })?;
    Ok((
        Reading::value(PciId(v)),
        Reading::value(PciId(dv)),
        Reading::value(PciClass(u32::from(c) << 8)),
    ))
}

/// The link: hwloc gives a bandwidth, which is quoted in the `not_captured` detail.
fn pci_link(d: Node) -> PcieLink {
    let speed_detail = match d.attribute("pci_link_speed") {
        Some(s) => format!(
            "hwloc XML gives link bandwidth ({} GB/s), not speed and width",
            show(s.trim())
        ),
        None => "hwloc XML has no link information for this device".to_owned(),
    };
    PcieLink {
        current_speed: not_captured::<LinkSpeed>(speed_detail.clone()),
        current_width: not_captured(speed_detail),
        max_speed: not_captured("hwloc XML does not record the maximum link"),
        max_width: not_captured("hwloc XML does not record the maximum link"),
    }
}

/// The anchor's cpuset, and the only NUMA node whose CPUs contain it.
fn anchor_locality(objects: &Objects, a: Node, numa_nodes: &[NumaNode]) -> Locality {
    let Some(cs) = objects.cpusets.get(&a.id()).filter(|c| !c.is_empty()) else {
        let why = format!(
            "the {} object the PCI tree hangs off has no cpuset",
            show(obj_type(&a))
        );
        return (not_captured(why.clone()), not_captured(why));
    };
    let cands: Vec<NumaNodeId> = numa_nodes
        .iter()
        .filter(|n| cs.is_subset(&n.cpus))
        .map(|n| n.id)
        .collect();
    let numa = match cands.as_slice() {
        [one] => Reading::value(*one),
        [] => not_captured(format!(
            "no NUMA node's CPUs contain the PCI tree's local CPUs {cs}"
        )),
        many => not_captured(format!(
            "several NUMA nodes ({}) contain the PCI tree's local CPUs {cs}",
            many.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    };
    (Reading::value(cs.clone()), numa)
}

/// OS devices directly under PCI objects: bus id, name and `osdev_type`.
fn os_devices(doc: &Document, osdevs: &[Node]) -> Result<Vec<(PciBusId, String, u32)>, ParseError> {
    let mut os_devices = Vec::new();
    for &o in osdevs {
        let Some(parent) = o.parent().filter(|p| is_object(p) && is_pci(p)) else {
            continue;
        };
        let Some(bus) = parent
            .attribute("pci_busid")
            .and_then(|b| b.parse::<PciBusId>().ok())
        else {
            continue;
        };
        let name = o
            .attribute("name")
            .ok_or_else(|| err_node(doc, o, "a name attribute on the OSDev", "none"))?;
        let ty = parse_u32_attr(doc, o, "osdev_type", "the OS device type")?;
        os_devices.push((bus, name.to_owned(), ty));
    }
    Ok(os_devices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuset_words_are_most_significant_first() {
        assert_eq!(decode_cpuset("0x00000003").unwrap().to_string(), "0-1");
        assert_eq!(
            decode_cpuset("0x000000ff,0xffffffff").unwrap().to_string(),
            "0-39"
        );
        assert_eq!(
            decode_cpuset("0x00000303,0x03030000,,0x0")
                .unwrap()
                .to_string(),
            "80-81,88-89,96-97,104-105"
        );
        assert_eq!(decode_cpuset("0x0").unwrap().to_string(), "");
    }

    #[test]
    fn cpuset_refuses_infinite_wide_and_garbage() {
        assert_eq!(decode_cpuset("0xf...f,0xffffffff").unwrap_err().offset, 0);
        assert_eq!(decode_cpuset("0xffffffff,0xf...f").unwrap_err().offset, 11);
        let wide = vec!["0x1"; 2049].join(",");
        assert!(decode_cpuset(&wide).is_err());
        let ok = vec!["0x1"; 2048].join(",");
        assert_eq!(decode_cpuset(&ok).unwrap().len(), 2048);
        assert_eq!(decode_cpuset("0x0000zz03").unwrap_err().offset, 0);
        assert_eq!(decode_cpuset("0x1,0x123456789").unwrap_err().offset, 4);
        assert!(decode_cpuset("0x").is_err());
    }

    #[test]
    fn pci_type_fields() {
        assert_eq!(
            parse_pci_type("0302 [10de:1db8] [10de:131d] a1"),
            Some((0x0302, 0x10de, 0x1db8))
        );
        assert_eq!(parse_pci_type("0302 10de:1db8"), None);
        assert_eq!(parse_pci_type("03020 [10de:1db8]"), None);
    }

    /// A two-package hwloc 2.x machine modelled on `fixtures/tools/hwloc/nvidia-dgx2.xml`
    /// (trimmed): one GPU behind a host bridge and a PCIe switch on package 1.
    const SMALL_V2: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" gp_index="1">
    <info name="HostName" value="box"/>
    <object type="Package" os_index="0" cpuset="0x00000003" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" gp_index="3" local_memory="1073741824">
        <page_type size="4096" count="0"/>
        <page_type size="2097152" count="16"/>
      </object>
      <object type="PU" os_index="0" cpuset="0x00000001" gp_index="4"/>
      <object type="PU" os_index="1" cpuset="0x00000002" gp_index="5"/>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c" gp_index="6">
      <object type="NUMANode" os_index="1" cpuset="0x0000000c" gp_index="7" local_memory="1073741824"/>
      <object type="PU" os_index="2" cpuset="0x00000004" gp_index="8"/>
      <object type="PU" os_index="3" cpuset="0x00000008" gp_index="9"/>
      <object type="Bridge" gp_index="10" bridge_type="0-1" depth="0" bridge_pci="0000:[17-19]">
        <object type="Bridge" gp_index="11" bridge_type="1-1" depth="1" bridge_pci="0000:[18-19]" pci_busid="0000:17:00.0" pci_type="0604 [1000:c010] [1000:a064] b0">
          <object type="PCIDev" gp_index="12" pci_busid="0000:18:00.0" pci_type="0302 [10de:1db8] [10de:131d] a1" pci_link_speed="15.753846">
            <object type="OSDev" gp_index="13" name="nvml0" osdev_type="1"/>
          </object>
        </object>
      </object>
    </object>
  </object>
  <distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="os">
    <indexes length="4">0 1 </indexes>
    <u64values length="12">10 21 21 10 </u64values>
  </distances2>
</topology>
"#;

    #[test]
    fn phases_of_a_small_v2_machine() {
        let t = parse(SMALL_V2).unwrap();
        assert_eq!(t.host.hostname.known().map(String::as_str), Some("box"));
        assert_eq!(t.host.sockets.known(), Some(&2));
        // Hugepages: the first page_type is the base page and is skipped.
        let n0 = t.numa_nodes.first().unwrap();
        assert_eq!(n0.hugepages.len(), 1);
        assert_eq!(n0.hugepages[0].page_size_kib, 2048);
        assert_eq!(n0.distances.known(), Some(&vec![10, 21]));
        // The GPU: behind the switch port, root complex from the host bridge's bus range,
        // local to package 1's node.
        let gpu = t
            .pci_devices
            .iter()
            .find(|d| d.bus_id.to_string() == "0000:18:00.0")
            .unwrap();
        assert_eq!(gpu.root_complex, "pci0000:17");
        let ups: Vec<String> = gpu.upstream_bridges.iter().map(|b| b.to_string()).collect();
        assert_eq!(ups, ["0000:17:00.0"]);
        assert_eq!(gpu.numa_node.known().map(|n| n.0), Some(1));
        assert_eq!(
            gpu.local_cpus.known().map(|c| c.to_string()).as_deref(),
            Some("2-3")
        );
        assert!(gpu.link.current_speed.known().is_none());
        assert_eq!(t.os_devices.len(), 1);
    }

    #[test]
    fn a_distance_matrix_for_other_nodes_is_not_imported() {
        let text = SMALL_V2.replace(
            "<indexes length=\"4\">0 1 </indexes>",
            "<indexes length=\"4\">0 5 </indexes>",
        );
        let t = parse(&text).unwrap();
        assert!(t.numa_nodes.iter().all(|n| n.distances.known().is_none()));
        assert!(
            t.notes
                .iter()
                .any(|n| n.contains("does not cover exactly the 2 NUMA nodes")),
            "{:?}",
            t.notes
        );
    }

    #[test]
    fn a_root_without_a_machine_or_of_another_kind_is_refused() {
        let e = parse("<topology version=\"2.0\"></topology>").unwrap_err();
        assert!(e.to_string().contains("a top-level <object>"), "{e}");
        let e = parse("<html/>").unwrap_err();
        assert!(e.to_string().contains("a <topology> root element"), "{e}");
    }

    #[test]
    fn a_pci_tree_under_a_cpu_set_of_two_nodes_has_no_single_node() {
        // A tree hung off the Machine, whose cpuset spans both nodes, belongs to neither.
        let text = SMALL_V2;
        let doc = parse_document(text).unwrap();
        let (_, root, _) = topology_root(&doc).unwrap();
        let objects = Objects::collect(&doc, root).unwrap();
        let machine = root.children().find(is_object).unwrap();
        let t = parse(text).unwrap();
        let (cpus, node) = anchor_locality(&objects, machine, &t.numa_nodes);
        assert_eq!(cpus.known().map(|c| c.to_string()).as_deref(), Some("0-3"));
        let why = format!("{node:?}");
        assert!(
            node.known().is_none() && why.contains("no NUMA node's CPUs contain"),
            "{why}"
        );
    }
}
