//! What the `nvidia-smi -q` text importer and the `nvidia-smi -q -x` XML importer share.
//!
//! Both formats are the same report in two spellings: a tree of named sections whose leaves
//! are strings such as `81559 MiB`, `72.50 W`, `Enabled` or `N/A`. Each importer turns its
//! input into a [`Node`] tree (the text one from indentation, the XML one from elements) and
//! hands the GPU sections to [`Ctx::gpu_details`], which reads every field by *path*. A path
//! is a list of alternatives, because NVIDIA renamed sections across drivers ("Clocks
//! Throttle Reasons" became "Clocks Event Reasons", "Power Readings" became "GPU Power
//! Readings", "Power Draw" became "Average Power Draw" and "Instantaneous Power Draw"), and
//! each call names the text spelling and the XML spelling side by side.
//!
//! Value rules, the same for both formats:
//! - a field the input does not carry is `not_captured`, naming the path(s) looked for;
//! - `N/A`, `Not Supported`, `[N/A]`, `[Not Supported]`, `Not available ...` are
//!   `not_supported`, `[Insufficient Permissions]` is `permission_denied` and
//!   `[Unknown Error]` is `not_reported`, each with the path and the printed text as detail;
//!   a section printed as `N/A` makes every field under it `not_supported`;
//! - anything else that does not parse is a [`ParseError`] at the offending character, never
//!   a zero and never a silently dropped field.
//!
//! Nodes carry byte offsets, not line numbers: positions are computed only when an error is
//! built, so an input of many long lines costs linear time.

use crate::ParseError;
use inferscope_host::{
    Bar1Memory, Clocks, EccState, GpuDetails, GpuMemory, GpuPcie, GpuProcess, GpuUuid,
    MemoryRepair, MigInstance, MigState, NvmlIndex, PendingMode, Reading, UnknownReason,
};

/// Inputs larger than this are refused before parsing (the snapshot file limit).
pub(crate) const MAX_INPUT_BYTES: usize = 64 * 1024 * 1024;

/// Deepest section nesting accepted (real reports nest 5 levels).
pub(crate) const MAX_DEPTH: usize = 64;

/// One section or field of a report.
#[derive(Debug, Default)]
pub(crate) struct Node {
    /// Field or section name as printed (`FB Memory Usage`, `fb_memory_usage`).
    pub(crate) key: String,
    /// Trimmed value; `None` for a bare section header or an element with no text.
    pub(crate) value: Option<String>,
    /// Byte offset of the value in the input (of the key when there is no value).
    pub(crate) at: usize,
    /// Nested fields, in input order.
    pub(crate) children: Vec<Node>,
}

impl Node {
    /// First child whose key matches, ignoring ASCII case (old drivers print
    /// "Replays since reset", new ones "Replays Since Reset").
    pub(crate) fn child(&self, key: &str) -> Option<&Node> {
        self.children
            .iter()
            .find(|c| c.key.eq_ignore_ascii_case(key))
    }
}

/// Which spelling of the report a tree came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `nvidia-smi -q`.
    Text,
    /// `nvidia-smi -q -x`.
    Xml,
}

/// A path of keys from a GPU section (or from the report root).
type Path = &'static [&'static str];
/// Alternative paths, tried in order.
type Alts = &'static [Path];

/// Why a value does not say anything, from how `nvidia-smi` prints a failed NVML call.
pub(crate) fn unknown_reason(value: &str) -> Option<UnknownReason> {
    let t = value
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim()
        .to_ascii_lowercase();
    if t == "n/a" || t.starts_with("not supported") || t.starts_with("not available") {
        Some(UnknownReason::NotSupported)
    } else if t == "insufficient permissions" || t == "no permission" {
        Some(UnknownReason::PermissionDenied)
    } else if t == "unknown error" {
        Some(UnknownReason::NotReported)
    } else {
        None
    }
}

/// 1-based line and character column of byte offset `at` in `src` (clamped).
pub(crate) fn locate(src: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(src.len());
    while at > 0 && !src.is_char_boundary(at) {
        at -= 1;
    }
    let before = src.get(..at).unwrap_or("");
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before.get(line_start..).unwrap_or("").chars().count() + 1;
    (line, col)
}

/// Builds a [`ParseError`] at byte offset `at` of `src`.
pub(crate) fn error_at(src: &str, at: usize, expected: &str, found: &str) -> ParseError {
    let (line, column) = locate(src, at);
    ParseError::new(line, column, expected, found)
}

/// `snake_case` of a printed name: lowercase, runs of other characters become one `_`.
pub(crate) fn snake_case(s: &str) -> String {
    let mut out = String::new();
    let mut pending_sep = false;
    for c in s.trim().chars() {
        if c.is_ascii_alphanumeric() {
            if pending_sep && !out.is_empty() {
                out.push('_');
            }
            pending_sep = false;
            out.push(c.to_ascii_lowercase());
        } else {
            pending_sep = true;
        }
    }
    out
}

// ---- value converters: Ok, or Err(byte offset of the problem within the value) ----

/// Accumulates ASCII digits; `Err` at the first non-digit, or at 0 on overflow / no digits.
fn digits(s: &str) -> Result<u64, usize> {
    if s.is_empty() {
        return Err(0);
    }
    let mut v: u64 = 0;
    for (i, c) in s.char_indices() {
        let d = c.to_digit(10).ok_or(i)?;
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(0usize)?;
    }
    Ok(v)
}

fn narrow<T: TryFrom<u64>>(v: u64) -> Result<T, usize> {
    T::try_from(v).map_err(|_| 0)
}

/// Splits `12 MiB` into (`12`, offset of unit, `MiB`); the unit may be empty.
fn number_and_unit(s: &str) -> (&str, usize, &str) {
    let end = s.find(char::is_whitespace).unwrap_or(s.len());
    let num = s.get(..end).unwrap_or("");
    let rest = s.get(end..).unwrap_or("");
    let unit = rest.trim_start();
    (num, s.len() - unit.len(), unit.trim_end())
}

/// A number followed by one of `units` (each with its multiplier).
fn scaled<T: TryFrom<u64>>(s: &str, units: &[(&str, u64)]) -> Result<T, usize> {
    let (num, unit_at, unit) = number_and_unit(s);
    let n = digits(num)?;
    let factor = units
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit))
        .map(|(_, f)| *f)
        .ok_or(unit_at)?;
    narrow(n.checked_mul(factor).ok_or(0usize)?)
}

pub(crate) fn bytes(s: &str) -> Result<u64, usize> {
    scaled(
        s,
        &[
            ("B", 1),
            ("KiB", 1 << 10),
            ("MiB", 1 << 20),
            ("GiB", 1 << 30),
            ("TiB", 1 << 40),
        ],
    )
}

pub(crate) fn plain_u64(s: &str) -> Result<u64, usize> {
    digits(s)
}

pub(crate) fn plain_u32(s: &str) -> Result<u32, usize> {
    digits(s).and_then(narrow)
}

fn mhz(s: &str) -> Result<u32, usize> {
    scaled(s, &[("MHz", 1)])
}

fn celsius(s: &str) -> Result<u32, usize> {
    scaled(s, &[("C", 1)])
}

fn kbytes_per_s(s: &str) -> Result<u32, usize> {
    scaled(s, &[("KB/s", 1)])
}

/// `16x` (also `x16`, `16`).
fn lanes(s: &str) -> Result<u32, usize> {
    if let Some(n) = s.strip_suffix(['x', 'X']) {
        plain_u32(n)
    } else if let Some(n) = s.strip_prefix(['x', 'X']) {
        plain_u32(n).map_err(|i| i + 1)
    } else {
        plain_u32(s)
    }
}

/// `72.50 W` → 72500 (milliwatts; at most three decimals, which is NVML's resolution).
fn milliwatts(s: &str) -> Result<u32, usize> {
    let (num, unit_at, unit) = number_and_unit(s);
    if !unit.eq_ignore_ascii_case("W") {
        return Err(unit_at);
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let whole = digits(int)?;
    let frac_start = int.len() + 1;
    if frac.len() > 3 {
        return Err(frac_start + 3);
    }
    let mut milli: u64 = 0;
    for (i, c) in frac.char_indices() {
        milli = milli * 10 + u64::from(c.to_digit(10).ok_or(frac_start + i)?);
    }
    for _ in frac.len()..3 {
        milli *= 10;
    }
    narrow(
        whole
            .checked_mul(1000)
            .and_then(|w| w.checked_add(milli))
            .ok_or(0usize)?,
    )
}

/// `Enabled`/`Disabled`, `Yes`/`No`.
fn flag(s: &str) -> Result<bool, usize> {
    match s.to_ascii_lowercase().as_str() {
        "enabled" | "yes" | "on" | "true" => Ok(true),
        "disabled" | "no" | "off" | "false" => Ok(false),
        _ => Err(0),
    }
}

fn text(s: &str) -> Result<String, usize> {
    Ok(s.to_owned())
}

/// Result of looking a path up.
enum Found<'n> {
    /// The node, and its path as printed.
    Node(&'n Node, String),
    /// None of the alternatives is there; the detail names them.
    Absent(String),
}

/// Takes the known value out of a reading, or makes the enclosing function return the
/// unknown as its own result.
macro_rules! known {
    ($r:expr) => {
        match $r {
            Reading::Value(v) => v,
            Reading::Unknown(u) => return Ok(Reading::Unknown(u)),
        }
    };
}

fn reason_of<T>(r: &Reading<T>) -> Option<UnknownReason> {
    match r {
        Reading::Value(_) => None,
        Reading::Unknown(u) => Some(u.reason),
    }
}

/// Combines `Current`/`Pending` readings into a [`PendingMode`].
fn pending_mode(cur: Reading<bool>, pend: Reading<bool>) -> Reading<PendingMode> {
    match (cur, pend) {
        (Reading::Value(current), Reading::Value(pending)) => {
            Reading::value(PendingMode { current, pending })
        }
        (Reading::Unknown(u), _) | (_, Reading::Unknown(u)) => Reading::Unknown(u),
    }
}

/// Reads fields of one report.
pub(crate) struct Ctx<'s> {
    /// The whole input, for error positions.
    pub(crate) src: &'s str,
    /// Which spelling.
    pub(crate) dialect: Dialect,
}

impl Ctx<'_> {
    fn pick(&self, text: Alts, xml: Alts) -> Alts {
        match self.dialect {
            Dialect::Text => text,
            Dialect::Xml => xml,
        }
    }

    fn tool(&self) -> &'static str {
        match self.dialect {
            Dialect::Text => "nvidia-smi -q",
            Dialect::Xml => "nvidia-smi -q -x",
        }
    }

    fn err(&self, at: usize, expected: &str, found: &str) -> ParseError {
        error_at(self.src, at, expected, found)
    }

    /// The first alternative whose value is usable; else the first present one (printed
    /// `N/A`); else a present prefix printed `N/A` (`<remapped_rows>N/A</remapped_rows>`).
    fn lookup<'n>(&self, base: &'n Node, alts: Alts) -> Found<'n> {
        let mut present: Option<(&'n Node, String)> = None;
        let mut na_prefix: Option<(&'n Node, String)> = None;
        for alt in alts {
            let mut cur = base;
            let mut names: Vec<&str> = Vec::new();
            let mut complete = true;
            for key in alt.iter() {
                match cur.child(key) {
                    Some(c) => {
                        names.push(c.key.as_str());
                        cur = c;
                    }
                    None => {
                        complete = false;
                        break;
                    }
                }
            }
            let na = cur.value.as_deref().and_then(unknown_reason).is_some();
            if complete {
                if !na {
                    return Found::Node(cur, names.join("/"));
                }
                if present.is_none() {
                    present = Some((cur, names.join("/")));
                }
            } else if na && !names.is_empty() && na_prefix.is_none() {
                na_prefix = Some((cur, names.join("/")));
            }
        }
        match present.or(na_prefix) {
            Some((n, p)) => Found::Node(n, p),
            None => Found::Absent(format!(
                "{} not in input",
                alts.iter()
                    .map(|p| p.join("/"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )),
        }
    }

    /// Converts a found node's value.
    fn convert<T>(
        &self,
        n: &Node,
        path: &str,
        expected: &str,
        conv: fn(&str) -> Result<T, usize>,
    ) -> Result<Reading<T>, ParseError> {
        let Some(v) = n.value.as_deref() else {
            let found = if n.children.is_empty() {
                "nothing"
            } else {
                "a section"
            };
            return Err(self.err(n.at, &format!("{expected} for {path}"), found));
        };
        if let Some(reason) = unknown_reason(v) {
            return Ok(Reading::unknown(reason, format!("{path}: {v}")));
        }
        match conv(v) {
            Ok(t) => Ok(Reading::value(t)),
            Err(off) => Err(self.err(
                n.at + off.min(v.len()),
                &format!("{expected} for {path}"),
                v,
            )),
        }
    }

    /// Reads the field at `alts` under `base`.
    fn read<T>(
        &self,
        base: &Node,
        alts: Alts,
        expected: &str,
        conv: fn(&str) -> Result<T, usize>,
    ) -> Result<Reading<T>, ParseError> {
        match self.lookup(base, alts) {
            Found::Absent(d) => Ok(Reading::unknown(UnknownReason::NotCaptured, d)),
            Found::Node(n, path) => self.convert(n, &path, expected, conv),
        }
    }

    /// Driver-wide version string (`Driver Version`, `CUDA Version`).
    pub(crate) fn read_string(
        &self,
        base: &Node,
        text: Alts,
        xml: Alts,
    ) -> Result<Reading<String>, ParseError> {
        self.read(base, self.pick(text, xml), "text", self::text)
    }

    /// `Attached GPUs`.
    pub(crate) fn attached_gpus(&self, root: &Node) -> Result<Reading<u32>, ParseError> {
        self.read(
            root,
            self.pick(&[&["Attached GPUs"]], &[&["attached_gpus"]]),
            "a GPU count",
            plain_u32,
        )
    }

    /// Everything one GPU section says. `label` names the GPU in notes.
    pub(crate) fn gpu_details(
        &self,
        g: &Node,
        index: Reading<NvmlIndex>,
        label: &str,
        notes: &mut Vec<String>,
    ) -> Result<GpuDetails, ParseError> {
        let tool = self.tool();
        Ok(GpuDetails {
            index,
            uuid: self
                .read(g, self.pick(&[&["GPU UUID"]], &[&["uuid"]]), "a UUID", text)?
                .map(GpuUuid),
            name: self.read(
                g,
                self.pick(&[&["Product Name"]], &[&["product_name"]]),
                "a name",
                text,
            )?,
            serial: self.read(
                g,
                self.pick(&[&["Serial Number"]], &[&["serial"]]),
                "a serial number",
                text,
            )?,
            memory: self.memory(g)?,
            bar1: self.bar1(g)?,
            persistence_mode: self.read(
                g,
                self.pick(&[&["Persistence Mode"]], &[&["persistence_mode"]]),
                "Enabled or Disabled",
                flag,
            )?,
            compute_mode: self
                .read(
                    g,
                    self.pick(&[&["Compute Mode"]], &[&["compute_mode"]]),
                    "a compute mode",
                    text,
                )?
                .map(|m| snake_case(&m)),
            mig: self.mig(g)?,
            ecc: self.ecc(g)?,
            memory_repair: self.memory_repair(g)?,
            clocks: self.clocks(g)?,
            temperature_c: self.read(
                g,
                self.pick(
                    &[&["Temperature", "GPU Current Temp"]],
                    &[&["temperature", "gpu_temp"]],
                ),
                "a temperature such as 33 C",
                celsius,
            )?,
            power_draw_mw: self.read(
                g,
                self.pick(
                    &[
                        &["GPU Power Readings", "Power Draw"],
                        &["GPU Power Readings", "Average Power Draw"],
                        &["GPU Power Readings", "Instantaneous Power Draw"],
                        &["Power Readings", "Power Draw"],
                        &["Power Readings", "Average Power Draw"],
                        &["Power Readings", "Instantaneous Power Draw"],
                    ],
                    &[
                        &["gpu_power_readings", "power_draw"],
                        &["gpu_power_readings", "average_power_draw"],
                        &["gpu_power_readings", "instant_power_draw"],
                        &["power_readings", "power_draw"],
                        &["power_readings", "average_power_draw"],
                        &["power_readings", "instant_power_draw"],
                    ],
                ),
                "a power such as 72.50 W",
                milliwatts,
            )?,
            power_limit_mw: self.read(
                g,
                self.pick(
                    &[
                        &["GPU Power Readings", "Current Power Limit"],
                        &["GPU Power Readings", "Enforced Power Limit"],
                        &["Power Readings", "Current Power Limit"],
                        &["Power Readings", "Enforced Power Limit"],
                        &["GPU Power Readings", "Power Limit"],
                        &["Power Readings", "Power Limit"],
                    ],
                    &[
                        &["gpu_power_readings", "current_power_limit"],
                        &["gpu_power_readings", "enforced_power_limit"],
                        &["power_readings", "current_power_limit"],
                        &["power_readings", "enforced_power_limit"],
                        &["gpu_power_readings", "power_limit"],
                        &["power_readings", "power_limit"],
                    ],
                ),
                "a power such as 72.50 W",
                milliwatts,
            )?,
            pcie: self.pcie(g)?,
            nvlinks: Reading::unknown(
                UnknownReason::NotCaptured,
                format!("{tool} does not print NVLink state (nvidia-smi nvlink -s does)"),
            ),
            cpu_affinity: Reading::unknown(
                UnknownReason::NotCaptured,
                format!("{tool} does not print CPU affinity (nvidia-smi topo -m does)"),
            ),
            memory_affinity: Reading::unknown(
                UnknownReason::NotCaptured,
                format!("{tool} does not print NUMA affinity (nvidia-smi topo -m does)"),
            ),
            gpu_numa_node: Reading::unknown(
                UnknownReason::NotCaptured,
                format!("{tool} does not print the GPU NUMA ID (nvidia-smi topo -m does)"),
            ),
            processes: self.processes(g, label, notes)?,
        })
    }

    fn memory(&self, g: &Node) -> Result<Reading<GpuMemory>, ParseError> {
        const SIZE: &str = "a size such as 81559 MiB";
        // Paths must be 'static (they are kept for error messages), so a macro, not a closure.
        macro_rules! field {
            ($text:literal, $xml:literal) => {
                self.read(
                    g,
                    self.pick(
                        &[&["FB Memory Usage", $text]],
                        &[&["fb_memory_usage", $xml]],
                    ),
                    SIZE,
                    bytes,
                )
            };
        }
        let total = field!("Total", "total")?;
        let used = field!("Used", "used")?;
        let free = field!("Free", "free")?;
        let reserved = field!("Reserved", "reserved")?;
        Ok(Reading::value(GpuMemory {
            total_bytes: known!(total),
            used_bytes: known!(used),
            free_bytes: known!(free),
            reserved_bytes: reserved,
        }))
    }

    fn bar1(&self, g: &Node) -> Result<Reading<Bar1Memory>, ParseError> {
        const SIZE: &str = "a size such as 256 MiB";
        let total = self.read(
            g,
            self.pick(
                &[&["BAR1 Memory Usage", "Total"]],
                &[&["bar1_memory_usage", "total"]],
            ),
            SIZE,
            bytes,
        )?;
        let used = self.read(
            g,
            self.pick(
                &[&["BAR1 Memory Usage", "Used"]],
                &[&["bar1_memory_usage", "used"]],
            ),
            SIZE,
            bytes,
        )?;
        Ok(Reading::value(Bar1Memory {
            total_bytes: known!(total),
            used_bytes: known!(used),
        }))
    }

    fn mig(&self, g: &Node) -> Result<Reading<MigState>, ParseError> {
        let cur = self.read(
            g,
            self.pick(&[&["MIG Mode", "Current"]], &[&["mig_mode", "current_mig"]]),
            "Enabled or Disabled",
            flag,
        )?;
        let pend = self.read(
            g,
            self.pick(&[&["MIG Mode", "Pending"]], &[&["mig_mode", "pending_mig"]]),
            "Enabled or Disabled",
            flag,
        )?;
        let instances = self.mig_instances(g)?;
        let mode = known!(pending_mode(cur, pend));
        Ok(Reading::value(MigState { mode, instances }))
    }

    /// `MIG Devices` / `<mig_devices>`: one entry per device. `nvidia-smi -q` prints neither
    /// the MIG UUID nor the profile name (`nvidia-smi -L` and `mig -lgi` do).
    fn mig_instances(&self, g: &Node) -> Result<Vec<MigInstance>, ParseError> {
        let (section, device) = match self.dialect {
            Dialect::Text => ("MIG Devices", "MIG Device"),
            Dialect::Xml => ("mig_devices", "mig_device"),
        };
        let Some(sec) = g.child(section) else {
            return Ok(Vec::new());
        };
        let tool = self.tool();
        let mut out = Vec::new();
        for d in sec
            .children
            .iter()
            .filter(|c| c.key.eq_ignore_ascii_case(device))
        {
            out.push(MigInstance {
                uuid: Reading::unknown(
                    UnknownReason::NotCaptured,
                    format!("{tool} does not print MIG device UUIDs (nvidia-smi -L does)"),
                ),
                name: Reading::unknown(
                    UnknownReason::NotCaptured,
                    format!("{tool} does not print MIG profile names (nvidia-smi mig -lgi does)"),
                ),
                memory_total_bytes: self.read(
                    d,
                    self.pick(
                        &[&["FB Memory Usage", "Total"]],
                        &[&["fb_memory_usage", "total"]],
                    ),
                    "a size such as 9984 MiB",
                    bytes,
                )?,
            });
        }
        Ok(out)
    }

    fn ecc(&self, g: &Node) -> Result<Reading<EccState>, ParseError> {
        let cur = self.read(
            g,
            self.pick(&[&["ECC Mode", "Current"]], &[&["ecc_mode", "current_ecc"]]),
            "Enabled or Disabled",
            flag,
        )?;
        let pend = self.read(
            g,
            self.pick(&[&["ECC Mode", "Pending"]], &[&["ecc_mode", "pending_ecc"]]),
            "Enabled or Disabled",
            flag,
        )?;
        let mode = pending_mode(cur, pend);
        let volatile = self.uncorrected(
            g,
            self.pick(
                &[&["ECC Errors", "Volatile"]],
                &[&["ecc_errors", "volatile"]],
            ),
        )?;
        let aggregate = self.uncorrected(
            g,
            self.pick(
                &[&["ECC Errors", "Aggregate"]],
                &[&["ecc_errors", "aggregate"]],
            ),
        )?;
        let counters_known = volatile.is_known() || aggregate.is_known();
        let counters_absent = reason_of(&volatile) == Some(UnknownReason::NotCaptured)
            && reason_of(&aggregate) == Some(UnknownReason::NotCaptured);
        if let Reading::Unknown(u) = &mode {
            // ECC mode N/A: the GPU has no ECC (its counters say N/A too); the whole ECC
            // reading says so rather than a structure of unknowns.
            if (u.reason == UnknownReason::NotSupported && !counters_known)
                || (u.reason == UnknownReason::NotCaptured && counters_absent)
            {
                return Ok(Reading::Unknown(u.clone()));
            }
        }
        Ok(Reading::value(EccState {
            mode,
            volatile_uncorrected: volatile,
            aggregate_uncorrected: aggregate,
        }))
    }

    /// Sum of the uncorrectable counters of an `ECC Errors` subsection: `SRAM Uncorrectable`
    /// (split into `Parity` and `SEC-DED` by newer drivers) plus `DRAM Uncorrectable`, or the
    /// `Double Bit / Total` of old drivers.
    fn uncorrected(&self, g: &Node, alts: Alts) -> Result<Reading<u64>, ParseError> {
        let (sec, path) = match self.lookup(g, alts) {
            Found::Absent(d) => return Ok(Reading::unknown(UnknownReason::NotCaptured, d)),
            Found::Node(n, p) => (n, p),
        };
        if let Some(v) = sec.value.as_deref()
            && let Some(reason) = unknown_reason(v)
        {
            return Ok(Reading::unknown(reason, format!("{path}: {v}")));
        }
        let mut counters: Vec<(&Node, String)> = Vec::new();
        for c in &sec.children {
            let k = c.key.to_ascii_lowercase();
            if k.contains("uncorrectable") {
                counters.push((c, format!("{path}/{}", c.key)));
            } else if (k == "double bit" || k == "double_bit")
                && let Some(t) = c.child("total")
            {
                counters.push((t, format!("{path}/{}/{}", c.key, t.key)));
            }
        }
        if counters.is_empty() {
            return Ok(Reading::unknown(
                UnknownReason::NotCaptured,
                format!("{path} lists no uncorrectable counters"),
            ));
        }
        let mut sum: u64 = 0;
        let mut first_unknown = None;
        for (n, p) in &counters {
            match self.convert(n, p, "an error count", plain_u64)? {
                Reading::Value(v) => {
                    sum = sum.checked_add(v).ok_or_else(|| {
                        self.err(n.at, "error counts whose sum fits in 64 bits", p)
                    })?;
                }
                Reading::Unknown(u) => {
                    first_unknown.get_or_insert(u);
                }
            }
        }
        Ok(match first_unknown {
            Some(u) => Reading::Unknown(u),
            None => Reading::value(sum),
        })
    }

    fn memory_repair(&self, g: &Node) -> Result<Reading<MemoryRepair>, ParseError> {
        const COUNT: &str = "a count";
        const YES_NO: &str = "Yes or No";
        let r = MemoryRepair {
            retired_pages_single_bit: self.read(
                g,
                self.pick(
                    &[&["Retired Pages", "Single Bit ECC"]],
                    &[&[
                        "retired_pages",
                        "multiple_single_bit_retirement",
                        "retired_count",
                    ]],
                ),
                COUNT,
                plain_u64,
            )?,
            retired_pages_double_bit: self.read(
                g,
                self.pick(
                    &[&["Retired Pages", "Double Bit ECC"]],
                    &[&["retired_pages", "double_bit_retirement", "retired_count"]],
                ),
                COUNT,
                plain_u64,
            )?,
            retirement_pending: self.read(
                g,
                self.pick(
                    &[
                        &["Retired Pages", "Pending Page Blacklist"],
                        &["Retired Pages", "Pending"],
                    ],
                    &[
                        &["retired_pages", "pending_retirement"],
                        &["retired_pages", "pending_blacklist"],
                    ],
                ),
                YES_NO,
                flag,
            )?,
            remapped_rows_correctable: self.read(
                g,
                self.pick(
                    &[&["Remapped Rows", "Correctable Error"]],
                    &[&["remapped_rows", "remapped_row_corr"]],
                ),
                COUNT,
                plain_u64,
            )?,
            remapped_rows_uncorrectable: self.read(
                g,
                self.pick(
                    &[&["Remapped Rows", "Uncorrectable Error"]],
                    &[&["remapped_rows", "remapped_row_unc"]],
                ),
                COUNT,
                plain_u64,
            )?,
            remap_pending: self.read(
                g,
                self.pick(
                    &[&["Remapped Rows", "Pending"]],
                    &[&["remapped_rows", "remapped_row_pending"]],
                ),
                YES_NO,
                flag,
            )?,
            remap_failure: self.read(
                g,
                self.pick(
                    &[&["Remapped Rows", "Remapping Failure Occurred"]],
                    &[&["remapped_rows", "remapped_row_failure"]],
                ),
                YES_NO,
                flag,
            )?,
        };
        Ok(self.section(
            &[
                reason_of(&r.retired_pages_single_bit),
                reason_of(&r.retired_pages_double_bit),
                reason_of(&r.retirement_pending),
                reason_of(&r.remapped_rows_correctable),
                reason_of(&r.remapped_rows_uncorrectable),
                reason_of(&r.remap_pending),
                reason_of(&r.remap_failure),
            ],
            r,
            "Retired Pages and Remapped Rows not in input",
            "retired_pages and remapped_rows not in input",
        ))
    }

    /// A section whose every field is absent from the input is itself `not_captured` (with the
    /// section's name in this dialect), not a struct full of unknowns.
    fn section<T>(
        &self,
        reasons: &[Option<UnknownReason>],
        value: T,
        text_name: &str,
        xml_name: &str,
    ) -> Reading<T> {
        if reasons
            .iter()
            .all(|x| *x == Some(UnknownReason::NotCaptured))
        {
            Reading::unknown(
                UnknownReason::NotCaptured,
                match self.dialect {
                    Dialect::Text => text_name,
                    Dialect::Xml => xml_name,
                },
            )
        } else {
            Reading::value(value)
        }
    }

    fn clocks(&self, g: &Node) -> Result<Reading<Clocks>, ParseError> {
        const MHZ: &str = "a clock such as 1980 MHz";
        let c = Clocks {
            sm_mhz: self.read(
                g,
                self.pick(&[&["Clocks", "SM"]], &[&["clocks", "sm_clock"]]),
                MHZ,
                mhz,
            )?,
            memory_mhz: self.read(
                g,
                self.pick(&[&["Clocks", "Memory"]], &[&["clocks", "mem_clock"]]),
                MHZ,
                mhz,
            )?,
            sm_max_mhz: self.read(
                g,
                self.pick(&[&["Max Clocks", "SM"]], &[&["max_clocks", "sm_clock"]]),
                MHZ,
                mhz,
            )?,
            memory_max_mhz: self.read(
                g,
                self.pick(
                    &[&["Max Clocks", "Memory"]],
                    &[&["max_clocks", "mem_clock"]],
                ),
                MHZ,
                mhz,
            )?,
            event_reasons: self.event_reasons(g)?,
        };
        Ok(self.section(
            &[
                reason_of(&c.sm_mhz),
                reason_of(&c.memory_mhz),
                reason_of(&c.sm_max_mhz),
                reason_of(&c.memory_max_mhz),
                reason_of(&c.event_reasons),
            ],
            c,
            "Clocks, Max Clocks and Clocks Event Reasons not in input",
            "clocks, max_clocks and clocks_event_reasons not in input",
        ))
    }

    /// Reasons printed `Active`, as NVML-style snake_case names (`gpu_idle`, `sw_power_cap`).
    fn event_reasons(&self, g: &Node) -> Result<Reading<Vec<String>>, ParseError> {
        let alts = self.pick(
            &[&["Clocks Event Reasons"], &["Clocks Throttle Reasons"]],
            &[&["clocks_event_reasons"], &["clocks_throttle_reasons"]],
        );
        let (sec, path) = match self.lookup(g, alts) {
            Found::Absent(d) => return Ok(Reading::unknown(UnknownReason::NotCaptured, d)),
            Found::Node(n, p) => (n, p),
        };
        if let Some(v) = sec.value.as_deref()
            && let Some(reason) = unknown_reason(v)
        {
            return Ok(Reading::unknown(reason, format!("{path}: {v}")));
        }
        // Text nests "HW Thermal Slowdown" under "HW Slowdown": walk the whole section.
        let mut leaves: Vec<&Node> = Vec::new();
        let mut stack: Vec<&Node> = sec.children.iter().rev().collect();
        while let Some(n) = stack.pop() {
            if n.value.is_some() {
                leaves.push(n);
            }
            stack.extend(n.children.iter().rev());
        }
        let mut active = Vec::new();
        let mut answered = false;
        let mut first_unknown = None;
        for n in leaves {
            let v = n.value.as_deref().unwrap_or("");
            if let Some(reason) = unknown_reason(v) {
                first_unknown.get_or_insert((reason, format!("{path}/{}: {v}", n.key)));
                continue;
            }
            match v.to_ascii_lowercase().as_str() {
                "active" => active.push(self.reason_name(&n.key)),
                "not active" => {}
                _ => {
                    return Err(self.err(
                        n.at,
                        &format!("Active or Not Active for {path}/{}", n.key),
                        v,
                    ));
                }
            }
            answered = true;
        }
        if !answered {
            return Ok(match first_unknown {
                Some((reason, detail)) => Reading::unknown(reason, detail),
                None => Reading::unknown(
                    UnknownReason::NotCaptured,
                    format!("{path} lists no reasons"),
                ),
            });
        }
        Ok(Reading::value(active))
    }

    fn reason_name(&self, key: &str) -> String {
        match self.dialect {
            Dialect::Xml => {
                let k = key.to_ascii_lowercase();
                let short = k
                    .strip_prefix("clocks_event_reason_")
                    .or_else(|| k.strip_prefix("clocks_throttle_reason_"))
                    .unwrap_or(&k);
                snake_case(short)
            }
            Dialect::Text => {
                // The text names differ from NVML's (and the XML's) in two places.
                match key.trim().to_ascii_lowercase().as_str() {
                    "idle" | "gpu idle" => "gpu_idle".to_owned(),
                    "display clock setting" => "display_clocks_setting".to_owned(),
                    _ => snake_case(key),
                }
            }
        }
    }

    fn pcie(&self, g: &Node) -> Result<Reading<GpuPcie>, ParseError> {
        const GEN: &str = "a PCIe generation";
        const WIDTH: &str = "a link width such as 16x";
        const KBS: &str = "a throughput such as 0 KB/s";
        let p = GpuPcie {
            gen_current: self.read(
                g,
                self.pick(
                    &[&["PCI", "GPU Link Info", "PCIe Generation", "Current"]],
                    &[&["pci", "pci_gpu_link_info", "pcie_gen", "current_link_gen"]],
                ),
                GEN,
                plain_u32,
            )?,
            gen_max: self.read(
                g,
                self.pick(
                    &[&["PCI", "GPU Link Info", "PCIe Generation", "Max"]],
                    &[&["pci", "pci_gpu_link_info", "pcie_gen", "max_link_gen"]],
                ),
                GEN,
                plain_u32,
            )?,
            width_current: self.read(
                g,
                self.pick(
                    &[&["PCI", "GPU Link Info", "Link Width", "Current"]],
                    &[&[
                        "pci",
                        "pci_gpu_link_info",
                        "link_widths",
                        "current_link_width",
                    ]],
                ),
                WIDTH,
                lanes,
            )?,
            width_max: self.read(
                g,
                self.pick(
                    &[&["PCI", "GPU Link Info", "Link Width", "Max"]],
                    &[&["pci", "pci_gpu_link_info", "link_widths", "max_link_width"]],
                ),
                WIDTH,
                lanes,
            )?,
            tx_kbytes_per_s: self.read(
                g,
                self.pick(&[&["PCI", "Tx Throughput"]], &[&["pci", "tx_util"]]),
                KBS,
                kbytes_per_s,
            )?,
            rx_kbytes_per_s: self.read(
                g,
                self.pick(&[&["PCI", "Rx Throughput"]], &[&["pci", "rx_util"]]),
                KBS,
                kbytes_per_s,
            )?,
            replay_counter: self.read(
                g,
                self.pick(
                    &[&["PCI", "Replays Since Reset"]],
                    &[&["pci", "replay_counter"]],
                ),
                "a count",
                plain_u32,
            )?,
        };
        Ok(self.section(
            &[
                reason_of(&p.gen_current),
                reason_of(&p.gen_max),
                reason_of(&p.width_current),
                reason_of(&p.width_max),
                reason_of(&p.tx_kbytes_per_s),
                reason_of(&p.rx_kbytes_per_s),
                reason_of(&p.replay_counter),
            ],
            p,
            "PCI not in input",
            "pci not in input",
        ))
    }

    /// `Processes: None` is a known empty list. Graphics-only (`Type: G`) entries are left
    /// out, since the model lists compute processes; a note counts them.
    fn processes(
        &self,
        g: &Node,
        label: &str,
        notes: &mut Vec<String>,
    ) -> Result<Reading<Vec<GpuProcess>>, ParseError> {
        let (sec, path) = match self.lookup(g, self.pick(&[&["Processes"]], &[&["processes"]])) {
            Found::Absent(d) => return Ok(Reading::unknown(UnknownReason::NotCaptured, d)),
            Found::Node(n, p) => (n, p),
        };
        if let Some(v) = sec.value.as_deref() {
            if let Some(reason) = unknown_reason(v) {
                return Ok(Reading::unknown(reason, format!("{path}: {v}")));
            }
            if !v.eq_ignore_ascii_case("none") || !sec.children.is_empty() {
                return Err(self.err(sec.at, &format!("None or a process list for {path}"), v));
            }
            return Ok(Reading::value(Vec::new()));
        }
        // Entries: the pid node and the nodes describing it.
        let mut entries: Vec<(&Node, Vec<&Node>)> = Vec::new();
        match self.dialect {
            Dialect::Text => {
                // Old drivers nest Type/Name/Used GPU Memory under "Process ID"; newer ones
                // print them as siblings after it, preceded by the MIG instance ids.
                for c in &sec.children {
                    if c.key.eq_ignore_ascii_case("Process ID") {
                        entries.push((c, c.children.iter().collect()));
                    } else if c.key.eq_ignore_ascii_case("GPU instance ID")
                        || c.key.eq_ignore_ascii_case("Compute instance ID")
                    {
                        continue;
                    } else if let Some(last) = entries.last_mut() {
                        last.1.push(c);
                    }
                }
            }
            Dialect::Xml => {
                for c in sec
                    .children
                    .iter()
                    .filter(|c| c.key.eq_ignore_ascii_case("process_info"))
                {
                    let Some(pid) = c.child("pid") else {
                        return Err(self.err(c.at, "a <pid> in <process_info>", "none"));
                    };
                    entries.push((pid, c.children.iter().collect()));
                }
            }
        }
        let (type_key, name_key, mem_key) = match self.dialect {
            Dialect::Text => ("Type", "Name", "Used GPU Memory"),
            Dialect::Xml => ("type", "process_name", "used_memory"),
        };
        let field = |fields: &[&Node], key: &str| -> Option<usize> {
            fields.iter().position(|n| n.key.eq_ignore_ascii_case(key))
        };
        let mut out = Vec::new();
        let mut graphics = 0usize;
        let mut no_pid = 0usize;
        for (pid_node, fields) in entries {
            let pid_path = format!("{path}/{}", pid_node.key);
            let pid = match self.convert(pid_node, &pid_path, "a process id", plain_u32)? {
                Reading::Value(p) => p,
                Reading::Unknown(_) => {
                    no_pid += 1;
                    continue;
                }
            };
            if let Some(i) = field(&fields, type_key)
                && let Some(t) = fields.get(i).and_then(|n| n.value.as_deref())
                && t.trim().eq_ignore_ascii_case("g")
            {
                graphics += 1;
                continue;
            }
            let name = match field(&fields, name_key).and_then(|i| fields.get(i)) {
                Some(n) => {
                    self.convert(n, &format!("{pid_path} {pid}/{}", n.key), "a name", text)?
                }
                None => Reading::unknown(
                    UnknownReason::NotCaptured,
                    format!("{pid_path} {pid}: {name_key} not in input"),
                ),
            };
            let used_memory_bytes = match field(&fields, mem_key).and_then(|i| fields.get(i)) {
                Some(n) => self.convert(
                    n,
                    &format!("{pid_path} {pid}/{}", n.key),
                    "a size such as 1234 MiB",
                    bytes,
                )?,
                None => Reading::unknown(
                    UnknownReason::NotCaptured,
                    format!("{pid_path} {pid}: {mem_key} not in input"),
                ),
            };
            out.push(GpuProcess {
                pid,
                used_memory_bytes,
                name,
            });
        }
        if graphics > 0 {
            notes.push(format!(
                "{label}: left out {graphics} graphics-only process(es) (Type G)"
            ));
        }
        if no_pid > 0 {
            notes.push(format!(
                "{label}: left out {no_pid} process(es) whose process id is not printed"
            ));
        }
        Ok(Reading::value(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(bytes("81559 MiB"), Ok(81559 * 1048576));
        assert_eq!(bytes("80 GiB"), Ok(80 << 30));
        assert_eq!(bytes("lots MiB"), Err(0));
        assert_eq!(bytes("12 parsecs"), Err(3));
        assert_eq!(milliwatts("72.50 W"), Ok(72500));
        assert_eq!(milliwatts("700 W"), Ok(700_000));
        assert_eq!(milliwatts("1.2345 W"), Err(5));
        assert_eq!(milliwatts("1.x W"), Err(2));
        assert_eq!(lanes("16x"), Ok(16));
        assert_eq!(lanes("x8"), Ok(8));
        assert_eq!(mhz("210 MHz"), Ok(210));
        assert_eq!(celsius("33 C"), Ok(33));
        assert_eq!(kbytes_per_s("567 KB/s"), Ok(567));
        assert_eq!(plain_u32("99999999999"), Err(0));
    }

    #[test]
    fn unknown_spellings() {
        for s in ["N/A", "[N/A]", "Not Supported", "[Not Supported]"] {
            assert_eq!(unknown_reason(s), Some(UnknownReason::NotSupported), "{s}");
        }
        assert_eq!(
            unknown_reason("[Insufficient Permissions]"),
            Some(UnknownReason::PermissionDenied)
        );
        assert_eq!(unknown_reason("0"), None);
        assert_eq!(unknown_reason("None"), None);
    }

    #[test]
    fn names() {
        assert_eq!(snake_case("Exclusive_Process"), "exclusive_process");
        assert_eq!(snake_case("Default"), "default");
        assert_eq!(snake_case(" SW Power Cap "), "sw_power_cap");
        assert_eq!(locate("ab\ncdé f", 8), (2, 5));
    }
}
