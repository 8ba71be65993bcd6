//! Workloads whose prompts are built per request rather than drawn from a pool:
//! `trace:FILE` (timestamped replay) and `shared-prefix:groups=G,prefix=P,suffix=S[,out=O]`.
//!
//! * **Trace** lines are the Mooncake format (kvcache-ai/Mooncake, `FAST25-release/traces`):
//!   `timestamp` (ms from the trace's start), `input_length` and `output_length` (tokens) and
//!   `hash_ids`, one id per 512-token block of the prompt; two requests with the same id at the
//!   same position share that block's text, so a prefix cache can serve it. A plain JSONL trace
//!   has `timestamp` and either `prompt` (sent as is) or the two lengths (no `hash_ids`: no block
//!   is shared). Each block's text is [`BLOCK`] words drawn from a seed and the block id, so the
//!   same id is always the same text; the last block is cut to `input_length`. Requests are sent
//!   at `timestamp / --trace-speed` from the first line's timestamp, as an open loop sends
//!   (latency counts from that intended time); the run ends with the trace.
//! * **Shared prefix**: request `i` belongs to group `i mod G`; its prompt is the group's
//!   `prefix` words followed by `suffix` words of its own (led by its number, so no two prompts
//!   are equal).
//!
//! Only the ids and lengths are kept per line (never the synthesised text), so a trace of a
//! million requests of 100k tokens costs memory for its ids alone; lines are capped as in
//! [`crate::dataset`]. Per request, the workload knows how much of its prompt an ideal prefix
//! cache could serve: the leading blocks (trace) or the prefix (shared prefix) an earlier
//! request already sent.

use crate::dataset::{ContentError, MAX_ENTRIES, Prompt, SpecError};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::Deserialize;
use std::collections::HashSet;
use std::io::BufRead;
use std::time::Duration;

/// Tokens (here: words) per Mooncake hash block.
pub const BLOCK: u32 = 512;
/// Longest prompt synthesised for one trace line (words); longer lines are refused.
pub const MAX_INPUT: u32 = 1 << 20;
/// Latest timestamp accepted (ms, about 115 days).
pub const MAX_TIMESTAMP_MS: f64 = 1e10;
/// `--trace-speed` range: slower than 1/1000 or faster than a million times is not a replay.
pub const SPEED_RANGE: std::ops::RangeInclusive<f64> = 1e-3..=1e6;
/// Most `hash_ids` kept over a whole trace (about 400 MiB with the set of ids seen); a trace
/// with more is refused at the line that passes it rather than exhausting memory.
pub const MAX_HASH_IDS: usize = 1 << 24;

/// One trace line, as kept in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEntry {
    /// Intended send offset from the trace's first line, µs (before `--trace-speed`).
    pub at_us: u64,
    /// Prompt length (words when synthesised).
    pub input: u32,
    /// `max_tokens`.
    pub output: u32,
    /// Block ids (empty: no shared block).
    pub hash_ids: Vec<u64>,
    /// A prompt given as text (plain JSONL traces).
    pub text: Option<String>,
    /// Words an ideal prefix cache could serve from earlier lines; `None` for text prompts.
    pub reusable: Option<u32>,
}

/// A workload whose prompts are built when sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Lazy {
    /// A timestamped trace.
    Trace {
        /// Lines in order.
        entries: Vec<TraceEntry>,
        /// Time compression (2 = twice as fast).
        speed: f64,
        /// Seed of the block texts.
        seed: u64,
    },
    /// Groups of requests sharing a prefix.
    SharedPrefix {
        /// Groups.
        groups: u32,
        /// Shared words.
        prefix: u32,
        /// Own words.
        suffix: u32,
        /// `max_tokens`.
        output: u32,
        /// Seed.
        seed: u64,
    },
}

impl Eq for Lazy {}

impl Lazy {
    /// The prompt of request `seq`; `None` past the end of a trace.
    pub fn prompt(&self, seq: u64) -> Option<Prompt> {
        match self {
            Lazy::Trace { entries, seed, .. } => {
                let e = entries.get(usize::try_from(seq).ok()?)?;
                let text = match &e.text {
                    Some(t) => t.clone(),
                    None => trace_text(e, *seed, seq),
                };
                Some(Prompt {
                    text,
                    max_tokens: e.output.max(1),
                    len: e.input,
                    tokens: None,
                    reusable: e.reusable,
                })
            }
            Lazy::SharedPrefix {
                groups,
                prefix,
                suffix,
                output,
                seed,
            } => {
                let g = seq % u64::from((*groups).max(1));
                let mut text = String::new();
                words(&mut text, *prefix, seed ^ 0x9e37_79b9_7f4a_7c15 ^ g);
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(&seq.to_string());
                words(
                    &mut text,
                    suffix.saturating_sub(1),
                    seed ^ 0x5eed ^ seq << 20,
                );
                Some(Prompt {
                    text,
                    max_tokens: (*output).max(1),
                    len: prefix + suffix,
                    tokens: None,
                    reusable: Some(if seq >= u64::from(*groups) {
                        *prefix
                    } else {
                        0
                    }),
                })
            }
        }
    }

    /// Intended send offsets (a trace), already divided by the speed.
    pub fn arrivals(&self) -> Option<impl Iterator<Item = Duration> + Send + 'static> {
        match self {
            Lazy::Trace { entries, speed, .. } => {
                let speed = *speed;
                let times: Vec<u64> = entries.iter().map(|e| e.at_us).collect();
                Some(times.into_iter().map(move |us| {
                    // Parsing bounds timestamps and speed; never panic regardless.
                    Duration::try_from_secs_f64(us as f64 / 1e6 / speed)
                        .unwrap_or(Duration::from_secs(1 << 32))
                }))
            }
            Lazy::SharedPrefix { .. } => None,
        }
    }
}

/// Append `n` seeded words, each after a space.
fn words(out: &mut String, n: u32, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let w = crate::dataset::WORDS;
    for _ in 0..n {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w.get(rng.random_range(0..w.len())).unwrap_or(&""));
    }
}

/// The synthesised text of a trace line: its blocks' words, cut to `input` words. Without
/// `hash_ids` the line's own number seeds one unshared text.
fn trace_text(e: &TraceEntry, seed: u64, seq: u64) -> String {
    let mut text = String::new();
    if e.hash_ids.is_empty() {
        text.push_str(&seq.to_string());
        words(
            &mut text,
            e.input.saturating_sub(1),
            seed ^ 0xa11 ^ seq << 24,
        );
        return text;
    }
    let mut left = e.input;
    for id in &e.hash_ids {
        if left == 0 {
            break;
        }
        let n = left.min(BLOCK);
        // The first word names the block so two different blocks never tokenize into one.
        if !text.is_empty() {
            text.push(' ');
        }
        text.push('b');
        text.push_str(&id.to_string());
        words(
            &mut text,
            n - 1,
            seed ^ id.wrapping_mul(0x2545_f491_4f6c_dd1d),
        );
        left -= n;
    }
    // A line with fewer blocks than its length: the rest is its own.
    if left > 0 {
        words(&mut text, left, seed ^ 0xa11 ^ seq << 24);
    }
    text
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    timestamp: Option<f64>,
    input_length: Option<u32>,
    output_length: Option<u32>,
    #[serde(default)]
    hash_ids: Vec<u64>,
    #[serde(alias = "text")]
    prompt: Option<String>,
    #[serde(alias = "max_tokens", alias = "output_tokens")]
    output: Option<u32>,
}

/// Parse a trace (Mooncake or plain JSONL) from a reader (pure).
pub fn parse_trace(
    input: &mut dyn BufRead,
    speed: f64,
    seed: u64,
    default_out: u32,
) -> Result<Lazy, ContentError> {
    parse_trace_capped(input, speed, seed, default_out, MAX_HASH_IDS)
}

fn parse_trace_capped(
    input: &mut dyn BufRead,
    speed: f64,
    seed: u64,
    default_out: u32,
    max_ids: usize,
) -> Result<Lazy, ContentError> {
    let mut ids_kept = 0usize;
    let mut entries: Vec<TraceEntry> = Vec::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut buf = Vec::new();
    let mut line = 0usize;
    let mut first_ms: Option<f64> = None;
    let mut last_ms = f64::NEG_INFINITY;
    while crate::dataset::next_jsonl_line(input, &mut buf, &mut line)? {
        let l: Line =
            serde_json::from_slice(&buf).map_err(|source| ContentError::Json { line, source })?;
        let bad = |msg: String| ContentError::Trace { line, msg };
        let ts = l
            .timestamp
            .ok_or_else(|| bad("no `timestamp` (ms)".into()))?;
        if !ts.is_finite() || !(0.0..=MAX_TIMESTAMP_MS).contains(&ts) {
            // A huge number is shown as the file spells it, not in 300 digits.
            let shown = if ts.abs() < 1e15 {
                ts.to_string()
            } else {
                format!("{ts:e}")
            };
            return Err(bad(format!(
                "timestamp {shown} is not a time in ms from 0 to {MAX_TIMESTAMP_MS:e}"
            )));
        }
        if ts < last_ms {
            return Err(bad(format!(
                "timestamp {ts} ms is before the previous line's {last_ms} ms (a trace is in time order)"
            )));
        }
        last_ms = ts;
        let first = *first_ms.get_or_insert(ts);
        let output = l.output_length.or(l.output).unwrap_or(default_out).max(1);
        let at_us = ((ts - first) * 1000.0).round() as u64;
        let entry = if let Some(text) = l.prompt {
            let input = (text.chars().count() / 4).min(u32::MAX as usize) as u32;
            TraceEntry {
                at_us,
                input,
                output,
                hash_ids: Vec::new(),
                text: Some(text),
                reusable: None,
            }
        } else {
            let input = l
                .input_length
                .ok_or_else(|| bad("neither `prompt` nor `input_length`".into()))?;
            if input == 0 || input > MAX_INPUT {
                return Err(bad(format!(
                    "input_length {input} is not in 1..={MAX_INPUT}"
                )));
            }
            let blocks = input.div_ceil(BLOCK) as usize;
            if l.hash_ids.len() > blocks {
                return Err(bad(format!(
                    "{} hash_ids for {input} tokens: at most {blocks} blocks of {BLOCK}",
                    l.hash_ids.len()
                )));
            }
            ids_kept += l.hash_ids.len();
            if ids_kept > max_ids {
                return Err(bad(format!(
                    "more than {max_ids} hash_ids in the trace so far: too large to replay"
                )));
            }
            // Prefix caches match whole leading blocks only.
            let lead = l.hash_ids.iter().take_while(|h| seen.contains(h)).count() as u32;
            let reusable = lead.saturating_mul(BLOCK).min(input);
            seen.extend(l.hash_ids.iter().copied());
            TraceEntry {
                at_us,
                input,
                output,
                hash_ids: l.hash_ids,
                text: None,
                reusable: Some(reusable),
            }
        };
        entries.push(entry);
        if entries.len() >= MAX_ENTRIES {
            break;
        }
    }
    if entries.is_empty() {
        return Err(ContentError::NoPrompts);
    }
    Ok(Lazy::Trace {
        entries,
        speed,
        seed,
    })
}

/// Parse `groups=G,prefix=P,suffix=S[,out=O]` (the part after `shared-prefix:`).
pub fn parse_shared_prefix(rest: &str) -> Result<(u32, u32, u32, u32), SpecError> {
    let (mut groups, mut prefix, mut suffix, mut out) = (4u32, 512u32, 64u32, 128u32);
    for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| SpecError::NoEquals(part.into()))?;
        let v: u32 = v.parse().map_err(|_| SpecError::BadValue(part.into()))?;
        match k {
            "groups" => groups = v,
            "prefix" => prefix = v,
            "suffix" => suffix = v,
            "out" => out = v,
            _ => {
                return Err(SpecError::UnknownKeyOf(
                    part.into(),
                    "groups, prefix, suffix, out",
                ));
            }
        }
    }
    if u64::from(prefix) + u64::from(suffix) > u64::from(MAX_INPUT) {
        return Err(SpecError::BadValue(format!(
            "shared-prefix:{rest}: prefix + suffix must be at most {MAX_INPUT} words"
        )));
    }
    if groups == 0 || suffix == 0 || out == 0 {
        return Err(SpecError::BadValue(format!(
            "shared-prefix:{rest}: groups, suffix and out must be at least 1"
        )));
    }
    Ok((groups, prefix, suffix, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOONCAKE: &str = "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [0, 1, 2]}\n\
        {\"timestamp\": 0, \"input_length\": 700, \"output_length\": 3, \"hash_ids\": [0, 3]}\n\
        {\"timestamp\": 3000, \"input_length\": 1100, \"output_length\": 7, \"hash_ids\": [0, 1, 4]}\n\
        {\"timestamp\": 3000, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [5, 1]}\n";

    fn trace(s: &str) -> Lazy {
        parse_trace(&mut s.as_bytes(), 1.0, 7, 16).unwrap()
    }

    #[test]
    fn shared_blocks_share_text_and_count_as_reusable() {
        let t = trace(MOONCAKE);
        let p: Vec<Prompt> = (0..4).map(|i| t.prompt(i).unwrap()).collect();
        for q in &p {
            assert_eq!(q.text.split(' ').count() as u32, q.len, "{}", q.len);
        }
        // Lines 0 and 2 share blocks 0 and 1: their first 1024 words are the same text.
        let w: Vec<Vec<&str>> = p.iter().map(|q| q.text.split(' ').collect()).collect();
        assert_eq!(w[0][..1024], w[2][..1024]);
        assert_ne!(w[0][1024..], w[2][1024..]);
        assert_eq!(w[0][..512], w[1][..512]);
        assert_ne!(w[0][512..700], w[1][512..700]);
        // Reusable: none, block 0, blocks 0+1, none (block 5 is new; 1 is not a leading block).
        let r: Vec<_> = p.iter().map(|q| q.reusable).collect();
        assert_eq!(r, [Some(0), Some(512), Some(1024), Some(0)]);
        assert_eq!(p[2].max_tokens, 7);
        assert_eq!(t.prompt(4), None);
    }

    #[test]
    fn real_mooncake_excerpt() {
        // fixtures/bench/traces/README.md: 11 real lines, every one starting with block 0.
        let text = include_str!("../../../fixtures/bench/traces/mooncake-conversation-head.jsonl");
        let t = trace(text);
        let r: Vec<Option<u32>> = (0..11).map(|i| t.prompt(i).unwrap().reusable).collect();
        let mut want = vec![Some(512); 11];
        want[0] = Some(0);
        assert_eq!(r, want);
        let p = t.prompt(3).unwrap();
        assert_eq!((p.len, p.max_tokens), (2290, 316));
        assert_eq!(p.text.split(' ').count(), 2290);
        let a: Vec<u64> = t
            .arrivals()
            .unwrap()
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(a, [0, 0, 0, 0, 0, 0, 3000, 3000, 3000, 5999, 5999]);
    }

    #[test]
    fn arrivals_follow_timestamps_and_speed() {
        let t = parse_trace(&mut MOONCAKE.as_bytes(), 2.0, 7, 16).unwrap();
        let a: Vec<Duration> = t.arrivals().unwrap().collect();
        assert_eq!(a, [0, 0, 1500, 1500].map(Duration::from_millis).to_vec());
    }

    #[test]
    fn plain_jsonl_trace() {
        let t = trace(
            "{\"timestamp\": 5, \"prompt\": \"hello there\"}\n{\"timestamp\": 9.5, \"input_length\": 3, \"output_length\": 2}\n",
        );
        assert_eq!(t.prompt(0).unwrap().text, "hello there");
        assert_eq!(t.prompt(0).unwrap().max_tokens, 16);
        assert_eq!(t.prompt(1).unwrap().text.split(' ').count(), 3);
        let a: Vec<Duration> = t.arrivals().unwrap().collect();
        assert_eq!(a, [Duration::ZERO, Duration::from_micros(4500)]);
    }

    #[test]
    fn bad_lines_name_their_line() {
        for (text, want) in [
            (
                "{\"timestamp\": 1, \"input_length\": 3}\n{\"input_length\": 3}\n",
                "line 2: no `timestamp`",
            ),
            (
                "{\"timestamp\": 5, \"input_length\": 3}\n{\"timestamp\": 1, \"input_length\": 3}\n",
                "line 2: timestamp 1 ms is before",
            ),
            (
                "{\"timestamp\": 1}\n",
                "line 1: neither `prompt` nor `input_length`",
            ),
            (
                "{\"timestamp\": 1, \"input_length\": 10, \"hash_ids\": [1, 2]}\n",
                "line 1: 2 hash_ids for 10 tokens",
            ),
            (
                "{\"timestamp\": 1, \"input_length\": 0}\n",
                "line 1: input_length 0",
            ),
            (
                "{\"timestamp\": -1, \"input_length\": 3}\n",
                "line 1: timestamp -1",
            ),
            (
                "{\"timestamp\": 1e300, \"input_length\": 3}\n",
                "line 1: timestamp 1e300 is not a time in ms from 0 to 1e10",
            ),
            (
                "{\"timestamp\": 1, \"input_length\": 3, \"hash\": 1}\n",
                "line 1: unknown field `hash`",
            ),
            ("", "no prompts"),
        ] {
            let e = parse_trace(&mut text.as_bytes(), 1.0, 0, 1)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{e} / {want}");
        }
    }

    #[test]
    fn total_hash_ids_are_capped() {
        let e = parse_trace_capped(&mut MOONCAKE.as_bytes(), 1.0, 0, 1, 6)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "line 3: more than 6 hash_ids in the trace so far: too large to replay"
        );
    }

    #[test]
    fn shared_prefix_groups() {
        let (g, p, s, o) = parse_shared_prefix("groups=3,prefix=20,suffix=5,out=4").unwrap();
        let l = Lazy::SharedPrefix {
            groups: g,
            prefix: p,
            suffix: s,
            output: o,
            seed: 1,
        };
        let q: Vec<Prompt> = (0..7).map(|i| l.prompt(i).unwrap()).collect();
        let w: Vec<Vec<&str>> = q.iter().map(|x| x.text.split(' ').collect()).collect();
        for (i, x) in w.iter().enumerate() {
            assert_eq!(x.len(), 25);
            assert_eq!(x[20], i.to_string());
        }
        assert_eq!(w[0][..20], w[3][..20]);
        assert_eq!(w[0][..20], w[6][..20]);
        assert_ne!(w[0][..20], w[1][..20]);
        assert_ne!(w[0][21..], w[3][21..]);
        let r: Vec<_> = q.iter().map(|x| x.reusable.unwrap()).collect();
        assert_eq!(r, [0, 0, 0, 20, 20, 20, 20]);
        assert!(parse_shared_prefix("groups=0").is_err());
        assert!(parse_shared_prefix("size=3").is_err());
        assert!(parse_shared_prefix("prefix=4000000000").is_err());
    }
}
