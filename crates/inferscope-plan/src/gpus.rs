//! The embedded GPU catalog (`data/gpus.toml`): memory as sold and as PyTorch sees it, memory
//! bandwidth, dense tensor throughput, GPU-to-GPU and host links, each entry with its datasheet
//! source and the fields that could not be verified.
//!
//! Names resolve forgivingly ([`lookup`]): case, spaces, dashes and underscores are ignored, the
//! `NVIDIA`/`Tesla`/`GeForce`/`AMD`/`Instinct` prefixes are optional, the NVML product name
//! (`NVIDIA A100-SXM4-80GB`, `Tesla T4`, `NVIDIA GeForce RTX 4090`) is an alias, and a trailing
//! memory size (`80GB`) narrows the match. A name that fits several entries (`a100`) is an error
//! that lists them. [`custom`] describes an unlisted card by the total PyTorch reports for it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::OnceLock;

use serde::Deserialize;

const CATALOG_TOML: &str = include_str!("../data/gpus.toml");

/// Bytes in a GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Who makes the GPU (and so which PCI vendor id its device ids belong to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Nvidia,
    Amd,
}

impl Vendor {
    /// The PCI vendor id (0x10de NVIDIA, 0x1002 AMD).
    pub fn pci_vendor_id(self) -> u16 {
        match self {
            Vendor::Nvidia => 0x10de,
            Vendor::Amd => 0x1002,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::Nvidia => "NVIDIA",
            Vendor::Amd => "AMD",
        }
    }
}

/// One GPU model. Optional numbers are `None` when the GPU lacks the feature or the number is
/// unknown (never 0). See the header of `data/gpus.toml` for the exact meaning of every field.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Canonical name, e.g. `H100 SXM`.
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub vendor: Vendor,
    /// PCI device ids (under [`Vendor::pci_vendor_id`]).
    #[serde(default)]
    pub pci_device_ids: Vec<u16>,
    /// Memory as sold, in GB (GPU memory is sold in binary units: see [`GpuSpec::memory_bytes`]).
    pub memory_gb: f64,
    #[serde(default)]
    pub memory_type: Option<String>,
    /// Total memory as PyTorch / vLLM report it (`total_gpu_memory`), GiB.
    pub torch_total_gib: f64,
    /// `measured: <where>` or `estimated: <how>`.
    pub torch_total_basis: String,
    /// `nvidia-smi` FB memory total, MiB, where a real capture gives it.
    #[serde(default)]
    pub nvidia_smi_total_mib: Option<u64>,
    /// Peak memory bandwidth, GB/s (10^9 B/s). `None` only for [`custom`] GPUs.
    #[serde(default)]
    pub memory_bandwidth_gbps: Option<f64>,
    /// Dense FP16/BF16 tensor TFLOPS with FP32 accumulate.
    #[serde(default)]
    pub fp16_tflops: Option<f64>,
    /// Dense FP8 tensor TFLOPS (FP32 accumulate); `None` where there is no FP8 path.
    #[serde(default)]
    pub fp8_tflops: Option<f64>,
    /// Dense INT8 tensor TOPS.
    #[serde(default)]
    pub int8_tops: Option<f64>,
    /// Dense FP4 tensor TFLOPS (NVFP4/MXFP4); `None` where there is no FP4 path.
    #[serde(default)]
    pub fp4_tflops: Option<f64>,
    /// GPU-to-GPU link per GPU, GB/s bidirectional as the vendor quotes it; `None` = PCIe only.
    #[serde(default)]
    pub gpu_link_gbps: Option<f64>,
    /// Which link (`NVLink 4 (18 links)`, `NVLink bridge (pairs)`, `Infinity Fabric ...`).
    #[serde(default)]
    pub gpu_link: Option<String>,
    /// CUDA compute capability (`"8.0"`), NVIDIA only; vLLM 0.8-0.9 falls back to V0 below 8.0.
    #[serde(default)]
    pub compute_capability: Option<String>,
    /// Host link where it is not PCIe (Grace NVLink-C2C), GB/s bidirectional.
    #[serde(default)]
    pub host_link_gbps: Option<f64>,
    #[serde(default)]
    pub pcie_gen: Option<u8>,
    #[serde(default)]
    pub pcie_lanes: Option<u8>,
    #[serde(default)]
    pub tdp_w: Option<f64>,
    /// Datasheet URL.
    pub source: String,
    #[serde(default)]
    pub notes: Option<String>,
    /// Names of fields whose value was not checked against a source.
    #[serde(default)]
    pub unverified: Vec<String>,
    /// Where the part is sold when only in one region (China export variants); `None` = widely.
    #[serde(default)]
    pub region: Option<String>,
}

impl GpuSpec {
    /// The compute capability as `(major, minor)` (`"8.9"` → `(8, 9)`), when the catalog has it.
    pub fn compute_capability_pair(&self) -> Option<(u32, u32)> {
        let (major, minor) = self.compute_capability.as_deref()?.split_once('.')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    }

    /// How GPUs of this kind are linked under tensor parallelism, for NCCL's buffers
    /// ([`crate::memory::TpLink`]): a GPU link on the board (SXM NVLink, Infinity Fabric), PCIe
    /// only (no GPU link at all), or `None` for bridged kinds (`NVLink bridge (pairs)`): a
    /// bridge is an optional part the catalog cannot see, and a bridged pair behaves like a
    /// board (the TGI 2×A6000 start-up with a bridge needs the NVLink increment).
    pub fn tp_link(&self) -> Option<crate::memory::TpLink> {
        match &self.gpu_link {
            None => Some(crate::memory::TpLink::Pcie),
            Some(link) if link.to_ascii_lowercase().contains("bridge") => None,
            Some(_) => Some(crate::memory::TpLink::BoardLink),
        }
    }

    /// Memory as sold, in bytes: `memory_gb × 2^30` (80 GB HBM3 is 80 GiB of DRAM; what PyTorch
    /// can use is [`GpuSpec::torch_total_bytes`]).
    pub fn memory_bytes(&self) -> u64 {
        (self.memory_gb * GIB) as u64
    }

    /// What PyTorch reports as total memory, bytes.
    pub fn torch_total_bytes(&self) -> u64 {
        (self.torch_total_gib * GIB) as u64
    }

    /// Whether `torch_total_gib` was measured (vLLM log or nvidia-smi capture) rather than estimated.
    pub fn torch_total_measured(&self) -> bool {
        self.torch_total_basis.starts_with("measured")
    }

    /// PCIe bandwidth per direction, GB/s, from generation and lanes (None when unknown).
    pub fn pcie_gbps_per_direction(&self) -> Option<f64> {
        pcie_gbps_per_direction(self.pcie_gen?, self.pcie_lanes?)
    }

    /// Whether a field (by its TOML name) is listed as unverified.
    pub fn is_unverified(&self, field: &str) -> bool {
        self.unverified.iter().any(|f| f == field)
    }
}

/// PCIe payload bandwidth per direction in GB/s for a generation and lane count, after line
/// coding (Gen1/2 8b/10b, Gen3-5 128b/130b, Gen6 FLIT ≈ 242/256): per lane 0.25, 0.5, 0.985,
/// 1.969, 3.938, 7.563 GB/s (PCI-SIG base specifications). Protocol (TLP) overhead is not
/// subtracted; see the `pcie` efficiency in [`crate::speed::Efficiency`].
pub fn pcie_gbps_per_direction(gen_: u8, lanes: u8) -> Option<f64> {
    let per_lane = match gen_ {
        1 => 0.25,
        2 => 0.5,
        3 => 0.984_6,
        4 => 1.969,
        5 => 3.938,
        6 => 7.563,
        _ => return None,
    };
    if lanes == 0 {
        return None;
    }
    Some(per_lane * f64::from(lanes))
}

/// Why a GPU name did not resolve.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GpuLookupError {
    #[error("unknown GPU {query:?}{}", suggest(.suggestions))]
    Unknown {
        query: String,
        suggestions: Vec<String>,
    },
    #[error("GPU name {query:?} is ambiguous: it matches {}; give one of these names", .candidates.join(", "))]
    Ambiguous {
        query: String,
        candidates: Vec<String>,
    },
    #[error("the embedded GPU catalog is invalid: {0}")]
    Catalog(String),
    #[error("--gpu-memory-gib must be a number of GiB between 0.5 and 4096, got {0}")]
    BadCustomMemory(f64),
}

fn suggest(s: &[String]) -> String {
    if s.is_empty() {
        String::from(
            " (docs/gpus.md lists the known names; describe another card with --gpu-memory-gib)",
        )
    } else {
        format!("; did you mean {}?", s.join(", "))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    gpu: Vec<GpuSpec>,
    #[serde(default)]
    link_latency: Vec<LinkLatency>,
}

/// Measured latency of one small all-reduce (a decode step's message) over a kind of link.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkLatency {
    /// `nvlink`, `pcie` or `infinity_fabric`.
    pub link: String,
    /// Microseconds per all-reduce of a few KiB (decode), as measured.
    pub allreduce_us: f64,
    /// Where it was measured.
    pub source: String,
}

/// A GPU catalog TOML that is not well-formed; the message names the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// Not TOML of the catalog's shape.
    #[error("{0}")]
    Toml(String),
    /// An entry breaks a rule (empty or shared names, bad latencies).
    #[error("{0}")]
    Entry(String),
}

/// The parsed catalog with its name index.
#[derive(Debug)]
pub struct Catalog {
    gpus: Vec<GpuSpec>,
    link_latency: Vec<LinkLatency>,
    /// normalized name or alias -> entry indices (more than one only when the catalog is wrong).
    keys: BTreeMap<String, Vec<usize>>,
}

impl Catalog {
    /// Parses a catalog TOML (the embedded one via [`catalog`]); checks it is well-formed.
    pub fn parse(text: &str) -> Result<Catalog, CatalogError> {
        let file: CatalogFile =
            toml::from_str(text).map_err(|e| CatalogError::Toml(e.to_string()))?;
        let mut keys: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, g) in file.gpus_iter() {
            for n in std::iter::once(&g.name).chain(g.aliases.iter()) {
                let k = normalize(n);
                if k.is_empty() {
                    return Err(CatalogError::Entry(format!(
                        "{}: empty name or alias {n:?}",
                        g.name
                    )));
                }
                let v = keys.entry(k).or_default();
                if !v.contains(&i) {
                    v.push(i);
                }
            }
        }
        if let Some((k, v)) = keys.iter().find(|(_, v)| v.len() > 1) {
            let names: Vec<&str> = v
                .iter()
                .filter_map(|&i| file.gpu.get(i))
                .map(|g| g.name.as_str())
                .collect();
            return Err(CatalogError::Entry(format!(
                "name {k:?} is given to several GPUs: {}",
                names.join(", ")
            )));
        }
        for l in &file.link_latency {
            if !(l.allreduce_us.is_finite() && l.allreduce_us > 0.0) {
                return Err(CatalogError::Entry(format!(
                    "link_latency {}: allreduce_us must be > 0",
                    l.link
                )));
            }
        }
        Ok(Catalog {
            gpus: file.gpu,
            link_latency: file.link_latency,
            keys,
        })
    }

    pub fn all(&self) -> &[GpuSpec] {
        &self.gpus
    }

    /// Measured small all-reduce latency over `link` (`nvlink`, `pcie`, `infinity_fabric`).
    pub fn link_latency(&self, link: &str) -> Option<&LinkLatency> {
        self.link_latency.iter().find(|l| l.link == link)
    }

    /// Resolves a name (see the module documentation for the rules).
    pub fn lookup(&self, query: &str) -> Result<&GpuSpec, GpuLookupError> {
        let key = normalize(query);
        if key.is_empty() {
            return Err(GpuLookupError::Unknown {
                query: query.to_string(),
                suggestions: Vec::new(),
            });
        }
        if let Some(v) = self.keys.get(&key) {
            return self.one(query, v.clone());
        }
        // A trailing memory size ("80gb", "24g") narrows a prefix match.
        let (stem, mem) = split_memory_suffix(&key);
        let mut hits = self.prefix_hits(stem);
        if let Some(gb) = mem {
            hits.retain(|&i| {
                self.gpus
                    .get(i)
                    .is_some_and(|g| (g.memory_gb - gb).abs() < 0.5)
            });
        }
        if hits.is_empty() {
            return Err(GpuLookupError::Unknown {
                query: query.to_string(),
                suggestions: self.suggestions(&key),
            });
        }
        self.one(query, hits)
    }

    fn one(&self, query: &str, mut hits: Vec<usize>) -> Result<&GpuSpec, GpuLookupError> {
        hits.sort_unstable();
        hits.dedup();
        if let [i] = hits.as_slice()
            && let Some(g) = self.gpus.get(*i)
        {
            return Ok(g);
        }
        Err(GpuLookupError::Ambiguous {
            query: query.to_string(),
            candidates: hits
                .iter()
                .filter_map(|&i| self.gpus.get(i))
                .map(|g| g.name.clone())
                .collect(),
        })
    }

    fn prefix_hits(&self, stem: &str) -> Vec<usize> {
        if stem.is_empty() {
            return Vec::new();
        }
        let mut out: Vec<usize> = self
            .keys
            .range(stem.to_string()..)
            .take_while(|(k, _)| k.starts_with(stem))
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    fn suggestions(&self, key: &str) -> Vec<String> {
        // Entries one of whose names contains the query, or is contained in it.
        let mut out: Vec<usize> = self
            .keys
            .iter()
            .filter(|(k, _)| key.len() >= 2 && (k.contains(key) || key.contains(k.as_str())))
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        out.sort_unstable();
        out.dedup();
        out.into_iter()
            .take(6)
            .filter_map(|i| self.gpus.get(i))
            .map(|g| g.name.clone())
            .collect()
    }

    /// The entry with this PCI device id (under its vendor's id).
    pub fn by_pci_id(&self, vendor_id: u16, device_id: u16) -> Option<&GpuSpec> {
        self.gpus.iter().find(|g| {
            g.vendor.pci_vendor_id() == vendor_id && g.pci_device_ids.contains(&device_id)
        })
    }

    /// The entry with this PCI device id, whichever vendor (ids do not collide in the catalog;
    /// a test checks it).
    pub fn by_pci_device_id(&self, device_id: u16) -> Option<&GpuSpec> {
        self.gpus
            .iter()
            .find(|g| g.pci_device_ids.contains(&device_id))
    }
}

impl CatalogFile {
    fn gpus_iter(&self) -> impl Iterator<Item = (usize, &GpuSpec)> {
        self.gpu.iter().enumerate()
    }
}

/// Lower-cases, keeps letters and digits only, and drops vendor/brand prefixes.
pub fn normalize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    for p in ["nvidia", "amd"] {
        if let Some(rest) = s.strip_prefix(p)
            && !rest.is_empty()
        {
            s = rest.to_string();
        }
    }
    for p in ["tesla", "geforce", "instinct"] {
        if let Some(rest) = s.strip_prefix(p)
            && !rest.is_empty()
        {
            s = rest.to_string();
        }
    }
    s
}

/// Splits `a10080gb` into (`a100`, Some(80.0)); `rtx409024g` into (`rtx4090`, Some(24.0)) only
/// when the digits before `g`/`gb` are separable: the stem must end in a letter or the number
/// must be a known memory size. Without a suffix returns (key, None).
fn split_memory_suffix(key: &str) -> (&str, Option<f64>) {
    let body = key
        .strip_suffix("gb")
        .or_else(|| key.strip_suffix("gib"))
        .or_else(|| key.strip_suffix('g'));
    let Some(body) = body else {
        return (key, None);
    };
    let digits = body.len() - body.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return (key, None);
    }
    // The memory number is at most 3 digits; "a10080" = "a100" + "80": try the longest plausible
    // split that leaves a stem and a memory size in the usual set.
    const SIZES: [u32; 18] = [
        8, 12, 16, 24, 32, 40, 48, 64, 80, 94, 96, 128, 141, 144, 180, 186, 192, 256,
    ];
    for n in (1..=digits.min(3)).rev() {
        let (stem, num) = body.split_at(body.len() - n);
        if stem.is_empty() || num.starts_with('0') {
            continue;
        }
        if let Ok(v) = num.parse::<u32>()
            && SIZES.contains(&v)
        {
            return (stem, Some(f64::from(v)));
        }
    }
    (key, None)
}

static CATALOG: OnceLock<Result<Catalog, CatalogError>> = OnceLock::new();

/// The embedded catalog, parsed once.
pub fn catalog() -> Result<&'static Catalog, GpuLookupError> {
    CATALOG
        .get_or_init(|| Catalog::parse(CATALOG_TOML))
        .as_ref()
        .map_err(|e| GpuLookupError::Catalog(e.to_string()))
}

/// Resolves a GPU name forgivingly; an ambiguous name is an error listing the candidates.
pub fn lookup(name: &str) -> Result<&'static GpuSpec, GpuLookupError> {
    catalog()?.lookup(name)
}

/// The catalog entry for a PCI device id (e.g. a Snapshot's sysfs `device`), any vendor.
pub fn by_pci_device_id(device_id: u16) -> Option<&'static GpuSpec> {
    catalog().ok()?.by_pci_device_id(device_id)
}

/// The catalog entry for a PCI vendor and device id.
pub fn by_pci_id(vendor_id: u16, device_id: u16) -> Option<&'static GpuSpec> {
    catalog().ok()?.by_pci_id(vendor_id, device_id)
}

/// Every catalog entry (for `--find`).
pub fn all() -> Result<&'static [GpuSpec], GpuLookupError> {
    Ok(catalog()?.all())
}

/// An unlisted GPU described only by the total memory PyTorch reports for it
/// (`--gpu-memory-gib N`). Bandwidth, TFLOPS and links are unknown (`None`), so speed bounds
/// for it are unavailable unless the caller fills them in.
pub fn custom(total_gib: f64) -> Result<GpuSpec, GpuLookupError> {
    if !total_gib.is_finite() || !(0.5..=4096.0).contains(&total_gib) {
        return Err(GpuLookupError::BadCustomMemory(total_gib));
    }
    Ok(GpuSpec {
        name: format!("custom GPU ({total_gib} GiB)"),
        aliases: Vec::new(),
        vendor: Vendor::Nvidia,
        pci_device_ids: Vec::new(),
        memory_gb: total_gib,
        memory_type: None,
        torch_total_gib: total_gib,
        torch_total_basis: String::from("given: --gpu-memory-gib"),
        nvidia_smi_total_mib: None,
        memory_bandwidth_gbps: None,
        fp16_tflops: None,
        fp8_tflops: None,
        int8_tops: None,
        fp4_tflops: None,
        gpu_link_gbps: None,
        gpu_link: None,
        compute_capability: None,
        host_link_gbps: None,
        pcie_gen: None,
        pcie_lanes: None,
        tdp_w: None,
        source: String::from("user-supplied"),
        notes: Some(String::from(
            "described by --gpu-memory-gib only; vendor assumed NVIDIA; bandwidth, TFLOPS and links unknown",
        )),
        unverified: Vec::new(),
        region: None,
    })
}

fn num(v: Option<f64>) -> String {
    match v {
        Some(x) => fmt_num(x),
        None => String::from("—"),
    }
}

fn fmt_num(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn mark(g: &GpuSpec, field: &str, s: String) -> String {
    if g.is_unverified(field) && s != "—" {
        format!("{s}†")
    } else {
        s
    }
}

/// The catalog as a Markdown table (docs/gpus.md embeds it; a test keeps them equal).
/// `†` marks a number not verified against a source; torch GiB is `m` measured or `e` estimated.
pub fn render_markdown_table(gpus: &[GpuSpec]) -> String {
    let mut out = String::new();
    out.push_str("| GPU | vendor | PCI ids | memory GB | torch GiB | BW GB/s | FP16 TFLOPS | FP8 TFLOPS | INT8 TOPS | GPU link GB/s (bidir) | PCIe | TDP W | source |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for g in gpus {
        let ids: Vec<String> = g
            .pci_device_ids
            .iter()
            .map(|i| format!("{i:#06x}"))
            .collect();
        let torch = format!(
            "{} {}",
            fmt_num(g.torch_total_gib),
            if g.torch_total_measured() { "m" } else { "e" }
        );
        let link = match (&g.gpu_link_gbps, &g.gpu_link) {
            (Some(b), Some(k)) => format!("{} ({k})", mark(g, "gpu_link_gbps", fmt_num(*b))),
            (Some(b), None) => mark(g, "gpu_link_gbps", fmt_num(*b)),
            _ => String::from("—"),
        };
        let pcie = match (g.pcie_gen, g.pcie_lanes) {
            (Some(gn), Some(l)) => mark(g, "pcie_gen", format!("Gen{gn} x{l}")),
            _ => String::from("—"),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | [link]({}) |",
            g.name,
            g.vendor.as_str(),
            mark(g, "pci_device_ids", ids.join(" ")),
            mark(g, "memory_gb", fmt_num(g.memory_gb)),
            mark(g, "torch_total_gib", torch),
            mark(g, "memory_bandwidth_gbps", num(g.memory_bandwidth_gbps)),
            mark(g, "fp16_tflops", num(g.fp16_tflops)),
            mark(g, "fp8_tflops", num(g.fp8_tflops)),
            mark(g, "int8_tops", num(g.int8_tops)),
            link,
            pcie,
            mark(g, "tdp_w", num(g.tdp_w)),
            g.source,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat() -> &'static Catalog {
        match catalog() {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn tp_link_from_the_catalog_link() {
        use crate::memory::TpLink;
        let link = |q: &str| lookup(q).map(|g| g.tp_link()).map_err(|e| e.to_string());
        assert_eq!(link("L40S"), Ok(Some(TpLink::Pcie)));
        assert_eq!(link("rtx-4090"), Ok(Some(TpLink::Pcie)));
        assert_eq!(link("h100-sxm"), Ok(Some(TpLink::BoardLink)));
        assert_eq!(link("MI300X"), Ok(Some(TpLink::BoardLink)));
        // a bridge may or may not be fitted
        assert_eq!(link("RTX A6000"), Ok(None));
        assert_eq!(link("H100 NVL"), Ok(None));
    }

    fn name_of(q: &str) -> String {
        match lookup(q) {
            Ok(g) => g.name.clone(),
            Err(e) => format!("ERR {e}"),
        }
    }

    #[test]
    fn catalog_parses_and_covers_the_required_gpus() {
        let required = [
            "T4",
            "V100 SXM2 16GB",
            "V100 SXM2 32GB",
            "V100 PCIe 16GB",
            "V100 PCIe 32GB",
            "A10",
            "A10G",
            "A30",
            "A40",
            "RTX A6000",
            "A100 PCIe 40GB",
            "A100 PCIe 80GB",
            "A100 SXM 40GB",
            "A100 SXM 80GB",
            "A800 SXM 80GB",
            "A800 PCIe 80GB",
            "H100 PCIe",
            "H100 SXM",
            "H100 NVL",
            "H800 SXM",
            "H20",
            "H200 SXM",
            "H200 NVL",
            "GH200 96GB",
            "B200",
            "GB200",
            "L4",
            "L40",
            "L40S",
            "RTX 3090",
            "RTX 4070",
            "RTX 4080",
            "RTX 4090",
            "RTX 5090",
            "RTX 6000 Ada",
            "MI210",
            "MI250X (per GCD)",
            "MI300X",
            "MI325X",
        ];
        for r in required {
            assert!(cat().all().iter().any(|g| g.name == r), "catalog lacks {r}");
        }
    }

    #[test]
    fn every_name_and_alias_resolves_to_its_entry() {
        for g in cat().all() {
            for n in std::iter::once(&g.name).chain(g.aliases.iter()) {
                assert_eq!(name_of(n), g.name, "alias {n:?}");
                // and the forgiving spellings of it
                assert_eq!(name_of(&n.to_uppercase()), g.name, "{n:?} upper");
                assert_eq!(name_of(&n.replace(' ', "_")), g.name, "{n:?} underscores");
                assert_eq!(name_of(&n.replace(' ', "-")), g.name, "{n:?} dashes");
                if !n.starts_with("NVIDIA") && !n.starts_with("AMD") {
                    assert_eq!(
                        name_of(&format!("NVIDIA {n}")),
                        g.name,
                        "{n:?} NVIDIA prefix"
                    );
                }
            }
        }
    }

    #[test]
    fn forgiving_names_from_the_brief_and_fixtures() {
        for (q, want) in [
            ("h100-sxm", "H100 SXM"),
            ("H100 80GB HBM3", "H100 SXM"),
            ("NVIDIA H100 80GB HBM3", "H100 SXM"), // vllm-logs gpu_model, smi-q fixture
            ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"), // smi-q fixture
            ("A100-SXM-80GB", "A100 SXM 80GB"),
            ("Tesla T4", "T4"),
            ("t4", "T4"),
            ("NVIDIA GeForce RTX 4090", "RTX 4090"),
            ("rtx_4090", "RTX 4090"),
            ("RTX 4090 24GB", "RTX 4090"),
            ("NVIDIA L4", "L4"),               // smi-q fixture
            ("NVIDIA RTX A6000", "RTX A6000"), // vllm-logs gpu_model
            ("l40s", "L40S"),
            ("L40", "L40"),
            ("H20", "H20"),
            ("h200", "H200 SXM"),
            ("mi300x", "MI300X"),
            ("AMD Instinct MI300X", "MI300X"),
            ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB"),
            ("v100 sxm2 32gb", "V100 SXM2 32GB"),
            ("h100 nvl", "H100 NVL"),
            ("gh200 144gb", "GH200 144GB"),
        ] {
            assert_eq!(name_of(q), want, "query {q:?}");
        }
    }

    #[test]
    fn ambiguous_names_list_the_candidates() {
        let cases: [(&str, &[&str]); 6] = [
            (
                "a100",
                &[
                    "A100 PCIe 40GB",
                    "A100 PCIe 80GB",
                    "A100 SXM 40GB",
                    "A100 SXM 80GB",
                ],
            ),
            ("A100 80GB", &["A100 PCIe 80GB", "A100 SXM 80GB"]),
            ("h100", &["H100 SXM", "H100 PCIe", "H100 NVL"]),
            (
                "V100",
                &[
                    "V100 SXM2 16GB",
                    "V100 SXM2 32GB",
                    "V100 PCIe 16GB",
                    "V100 PCIe 32GB",
                ],
            ),
            ("gh200", &["GH200 96GB", "GH200 144GB"]),
            ("rtx 40", &["RTX 4070", "RTX 4080", "RTX 4090"]),
        ];
        for (q, want) in cases {
            match lookup(q) {
                Err(GpuLookupError::Ambiguous { candidates, .. }) => {
                    let mut got = candidates.clone();
                    got.sort();
                    let mut w: Vec<String> = want.iter().map(|s| s.to_string()).collect();
                    w.sort();
                    assert_eq!(got, w, "query {q:?}");
                    let msg = lookup(q).err().map(|e| e.to_string()).unwrap_or_default();
                    for c in want {
                        assert!(msg.contains(c), "{msg}");
                    }
                }
                other => panic!("{q:?} should be ambiguous, got {other:?}"),
            }
        }
    }

    #[test]
    fn unknown_names_are_errors_with_suggestions() {
        match lookup("H300") {
            Err(GpuLookupError::Unknown { .. }) => {}
            other => panic!("{other:?}"),
        }
        match lookup("") {
            Err(GpuLookupError::Unknown { .. }) => {}
            other => panic!("{other:?}"),
        }
        match lookup("NVIDIA A100-SXM4-80GB-extra") {
            Err(GpuLookupError::Unknown { suggestions, .. }) => {
                assert!(
                    suggestions.contains(&"A100 SXM 80GB".to_string()),
                    "{suggestions:?}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pci_device_ids_resolve_and_do_not_collide() {
        for (id, want) in [
            (0x2330, "H100 SXM"),
            (0x20b2, "A100 SXM 80GB"),
            (0x2684, "RTX 4090"),
            (0x2b85, "RTX 5090"),
            (0x20f1, "A100 PCIe 40GB"),
            (0x2204, "RTX 3090"),
            (0x27b8, "L4"),
            (0x1eb8, "T4"),
            (0x74a1, "MI300X"),
        ] {
            assert_eq!(
                by_pci_device_id(id).map(|g| g.name.as_str()),
                Some(want),
                "{id:#x}"
            );
        }
        assert_eq!(
            by_pci_id(0x10de, 0x2330).map(|g| g.name.as_str()),
            Some("H100 SXM")
        );
        assert!(by_pci_id(0x1002, 0x2330).is_none());
        assert!(by_pci_device_id(0x0001).is_none());
        let mut seen = BTreeMap::new();
        for g in cat().all() {
            for id in &g.pci_device_ids {
                if let Some(prev) = seen.insert(*id, g.name.clone()) {
                    panic!("device id {id:#x} on both {prev} and {}", g.name);
                }
            }
        }
    }

    #[test]
    fn every_entry_is_sourced_positive_and_consistent() {
        const FIELDS: [&str; 15] = [
            "fp4_tflops",
            "pci_device_ids",
            "memory_gb",
            "torch_total_gib",
            "memory_bandwidth_gbps",
            "fp16_tflops",
            "fp8_tflops",
            "int8_tops",
            "gpu_link_gbps",
            "host_link_gbps",
            "pcie_gen",
            "tdp_w",
            "memory_type",
            "gpu_link",
            "nvidia_smi_total_mib",
        ];
        for g in cat().all() {
            assert!(g.source.starts_with("https://"), "{}: source", g.name);
            assert!(
                g.torch_total_basis.starts_with("measured:")
                    || g.torch_total_basis.starts_with("estimated:"),
                "{}: basis",
                g.name
            );
            assert!(g.memory_gb > 0.0, "{}", g.name);
            assert!(
                g.torch_total_gib > 0.0 && g.torch_total_gib < g.memory_gb,
                "{}: torch-visible {} must be below marketing {}",
                g.name,
                g.torch_total_gib,
                g.memory_gb
            );
            assert!(g.torch_total_bytes() < g.memory_bytes(), "{}", g.name);
            // Every catalog entry knows its bandwidth and FP16 rate (custom GPUs do not).
            assert!(
                g.memory_bandwidth_gbps.is_some_and(|b| b > 0.0),
                "{}",
                g.name
            );
            assert!(g.fp16_tflops.is_some(), "{}", g.name);
            for (f, v) in [
                ("fp16", g.fp16_tflops),
                ("fp8", g.fp8_tflops),
                ("int8", g.int8_tops),
                ("link", g.gpu_link_gbps),
                ("host", g.host_link_gbps),
                ("tdp", g.tdp_w),
            ] {
                if let Some(v) = v {
                    assert!(v.is_finite() && v > 0.0, "{}: {f} = {v}", g.name);
                }
            }
            // FP8 where present is at least the FP16 rate (dense, same accumulate).
            if let (Some(a), Some(b)) = (g.fp16_tflops, g.fp8_tflops) {
                assert!(b >= a, "{}: fp8 < fp16", g.name);
            }
            assert!(
                g.gpu_link_gbps.is_some() == g.gpu_link.is_some(),
                "{}",
                g.name
            );
            assert!(g.pcie_gbps_per_direction().is_some(), "{}: pcie", g.name);
            assert!(!g.pci_device_ids.is_empty(), "{}: pci ids", g.name);
            for f in &g.unverified {
                assert!(
                    FIELDS.contains(&f.as_str()),
                    "{}: unknown field {f}",
                    g.name
                );
            }
            if let Some(mib) = g.nvidia_smi_total_mib {
                let smi_gib = mib as f64 / 1024.0;
                assert!(
                    g.torch_total_gib <= smi_gib && smi_gib <= g.memory_gb,
                    "{}",
                    g.name
                );
            }
        }
    }

    #[test]
    fn custom_gpu_has_unknown_speeds_not_zero() {
        let g = match custom(23.5) {
            Ok(g) => g,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(g.torch_total_gib, 23.5);
        assert_eq!(g.memory_bandwidth_gbps, None);
        assert_eq!(g.fp16_tflops, None);
        assert_eq!(g.gpu_link_gbps, None);
        assert!(custom(0.0).is_err());
        assert!(custom(f64::NAN).is_err());
        assert!(custom(-3.0).is_err());
        assert!(custom(1e9).is_err());
    }

    #[test]
    fn pcie_rates() {
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 0.05);
        assert!(close(pcie_gbps_per_direction(3, 16), 15.75));
        assert!(close(pcie_gbps_per_direction(4, 16), 31.5));
        assert!(close(pcie_gbps_per_direction(5, 16), 63.0));
        assert!(close(pcie_gbps_per_direction(4, 8), 15.75));
        assert_eq!(pcie_gbps_per_direction(9, 16), None);
        assert_eq!(pcie_gbps_per_direction(4, 0), None);
    }

    #[test]
    fn memory_suffix_split() {
        assert_eq!(split_memory_suffix("a10080gb"), ("a100", Some(80.0)));
        assert_eq!(split_memory_suffix("rtx409024gb"), ("rtx4090", Some(24.0)));
        assert_eq!(split_memory_suffix("h200141gb"), ("h200", Some(141.0)));
        assert_eq!(split_memory_suffix("l40s"), ("l40s", None));
        assert_eq!(split_memory_suffix("gb"), ("gb", None));
    }

    #[test]
    fn docs_table_matches_the_catalog() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/gpus.md");
        let table = render_markdown_table(cat().all());
        const BEGIN: &str = "<!-- BEGIN GPU TABLE (generated by gpus::tests::docs_table_matches_the_catalog; UPDATE_EXPECTED=1 to rewrite) -->\n";
        const END: &str = "<!-- END GPU TABLE -->";
        let doc = std::fs::read_to_string(path).unwrap_or_default();
        let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
            panic!("docs/gpus.md lacks the table markers");
        };
        let current = &doc[b + BEGIN.len()..e];
        if current != table {
            if std::env::var_os("UPDATE_EXPECTED").is_some() {
                let new = format!("{}{}{}{}", &doc[..b], BEGIN, table, &doc[e..]);
                if let Err(err) = std::fs::write(path, new) {
                    panic!("writing {path}: {err}");
                }
            } else {
                panic!(
                    "docs/gpus.md table is stale; rerun with UPDATE_EXPECTED=1\n--- expected ---\n{table}"
                );
            }
        }
    }
}
