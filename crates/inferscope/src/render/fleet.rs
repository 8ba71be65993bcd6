//! Text of `inferscope diff` and `inferscope labels` (the reasoning is in inferscope-fleet).

use inferscope_fleet::diff::FleetDiff;
use inferscope_fleet::labels::Label;

/// The comparison as a table: one row per differing fact, one column per node.
pub fn diff_text(d: &FleetDiff) -> String {
    let mut o = String::new();
    let n = d.nodes.len();
    if d.identical() {
        o.push_str(&format!(
            "{n} nodes, {} facts compared: identical\n",
            d.compared_fields
        ));
        return o;
    }
    o.push_str(&format!(
        "{n} nodes, {} facts compared, {} differ",
        d.compared_fields,
        d.differences.len()
    ));
    let clear = match d.nodes.as_slice() {
        [first, rest @ ..] if n > 2 => rest
            .first()
            .is_none_or(|s| s.odd_fields < first.odd_fields)
            .then_some(first),
        _ => None,
    };
    if let Some(first) = clear {
        o.push_str(&format!(
            "; odd one out: {} (differs from the majority on {} of {})",
            first.name,
            first.odd_fields,
            d.differences.len()
        ));
    } else if n == 2 {
        o.push_str("; with two nodes there is no majority");
    }
    o.push_str("\n\n");
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut head = vec!["fact".to_string()];
    head.extend(d.nodes.iter().map(|x| x.name.clone()));
    rows.push(head);
    for f in &d.differences {
        let mut r = vec![f.field.clone()];
        r.extend(f.values.iter().map(|v| {
            if f.majority.as_ref() == Some(v) {
                v.clone()
            } else {
                format!("{v} *")
            }
        }));
        rows.push(r);
    }
    let widths: Vec<usize> = (0..=n)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|x| x.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        o.push_str(line.join("  ").trim_end());
        o.push('\n');
    }
    o.push_str("\n* differs from the majority (every value when there is none)\n");
    o
}

/// `key=value` lines; `header` adds NFD-ignored comment lines naming the source (`--format nfd`).
pub fn labels_text(labels: &[Label], header: Option<&str>) -> String {
    let mut o = String::new();
    if let Some(h) = header {
        for l in h.lines() {
            o.push_str("# ");
            o.push_str(l);
            o.push('\n');
        }
    }
    for l in labels {
        o.push_str(&l.key);
        o.push('=');
        o.push_str(&l.value);
        o.push('\n');
    }
    o
}
