#!/usr/bin/env bash
# Client CPU per streamed token and maximum sustained token rate on one core:
# inferscope bench vs GuideLLM 0.8.1, side by side, against the same local llama-server.
#
# Usage: scripts/bench_client_cpu.sh [OUTDIR]      (default: target/bench-client-cpu)
# Needs: scripts/setup_llama_server.sh (run here if needed), python3 + pip (GuideLLM is installed
# into ${INFERSCOPE_GUIDELLM_VENV:-$HOME/.cache/inferscope-guidellm/venv}: ~6 GB, a few minutes,
# once), taskset. Load goes only to 127.0.0.1; every run is bounded in time.
#
# Method
# * llama-server (tiny random model, 16 slots) is pinned to CPU 0, the client to CPU 1.
# * Same load for both clients: /v1/completions, streaming, ~64 prompt / 64 output tokens.
# * Tokens are counted by the server (llama.cpp /metrics `tokens_predicted_total`), the same
#   counter for both clients. Client CPU is user+system of the client process tree (getrusage of
#   children), so imports and start-up are included.
# * CPU per token is the *marginal* cost: (CPU of a 30 s run - CPU of a 10 s run) / (tokens of the
#   30 s run - tokens of the 10 s run), which removes fixed start-up cost (GuideLLM imports torch).
#   The totals of each run are printed too.
# * Max sustained rate: 32 concurrent streams for 20 s, client on one core; the median tokens/s
#   of the server counter over the seconds in which tokens flowed. If both clients reach the same
#   rate, the server (one core) is the limit, not the client.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/target/bench-client-cpu}
mkdir -p "$OUT"
eval "$("$ROOT/scripts/setup_llama_server.sh")"
TOK=$(dirname "$INFERSCOPE_TINY_GGUF")/tok
GV=${INFERSCOPE_GUIDELLM_VENV:-$HOME/.cache/inferscope-guidellm/venv}
if [ ! -x "$GV/bin/guidellm" ]; then
  python3 -m venv "$GV"
  "$GV/bin/pip" install -q guidellm==0.8.1
fi
(cd "$ROOT" && cargo build --release -q -p inferscope)
INF=$ROOT/target/release/inferscope

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

# run NAME CMD...: runs the command pinned to CPU 1; appends "NAME tokens= cpu_s= wall_s= rate= rc="
# where tokens is the server's counter delta and rate the median tokens/s over the seconds in which
# tokens flowed (so start-up time does not dilute it).
run() {
  local name=$1; shift
  python3 - "$URL" "$OUT/$name" "$@" <<'PY' | tee -a "$OUT/summary.txt"
import resource, statistics, subprocess, sys, time, urllib.request
url, out, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
def tokens():
    for line in urllib.request.urlopen(url + "/metrics", timeout=5).read().decode().splitlines():
        if line.startswith("llamacpp:tokens_predicted_total"):
            return float(line.split()[1])
    return 0.0
t0, w = tokens(), time.monotonic()
with open(out + ".log", "w") as log:
    p = subprocess.Popen(["taskset", "-c", "1"] + cmd, stdout=log, stderr=subprocess.STDOUT)
    samples, last = [], t0
    while p.poll() is None:
        time.sleep(1.0)
        now = tokens()
        samples.append(now - last)
        last = now
rc = p.wait()
wall = time.monotonic() - w
r = resource.getrusage(resource.RUSAGE_CHILDREN)
flowing = [d for d in samples[:-1] if d > 0]
rate = statistics.median(flowing) if flowing else 0.0
name = out.rsplit("/", 1)[1]
print(f"{name} tokens={tokens() - t0:.0f} cpu_s={r.ru_utime + r.ru_stime:.3f} wall_s={wall:.2f} rate={rate:.0f} rc={rc}")
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

: > "$OUT/summary.txt"
inferscope 10 4 inferscope-10s
inferscope 30 4 inferscope-30s
guidellm 10 4 guidellm-10s
guidellm 30 4 guidellm-30s
inferscope 20 32 inferscope-max
guidellm 20 32 guidellm-max

python3 - "$OUT/summary.txt" <<'PY' | tee "$OUT/report.txt"
import sys
rows = {}
for line in open(sys.argv[1]):
    name, *kv = line.split()
    rows[name] = {k: float(v) for k, v in (x.split("=") for x in kv)}
def marginal(c):
    a, b = rows[f"{c}-10s"], rows[f"{c}-30s"]
    return (b["cpu_s"] - a["cpu_s"]) / max(b["tokens"] - a["tokens"], 1)
print("client      CPU µs/token (marginal)  CPU µs/token (30 s run, incl. start-up)  max tok/s on 1 core (32 streams)")
for c in ("inferscope", "guidellm"):
    r30, mx = rows[f"{c}-30s"], rows[f"{c}-max"]
    print(f"{c:<11} {marginal(c)*1e6:>24.1f}  {r30['cpu_s']/max(r30['tokens'],1)*1e6:>39.1f}  {mx['rate']:>32.0f}")
print(f"ratio (GuideLLM / inferscope, marginal CPU per token): {marginal('guidellm')/marginal('inferscope'):.1f}x")
PY
