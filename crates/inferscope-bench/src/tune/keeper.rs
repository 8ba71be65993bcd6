//! The keeper: `tune` starts each server through it (`inferscope __tune-keeper GRACE_MS -- CMD…`,
//! a hidden entry point of the binary itself), so that no process tune started outlives tune,
//! however tune ends (issue 33 item 6; docs/SECURITY.md, "Processes").
//!
//! * It is a **child subreaper** (`PR_SET_CHILD_SUBREAPER`): a server's descendant that calls
//!   `setsid` and whose parent exits is re-parented to the keeper, not to init, so it stays in
//!   the keeper's tree (and out of reach of a process-group kill, which is why a tree walk is
//!   needed at all).
//! * It learns of tune's end three ways: its stdin is a pipe whose other end only tune holds (end
//!   of file when tune exits, SIGKILL included), `PR_SET_PDEATHSIG` (SIGTERM when tune dies), and
//!   SIGTERM/SIGINT/SIGHUP/SIGQUIT (tune's stop signals the whole process group).
//! * Then it signals every descendant (found by walking `/proc/*/stat` for parent ids, again and
//!   again until none is left) with SIGTERM, and with SIGKILL after the grace, and exits.
//! * When the server exits by itself, the keeper kills what the server left and exits with the
//!   server's status (re-raising its signal), so tune sees the server's own exit.
//!
//! Linux only (prctl, /proc); unprivileged, no cgroups.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The hidden first argument that makes the binary a keeper.
pub const ARG: &str = "__tune-keeper";

/// The signal that asked the keeper to stop (0: none yet).
static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    STOP.store(sig, Ordering::SeqCst);
}

/// The keeper's argv for a server command.
pub fn argv(exe: &str, grace: Duration, command: &[String]) -> Vec<String> {
    let mut v = vec![
        exe.to_string(),
        ARG.to_string(),
        grace.as_millis().to_string(),
        "--".to_string(),
    ];
    v.extend(command.iter().cloned());
    v
}

/// When the process was started as a keeper, run it and return its exit code.
pub fn main_if_keeper() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != ARG {
        return None;
    }
    let grace = args
        .next()
        .and_then(|g| g.to_str().and_then(|g| g.parse::<u64>().ok()));
    let sep = args.next();
    let command: Vec<OsString> = args.collect();
    Some(match (grace, sep) {
        (Some(ms), Some(s)) if s == "--" && !command.is_empty() => {
            keep(Duration::from_millis(ms), &command)
        }
        _ => {
            say(&format!(
                "inferscope: error: usage: inferscope {ARG} GRACE_MS -- COMMAND..."
            ));
            ExitCode::from(2)
        }
    })
}

fn keep(grace: Duration, command: &[OsString]) -> ExitCode {
    // SAFETY: prctl with integer arguments; the handler only stores to an atomic.
    let parent = unsafe {
        let parent = libc::getppid();
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
        let h = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(s, h);
        }
        parent
    };
    let Some((prog, rest)) = command.split_first() else {
        return ExitCode::from(2);
    };
    // The server keeps the keeper's process group (tune's stop signals both) and its stdout and
    // stderr (the log file); not its stdin, the pipe from tune.
    let child = match Command::new(prog).args(rest).stdin(Stdio::null()).spawn() {
        Ok(c) => c,
        Err(e) => {
            say(&format!(
                "inferscope: cannot start `{}`: {e}",
                prog.to_string_lossy()
            ));
            return ExitCode::from(127);
        }
    };
    let server = child.id() as i32;
    let mut status: Option<libc::c_int> = None;
    loop {
        // SAFETY: getppid has no preconditions.
        let orphaned = unsafe { libc::getppid() } != parent;
        if STOP.load(Ordering::SeqCst) != 0 || orphaned || tune_gone() {
            kill_tree(grace);
            return exit_like(status);
        }
        reap(server, &mut status);
        if status.is_some() {
            // The server ended by itself: what it left goes too.
            kill_tree(grace);
            return exit_like(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether tune closed its end of the stdin pipe (it exited) — a zero-timeout poll.
fn tune_gone() -> bool {
    let mut p = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    if n <= 0 {
        return false;
    }
    if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        return true;
    }
    // Readable: tune never writes, so this is end of file (a byte would mean "stop" as well).
    true
}

/// A line on stderr (the server log); a closed stderr is no reason to stop.
fn say(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// Reap every exited child (orphans re-parented here included); the server's status is kept.
fn reap(server: i32, status: &mut Option<libc::c_int>) {
    loop {
        let mut st: libc::c_int = 0;
        // SAFETY: waitpid on any child, non-blocking, into a local.
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        if pid == server {
            *status = Some(st);
        }
    }
}

/// Exit with the server's status: its code, or its signal re-raised.
fn exit_like(status: Option<libc::c_int>) -> ExitCode {
    match status {
        Some(st) if libc::WIFEXITED(st) => ExitCode::from(libc::WEXITSTATUS(st) as u8),
        Some(st) if libc::WIFSIGNALED(st) => {
            let sig = libc::WTERMSIG(st);
            // SAFETY: restoring the default action and raising the server's signal on ourselves.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
            ExitCode::from(128u8.wrapping_add(sig as u8))
        }
        _ => ExitCode::SUCCESS,
    }
}

/// Live (not zombie) descendants of `root`, from `/proc/*/stat`.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<(i32, bool)>> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) S ppid ...`: comm may hold spaces and parentheses, so read after the last
        // `)`.
        let Some((_, after)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut f = after.split_whitespace();
        let (Some(state), Some(ppid)) = (f.next(), f.next().and_then(|p| p.parse::<i32>().ok()))
        else {
            continue;
        };
        // Zombies stay in the tree walk: the walk is not atomic, and a child read while its
        // parent was alive must still be found through that parent once it is a zombie (or it
        // is missed, the keeper exits, and the child is re-parented to init). They are never
        // signalled or counted as alive.
        children.entry(ppid).or_default().push((pid, state == "Z"));
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &(c, zombie) in children.get(&p).map(Vec::as_slice).unwrap_or_default() {
            if seen.insert(c) {
                if !zombie {
                    out.push(c);
                }
                todo.push(c);
            }
        }
    }
    out
}

/// SIGTERM every descendant, SIGKILL what is left after `grace`, until none is left (walked
/// again and again: a process can fork while being signalled). Bounded by grace + 10 s.
fn kill_tree(grace: Duration) {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let t = Instant::now();
    let mut termed = HashSet::new();
    let mut ignored = None;
    let mut empty_walks = 0;
    loop {
        reap(-1, &mut ignored);
        let alive = descendants(me);
        // Two empty walks in a row: a process re-parented to the keeper between the reads of
        // one walk is seen by the next.
        empty_walks = if alive.is_empty() { empty_walks + 1 } else { 0 };
        if empty_walks >= 2 || t.elapsed() > grace + Duration::from_secs(10) {
            return;
        }
        let hard = t.elapsed() >= grace;
        for p in alive {
            if hard {
                // SAFETY: signalling a descendant of ours.
                unsafe { libc::kill(p, libc::SIGKILL) };
            } else if termed.insert(p) {
                // SAFETY: as above.
                unsafe { libc::kill(p, libc::SIGTERM) };
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
