#!/usr/bin/env bash
# Client CPU per streamed token: inferscope bench vs GuideLLM 0.8.1 vs AIPerf 0.13.0, side by
# side, against the same local llama-server.
#
# Usage: scripts/bench_client_cpu.sh [OUTDIR]      (default: target/bench-client-cpu)
# Env:   INFERSCOPE_BIN (an inferscope binary; default: cargo build --release),
#        CLIENTS (default "inferscope guidellm aiperf"), SHORT_S / LONG_S (default 10 / 30).
# Needs: scripts/setup_llama_server.sh (run here if needed), python3 + pip, taskset. GuideLLM is
# installed into ${INFERSCOPE_GUIDELLM_VENV:-$HOME/.cache/inferscope-guidellm/venv} (~6 GB with
# torch) and AIPerf into ${INFERSCOPE_AIPERF_VENV:-$HOME/.cache/inferscope-aiperf/venv} (~1.2 GB),
# each once. Load goes only to 127.0.0.1; every run is bounded in time.
#
# Method
# * llama-server (tiny random model, 32 slots, one thread) is pinned to CPU 0, the client to
#   CPU 1. Same load for every client: /v1/completions, streaming, 4 concurrent streams,
#   64 prompt / 64 output tokens (ignore_eos).
# * Tokens are counted by the server (llama.cpp /metrics `tokens_predicted_total`), the same
#   counter for every client. Client CPU is user+system of the client's whole process tree
#   (getrusage of children), so interpreter start-up, imports and worker processes count.
# * Whole-run CPU per token: CPU of the LONG_S run / its tokens (start-up included).
#   Marginal CPU per token: (CPU of the LONG_S run - CPU of the SHORT_S run) / (tokens of the
#   LONG_S run - tokens of the SHORT_S run), which removes the fixed start-up cost.
# * Ratio: the better (lower) peer's figure over inferscope's, for both measures.
# * `uptime` before and after: this machine is shared, and neighbours' load inflates everyone's
#   CPU time (more cache misses, more wake-ups); compare figures from the same report only.
# AIPerf note: its offline mode (HF_HUB_OFFLINE=1) cannot load a tokenizer from a local folder
# (0.13.0 resolves every name through snapshot_download, which rejects paths), so it runs without
# that variable; the folder is local and nothing is downloaded.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/target/bench-client-cpu}
SHORT_S=${SHORT_S:-10}
LONG_S=${LONG_S:-30}
CLIENTS=${CLIENTS:-inferscope guidellm aiperf}
mkdir -p "$OUT"
# Assigned first so a failing set-up stops the script (`eval "$(…)"` would hide its status).
if ! SETUP=$("$ROOT/scripts/setup_llama_server.sh"); then
  echo "bench_client_cpu: scripts/setup_llama_server.sh failed" >&2
  exit 2
fi
eval "$SETUP"
TOK=$(dirname "$INFERSCOPE_TINY_GGUF")/tok
GV=${INFERSCOPE_GUIDELLM_VENV:-$HOME/.cache/inferscope-guidellm/venv}
AV=${INFERSCOPE_AIPERF_VENV:-$HOME/.cache/inferscope-aiperf/venv}
for c in $CLIENTS; do
  case $c in
    guidellm) if [ ! -x "$GV/bin/guidellm" ]; then
        python3 -m venv "$GV" && "$GV/bin/pip" install -q guidellm==0.8.1
      fi ;;
    aiperf) if [ ! -x "$AV/bin/aiperf" ]; then
        python3 -m venv "$AV" && "$AV/bin/pip" install -q aiperf==0.13.0
      fi ;;
  esac
done
if [ -n "${INFERSCOPE_BIN:-}" ]; then
  INF=$INFERSCOPE_BIN
else
  (cd "$ROOT" && cargo build --release -q -p inferscope)
  INF=$ROOT/target/release/inferscope
fi

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
taskset -c 0 "$INFERSCOPE_LLAMA_SERVER" -m "$INFERSCOPE_TINY_GGUF" --alias tiny --host 127.0.0.1 \
  --port "$PORT" -c 32768 -np 32 -t 1 --metrics > "$OUT/server.log" 2>&1 &
SERVER=$!
cleanup() {
  kill "$SERVER" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$SERVER" 2>/dev/null || return 0; sleep 0.2; done
  kill -9 "$SERVER" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 200); do curl -sf "$URL/health" >/dev/null && break; sleep 0.05; done

# run NAME CMD...: runs the command pinned to CPU 1 (with a hard time limit); appends
# "NAME tokens= cpu_s= wall_s= rc=" where tokens is the server's counter delta.
run() {
  local name=$1; shift
  python3 - "$URL" "$OUT/$name" "$@" <<'PY' | tee -a "$OUT/summary.txt"
import resource, subprocess, sys, time, urllib.request
url, out, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
def tokens():
    for line in urllib.request.urlopen(url + "/metrics", timeout=5).read().decode().splitlines():
        if line.startswith("llamacpp:tokens_predicted_total"):
            return float(line.split()[1])
    raise SystemExit("llama-server /metrics has no tokens_predicted_total")
t0, w = tokens(), time.monotonic()
with open(out + ".log", "w") as log:
    p = subprocess.Popen(["taskset", "-c", "1"] + cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        rc = p.wait(timeout=600)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
wall = time.monotonic() - w
time.sleep(0.5)  # requests the client abandoned may still be counted by the server
r = resource.getrusage(resource.RUSAGE_CHILDREN)
name = out.rsplit("/", 1)[1]
print(f"{name} tokens={tokens() - t0:.0f} cpu_s={r.ru_utime + r.ru_stime:.3f} "
      f"user_s={r.ru_utime:.3f} sys_s={r.ru_stime:.3f} wall_s={wall:.2f} rc={rc}")
PY
}

inferscope() { # SECONDS STREAMS NAME
  run "$3" "$INF" bench --url "$URL" --model tiny --concurrency "$2" --duration "$1s" \
    --dataset random:in=64,out=64 --quiet --timeout 60s --out "$OUT/$3.json"
}
guidellm() { # SECONDS STREAMS NAME
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 run "$3" "$GV/bin/guidellm" run \
    --backend "kind=openai_http,target=$URL,model=tiny,request_format=/v1/completions" \
    --tokenizer "kind=hf_auto,model=$TOK" \
    --data kind=synthetic_text,prompt_tokens=64,output_tokens=64 \
    --profile "kind=concurrent,streams=$2" \
    --constraint "kind=max_duration,seconds=$1" \
    --output "kind=json,path=$OUT/$3.json" --disable-console-interactive
}
aiperf() { # SECONDS STREAMS NAME
  (cd "$OUT" && run "$3" "$AV/bin/aiperf" profile --model tiny --url "$URL" \
    --endpoint-type completions --streaming --concurrency "$2" --benchmark-duration "$1" \
    --prompt-input-tokens-mean 64 --prompt-input-tokens-stddev 0 \
    --prompt-output-tokens-mean 64 --prompt-output-tokens-stddev 0 \
    --extra-inputs ignore_eos:true --extra-inputs min_tokens:64 --tokenizer "$TOK" \
    --output-artifact-dir "$OUT/$3" --ui-type none --no-server-metrics --no-gpu-telemetry)
}

: > "$OUT/summary.txt"
echo "load before: $(uptime)" | tee "$OUT/load.txt"
for c in $CLIENTS; do
  "$c" "$SHORT_S" 4 "$c-short"
  "$c" "$LONG_S" 4 "$c-long"
done
echo "load after:  $(uptime)" | tee -a "$OUT/load.txt"

python3 - "$OUT/summary.txt" "$OUT/load.txt" $CLIENTS <<'PY' | tee "$OUT/report.txt"
import sys
rows = {}
for line in open(sys.argv[1]):
    name, *kv = line.split()
    rows[name] = {k: float(v) for k, v in (x.split("=") for x in kv)}
clients = sys.argv[3:]
def whole(c):
    r = rows[f"{c}-long"]
    return r["cpu_s"] / max(r["tokens"], 1)
def marginal(c):
    a, b = rows[f"{c}-short"], rows[f"{c}-long"]
    return (b["cpu_s"] - a["cpu_s"]) / max(b["tokens"] - a["tokens"], 1)
print(open(sys.argv[2]).read().rstrip())
print("4 streams, 64/64 tokens, llama-server on CPU 0, client on CPU 1")
print(f"{'client':<11} {'tokens':>7} {'user s':>7} {'sys s':>7} {'µs/token whole run':>19} {'µs/token marginal':>18}")
for c in clients:
    r = rows[f"{c}-long"]
    print(f"{c:<11} {r['tokens']:>7.0f} {r['user_s']:>7.2f} {r['sys_s']:>7.2f} "
          f"{whole(c)*1e6:>19.1f} {marginal(c)*1e6:>18.1f}")
peers = [c for c in clients if c != "inferscope"]
if "inferscope" in clients and peers:
    bw = min(whole(c) for c in peers)
    bm = min(marginal(c) for c in peers)
    print(f"ratio (better peer / inferscope): whole run {bw / whole('inferscope'):.1f}x, "
          f"marginal {bm / max(marginal('inferscope'), 1e-12):.1f}x")
PY
