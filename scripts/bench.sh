#!/usr/bin/env bash
# Wall-clock benchmark of the foundation commands (issue: "snapshot and topo each well under
# 50 ms"). Times whole process runs, as a user sees them, with hyperfine (Debian package
# `hyperfine`); falls back to a plain loop when hyperfine is absent. Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
bin=target/release/inferscope
big=fixtures/hosts/h100-sxm8-2s-switch-12nic/root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" snapshot --root "$big" >"$tmp/h100.json"
cmds=(
  "$bin snapshot"
  "$bin topo"
  "$bin snapshot --root $big"
  "$bin topo --root $big"
  "$bin topo --snapshot $tmp/h100.json"
  "$bin gather --out $tmp/g.tar.gz"
  "$bin check"
  "$bin check --root $big"
  "$bin run --dry-run --root $big --gpus auto:4 -- true"
  "$bin plan --gpu l40s --gpus 2 -- vllm serve Qwen/Qwen2.5-72B-Instruct-AWQ --tensor-parallel-size 2 --max-model-len 32768"
  "$bin plan --find --model meta-llama/Llama-3.1-70B-Instruct --max-model-len 8192 --concurrency 32"
)
if command -v hyperfine >/dev/null; then
  hyperfine -N -i --warmup 5 --min-runs 50 --export-markdown "$tmp/bench.md" "${cmds[@]}" >/dev/null
  cat "$tmp/bench.md"
else
  for c in "${cmds[@]}"; do
    start=$(date +%s%N)
    for _ in $(seq 50); do $c >/dev/null; done
    end=$(date +%s%N)
    echo "$c: $(( (end - start) / 50000 )) us per run (mean of 50)"
  done
fi
