//! What differs between two runs besides the change being judged (pure): the server's command
//! line flag by flag (`bench --server-cmd`), its reported version, the models, the machine and
//! the client's settings. `compare` prints these beside its verdict and warns when more than
//! one thing changed, since a verdict cannot say which of several changes made a difference.

use crate::result::BenchResult;
use std::collections::BTreeMap;

/// Split a command line into words: whitespace separates, single and double quotes group,
/// a backslash escapes the next character (outside single quotes). Unbalanced quotes end at
/// the end of the line rather than failing: this is for display, not for running.
pub fn split_command(cmd: &str) -> Vec<String> {
    let (mut words, mut cur, mut quote, mut in_word) = (Vec::new(), String::new(), None, false);
    let mut chars = cmd.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => cur.push(c),
            (_, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                in_word = true;
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (_, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// A command line as flags (`--name` → its value, `""` for a switch) and positional words
/// (`#1`, `#2`, …). `--name=value` and `--name value` are the same flag; a word after a flag
/// is its value unless it starts with `-`.
pub fn flags(cmd: &str) -> BTreeMap<String, String> {
    let words = split_command(cmd);
    let mut out = BTreeMap::new();
    let mut pos = 0;
    let mut i = 0;
    while let Some(w) = words.get(i) {
        i += 1;
        if w.starts_with('-') && w.len() > 1 && w.parse::<f64>().is_err() {
            if let Some((k, v)) = w.split_once('=') {
                out.insert(k.to_string(), v.to_string());
                continue;
            }
            let value = match words.get(i) {
                Some(n) if !n.starts_with('-') || n.parse::<f64>().is_ok() => {
                    i += 1;
                    n.clone()
                }
                _ => String::new(),
            };
            out.insert(w.clone(), value);
        } else {
            pos += 1;
            out.insert(format!("#{pos}"), w.clone());
        }
    }
    out
}

fn show(v: Option<&str>) -> String {
    match v {
        None => "absent".into(),
        Some("") => "set".into(),
        Some(v) => v.into(),
    }
}

/// Every difference between the two runs' servers, machines and settings, one line each.
pub fn differences(base: &BenchResult, cand: &BenchResult) -> Vec<String> {
    let mut out = Vec::new();
    let (bs, cs) = (&base.server, &cand.server);
    match (&bs.command, &cs.command) {
        (Some(b), Some(c)) if b != c => {
            let (fb, fc) = (flags(b), flags(c));
            let keys: std::collections::BTreeSet<&String> = fb.keys().chain(fc.keys()).collect();
            for k in keys {
                let (vb, vc) = (fb.get(k), fc.get(k));
                if vb != vc {
                    let name = match k.strip_prefix('#') {
                        Some(n) => format!("argument {n}"),
                        None => format!("flag {k}"),
                    };
                    out.push(format!(
                        "server {name}: {} -> {}",
                        show(vb.map(String::as_str)),
                        show(vc.map(String::as_str))
                    ));
                }
            }
        }
        (Some(_), None) | (None, Some(_)) => out.push(
            "server command: recorded for one run only (bench --server-cmd): flags not compared"
                .into(),
        ),
        _ => {}
    }
    if bs.version != cs.version {
        out.push(format!(
            "server version: {} -> {}",
            bs.version.as_deref().unwrap_or("unknown"),
            cs.version.as_deref().unwrap_or("unknown")
        ));
    }
    if bs.models != cs.models {
        out.push(format!(
            "server models: {} -> {}",
            bs.models.join(", "),
            cs.models.join(", ")
        ));
    }
    if bs.startup.is_some() != cs.startup.is_some() {
        out.push(
            "server start-up: log given for one run only (bench --startup-log): memory not \
             compared"
                .into(),
        );
    }
    let as_map = |v: serde_json::Value| match v {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    let value = |x: Option<&serde_json::Value>| x.map_or("absent".into(), |v| v.to_string());
    let mut fields = |what: &str, b: serde_json::Value, c: serde_json::Value| {
        let (b, c) = (as_map(b), as_map(c));
        let keys: std::collections::BTreeSet<&String> = b.keys().chain(c.keys()).collect();
        for k in keys {
            if b.get(k) != c.get(k) {
                out.push(format!(
                    "{what} {k}: {} -> {}",
                    value(b.get(k)),
                    value(c.get(k))
                ));
            }
        }
    };
    // The start-up memory figures (`bench --startup-log`): a different KV cache changes what
    // the same flags can serve.
    let startup = |s: &crate::client::ServerInfo| {
        s.startup.as_ref().map_or(serde_json::Value::Null, |f| {
            let mut v = serde_json::to_value(f).unwrap_or_default();
            // where the log was is not a difference of the server
            if let Some(m) = v.as_object_mut() {
                m.remove("log");
            }
            v
        })
    };
    if bs.startup.is_some() && cs.startup.is_some() {
        fields("server start-up", startup(bs), startup(cs));
    }
    match (&base.machine, &cand.machine) {
        (Some(b), Some(c)) => fields(
            "machine",
            serde_json::to_value(b).unwrap_or_default(),
            serde_json::to_value(c).unwrap_or_default(),
        ),
        (None, None) => {}
        _ => fields("machine", serde_json::Value::Null, serde_json::Value::Null),
    }
    let mut settings = |b: &crate::result::Settings, c: &crate::result::Settings| {
        let (mut b, mut c) = (
            serde_json::to_value(b).unwrap_or_default(),
            serde_json::to_value(c).unwrap_or_default(),
        );
        // The request settings are their own object; compare them field by field too.
        let (rb, rc) = (
            b.get_mut("request").map(serde_json::Value::take),
            c.get_mut("request").map(serde_json::Value::take),
        );
        fields("bench setting", b, c);
        fields(
            "bench request",
            rb.unwrap_or_default(),
            rc.unwrap_or_default(),
        );
    };
    settings(&base.settings, &cand.settings);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_flags() {
        assert_eq!(
            split_command(r#"vllm serve "my model" --x='a b' -n 4 --flag"#),
            ["vllm", "serve", "my model", "--x=a b", "-n", "4", "--flag"]
        );
        let f = flags("vllm serve M --max-num-seqs 256 --enable-prefix-caching --tp=2 --x -1");
        assert_eq!(f["#1"], "vllm");
        assert_eq!(f["#3"], "M");
        assert_eq!(f["--max-num-seqs"], "256");
        assert_eq!(f["--enable-prefix-caching"], "");
        assert_eq!(f["--tp"], "2");
        assert_eq!(f["--x"], "-1");
    }
}
