//! The detector on engines started as `python -m MODULE` (the engines' modules are
//! registered on `Engine`; these cases were in `engine_command.rs`'s inline tests).

use inferscope_host::engine::Engine;
use inferscope_host::engine_command::{Found, find, module_engine};

fn kind(c: &str) -> Option<Engine> {
    let words: Vec<&str> = c.split(' ').collect();
    match find(&words) {
        Found::Engine { kind, .. } => Some(kind),
        _ => None,
    }
}

#[test]
fn python_modules_name_their_engine() {
    assert_eq!(
        kind("numactl -N 1 -m 1 python3 -m sglang.launch_server --model-path m"),
        Some(Engine::Sglang)
    );
    assert_eq!(
        kind("python3 -u -msglang.launch_server --model-path m"),
        Some(Engine::Sglang)
    );
    // a module of the package that is not its server
    assert_eq!(
        find(&["python3", "-m", "sglang.bench_serving", "--x"]),
        Found::PythonModule {
            module: "sglang.bench_serving".into(),
            args: 3
        }
    );
    assert_eq!(module_engine("sglang.bench_serving"), Some(Engine::Sglang));
    assert_eq!(
        module_engine("vllm.entrypoints.cli.main"),
        Some(Engine::Vllm)
    );
    assert_eq!(module_engine("sglangx.launch_server"), None);
    assert_eq!(kind("python3 -m sglang.launch_server_x"), None);
}
