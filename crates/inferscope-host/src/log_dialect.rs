//! An engine's start-up log phrases as data (issue 32: what inferscope knows of one engine is
//! registered with it, not spread over the parsers). The start-up log parser
//! (`inferscope_formats::startup_log`) sits below the engine rooms, so an engine whose log it
//! reads through a table registers the table on [`crate::engine::Engine::log_dialect`], each
//! phrase with the engine source that prints it; the parser iterates over the registered
//! dialects and names no engine of them.

/// How one figure follows its phrase on a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FigureUnit {
    /// A memory figure with its unit printed after the number (`GiB`, `MiB`, `GB`).
    Memory,
    /// A count in this unit (`tokens`, `requests`).
    Count(&'static str),
}

/// One figure on a line: the number right after `after`, kept under `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogFigure {
    /// The stable key (`weights`, `kv_cache_tokens`, ...).
    pub key: &'static str,
    /// The text the number follows (`avail mem=`).
    pub after: &'static str,
    /// Memory or a count.
    pub unit: FigureUnit,
}

/// A line the engine prints, recognised by any of its phrases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLine {
    /// Phrases of the line (any one is enough).
    pub phrases: &'static [&'static str],
    /// The line names the engine (only it prints the line).
    pub names_engine: bool,
    /// Figures read from the line, in order.
    pub figures: &'static [LogFigure],
    /// The line says the start-up failed.
    pub fails: bool,
}

/// An engine's start-up log, as the parser reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogDialect {
    /// Phrases only this engine prints: a line with one belongs to it (and, after another
    /// engine's lines, begins a new record).
    pub own_lines: &'static [&'static str],
    /// Phrases the engine prints first in every start-up (a second one is a restart).
    pub run_starts: &'static [&'static str],
    /// Groups of words that name the engine when all of a group are on one line.
    pub names: &'static [&'static [&'static str]],
    /// Its arguments dump: the text before `key=value, ...)` and the separator of key and value.
    pub args: Option<(&'static str, char)>,
    /// Its command quoted in a report (`PREFIX MODEL --flag value`): the prefix.
    pub command: Option<&'static str>,
    /// The lines with figures or failures.
    pub lines: &'static [LogLine],
    /// Phrases (traceback frames, log words) naming the start-up phase an out-of-memory error
    /// happened in, by the phase's JSON name (`graph_capture`, `kv_cache_allocation`,
    /// `profile_run`, ...; `inferscope_formats::oom_phase`).
    pub oom_phases: &'static [(&'static str, &'static [&'static str])],
}
