//! Help texts that list engines are built from the engines' rooms (`inferscope::help`); they
//! read word for word as when they were written by hand (issue 32), with LMDeploy, the fifth
//! engine's room, added by its registration alone.

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_inferscope"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn engine_lists_read_as_before() {
    for (args, text) in [
        (
            &["plan", "--help"][..],
            "Will this model and these flags fit, how many users, how fast. Paste the serving command after `--` (vllm serve, sglang, text-generation-launcher, llama-server, lmdeploy serve api_server)",
        ),
        (
            &["--help"][..],
            "Will this model and these flags fit, how many users, how fast. Paste the serving command after `--` (vllm serve, sglang, text-generation-launcher, llama-server, lmdeploy serve api_server)",
        ),
        (
            &["plan", "--help"][..],
            "Engine of the expected speed figures: vllm, sglang, tgi, trtllm, llama.cpp, mlc (default: the pasted command's engine, else vllm)",
        ),
        (
            &["mem", "startup", "--help"][..],
            "Read a vLLM, SGLang, TGI, llama-server or LMDeploy start-up log: the memory the engine measured, the planner's prediction beside it, and for a failed start-up the diagnosis and fixes\n",
        ),
        (
            &["mem", "--help"][..],
            "Read a vLLM, SGLang, TGI, llama-server or LMDeploy start-up log: the memory the engine measured, the planner's prediction beside it, and for a failed start-up the diagnosis and fixes\n",
        ),
        (
            &["bench", "--help"][..],
            "Scrape engine metrics (Prometheus text) from this URL while the run goes, instead of the default URL/metrics (vLLM, SGLang, TGI, LMDeploy, llama-server --metrics)",
        ),
        (
            &["run", "--help"][..],
            "How CUDA_VISIBLE_DEVICES names the GPUs: index (with CUDA_DEVICE_ORDER=PCI_BUS_ID), or uuid (refused for engines that reject UUIDs: vLLM, SGLang)",
        ),
    ] {
        let h = help(args);
        assert!(h.contains(text), "{args:?}:\n{h}");
    }
}
