//! One server over several machines (issue 30): what each node runs. A room answers
//! [`super::EngineRoom::multi_node`] from its own release's flags; `inferscope_launch` writes the
//! answer as per-node shell commands or a LeaderWorkerSet manifest.
//!
//! Words are data, not shell: a [`Word::Lit`] is passed to the server as it is (quoted by the
//! writer), a [`Word::Expr`] is a shell expansion the writer leaves unquoted (the leader's
//! address in a variable, the node's rank from the orchestrator, `$((RANK * 8))`). Kubernetes'
//! own `$(VAR)` syntax is never used, so the same words run under `sh -c` in a pod and in a
//! terminal.

use crate::engine::EngineSettings;

/// One word of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// Passed as is (the writer quotes it).
    Lit(String),
    /// A shell expansion, left unquoted (`"$LEADER_ADDR"`, `$((LWS_WORKER_INDEX * 8))`).
    Expr(String),
}

impl Word {
    /// A literal word.
    pub fn lit(s: impl Into<String>) -> Word {
        Word::Lit(s.into())
    }
}

/// Which node a command is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rank {
    /// A known position: 0 is the leader (per-node commands).
    Index(u32),
    /// A worker whose position the orchestrator puts in this environment variable (1 ..
    /// nodes − 1), e.g. LeaderWorkerSet's `LWS_WORKER_INDEX`.
    Var(String),
}

impl Rank {
    /// The leader (rank 0).
    pub fn is_leader(&self) -> bool {
        matches!(self, Rank::Index(0))
    }

    /// The rank times `k` as a word: a number, or shell arithmetic on the variable.
    pub fn times(&self, k: u32) -> Word {
        match self {
            Rank::Index(i) => Word::Lit((u64::from(*i) * u64::from(k)).to_string()),
            Rank::Var(v) if k == 1 => Word::Expr(format!("\"${v}\"")),
            Rank::Var(v) => Word::Expr(format!("$(({v} * {k}))")),
        }
    }
}

/// What a multi-node launch is asked for.
#[derive(Debug, Clone)]
pub struct NodeRequest<'a> {
    /// The one-node command as the user gives it (`vllm serve M -tp 8 -pp 2`).
    pub command: &'a [String],
    /// What the planner read from it (parallel sizes).
    pub settings: &'a EngineSettings,
    /// The engine release (`--engine-version`); `None`: the newest modelled.
    pub version: Option<&'a str>,
    /// Machines in one server.
    pub nodes: u32,
    /// The leader's address as every node reaches it.
    pub leader: Word,
    /// The node this command is for.
    pub rank: Rank,
}

/// What one node runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCommand {
    /// The server command on this node.
    pub argv: Vec<Word>,
    /// Whether this node serves the HTTP API (readiness, the Service's port): the leader only.
    pub serves_http: bool,
    /// GPUs this node gives the server.
    pub gpus: u32,
    /// The port the leader serves on.
    pub port: u16,
    /// The readiness path (`/health`).
    pub readiness_path: &'static str,
    /// Why the command looks as it does: the release's flags with their sources.
    pub notes: Vec<String>,
}

/// Why a layout cannot be written as per-node commands: one line for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MultiNodeError(pub String);

/// GPUs per node of `world` GPUs over `nodes` nodes, or the error naming the product.
pub fn gpus_per_node(world: u32, what: &str, nodes: u32) -> Result<u32, MultiNodeError> {
    if nodes < 2 {
        return Err(MultiNodeError(format!(
            "--nodes {nodes}: a multi-node launch needs at least 2 nodes"
        )));
    }
    if world == 0 || !world.is_multiple_of(nodes) {
        return Err(MultiNodeError(format!(
            "{what} = {world} GPUs do not split evenly over {nodes} nodes"
        )));
    }
    Ok(world / nodes)
}

/// A word's option name (`_` read as `-` in `--` names) and its inline `=value`.
fn option_word(w: &str) -> (String, Option<&str>) {
    let (name, inline) = match w.split_once('=') {
        Some((f, v)) => (f, Some(v)),
        None => (w, None),
    };
    let name = if name.starts_with("--") {
        name.replace('_', "-")
    } else {
        name.to_string()
    };
    (name, inline)
}

/// The first of `flags` the command already sets (`--flag`, `--flag=v`, `_` for `-`): a
/// multi-node launch adds them itself from the one-node form.
pub fn already_set<'a>(command: &[String], flags: &[&'a str]) -> Option<&'a str> {
    command.iter().find_map(|w| {
        let (name, _) = option_word(w);
        flags.iter().copied().find(|f| *f == name)
    })
}

/// The number the first of `flags` is given (`--flag N` or `--flag=N`), when it is one.
pub fn number_of(command: &[String], flags: &[&str]) -> Option<u64> {
    command.iter().enumerate().find_map(|(i, w)| {
        let (name, inline) = option_word(w);
        if !flags.contains(&name.as_str()) {
            return None;
        }
        inline
            .or_else(|| command.get(i + 1).map(String::as_str))?
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_numbers_or_shell_arithmetic_on_the_orchestrators_variable() {
        assert_eq!(Rank::Index(3).times(8), Word::lit("24"));
        assert_eq!(
            Rank::Var("LWS_WORKER_INDEX".into()).times(1),
            Word::Expr("\"$LWS_WORKER_INDEX\"".into())
        );
        assert_eq!(
            Rank::Var("LWS_WORKER_INDEX".into()).times(8),
            Word::Expr("$((LWS_WORKER_INDEX * 8))".into())
        );
        assert!(Rank::Index(0).is_leader() && !Rank::Index(1).is_leader());
    }

    #[test]
    fn uneven_splits_and_one_node_are_refused_by_name() {
        assert_eq!(gpus_per_node(16, "TP × PP", 2), Ok(8));
        assert_eq!(
            gpus_per_node(12, "TP × PP", 8).unwrap_err().to_string(),
            "TP × PP = 12 GPUs do not split evenly over 8 nodes"
        );
        assert!(gpus_per_node(8, "TP", 1).is_err());
        let cmd: Vec<String> = ["vllm", "serve", "m", "--node_rank=1"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            already_set(&cmd, &["--nnodes", "--node-rank"]),
            Some("--node-rank")
        );
    }
}
