//! Which inference engine a server command starts: the one detector `run`, `plan`, `tune` and
//! `mem startup` share, so a command is never vLLM for one of them and "unknown" for another
//! (issue 32: `env X=1 vllm serve ...` skipped run's vLLM safety rules).
//!
//! Wrappers users put in front of the server are looked through: environment assignments,
//! `env` (with `-i`, `-u NAME`, `-C DIR`), `nohup`, `exec`, `time`, `sudo`, `uv run`,
//! `numactl ... [--]`, `taskset MASK` / `taskset -c LIST`, and `python -m MODULE` with
//! interpreter switches before `-m`. Containers (`docker run IMAGE ...`) are not looked into:
//! the image decides what runs.

pub use crate::engine::Engine;

/// What a command line runs, after its wrappers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A server of a known engine; its own arguments start at index `args` of the command.
    Engine {
        /// Which engine.
        kind: Engine,
        /// Index of the first word after the program (and its `serve` / `-m MODULE`).
        args: usize,
    },
    /// Nothing but wrappers (or nothing at all).
    NoCommand,
    /// `python` without `-m MODULE` (a script: its contents are not read).
    PythonScript {
        /// The interpreter as written.
        program: String,
    },
    /// `python -m MODULE` where MODULE is not a known server entry point.
    PythonModule {
        /// The module as written.
        module: String,
        /// Index of the first word after the module.
        args: usize,
    },
    /// `vllm` with a subcommand other than `serve` (or none).
    VllmNotServe {
        /// Index of the word after `vllm`.
        args: usize,
    },
    /// Any other program.
    Other {
        /// The program's base name.
        program: String,
    },
}

fn base(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// The engine whose package a Python module belongs to (`vllm.entrypoints.cli.main` → vLLM,
/// an engine's benchmark module → that engine; [`Engine::python_package`]): importing it
/// imports the engine, even when the module is not a server.
pub fn module_engine(module: &str) -> Option<Engine> {
    let package = module.split('.').next()?;
    Engine::ALL
        .into_iter()
        .find(|e| e.python_package() == Some(package))
}

/// `NAME=value`: an environment assignment before a command.
pub fn is_assignment(w: &str) -> bool {
    w.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !k.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// Index of the first word after wrappers and environment assignments (the real program), or
/// `command.len()` when nothing is left.
pub fn skip_wrappers<S: AsRef<str>>(command: &[S]) -> usize {
    let word = |i: usize| command.get(i).map(<S as AsRef<str>>::as_ref);
    let mut i = 0;
    while let Some(w) = word(i) {
        if is_assignment(w) {
            i += 1;
            continue;
        }
        i = match base(w) {
            // Options that take a value: `-u NAME`, `-C DIR`, `-S STRING` (and long forms).
            "env" => skip_options(command, i + 1, &["-u", "-C", "-S", "--unset", "--chdir"]),
            "nohup" | "exec" | "time" | "stdbuf" => skip_options(command, i + 1, &[]),
            "sudo" => skip_options(command, i + 1, &["-u", "-g", "-C", "-D", "-h", "-U"]),
            "uv" if word(i + 1) == Some("run") => skip_options(
                command,
                i + 2,
                &[
                    "--with",
                    "--python",
                    "-p",
                    "--project",
                    "--directory",
                    "--env-file",
                    "--extra",
                    "--group",
                    "--package",
                    "--index",
                    "--index-url",
                ],
            ),
            "numactl" => skip_options(
                command,
                i + 1,
                &[
                    "-N",
                    "-m",
                    "-C",
                    "-i",
                    "-p",
                    "-P",
                    "-w",
                    "--cpunodebind",
                    "--membind",
                    "--physcpubind",
                    "--interleave",
                    "--preferred",
                    "--preferred-many",
                    "--weighted-interleave",
                ],
            ),
            // `taskset -c LIST prog` or `taskset MASK prog`: the word after the options is the
            // CPU list or mask.
            "taskset" => (skip_options(command, i + 1, &[]) + 1).min(command.len()),
            _ => return i,
        };
    }
    i
}

/// Skip the options of a wrapper starting at `i` (those in `with_value` take the next word
/// unless written `--opt=value` or `-Xvalue`); a `--` ends them.
fn skip_options<S: AsRef<str>>(command: &[S], mut i: usize, with_value: &[&str]) -> usize {
    while let Some(w) = command.get(i).map(<S as AsRef<str>>::as_ref) {
        if w == "--" {
            return i + 1;
        }
        if !w.starts_with('-') || w == "-" {
            return i;
        }
        i += 1;
        if with_value.contains(&w) {
            i += 1;
        }
    }
    i.min(command.len())
}

/// `serve api_server`: LMDeploy's OpenAI server subcommand (0.18.0 `lmdeploy/cli/serve.py`).
fn api_server(a: Option<&str>, b: Option<&str>) -> bool {
    a == Some("serve") && b == Some("api_server")
}

/// Which engine `command` starts, looking through wrappers.
pub fn find<S: AsRef<str>>(command: &[S]) -> Found {
    let word = |i: usize| command.get(i).map(<S as AsRef<str>>::as_ref);
    let i = skip_wrappers(command);
    let Some(first) = word(i) else {
        return Found::NoCommand;
    };
    let program = base(first);
    if program.starts_with("python") {
        // Interpreter switches before `-m` (`python3 -u -m MODULE`).
        let mut j = i + 1;
        while let Some(w) = word(j) {
            let module = if w == "-m" {
                word(j + 1).map(|m| (m, j + 2))
            } else {
                w.strip_prefix("-m")
                    .filter(|m| !m.is_empty())
                    .map(|m| (m, j + 1))
            };
            if let Some((m, args)) = module {
                // `python -m lmdeploy serve api_server` (lmdeploy/__main__.py runs the CLI)
                if m == "lmdeploy" && api_server(word(args), word(args + 1)) {
                    return Found::Engine {
                        kind: Engine::Lmdeploy,
                        args: args + 2,
                    };
                }
                // the engines' server modules ([`Engine::serves_module`])
                return match Engine::ALL.into_iter().find(|e| e.serves_module(m)) {
                    Some(kind) => Found::Engine { kind, args },
                    None => Found::PythonModule {
                        module: m.to_string(),
                        args,
                    },
                };
            }
            if !w.starts_with('-') || w == "-c" {
                break;
            }
            // `-X opt` and `-W arg` take a value.
            j += if w == "-X" || w == "-W" { 2 } else { 1 };
        }
        return Found::PythonScript {
            program: first.to_string(),
        };
    }
    let kind = match program {
        "vllm" => {
            return if word(i + 1) == Some("serve") {
                Found::Engine {
                    kind: Engine::Vllm,
                    args: i + 2,
                }
            } else {
                Found::VllmNotServe { args: i + 1 }
            };
        }
        // lmdeploy/cli/entrypoint.py: `lmdeploy serve api_server MODEL ...`
        "lmdeploy" if api_server(word(i + 1), word(i + 2)) => {
            return Found::Engine {
                kind: Engine::Lmdeploy,
                args: i + 3,
            };
        }
        "ollama" => Engine::Ollama,
        "text-generation-launcher" => Engine::Tgi,
        "llama-server" | "llama-cpp-server" => Engine::LlamaCpp,
        // TensorRT-LLM's OpenAI server (tensorrt_llm/commands/serve.py, `trtllm-serve MODEL`)
        "trtllm-serve" => Engine::Trtllm,
        _ => {
            return Found::Other {
                program: program.to_string(),
            };
        }
    };
    Found::Engine { kind, args: i + 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(c: &str) -> Option<Engine> {
        let words: Vec<&str> = c.split(' ').collect();
        match find(&words) {
            Found::Engine { kind, .. } => Some(kind),
            _ => None,
        }
    }

    #[test]
    fn wrappers_are_looked_through() {
        use Engine::*;
        for (c, e) in [
            ("env X=1 vllm serve m", Some(Vllm)),
            ("env -i PATH=/bin vllm serve m", Some(Vllm)),
            ("env -u HF_TOKEN vllm serve m", Some(Vllm)),
            ("env --unset=HF_TOKEN vllm serve m", Some(Vllm)),
            ("CUDA_VISIBLE_DEVICES=0 X=1 vllm serve m", Some(Vllm)),
            (
                "nohup numactl --cpunodebind=0 --membind=0 -- vllm serve m",
                Some(Vllm),
            ),
            ("taskset -c 0-15 llama-server -m x.gguf", Some(LlamaCpp)),
            ("uv run --with vllm vllm serve m", Some(Vllm)),
            (
                "python3 -u -X dev -m vllm.entrypoints.openai.api_server --model m",
                Some(Vllm),
            ),
            (
                "sudo -u svc text-generation-launcher --model-id m",
                Some(Tgi),
            ),
            ("env X=1 lmdeploy serve api_server m --tp 2", Some(Lmdeploy)),
            ("/opt/bin/lmdeploy serve api_server m", Some(Lmdeploy)),
            ("python3 -u -m lmdeploy serve api_server m", Some(Lmdeploy)),
            ("lmdeploy serve gradio m", None),
            ("lmdeploy chat m", None),
            ("python -m lmdeploy lite auto_awq m", None),
            ("env python serve.py -m vllm", None),
            ("env", None),
            ("docker run img vllm serve m", None),
        ] {
            assert_eq!(kind(c), e, "{c}");
        }
    }

    #[test]
    fn lmdeploy_arguments_start_after_api_server() {
        for (w, at) in [
            (vec!["lmdeploy", "serve", "api_server", "m"], 3),
            (
                vec![
                    "A=1",
                    "python3",
                    "-m",
                    "lmdeploy",
                    "serve",
                    "api_server",
                    "m",
                ],
                6,
            ),
        ] {
            assert_eq!(
                find(&w),
                Found::Engine {
                    kind: Engine::Lmdeploy,
                    args: at
                }
            );
        }
    }

    #[test]
    fn engine_arguments_start_after_the_program() {
        let w = ["env", "-u", "A", "B=1", "vllm", "serve", "m"];
        assert_eq!(
            find(&w),
            Found::Engine {
                kind: Engine::Vllm,
                args: 6
            }
        );
    }
}
