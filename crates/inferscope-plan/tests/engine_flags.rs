//! Every real serving command in the fixtures goes through the engine-flag check without a false
//! "not an option" error (issue 26 item 6): the known-flag lists must cover what people run.
//! Sources: fixtures/tools/engine-logs/*.jsonl `command` (and vLLM's own "non-default args" log
//! lines, whose keys are its argparse dests), fixtures/tools/llama-server/*.log `# command:`,
//! fixtures/tools/vllm-logs/*.txt "non-default args".

use inferscope_plan::engine::{Engine, parse_command};
use inferscope_plan::flags::{FlagCheck, check};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

/// The words of a command as a shell would split simple ones (quotes removed).
fn words(cmd: &str) -> Vec<String> {
    cmd.split_whitespace()
        .map(|w| w.trim_matches(|c| c == '\'' || c == '"').to_string())
        .collect()
}

/// Commands and "non-default args" dicts found in the fixtures, with where they came from.
/// (where it came from, what) pairs.
type Found = Vec<(String, String)>;

fn fixtures() -> (Found, Found) {
    let (mut commands, mut dests) = (Vec::new(), Vec::new());
    let mut non_default = |from: &Path, line: &str| {
        let Some(dict) = line.split("non-default args: ").nth(1) else {
            return;
        };
        // {'model_tag': 'x', 'max_model_len': 32768, ...}: the keys are argparse dests
        for part in dict.split(", '").map(|p| p.trim_start_matches("{'")) {
            if let Some((key, _)) = part.split_once("':") {
                dests.push((from.display().to_string(), key.to_string()));
            }
        }
    };
    for f in files("fixtures/tools/engine-logs", "jsonl") {
        for line in std::fs::read_to_string(&f).unwrap().lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(c) = v["command"].as_str() {
                commands.push((f.display().to_string(), c.to_string()));
            }
            for raw in v["raw_lines"].as_array().into_iter().flatten() {
                if let Some(r) = raw.as_str() {
                    non_default(&f, r);
                }
            }
        }
    }
    for f in files("fixtures/tools/llama-server", "log") {
        for line in std::fs::read_to_string(&f).unwrap().lines() {
            if let Some(c) = line.strip_prefix("# command: ") {
                commands.push((f.display().to_string(), c.to_string()));
            }
        }
    }
    for f in files("fixtures/tools/vllm-logs", "txt") {
        for line in std::fs::read_to_string(&f).unwrap().lines() {
            non_default(&f, line);
        }
    }
    (commands, dests)
}

#[test]
fn every_real_command_in_the_fixtures_passes_the_flag_check() {
    let (commands, dests) = fixtures();
    let mut parsed = 0;
    for (from, cmd) in &commands {
        // From the engine's own name on: wrappers (docker run, uv run, sudo) are not the engine's.
        let w = words(cmd);
        let Some(start) = w.iter().position(|x| {
            x == "vllm"
                || x.starts_with("python")
                || x.ends_with("text-generation-launcher")
                || x == "llama-server"
        }) else {
            continue;
        };
        match parse_command(&w[start..]) {
            Ok(_) => parsed += 1,
            Err(e) => assert!(!e.0.contains("not an option"), "{from}: {cmd}\n  -> {e}"),
        }
    }
    assert!(
        parsed >= 20,
        "only {parsed} of {} commands parsed",
        commands.len()
    );
    assert!(dests.len() >= 10, "{dests:?}");
    for (from, dest) in &dests {
        if dest == "model_tag" {
            continue; // `vllm serve`'s positional
        }
        let flag = format!("--{}", dest.replace('_', "-"));
        assert!(
            matches!(check(Engine::Vllm, &flag), FlagCheck::Known(_)),
            "{from}: {flag}"
        );
    }
}

#[test]
fn a_misspelt_flag_is_the_error_the_engine_gives() {
    let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    for (cmd, want) in [
        (
            "vllm serve Qwen/Qwen3-8B --max-modle-len 8192",
            "did you mean --max-model-len?",
        ),
        (
            "python -m sglang.launch_server --model-path m --context_length 8192",
            "did you mean --context-length?",
        ),
        (
            "text-generation-launcher --model-id m --max-total-tokns 4096",
            "did you mean --max-total-tokens?",
        ),
        (
            "llama-server -m m.gguf --ctx-sise 4096",
            "did you mean --ctx-size?",
        ),
    ] {
        let e = parse_command(&w(cmd)).unwrap_err();
        assert!(
            e.0.contains("not an option of") && e.0.contains(want),
            "{cmd}: {e}"
        );
    }
    // argparse's abbreviation is the flag it abbreviates, as vLLM would read it
    let s = parse_command(&w("vllm serve m --max-model 4096")).unwrap();
    assert_eq!(s.max_model_len, Some(4096));
}

/// Each engine's parser as its source behaves: `_` as `-`, abbreviations, `--no-x`, dotted
/// options, the closest option for a typo (moved from src/flags.rs with the rooms, issue 32).
#[test]
fn each_parser_as_its_source_behaves() {
    use FlagCheck::*;
    let k = |s: &str| Known(s.to_string());
    for (engine, word, want) in [
        (Engine::Vllm, "--max-model-len", k("--max-model-len")),
        (Engine::Vllm, "--max_model_len", k("--max-model-len")),
        (Engine::Vllm, "--max-model", k("--max-model-len")),
        (
            Engine::Vllm,
            "--no-enable-prefix-caching",
            k("--no-enable-prefix-caching"),
        ),
        (
            Engine::Vllm,
            "--compilation-config.level",
            k("--compilation-config"),
        ),
        (Engine::Vllm, "-O3", k("-O")),
        (Engine::Vllm, "-tp", k("-tp")),
        (
            Engine::Vllm,
            "--max-modle-len",
            Unknown(Some("--max-model-len".into())),
        ),
        (Engine::Sglang, "--tp-size", k("--tp-size")),
        (Engine::Sglang, "--context-len", k("--context-length")),
        (
            Engine::Sglang,
            "--context_length",
            Unknown(Some("--context-length".into())),
        ),
        (Engine::Tgi, "--max-total-tokens", k("--max-total-tokens")),
        (Engine::Tgi, "--max-total", Unknown(None)),
        (Engine::LlamaCpp, "--n_gpu_layers", k("--n-gpu-layers")),
        (Engine::LlamaCpp, "-ngl", k("-ngl")),
        (
            Engine::LlamaCpp,
            "--ctx-sise",
            Unknown(Some("--ctx-size".into())),
        ),
    ] {
        assert_eq!(check(engine, word), want, "{engine:?} {word}");
    }
    assert!(matches!(check(Engine::Vllm, "--max"), Ambiguous(v) if v.len() > 3));
}
