#!/usr/bin/env bash
# Start the real llama-server of scripts/setup_llama_server.sh with each memory-relevant flag set
# below, keep its start-up log (verbosity 4) and stop it: the fixtures of
# crates/inferscope-plan/tests/llama_cpp_logs.rs (fixtures/tools/llama-server/).
#
#   scripts/capture_llama_server_logs.sh [WORKDIR]   (WORKDIR as for setup_llama_server.sh)
#
# Models: the e2e model (tiny.gguf: 2 layers, 128 wide, 4 heads, 2048 context), a wider one
# written by make_tiny_gguf.py (4 layers, 256 wide, 8 heads, 4096 context) and a gemma3 one
# with sliding-window attention written by make_tiny_gemma3_gguf.py (7 layers, 4 query and 2 KV
# heads of 64, window 128, 4096 context). Their GGUF headers
# (metadata and tensor infos, no tensor data) are kept beside the logs; the test restores each
# file's length as a sparse file so the planner reads it like the original.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=${1:-${INFERSCOPE_LLAMA_DIR:-$HOME/.cache/inferscope-llama}}
OUT=$HERE/../fixtures/tools/llama-server
S=$W/build/bin/llama-server
mkdir -p "$OUT"
[ -f "$W/tiny4.gguf" ] || "$W/venv/bin/python" "$HERE/make_tiny_gguf.py" "$W/tiny4.gguf" \
    --layers 4 --embd 256 --heads 8 --ff 512 --ctx 4096 >&2
[ -f "$W/gemma3.gguf" ] || "$W/venv/bin/python" "$HERE/make_tiny_gemma3_gguf.py" "$W/gemma3.gguf" >&2
for m in tiny tiny4 gemma3; do
    "$W/venv/bin/python" - "$W/$m.gguf" "$OUT/$m.gguf.head" <<'PY'
import sys
from gguf import GGUFReader
src, dst = sys.argv[1], sys.argv[2]
r = GGUFReader(src)
data = open(src, "rb").read()
open(dst, "wb").write(data[: r.data_offset])
open(dst + ".size", "w").write(f"{len(data)}\n")
PY
done
version=$("$S" --version 2>&1 | head -1)
port=18400
while read -r name model args; do
    [ -n "$name" ] || continue
    port=$((port + 1))
    log=$(mktemp)
    # shellcheck disable=SC2086
    "$S" -m "$W/$model.gguf" --port $port -t 1 -lv 4 $args >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do grep -q "listening on\|error" "$log" && break; sleep 0.1; done
    kill $pid; wait $pid 2>/dev/null || true
    {
        echo "# llama-server start-up log (verbosity 4), captured by scripts/capture_llama_server_logs.sh"
        echo "# llama-server: $version, built from the llama.cpp vendored in llama-cpp-python 0.3.36 (PyPI)"
        echo "# machine: the 2-core dev VM, CPU only (KV and compute buffers on the CPU; sizes are device-independent)"
        echo "# model: $model"
        echo "# command: llama-server -m $model.gguf $args"
        grep -v "^\s*$" "$log" | sed -E 's/^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+ //'
    } >"$OUT/$name.log"
    rm -f "$log"
    echo "$name: $(grep -c . "$OUT/$name.log") lines" >&2
done <<'RUNS'
c8192-np4 tiny -c 8192 -np 4
c8192-np1-q8_0 tiny -c 8192 -np 1 -ctk q8_0 -ctv q8_0 -fa on
c4096-np1-ctk-q4_0 tiny -c 4096 -np 1 -ctk q4_0 -fa on
c1000-np1 tiny -c 1000 -np 1
np1 tiny -np 1
c8192-auto tiny -c 8192
defaults tiny
c3000-np3-bf16-f32 tiny -c 3000 -np 3 -ctk bf16 -ctv f32 -fa on
c8192-np3 tiny -c 8192 -np 3
c0-np3-kvu tiny -c 0 -np 3 -kvu
w4-c16384-np4-q5_1-iq4_nl tiny4 -c 16384 -np 4 -ctk q5_1 -ctv iq4_nl -fa on
w4-np2 tiny4 -np 2
w4-ub128-no-kvu tiny4 -c 6000 -ub 128 -no-kvu
g3-c8192-np2 gemma3 -c 8192 -np 2
g3-c8192-auto gemma3 -c 8192
g3-swa-full gemma3 -c 8192 -np 2 --swa-full
g3-c16384-ub2048 gemma3 -c 16384 -np 1 -ub 2048 -ctk q8_0 -ctv q8_0 -fa on
RUNS
