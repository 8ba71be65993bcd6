//! GPU014: the GPU is slowing its clocks for heat or power, or runs hot.

use super::support::per_gpu_details;
use crate::{CheckDef, CheckInput, Outcome, Scope, Severity};
use inferscope_host::Reading;

/// The check.
pub const CHECK: CheckDef = CheckDef {
    code: "GPU014",
    title: "Clock throttling active",
    severity: Severity::Warn,
    scope: Scope::Gpu,
    why: "A GPU that slows its clocks for heat, power or an external brake signal serves fewer tokens per second than its neighbours, and in a tensor-parallel group every GPU waits for the slowest one.",
    run,
};

/// Clock event reasons (NVML names, lower case) that mean the GPU is held below its clocks.
/// `gpu_idle`, `applications_clocks_setting`, `display_clock_setting` and `sync_boost` are
/// normal operation.
const THROTTLES: &[(&str, &str)] = &[
    (
        "hw_slowdown",
        "hardware slowdown (power brake or overheating signal)",
    ),
    ("hw_thermal_slowdown", "hardware thermal slowdown"),
    (
        "hw_power_brake_slowdown",
        "external power brake (PSU or chassis)",
    ),
    ("sw_thermal_slowdown", "driver thermal slowdown"),
    ("sw_power_cap", "power cap reached"),
];

fn run(input: &CheckInput) -> Vec<Outcome> {
    let s = input.snapshot;
    let max_temp = input.thresholds.max_gpu_temperature_c;
    per_gpu_details(s, |_g, subject, d| {
        let reasons = match &d.clocks {
            Reading::Value(c) => c.event_reasons.clone(),
            Reading::Unknown(u) => Reading::Unknown(u.clone()),
        };
        let mut parts = Vec::new();
        let mut problems = Vec::new();
        match &reasons {
            Reading::Value(r) => {
                parts.push(format!(
                    "clock event reasons: {} (nvmlDeviceGetCurrentClocksEventReasons)",
                    if r.is_empty() {
                        "none".to_string()
                    } else {
                        r.join(", ")
                    }
                ));
                for (name, what) in THROTTLES {
                    if r.iter().any(|x| x == name) {
                        problems.push(format!("{name} ({what})"));
                    }
                }
            }
            Reading::Unknown(u) => {
                parts.push(format!("clock event reasons unknown ({})", u.reason))
            }
        }
        if let Some(c) = d.clocks.known()
            && let (Some(sm), Some(max)) = (c.sm_mhz.known(), c.sm_max_mhz.known())
        {
            parts.push(format!("SM clock {sm} of {max} MHz"));
        }
        match &d.temperature_c {
            Reading::Value(t) => {
                parts.push(format!("temperature {t} °C (threshold {max_temp} °C)"));
                if *t > max_temp {
                    problems.push(format!("temperature {t} °C above {max_temp} °C"));
                }
            }
            Reading::Unknown(u) => parts.push(format!("temperature unknown ({})", u.reason)),
        }
        if let (Some(p), Some(l)) = (d.power_draw_mw.known(), d.power_limit_mw.known()) {
            parts.push(format!("power {} of {} W", p / 1000, l / 1000));
        }
        let evidence = parts.join("; ");
        if !problems.is_empty() {
            return Outcome::fail(
                subject,
                format!("{evidence}: {}", problems.join(", ")),
                "Find the cause with `nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i N`. Thermal: check airflow, fans and inlet temperature (and the data-centre cooling). Power cap: restore the default limit with `sudo nvidia-smi -pl <default W> -i N` (see `nvidia-smi -q -d POWER` for Default Power Limit). HW power brake: check PSU redundancy and power cabling; persistent HW slowdown needs a hardware ticket.",
            );
        }
        if reasons.is_known() {
            Outcome::pass(subject, evidence)
        } else {
            Outcome::unknown(subject, evidence)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::support::testing::*;
    use super::*;
    use crate::{Status, Thresholds};
    use inferscope_host::UnknownReason;

    fn set_reasons(s: &mut inferscope_host::Snapshot, gpu: usize, r: Reading<Vec<String>>) {
        if let Reading::Value(d) = &mut s.gpus[gpu].details
            && let Reading::Value(c) = &mut d.clocks
        {
            c.event_reasons = r;
        }
    }

    #[test]
    fn no_reasons_pass() {
        let out = check(&CHECK, &h100_with_driver());
        assert!(statuses(&out).iter().all(|x| *x == Status::Pass));
        assert!(out[0].evidence.starts_with("clock event reasons: none"));
    }

    #[test]
    fn idle_is_not_throttling() {
        let mut s = h100_with_driver();
        set_reasons(&mut s, 0, Reading::value(vec!["gpu_idle".into()]));
        assert_eq!(check(&CHECK, &s)[0].status, Status::Pass);
    }

    #[test]
    fn thermal_slowdown_fails() {
        let mut s = h100_with_driver();
        set_reasons(
            &mut s,
            5,
            Reading::value(vec!["sw_thermal_slowdown".into()]),
        );
        let out = check(&CHECK, &s);
        assert_eq!(out[5].status, Status::Fail);
        assert!(
            out[5]
                .evidence
                .contains("sw_thermal_slowdown (driver thermal slowdown)")
        );
    }

    #[test]
    fn heat_above_threshold_fails_even_without_reason() {
        let mut s = h100_with_driver();
        if let Reading::Value(d) = &mut s.gpus[0].details {
            d.temperature_c = Reading::value(90);
        }
        assert_eq!(check(&CHECK, &s)[0].status, Status::Fail);
        let relaxed = Thresholds {
            max_gpu_temperature_c: 95,
            ..Thresholds::default()
        };
        assert_eq!(
            run_with(&CHECK, &s, None, None, &relaxed)[0].status,
            Status::Pass
        );
    }

    #[test]
    fn unknown_when_reasons_unreadable() {
        let mut s = h100_with_driver();
        set_reasons(
            &mut s,
            0,
            Reading::unknown(UnknownReason::NotSupported, "NVML: Not Supported"),
        );
        assert_eq!(check(&CHECK, &s)[0].status, Status::Unknown);
        assert_eq!(check(&CHECK, &fixture("plx"))[0].status, Status::Unknown);
    }
}
