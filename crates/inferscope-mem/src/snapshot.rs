//! Analysis of a PyTorch memory snapshot: where the reserved memory is, how fragmented the free
//! part is, who allocated it, and what expandable segments would change. Plus an SVG map.

use inferscope_formats::torch_memory_snapshot::{Block, Frame, MemorySnapshot, Segment};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Allocations up to this size come from the small pool (PyTorch's `kSmallSize`).
pub const SMALL_ALLOC: u64 = 1 << 20;
/// Expandable segments map memory in pages of this size (large pool).
pub const EXPANDABLE_PAGE: u64 = 2 << 20;
/// Allocation sites listed.
pub const TOP_SITES: usize = 10;

/// Totals for a set of segments.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PoolStats {
    /// Segments.
    pub segments: usize,
    /// Blocks.
    pub blocks: usize,
    /// Reserved (sum of segment sizes).
    pub reserved_bytes: u64,
    /// In `active_allocated` blocks.
    pub allocated_bytes: u64,
    /// In `active_pending_free` blocks (freed, waiting for a stream).
    pub pending_free_bytes: u64,
    /// In `inactive` blocks.
    pub free_bytes: u64,
    /// Largest `inactive` block.
    pub largest_free_block_bytes: u64,
    /// 1 − largest free / total free (0 when nothing is free).
    pub external_fragmentation: f64,
}

impl PoolStats {
    fn add(&mut self, s: &Segment) {
        self.segments += 1;
        self.reserved_bytes = self.reserved_bytes.saturating_add(s.total_size);
        for b in &s.blocks {
            self.blocks += 1;
            match b.state.as_str() {
                "active_allocated" => {
                    self.allocated_bytes = self.allocated_bytes.saturating_add(b.size)
                }
                "active_pending_free" => {
                    self.pending_free_bytes = self.pending_free_bytes.saturating_add(b.size)
                }
                _ => {
                    self.free_bytes = self.free_bytes.saturating_add(b.size);
                    self.largest_free_block_bytes = self.largest_free_block_bytes.max(b.size);
                }
            }
        }
        self.external_fragmentation = if self.free_bytes == 0 {
            0.0
        } else {
            1.0 - self.largest_free_block_bytes as f64 / self.free_bytes as f64
        };
    }
}

/// One allocation site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Site {
    /// `file:line in function` of the first frame outside PyTorch itself.
    pub site: String,
    /// Live blocks allocated there.
    pub blocks: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// What expandable segments would have changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExpandableEstimate {
    /// Large-pool reserved now.
    pub large_reserved_bytes: u64,
    /// Large-pool reserved with expandable segments: live blocks rounded up to 2 MiB pages.
    pub large_reserved_expandable_bytes: u64,
    /// The difference: cached free pieces that would have been unmapped or merged.
    pub reclaimable_bytes: u64,
    /// For the recorded OOM: would the request have fit in free device memory plus the
    /// reclaimable bytes?
    pub oom_would_fit: Option<bool>,
    /// One sentence.
    pub summary: String,
}

/// A private pool (CUDA Graphs and `torch.cuda.MemPool`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrivatePool {
    /// Pool id as `a,b`.
    pub pool: String,
    /// Totals.
    pub stats: PoolStats,
}

/// The recorded OOM, when the trace has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OomEvent {
    /// Device.
    pub device: usize,
    /// Bytes requested.
    pub size: u64,
    /// Device free memory at the time (`None`: the trace does not say).
    pub device_free: Option<u64>,
}

/// The whole analysis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnapshotAnalysis {
    /// Devices with segments.
    pub devices: Vec<i64>,
    /// Everything.
    pub overall: PoolStats,
    /// Segments of the small pool (allocations ≤ 1 MiB).
    pub small_pool: PoolStats,
    /// Segments of the large pool.
    pub large_pool: PoolStats,
    /// Private pools.
    pub private_pools: Vec<PrivatePool>,
    /// Top allocation sites of live blocks, by bytes.
    pub top_sites: Vec<Site>,
    /// Live blocks without recorded frames (history not enabled).
    pub blocks_without_frames: usize,
    /// Trace events per device.
    pub trace_events: usize,
    /// The last recorded OOM.
    pub oom: Option<OomEvent>,
    /// Expandable segments estimate.
    pub expandable: ExpandableEstimate,
    /// Segments already expandable.
    pub expandable_segments_in_use: usize,
}

fn is_small(s: &Segment) -> bool {
    match s.segment_type.as_str() {
        "small" => true,
        "large" => false,
        _ => s.total_size <= 2 * SMALL_ALLOC && s.blocks.iter().all(|b| b.size <= SMALL_ALLOC),
    }
}

fn site_of(frames: &[Frame]) -> Option<String> {
    let pick = frames
        .iter()
        .find(|f| !f.filename.contains("/torch/") && !f.filename.is_empty())
        .or_else(|| frames.first())?;
    Some(format!("{}:{} in {}", pick.filename, pick.line, pick.name))
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to).saturating_mul(to)
}

/// Analyse a decoded snapshot.
pub fn analyse(snap: &MemorySnapshot) -> SnapshotAnalysis {
    let mut overall = PoolStats::default();
    let mut small = PoolStats::default();
    let mut large = PoolStats::default();
    let mut pools: BTreeMap<(i64, i64), PoolStats> = BTreeMap::new();
    let mut sites: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    let mut no_frames = 0;
    let mut devices: Vec<i64> = Vec::new();
    let mut expandable_live = 0u64;
    let mut expandable_in_use = 0;
    for s in &snap.segments {
        overall.add(s);
        if !devices.contains(&s.device) {
            devices.push(s.device);
        }
        if s.is_expandable {
            expandable_in_use += 1;
        }
        if is_small(s) {
            small.add(s);
        } else {
            large.add(s);
            let live: u64 = s
                .blocks
                .iter()
                .filter(|b| b.state != "inactive")
                .map(|b| b.size)
                .fold(0u64, u64::saturating_add);
            expandable_live = expandable_live.saturating_add(round_up(live, EXPANDABLE_PAGE));
        }
        if let Some(p) = s.segment_pool_id
            && p != (0, 0)
        {
            pools.entry(p).or_default().add(s);
        }
        for b in s
            .blocks
            .iter()
            .filter(|b: &&Block| b.state == "active_allocated")
        {
            match site_of(&b.frames) {
                Some(site) => {
                    let e = sites.entry(site).or_default();
                    e.0 += 1;
                    e.1 = e.1.saturating_add(b.size);
                }
                None => no_frames += 1,
            }
        }
    }
    devices.sort_unstable();
    let mut top: Vec<Site> = sites
        .into_iter()
        .map(|(site, (blocks, bytes))| Site {
            site,
            blocks,
            bytes,
        })
        .collect();
    top.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.site.cmp(&b.site)));
    top.truncate(TOP_SITES);
    let oom = snap
        .device_traces
        .iter()
        .enumerate()
        .flat_map(|(d, t)| t.iter().map(move |e| (d, e)))
        .rfind(|(_, e)| e.action == "oom")
        .map(|(device, e)| OomEvent {
            device,
            size: e.size,
            device_free: e.device_free,
        });
    let reclaimable = large.reserved_bytes.saturating_sub(expandable_live);
    // Unknown free memory leaves the question open rather than assuming 0 bytes free.
    let oom_would_fit = oom
        .as_ref()
        .and_then(|o| Some(o.device_free?.saturating_add(reclaimable) >= o.size));
    let summary = match oom_would_fit {
        Some(true) => format!(
            "with expandable segments about {} MiB of cached large-pool memory would be reusable; the recorded OOM ({} MiB) would likely have fit",
            reclaimable >> 20,
            oom.as_ref().map_or(0, |o| o.size >> 20)
        ),
        Some(false) => format!(
            "expandable segments would free about {} MiB of cached pieces, not enough for the recorded OOM ({} MiB): the memory is really in use",
            reclaimable >> 20,
            oom.as_ref().map_or(0, |o| o.size >> 20)
        ),
        None => format!(
            "expandable segments would make about {} MiB of cached large-pool memory reusable (free pieces merge and unmapped tails return to the device)",
            reclaimable >> 20
        ),
    };
    SnapshotAnalysis {
        devices,
        overall,
        small_pool: small,
        large_pool: large.clone(),
        private_pools: pools
            .into_iter()
            .map(|((a, b), stats)| PrivatePool {
                pool: format!("{a},{b}"),
                stats,
            })
            .collect(),
        top_sites: top,
        blocks_without_frames: no_frames,
        trace_events: snap.device_traces.iter().map(Vec::len).sum(),
        oom,
        expandable: ExpandableEstimate {
            large_reserved_bytes: large.reserved_bytes,
            large_reserved_expandable_bytes: expandable_live,
            reclaimable_bytes: reclaimable,
            oom_would_fit,
            summary,
        },
        expandable_segments_in_use: expandable_in_use,
    }
}

/// Most segments drawn in the SVG map (the largest ones).
pub const SVG_MAX_SEGMENTS: usize = 400;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An SVG map: one row per segment (largest first, scaled to the largest), blocks coloured by
/// state. Hand-written SVG 1.1, no scripts.
pub fn svg(snap: &MemorySnapshot) -> String {
    const W: f64 = 900.0;
    const ROW: f64 = 18.0;
    const LEFT: f64 = 190.0;
    let mut segs: Vec<&Segment> = snap.segments.iter().collect();
    segs.sort_by(|a, b| {
        b.total_size
            .cmp(&a.total_size)
            .then(a.address.cmp(&b.address))
    });
    let omitted = segs.len().saturating_sub(SVG_MAX_SEGMENTS);
    segs.truncate(SVG_MAX_SEGMENTS);
    let max = segs.iter().map(|s| s.total_size).max().unwrap_or(1).max(1) as f64;
    let height = 60.0 + ROW * segs.len() as f64 + if omitted > 0 { ROW } else { 0.0 };
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="monospace" font-size="11">"#,
        LEFT + W + 20.0
    );
    let _ = writeln!(
        o,
        r##"<text x="4" y="16">PyTorch memory segments (largest first; width ∝ size): <tspan fill="#c0392b">■ allocated</tspan> <tspan fill="#e67e22">■ pending free</tspan> <tspan fill="#95a5a6">■ free (cached)</tspan></text>"##
    );
    for (i, s) in segs.iter().enumerate() {
        let y = 30.0 + ROW * i as f64;
        let pool = match s.segment_pool_id {
            Some(p) if p != (0, 0) => format!(" pool {},{}", p.0, p.1),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            r#"<text x="4" y="{}">dev{} {:>9.1} MiB {}{}</text>"#,
            y + 12.0,
            s.device,
            s.total_size as f64 / (1u64 << 20) as f64,
            esc(if is_small(s) { "small" } else { "large" }),
            esc(&pool)
        );
        let mut x = LEFT;
        for b in &s.blocks {
            let w = (b.size as f64 / max * W).max(0.5);
            let fill = match b.state.as_str() {
                "active_allocated" => "#c0392b",
                "active_pending_free" => "#e67e22",
                _ => "#95a5a6",
            };
            let title = match site_of(&b.frames) {
                Some(site) => format!("{} bytes {} at {}", b.size, b.state, site),
                None => format!("{} bytes {}", b.size, b.state),
            };
            let _ = writeln!(
                o,
                r#"<rect x="{x:.1}" y="{y}" width="{w:.1}" height="{}" fill="{fill}" stroke="white" stroke-width="0.3"><title>{}</title></rect>"#,
                ROW - 4.0,
                esc(&title)
            );
            x += w;
        }
    }
    if omitted > 0 {
        let _ = writeln!(
            o,
            r#"<text x="4" y="{}">… {omitted} smaller segments not drawn</text>"#,
            42.0 + ROW * segs.len() as f64
        );
    }
    o.push_str("</svg>\n");
    o
}
