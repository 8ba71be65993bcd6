#!/usr/bin/env bash
# Run every fuzz target in fuzz/ for SECONDS each (default 60), two at a time, and print
# executions, coverage and crashes per target.
#
#   scripts/fuzz.sh SECONDS [TARGET...]
#
# Harness: cargo-fuzz + libFuzzer (coverage-guided, in-process). cargo-fuzz wants nightly; this
# project's only toolchain is stable 1.95, so the build sets RUSTC_BOOTSTRAP=1, which lets stable
# rustc accept the unstable flags cargo-fuzz passes. Targets are built with debug assertions
# (integer overflow panics) and without AddressSanitizer (the parsers are safe Rust; ASan would
# halve the executions and find nothing the panic checks do not). Install: `cargo install cargo-fuzz`.
#
# Corpora start from fixtures/ (copied into fuzz/corpus/TARGET, which is kept between runs and
# ignored by git). A crash, hang (> 10 s per input) or memory use over 1 GiB stops that target
# and is saved in fuzz/artifacts/TARGET/; reproduce with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run -s none TARGET fuzz/artifacts/TARGET/crash-...
# then add the input to fixtures/bad/ with its expected error and a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
SECS=${1:-60}
shift || true
ALL=(cpulist procfs nvidia_smi_topo nvidia_smi_q nvidia_smi_xml hwloc_xml hf_config safetensors
     gguf torch_pickle oom engine_cmdline snapshot_json sse tokenizer_json detect)
if [ $# -gt 0 ]; then TARGETS=("$@"); else TARGETS=("${ALL[@]}"); fi
JOBS=${FUZZ_JOBS:-2}

command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz not installed: cargo install cargo-fuzz" >&2; exit 2; }
export RUSTC_BOOTSTRAP=1
cd fuzz
FLAGS=(--sanitizer none --debug-assertions --release)
# `cargo fuzz build` takes one target or all; build all (cheap after the first time).
cargo fuzz build "${FLAGS[@]}"

seed() { # seed TARGET FILES...
    local dir="corpus/$1"
    shift
    mkdir -p "$dir"
    for f in "$@"; do
        [ -f "$f" ] || continue
        local sz
        sz=$(stat -c %s "$f")
        [ "$sz" -le 262144 ] || continue
        cp -n "$f" "$dir/seed-$(echo "$f" | sed 's#[/ ]#_#g')" 2>/dev/null || true
    done
}
F=$REPO/fixtures
seed_all() {
    shopt -s nullglob globstar
    local d
    d=$(mktemp -d)
    printf '0-3,8-11' >"$d/a"; printf '0,2,4-4095' >"$d/b"; printf '' >"$d/c"; printf '0-4294967295' >"$d/e"
    seed cpulist "$d"/* "$F"/hosts/*/root/sys/devices/system/node/node*/cpulist
    seed procfs "$F"/bad/procfs/*.txt "$F"/hosts/*/root/proc/{meminfo,cpuinfo,cmdline} \
        "$F"/hosts/*/root/proc/self/{limits,mounts,cgroup,numa_maps}
    seed nvidia_smi_topo "$F"/tools/nvidia-smi-topo/*.txt
    seed nvidia_smi_q "$F"/tools/nvidia-smi-q/*.txt
    seed nvidia_smi_xml "$F"/tools/nvidia-smi-q/*.xml
    seed hwloc_xml "$F"/tools/hwloc/*.xml
    seed hf_config "$F"/bad/plan/*.json "$REPO"/crates/inferscope-plan/data/models/*.json
    seed safetensors "$F"/tools/safetensors/*.safetensors "$F"/tools/safetensors/*.index.json
    seed gguf "$F"/tools/gguf/*.gguf
    seed torch_pickle "$F"/tools/torch-snapshots/*.pickle
    seed oom "$F"/tools/oom/*.txt "$F"/bad/oom/*
    printf 'vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 2 --max-model-len 8192 --gpu-memory-utilization 0.9 --kv-cache-dtype fp8' >"$d/v"
    printf 'python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B --tp 2 --mem-fraction-static 0.8' >"$d/s"
    printf 'text-generation-launcher --model-id x --num-shard 2 --max-total-tokens 4096' >"$d/t"
    printf 'llama-server -m model.gguf -c 8192 -ngl 99 --parallel 4 -ctk q8_0' >"$d/l"
    printf 'llama-server -m m.gguf -c 4294967296 -np 4096 -ngl all -ctk q4_1 -ctv iq4_nl -fa on -ub 1048576 -kvu --swa-full' >"$d/l2"
    printf 'llama-server -m m.gguf -c 0 -np -1 -ngl auto -fa off -ctv q8_0 -no-kvu' >"$d/l3"
    printf 'CUDA_VISIBLE_DEVICES=0,1 env X=1 vllm serve x --quantization awq --dtype half' >"$d/w"
    seed engine_cmdline "$d"/v "$d"/s "$d"/t "$d"/l "$d"/l2 "$d"/l3 "$d"/w
    seed snapshot_json "$F"/bad/snapshot/*.json "$REPO"/crates/inferscope/tests/snapshots/*.json
    printf '\x02\x10\x80data: {"a":1}\r\n\r\ndata: [DONE]\n\n' >"$d/sse1"
    printf '\x01\x40: keep-alive\nevent: error\ndata: boom\n\nretry: 10\nid: 3\ndata:x\rdata:y\r\r' >"$d/sse2"
    seed sse "$d"/sse1 "$d"/sse2
    seed tokenizer_json "$F"/tokenizers/tiny-llama-spm/tokenizer.json "$F"/bad/tokenizer/*.json
    seed detect "$F"/tools/nvidia-smi-topo/*.txt "$F"/tools/nvidia-smi-q/*.txt "$F"/tools/hwloc/*.xml \
        "$F"/bad/snapshot/*
    rm -rf "$d"
}
seed_all

mkdir -p logs artifacts
run_one() {
    local t=$1
    mkdir -p "artifacts/$t" "corpus/$t"
    local n_before
    n_before=$(ls "artifacts/$t" | wc -l)
    set +e
    timeout $((SECS + 120)) "target/x86_64-unknown-linux-gnu/release/$t" "corpus/$t" \
        -max_total_time="$SECS" -timeout=10 -rss_limit_mb=1024 -max_len=262144 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"logs/$t.log" 2>&1
    local rc=$?
    set -e
    local execs cov ft crashes
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' || true)
    cov=$(grep -o 'cov: [0-9]*' "logs/$t.log" | tail -1 | grep -o '[0-9]*' || true)
    ft=$(grep -o 'ft: [0-9]*' "logs/$t.log" | tail -1 | grep -o '[0-9]*' || true)
    crashes=$(( $(ls "artifacts/$t" | wc -l) - n_before ))
    printf '%-16s rc=%-3s execs=%-10s cov=%-6s ft=%-6s corpus=%-5s new_artifacts=%s\n' \
        "$t" "$rc" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$(ls "corpus/$t" | wc -l)" "$crashes"
}
export -f run_one
export SECS
printf '%s\n' "${TARGETS[@]}" | xargs -P "$JOBS" -I{} bash -c 'run_one {}'
echo "logs in fuzz/logs/, crashing inputs (if any) in fuzz/artifacts/"
