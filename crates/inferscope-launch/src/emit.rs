//! `--emit`: the plan said in the language of where the server is deployed.
//!
//! Each emitter is a pure function of the [`LaunchPlan`] and the [`EmitOptions`]. Warnings and
//! what a format cannot express travel as comments at the top, so a pasted config carries its
//! caveats. The command after `--` is placed where the format runs a command: after
//! `numactl --`, as `ExecStart=`, and as what the container image expects (see [`crate::image`]).
//!
//! An emitted artifact runs somewhere else than the shell the snapshot was taken in (a unit, a
//! container, another login), so it never relies on that shell's environment: it always sets
//! the GPU selection it was planned for ([`LaunchPlan::gpu_selection`]) explicitly (issue 26).
//!
//! Every value is quoted for its format (issue 33): `$(…)`, backticks, quotes and newlines in
//! an argument or a variable reach the server as bytes, never as shell, systemd or Kubernetes
//! syntax. Comments carry text on one line with control characters escaped.
//!
//! Format decisions:
//!
//! * `numactl`: `--physcpubind` with the exact CPU list (not `--cpunodebind`, which would undo a
//!   cgroup intersection or a `--cpus-per-gpu` slot), `--membind` / `--preferred` /
//!   `--interleave`, and the environment as `VAR=value` assignments in front.
//! * `docker`: `--cpuset-mems` is a hard limit, i.e. a bind; it is emitted for `bind` and
//!   `interleave` (the allowed set; the interleave itself needs a policy inside), not for
//!   `preferred`. `--gpus '"device=..."'` takes UUIDs when known, else NVML indices (`GPUn`).
//!   Inside the container only those GPUs exist and CUDA numbers them from 0, so the selection
//!   is passed renumbered: `CUDA_DEVICE_ORDER=PCI_BUS_ID` and `CUDA_VISIBLE_DEVICES` naming the
//!   same GPUs in the planned order by their position among the container's GPUs.
//!   `--cap-add SYS_NICE` lets `inferscope run` or the engine set a NUMA policy inside
//!   (Docker's seccomp profile refuses `set_mempolicy` without it). `--shm-size=16g` is a fixed
//!   recommendation for NCCL and multi-process servers, not a measurement.
//! * `systemd`: a drop-in with `CPUAffinity=`, `NUMAPolicy=`, `NUMAMask=`, `Environment=`,
//!   `LimitMEMLOCK=infinity` and `ExecStart=` (reset first, as drop-ins require).
//! * `k8s`: Kubernetes cannot be told CPU or GPU numbers; the kubelet's CPU, memory and topology
//!   managers must align them. The output is the kubelet settings that make them do so (as
//!   comments) and a Guaranteed-QoS pod with whole CPUs, the GPU count, the image and the
//!   environment (the GPU selection renumbered as for Docker). The memory request is a
//!   placeholder: inferscope does not know the server's footprint.

use crate::image::{ImagePlan, choose};
use crate::plan::LaunchPlan;
use crate::request::MemMode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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

/// What `--emit` needs beyond the plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmitOptions {
    /// `--image`: the container image for `docker` and `k8s`.
    pub image: Option<String>,
    /// `--engine-version`: the engine release whose official image to use.
    pub engine_version: Option<String>,
}

/// Render the plan for `target`. Fails only for `docker` without an image to run (an engine
/// with no known official image and no `--image`) or with a malformed `--image` or
/// `--engine-version`.
pub fn emit(
    plan: &LaunchPlan,
    target: Emit,
    opts: &EmitOptions,
) -> Result<String, crate::LaunchError> {
    let image = match target {
        Emit::Docker => Some(choose(
            plan,
            opts.image.as_deref(),
            opts.engine_version.as_deref(),
        )?),
        Emit::K8s => match choose(plan, opts.image.as_deref(), opts.engine_version.as_deref()) {
            Ok(i) => Some(i),
            // A pod can be written without knowing the image; the placeholder says so.
            Err(_) if opts.image.is_none() && opts.engine_version.is_none() => None,
            Err(e) => return Err(e),
        },
        _ => None,
    };
    let mut out = String::new();
    let _ = writeln!(out, "# inferscope run: {}", comment(&plan.summary()));
    for w in &plan.warnings {
        let _ = writeln!(out, "# warning: {}", comment(w));
    }
    match target {
        Emit::Numactl => numactl(plan, &mut out),
        Emit::Docker => {
            if let Some(i) = &image {
                docker(plan, i, &mut out)
            }
        }
        Emit::Systemd => systemd(plan, &mut out),
        Emit::K8s => k8s(plan, image.as_ref(), &mut out),
    }
    Ok(out)
}

/// Text for a `#` comment line: one line, control and line-separator characters shown as
/// escapes, and never ending in a backslash (systemd would join the next line to it).
pub(crate) fn comment(s: &str) -> String {
    let mut out = String::new();
    for ch in s.chars() {
        match ch {
            '\n' | '\r' => out.push(' '),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    if out.ends_with('\\') {
        out.push_str(" (end)");
    }
    out
}

/// The environment an artifact that runs on the host sets: what `run` sets, plus the planned
/// GPU selection whether or not the snapshot's shell already had it.
fn host_env(plan: &LaunchPlan) -> BTreeMap<String, String> {
    let mut env = plan.env.clone();
    for (k, v) in &plan.gpu_selection {
        env.insert(k.clone(), v.clone());
    }
    env
}

/// The environment inside a container that holds exactly the plan's GPUs: the selection with
/// each index replaced by the GPU's position among the container's GPUs in PCI order (what
/// CUDA and ROCm number from 0 there), so the planned order (rank 0 first) is kept. UUIDs
/// name the same GPU everywhere and are kept.
fn container_env(plan: &LaunchPlan) -> BTreeMap<String, String> {
    let mut env = plan.env.clone();
    for (k, v) in &plan.gpu_selection {
        let nvidia = k == "CUDA_VISIBLE_DEVICES";
        let renumber = (nvidia || k == "HIP_VISIBLE_DEVICES")
            && v.split(',')
                .all(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()));
        let value = if renumber {
            let mut inside: Vec<_> = plan
                .gpus
                .iter()
                .filter(|g| g.nvidia == nvidia)
                .map(|g| g.pci_bus_id)
                .collect();
            inside.sort();
            plan.gpus
                .iter()
                .filter(|g| g.nvidia == nvidia)
                .filter_map(|g| inside.iter().position(|p| *p == g.pci_bus_id))
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        } else {
            v.clone()
        };
        env.insert(k.clone(), value);
    }
    env
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
    let mut words: Vec<String> = host_env(plan)
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

fn docker(plan: &LaunchPlan, image: &ImagePlan, out: &mut String) {
    let _ = writeln!(out, "# image: {}", comment(&image.why));
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
        flags.push(format!(
            "--gpus {}",
            shell_quote(&format!("\"device={}\"", docker_devices(plan)))
        ));
    }
    flags.push(format!("--shm-size={SHM_SIZE}"));
    flags.push("--ulimit memlock=-1".into());
    flags.push("--cap-add SYS_NICE".into());
    let env = container_env(plan);
    if env.contains_key("CUDA_VISIBLE_DEVICES") || env.contains_key("HIP_VISIBLE_DEVICES") {
        let _ = writeln!(
            out,
            "# note: the container holds only the GPUs of --gpus, numbered from 0 in PCI order; the visibility variable names them in the planned order"
        );
    }
    for (k, v) in &env {
        flags.push(format!("-e {}", shell_quote(&format!("{k}={v}"))));
    }
    if let Some(e) = &image.entrypoint {
        flags.push(format!("--entrypoint {}", shell_quote(e)));
    }
    let _ = writeln!(out, "docker run \\");
    for f in &flags {
        let _ = writeln!(out, "  {f} \\");
    }
    if image.args.is_empty() {
        let _ = writeln!(out, "  {}", shell_quote(&image.image));
    } else {
        let _ = writeln!(out, "  {} \\", shell_quote(&image.image));
        let _ = writeln!(out, "  {}", shell_command_line(&image.args));
    }
}

/// Quote one word for systemd's `ExecStart=` (double quotes, C escapes; `%` and `$` doubled so
/// systemd expands neither a specifier nor a variable).
pub fn systemd_quote(word: &str) -> String {
    systemd_word(&word.replace('$', "$$"))
}

/// Quote one `NAME=value` for systemd's `Environment=`: `%` is a specifier there too, but `$`
/// has no special meaning (systemd.exec(5)), so it is not doubled.
pub fn systemd_env_quote(assignment: &str) -> String {
    systemd_word(assignment)
}

fn systemd_word(word: &str) -> String {
    let escaped = word.replace('%', "%%");
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
                '\r' => q.push_str("\\r"),
                '\t' => q.push_str("\\t"),
                c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                    let _ = write!(q, "\\u{:04x}", c as u32);
                }
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
    let env = host_env(plan);
    if !env.is_empty() {
        let vars: Vec<String> = env
            .iter()
            .map(|(k, v)| systemd_env_quote(&format!("{k}={v}")))
            .collect();
        let _ = writeln!(out, "Environment={}", vars.join(" "));
    }
    let _ = writeln!(out, "LimitMEMLOCK=infinity");
    let _ = writeln!(out, "ExecStart=");
    let cmd: Vec<String> = plan.command.iter().map(|w| systemd_quote(w)).collect();
    let _ = writeln!(out, "ExecStart={}", cmd.join(" "));
}

/// A JSON string literal, which is also a YAML double-quoted scalar (line and paragraph
/// separators escaped too: YAML 1.1 parsers fold them).
fn json_string(s: &str) -> String {
    let mut q = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\r' => q.push_str("\\r"),
            '\t' => q.push_str("\\t"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                let _ = write!(q, "\\u{:04x}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// A value Kubernetes passes through unchanged: it expands `$(VAR)` in a container's command,
/// args and env values and turns `$$` into `$`, so every `$` is doubled.
pub(crate) fn k8s_string(s: &str) -> String {
    json_string(&s.replace('$', "$$"))
}

fn k8s(plan: &LaunchPlan, image: Option<&ImagePlan>, out: &mut String) {
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
            "# The device plugin chooses which GPUs; inferscope chose {} on {}; the container sees its GPUs numbered from 0.",
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
    match image {
        Some(i) => {
            let _ = writeln!(out, "    # image: {}", comment(&i.why));
            let _ = writeln!(out, "    image: {}", json_string(&i.image));
            if let Some(e) = &i.entrypoint {
                let _ = writeln!(out, "    command: [{}]", k8s_string(e));
            }
            let args: Vec<String> = i.args.iter().map(|w| k8s_string(w)).collect();
            let _ = writeln!(out, "    args: [{}]", args.join(", "));
        }
        None => {
            let _ = writeln!(
                out,
                "    # image: unknown for this engine; give --image IMAGE (the command below replaces its entrypoint)"
            );
            let _ = writeln!(out, "    image: \"<image>\"");
            let cmd: Vec<String> = plan.command.iter().map(|w| k8s_string(w)).collect();
            let _ = writeln!(out, "    command: [{}]", cmd.join(", "));
        }
    }
    let env = container_env(plan);
    if !env.is_empty() {
        let _ = writeln!(out, "    env:");
        for (k, v) in &env {
            let _ = writeln!(out, "    - name: {}", json_string(k));
            let _ = writeln!(out, "      value: {}", k8s_string(v));
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
