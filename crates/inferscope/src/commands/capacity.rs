//! Capacity search's text summary (`bench --find-capacity`). The search itself runs in
//! [`inferscope_bench::capacity::find`].

use inferscope_bench::capacity::Capacity;

/// The text summary.
pub fn write_text(c: &Capacity, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "saturation (closed loop): {:.2} requests/s",
        c.saturation_rate
    )?;
    writeln!(out, "probe  rate req/s  attainment  valid  pass")?;
    for (i, p) in c.probes.iter().enumerate() {
        writeln!(
            out,
            "{:>5}  {:>11.2}  {:>10}  {:>5}  {}",
            i + 1,
            p.rate,
            p.attainment
                .map(|a| format!("{:.1} %", a * 100.0))
                .unwrap_or_else(|| "unknown".into()),
            if p.valid { "yes" } else { "no" },
            if p.pass { "yes" } else { "no" }
        )?;
    }
    match c.requests_per_s {
        Some(r) => writeln!(
            out,
            "capacity: {r:.2} requests/s with ≥ {:.1} % of requests within the SLO{} ({})",
            c.target * 100.0,
            c.failing_rate
                .map(|f| format!("; {f:.2} requests/s fails"))
                .unwrap_or_default(),
            c.stopped
        ),
        None => writeln!(
            out,
            "capacity: none found: no probed rate kept ≥ {:.1} % of requests within the SLO ({})",
            c.target * 100.0,
            c.stopped
        ),
    }
}
