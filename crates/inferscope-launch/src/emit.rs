//! `--emit`: the plan said in the language of where the server is deployed.
//!
//! Each emitter is a pure function of the [`LaunchPlan`]. Warnings and what a format cannot
//! express travel as comments at the top, so a pasted config carries its caveats. The command
//! after `--` is placed where the format runs a command: after `numactl --`, as the image and its
//! arguments of `docker run`, as `ExecStart=`, and as the container's `command` (the image is a
//! placeholder there).
//!
//! Format decisions:
//!
//! * `numactl`: `--physcpubind` with the exact CPU list (not `--cpunodebind`, which would undo a
//!   cgroup intersection or a `--cpus-per-gpu` slot), `--membind` / `--preferred` /
//!   `--interleave`, and the environment as `VAR=value` assignments in front.
//! * `docker`: `--cpuset-mems` is a hard limit, i.e. a bind; it is emitted for `bind` and
//!   `interleave` (the allowed set; the interleave itself needs a policy inside), not for
//!   `preferred`. `--gpus '"device=..."'` takes UUIDs when known, else NVML indices (`GPUn`).
//!   Inside the container CUDA renumbers the visible GPUs from 0, so `CUDA_VISIBLE_DEVICES` and
//!   `CUDA_DEVICE_ORDER` are not passed. `--cap-add SYS_NICE` lets `inferscope run` or the engine
//!   set a NUMA policy inside (Docker's seccomp profile refuses `set_mempolicy` without it).
//!   `--shm-size=16g` is a fixed recommendation for NCCL and multi-process servers, not a
//!   measurement.
//! * `systemd`: a drop-in with `CPUAffinity=`, `NUMAPolicy=`, `NUMAMask=`, `Environment=`,
//!   `LimitMEMLOCK=infinity` and `ExecStart=` (reset first, as drop-ins require).
//! * `k8s`: Kubernetes cannot be told CPU or GPU numbers; the kubelet's CPU, memory and topology
//!   managers must align them. The output is the kubelet settings that make them do so (as
//!   comments) and a Guaranteed-QoS pod with whole CPUs, the GPU count and the environment. The
//!   memory request is a placeholder: inferscope does not know the server's footprint.

use crate::plan::LaunchPlan;
use crate::request::MemMode;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::str::FromStr;

/// Where the plan is going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Emit {
    /// A `numactl` command line.
    Numactl,
    /// `docker run` flags and the command.
    Docker,
    /// A systemd unit drop-in.
    Systemd,
    /// Kubernetes kubelet settings and a pod.
    K8s,
}

impl FromStr for Emit {
    type Err = crate::LaunchError;
    fn from_str(s: &str) -> Result<Self, crate::LaunchError> {
        match s {
            "numactl" => Ok(Emit::Numactl),
            "docker" => Ok(Emit::Docker),
            "systemd" => Ok(Emit::Systemd),
            "k8s" => Ok(Emit::K8s),
            other => Err(crate::LaunchError::Usage(format!(
                "--emit {:?}: expected numactl, docker, systemd or k8s",
                other.chars().take(40).collect::<String>()
            ))),
        }
    }
}

/// Fixed `/dev/shm` size recommended for containers (NCCL, multi-process servers).
pub const SHM_SIZE: &str = "16g";

/// Render the plan for `target`.
pub fn emit(plan: &LaunchPlan, target: Emit) -> String {
    let mut out = String::new();
    let c = "#";
    let _ = writeln!(out, "{c} inferscope run: {}", one_line(&plan.summary()));
    for w in &plan.warnings {
        let _ = writeln!(out, "{c} warning: {}", one_line(w));
    }
    match target {
        Emit::Numactl => numactl(plan, &mut out),
        Emit::Docker => docker(plan, &mut out),
        Emit::Systemd => systemd(plan, &mut out),
        Emit::K8s => k8s(plan, &mut out),
    }
    out
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// Quote one word for a POSIX shell.
pub fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A command line quoted for a POSIX shell.
pub fn shell_command_line(cmd: &[String]) -> String {
    cmd.iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

fn numactl(plan: &LaunchPlan, out: &mut String) {
    let mut words: Vec<String> = plan
        .env
        .iter()
        .map(|(k, v)| format!("{k}={}", shell_quote(v)))
        .collect();
    words.push("numactl".into());
    words.push(format!("--physcpubind={}", plan.cpus));
    if let Some(m) = &plan.memory {
        words.push(match m.policy {
            MemMode::Bind => format!("--membind={}", m.nodes),
            MemMode::Preferred => format!("--preferred={}", m.nodes),
            MemMode::Interleave => format!("--interleave={}", m.nodes),
        });
    }
    words.push("--".into());
    let _ = writeln!(
        out,
        "{} {}",
        words.join(" "),
        shell_command_line(&plan.command)
    );
}

fn docker_devices(plan: &LaunchPlan) -> String {
    let all_uuids = plan.gpus.iter().all(|g| g.uuid.is_some());
    plan.gpus
        .iter()
        .map(|g| match (&g.uuid, all_uuids) {
            (Some(u), true) => u.0.clone(),
            _ => g.index.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn docker(plan: &LaunchPlan, out: &mut String) {
    let mut flags: Vec<String> = vec![format!("--cpuset-cpus={}", plan.cpus)];
    match &plan.memory {
        Some(m) if m.policy != MemMode::Preferred => {
            flags.push(format!("--cpuset-mems={}", m.nodes));
            if m.policy == MemMode::Interleave {
                let _ = writeln!(
                    out,
                    "# note: --cpuset-mems only limits memory to nodes {}; to interleave, run `inferscope run --mem interleave` (or numactl) inside the container",
                    m.nodes
                );
            }
        }
        Some(m) => {
            let _ = writeln!(
                out,
                "# note: Docker cannot express a preferred node; no --cpuset-mems (it would bind to node {}); run `inferscope run --mem preferred` inside the container",
                m.nodes
            );
        }
        None => {}
    }
    if !plan.gpus.is_empty() {
        flags.push(format!("--gpus '\"device={}\"'", docker_devices(plan)));
    }
    flags.push(format!("--shm-size={SHM_SIZE}"));
    flags.push("--ulimit memlock=-1".into());
    flags.push("--cap-add SYS_NICE".into());
    for (k, v) in &plan.env {
        if k == "CUDA_VISIBLE_DEVICES" || k == "CUDA_DEVICE_ORDER" {
            continue;
        }
        flags.push(format!("-e {}", shell_quote(&format!("{k}={v}"))));
    }
    let _ = writeln!(out, "docker run \\");
    for f in &flags {
        let _ = writeln!(out, "  {f} \\");
    }
    let _ = writeln!(out, "  {}", shell_command_line(&plan.command));
}

/// Quote one word for systemd's `ExecStart=`/`Environment=` (double quotes, C escapes; `%` and
/// `$` doubled so systemd does not expand them).
pub fn systemd_quote(word: &str) -> String {
    let escaped = word.replace('%', "%%").replace('$', "$$");
    let safe = !escaped.is_empty()
        && escaped
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-$".contains(&b));
    if safe {
        escaped
    } else {
        let mut q = String::from("\"");
        for ch in escaped.chars() {
            match ch {
                '"' => q.push_str("\\\""),
                '\\' => q.push_str("\\\\"),
                '\n' => q.push_str("\\n"),
                '\t' => q.push_str("\\t"),
                c => q.push(c),
            }
        }
        q.push('"');
        q
    }
}

fn systemd(plan: &LaunchPlan, out: &mut String) {
    let _ = writeln!(
        out,
        "# a drop-in: `systemctl edit SERVICE`, paste, then `systemctl restart SERVICE`"
    );
    let _ = writeln!(out, "[Service]");
    let _ = writeln!(out, "CPUAffinity={}", plan.cpus);
    if let Some(m) = &plan.memory {
        let _ = writeln!(out, "NUMAPolicy={}", m.policy);
        let _ = writeln!(out, "NUMAMask={}", m.nodes);
    }
    if !plan.env.is_empty() {
        let vars: Vec<String> = plan
            .env
            .iter()
            .map(|(k, v)| systemd_quote(&format!("{k}={v}")))
            .collect();
        let _ = writeln!(out, "Environment={}", vars.join(" "));
    }
    let _ = writeln!(out, "LimitMEMLOCK=infinity");
    let _ = writeln!(out, "ExecStart=");
    let cmd: Vec<String> = plan.command.iter().map(|w| systemd_quote(w)).collect();
    let _ = writeln!(out, "ExecStart={}", cmd.join(" "));
}

/// A JSON string literal, which is also a YAML double-quoted scalar.
fn json_string(s: &str) -> String {
    let mut q = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\r' => q.push_str("\\r"),
            '\t' => q.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(q, "\\u{:04x}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

fn k8s(plan: &LaunchPlan, out: &mut String) {
    let one_node = plan.nodes.len() == 1;
    let policy = if one_node {
        "single-numa-node"
    } else {
        "restricted"
    };
    let cpus = plan.cpus.len();
    let _ = writeln!(
        out,
        "# Kubernetes places CPUs and GPUs itself; for it to give this pod {cpus} CPUs{} on NUMA node {},",
        if plan.gpus.is_empty() {
            String::new()
        } else {
            format!(" and {} GPU(s)", plan.gpus.len())
        },
        plan.nodes
    );
    let _ = writeln!(out, "# the node's kubelet configuration needs:");
    let _ = writeln!(out, "#   cpuManagerPolicy: static");
    let _ = writeln!(
        out,
        "#   memoryManagerPolicy: Static        # with reservedMemory per NUMA node"
    );
    let _ = writeln!(out, "#   topologyManagerPolicy: {policy}");
    let _ = writeln!(out, "#   topologyManagerScope: pod");
    let _ = writeln!(
        out,
        "# and the pod must be Guaranteed QoS: requests equal limits, whole CPUs."
    );
    if !plan.gpus.is_empty() {
        let _ = writeln!(
            out,
            "# The device plugin chooses which GPUs; inferscope chose {} on {}.",
            plan.gpus
                .iter()
                .map(|g| g.label.as_str())
                .collect::<Vec<_>>()
                .join(","),
            if plan.live {
                "this machine"
            } else {
                "the snapshot's machine"
            }
        );
    }
    let _ = writeln!(out, "apiVersion: v1");
    let _ = writeln!(out, "kind: Pod");
    let _ = writeln!(out, "metadata:");
    let _ = writeln!(out, "  name: inference-server");
    let _ = writeln!(out, "spec:");
    let _ = writeln!(out, "  containers:");
    let _ = writeln!(out, "  - name: server");
    let _ = writeln!(out, "    image: \"<image>\"");
    let cmd: Vec<String> = plan.command.iter().map(|w| json_string(w)).collect();
    let _ = writeln!(out, "    command: [{}]", cmd.join(", "));
    let env: Vec<(&String, &String)> = plan
        .env
        .iter()
        .filter(|(k, _)| {
            // The device plugin chooses the GPUs in Kubernetes.
            !matches!(
                k.as_str(),
                "CUDA_VISIBLE_DEVICES" | "CUDA_DEVICE_ORDER" | "HIP_VISIBLE_DEVICES"
            )
        })
        .collect();
    if !env.is_empty() {
        let _ = writeln!(out, "    env:");
        for (k, v) in env {
            let _ = writeln!(out, "    - name: {k}");
            let _ = writeln!(out, "      value: {}", json_string(v));
        }
    }
    let gpu = if plan.gpus.is_empty() {
        String::new()
    } else {
        format!(", nvidia.com/gpu: \"{}\"", plan.gpus.len())
    };
    let _ = writeln!(out, "    resources:");
    let _ = writeln!(
        out,
        "      requests: {{cpu: \"{cpus}\", memory: \"<memory>\"{gpu}}}"
    );
    let _ = writeln!(
        out,
        "      limits: {{cpu: \"{cpus}\", memory: \"<memory>\"{gpu}}}"
    );
    let _ = writeln!(out, "    securityContext:");
    let _ = writeln!(out, "      capabilities:");
    let _ = writeln!(out, "        add: [\"SYS_NICE\"]");
    let _ = writeln!(out, "    volumeMounts:");
    let _ = writeln!(out, "    - name: dshm");
    let _ = writeln!(out, "      mountPath: /dev/shm");
    let _ = writeln!(out, "  volumes:");
    let _ = writeln!(out, "  - name: dshm");
    let _ = writeln!(out, "    emptyDir: {{medium: Memory, sizeLimit: 16Gi}}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("vllm"), "vllm");
        assert_eq!(shell_quote("--port=8000"), "--port=8000");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
    }

    #[test]
    fn systemd_quoting() {
        assert_eq!(systemd_quote("vllm"), "vllm");
        assert_eq!(systemd_quote("50%"), "50%%");
        assert_eq!(systemd_quote("$HOME"), "$$HOME");
        assert_eq!(systemd_quote("a \"b\""), "\"a \\\"b\\\"\"");
    }

    #[test]
    fn json_strings() {
        assert_eq!(json_string("a\"b\\\n\u{1}"), "\"a\\\"b\\\\\\n\\u0001\"");
    }
}
