//! `sessions:turns=N,think=D,user=U,out=O[,system=S]`: multi-turn chat (pure parts).
//!
//! Each session is a conversation of `turns` chat requests. Turn 1 sends the system prompt (S
//! words shared by every session, none by default) and a user message of U seeded words; every
//! later turn re-sends the whole history — system prompt, every user message and every reply
//! exactly as the server streamed it — plus a new user message, as a chat client does. A turn
//! is sent `think` after the previous reply ended (its intended send time: latency counts from
//! then). `--concurrency` counts sessions in flight; when a session ends the next one starts. A
//! failed turn ends its session (its history cannot go on). `--requests` counts turns.
//!
//! Per turn the result reports TTFT and its median against turn 1's (`turns`), the view that
//! shows whether the server's prefix cache keeps up as histories grow.

use crate::client::RequestSettings;
use crate::dataset::SpecError;
use crate::record::RequestRecord;
use crate::stats::{Latency, Summary, per_request};
use bytes::Bytes;
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A `sessions:` workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sessions {
    /// Turns per session.
    pub turns: u32,
    /// Time between a reply's end and the next turn.
    pub think: Duration,
    /// Words per user message.
    pub user: u32,
    /// `max_tokens` per turn.
    pub output: u32,
    /// Words of the system prompt shared by every session (0: none).
    pub system: u32,
    /// Seed.
    pub seed: u64,
}

/// Parse `turns=N,think=D,user=U,out=O,system=S` (the part after `sessions:`; all optional).
pub fn parse(rest: &str) -> Result<Sessions, SpecError> {
    let mut s = Sessions {
        turns: 4,
        think: Duration::ZERO,
        user: 64,
        output: 64,
        system: 0,
        seed: 0,
    };
    for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| SpecError::NoEquals(part.into()))?;
        let bad = || SpecError::BadValue(part.into());
        let n = || v.parse::<u32>().map_err(|_| bad());
        match k {
            "turns" => s.turns = n()?,
            "user" => s.user = n()?,
            "out" => s.output = n()?,
            "system" => s.system = n()?,
            "think" => s.think = crate::parse_duration(v).map_err(|_| bad())?,
            _ => {
                return Err(SpecError::UnknownKeyOf(
                    part.into(),
                    "turns, think, user, out, system",
                ));
            }
        }
    }
    // Bounded so no spec can exhaust memory: a conversation's prompt stays under a million words.
    let max = crate::workload::MAX_INPUT;
    let last_turn =
        u64::from(s.system) + u64::from(s.turns) * (u64::from(s.user) + u64::from(s.output));
    if s.turns > 1000 || s.user > max || s.system > max || s.output > max || last_turn > 1 << 24 {
        return Err(SpecError::BadValue(format!(
            "sessions:{rest}: at most 1000 turns, {max} words (or tokens) per message and 16777216 in the last turn"
        )));
    }
    if s.turns == 0 || s.user == 0 || s.output == 0 {
        return Err(SpecError::BadValue(format!(
            "sessions:{rest}: turns, user and out must be at least 1"
        )));
    }
    Ok(s)
}

impl std::fmt::Display for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sessions:turns={},think={}ms,user={},out={},system={}",
            self.turns,
            self.think.as_millis(),
            self.user,
            self.output,
            self.system
        )
    }
}

/// Seeded words, the first naming the message so no two messages are equal.
fn message(name: &str, n: u32, seed: u64) -> String {
    let mut text = name.to_string();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let w = crate::dataset::WORDS;
    for _ in 1..n {
        text.push(' ');
        text.push_str(
            w.get(rand::RngExt::random_range(&mut rng, 0..w.len()))
                .unwrap_or(&""),
        );
    }
    text
}

/// One conversation's messages so far.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    messages: Vec<serde_json::Value>,
    /// Words of all messages.
    words: u32,
    /// Words before the last user message (what a prefix cache could serve).
    words_before: u32,
}

impl History {
    /// A new conversation of `spec`, with its system prompt.
    pub fn new(spec: &Sessions) -> Self {
        let mut h = History {
            messages: Vec::new(),
            words: 0,
            words_before: 0,
        };
        if spec.system > 0 {
            let text = message("system", spec.system, spec.seed ^ 0x5157);
            h.push("system", text);
        }
        h
    }

    fn push(&mut self, role: &str, text: String) {
        let n = u32::try_from(text.split_whitespace().count()).unwrap_or(u32::MAX);
        self.words = self.words.saturating_add(n);
        self.messages
            .push(serde_json::json!({"role": role, "content": text}));
    }

    /// Add turn `turn`'s (0-based) user message of session `session`.
    pub fn push_user(&mut self, spec: &Sessions, session: u64, turn: u32) {
        self.words_before = self.words;
        let seed = spec.seed ^ session.wrapping_mul(0x9e37_79b9) ^ u64::from(turn) << 40;
        self.push(
            "user",
            message(&format!("s{session}t{turn}"), spec.user, seed),
        );
    }

    /// Add the server's reply, exactly as streamed.
    pub fn push_reply(&mut self, text: String) {
        self.push("assistant", text);
    }

    /// Words of every message (the prompt length in words).
    pub fn words(&self) -> u32 {
        self.words
    }

    /// Words before the newest user message.
    pub fn words_before(&self) -> u32 {
        self.words_before
    }

    /// The chat request body for the history.
    pub fn body(&self, s: &RequestSettings, max_tokens: u32) -> Bytes {
        crate::client::chat_body(
            s,
            serde_json::Value::Array(self.messages.clone()),
            max_tokens,
        )
    }
}

/// TTFT of one turn position across sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnTtft {
    /// Turn, from 1.
    pub turn: u32,
    /// TTFT of the completed measured requests of that turn.
    pub ttft_ms: Summary,
    /// Median TTFT of this turn over turn 1's; `null` without both.
    pub p50_vs_turn1: Option<f64>,
}

/// Per-turn TTFT of a session run; empty when no record belongs to a session.
pub fn turn_ttft(records: &[RequestRecord]) -> Vec<TurnTtft> {
    let mut by_turn: Vec<Latency> = Vec::new();
    for r in records.iter().filter(|r| !r.warmup && r.is_ok()) {
        let (Some(turn), Some(t)) = (r.turn, per_request(r).ttft_us) else {
            continue;
        };
        let i = turn as usize;
        while by_turn.len() <= i {
            by_turn.push(Latency::new());
        }
        if let Some(l) = by_turn.get_mut(i) {
            l.record(t);
        }
    }
    let first = by_turn.first().and_then(|l| l.summary().p50);
    by_turn
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let s = l.summary();
            TurnTtft {
                turn: i as u32 + 1,
                ttft_ms: s,
                p50_vs_turn1: match (s.p50, first) {
                    (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                    _ => None,
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec() {
        let s = parse("turns=3,think=250ms,user=10,out=5,system=20").unwrap();
        assert_eq!(
            (s.turns, s.think, s.user, s.output, s.system),
            (3, Duration::from_millis(250), 10, 5, 20)
        );
        assert_eq!(
            s.to_string(),
            "sessions:turns=3,think=250ms,user=10,out=5,system=20"
        );
        assert!(parse("turns=0").is_err());
        assert!(parse("think=soon").is_err());
        assert!(parse("depth=2").is_err());
        assert!(parse("user=4000000000").is_err());
        assert!(parse("turns=100000").is_err());
        assert!(parse("turns=1000,user=100000").is_err());
    }

    #[test]
    fn history_grows_and_knows_its_prefix() {
        let s = parse("user=5,system=3").unwrap();
        let mut h = History::new(&s);
        h.push_user(&s, 7, 0);
        assert_eq!((h.words(), h.words_before()), (8, 3));
        h.push_reply("a b".into());
        h.push_user(&s, 7, 1);
        assert_eq!((h.words(), h.words_before()), (15, 10));
        let other = {
            let mut o = History::new(&s);
            o.push_user(&s, 8, 0);
            o
        };
        assert_ne!(h.messages[1], other.messages[1]);
        assert_eq!(
            h.messages[0], other.messages[0],
            "the system prompt is shared"
        );
    }
}
