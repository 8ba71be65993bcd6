//! GPU energy per output token (pure): from NVML's total energy counters read before and after
//! the run on the server's machine, or why it is unknown. The binary reads the counters.

use serde::{Deserialize, Serialize};

/// The `energy` object of the result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Energy {
    /// `ok` or `unknown`.
    pub status: String,
    /// Why unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// GPUs summed (absent when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    /// Joules all GPUs used during the run (warm-up included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules: Option<f64>,
    /// Joules per output token received (warm-up included, as the energy is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_output_token: Option<f64>,
}

impl Energy {
    /// Unknown, and why.
    pub fn unknown(why: impl Into<String>) -> Self {
        Energy {
            status: "unknown".into(),
            reason: Some(why.into()),
            ..Energy::default()
        }
    }

    /// From the counters (mJ) before and after and the output tokens received. A counter that
    /// went down (driver reloaded) or a GPU list that changed makes it unknown.
    pub fn from_counters(before: &[u64], after: &[u64], tokens: u64) -> Self {
        if before.len() != after.len() || before.is_empty() {
            return Energy::unknown("the GPUs changed during the run");
        }
        let mut mj = 0u64;
        for (b, a) in before.iter().zip(after) {
            match a.checked_sub(*b) {
                Some(d) => mj += d,
                None => return Energy::unknown("an energy counter went back (driver reloaded?)"),
            }
        }
        let joules = mj as f64 / 1000.0;
        Energy {
            status: "ok".into(),
            reason: None,
            gpus: Some(before.len() as u32),
            joules: Some(joules),
            joules_per_output_token: (tokens > 0).then(|| joules / tokens as f64),
        }
    }
}

/// Whether `url`'s host is this machine as far as the URL tells: a loopback name or address,
/// or `hostname` itself.
pub fn url_is_local(url: &str, hostname: Option<&str>) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost")
        || host.starts_with("127.")
        || host == "::1"
        || host == "0.0.0.0"
        || hostname.is_some_and(|h| !h.is_empty() && host.eq_ignore_ascii_case(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joules_per_token() {
        let e = Energy::from_counters(&[1_000, 50_000], &[301_000, 250_000], 1000);
        assert_eq!(e.status, "ok");
        assert_eq!(e.gpus, Some(2));
        assert_eq!(e.joules, Some(500.0));
        assert_eq!(e.joules_per_output_token, Some(0.5));
        assert_eq!(Energy::from_counters(&[5], &[4], 1).status, "unknown");
        assert_eq!(Energy::from_counters(&[5], &[6, 7], 1).status, "unknown");
        assert_eq!(
            Energy::from_counters(&[5], &[6], 0).joules_per_output_token,
            None
        );
    }

    #[test]
    fn local_urls() {
        for u in [
            "http://127.0.0.1:8000",
            "http://localhost/v1",
            "http://[::1]:80",
            "http://gpu7:1",
        ] {
            assert!(url_is_local(u, Some("gpu7")), "{u}");
        }
        for u in [
            "http://10.0.0.2:8000",
            "https://api.example.com",
            "http://gpu8:1",
        ] {
            assert!(!url_is_local(u, Some("gpu7")), "{u}");
        }
    }
}
