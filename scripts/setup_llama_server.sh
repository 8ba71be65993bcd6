#!/usr/bin/env bash
# Build llama.cpp's own `llama-server` from the llama.cpp sources vendored in the
# llama-cpp-python sdist on PyPI, and generate a tiny random-weight GGUF model plus a
# matching Hugging Face tokenizer folder, for inferscope-bench's end-to-end test and
# scripts/bench_client_cpu.sh.
#
# Adapted from the project's shared research recipe (recipes/llama-server.md,
# setup_llama_server.sh and make_tiny_gguf.py); llama.cpp is MIT-licensed
# (https://github.com/ggml-org/llama.cpp), llama-cpp-python is MIT-licensed.
#
# Usage: scripts/setup_llama_server.sh [WORKDIR]
#   WORKDIR defaults to ${INFERSCOPE_LLAMA_DIR:-$HOME/.cache/inferscope-llama}. Keep it outside the
#   clone: a machine that keeps its disk skips the ~8-minute build next time (idempotent).
# Prints, as its last lines, the two variables the e2e test reads:
#   export INFERSCOPE_LLAMA_SERVER=WORKDIR/build/bin/llama-server
#   export INFERSCOPE_TINY_GGUF=WORKDIR/tiny.gguf
# Needs: python3 (venv + pip, PyPI reachable on the first run), a C/C++ compiler.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=${1:-${INFERSCOPE_LLAMA_DIR:-$HOME/.cache/inferscope-llama}}
V=0.3.36   # llama-cpp-python version whose vendored llama.cpp we build (pinned: it moves every release)
mkdir -p "$W" && cd "$W"
W=$(pwd)
[ -x venv/bin/python ] || python3 -m venv venv
if ! venv/bin/python -c 'import gguf, numpy' 2>/dev/null || [ ! -x venv/bin/cmake ]; then
  venv/bin/pip install -q cmake ninja numpy gguf >&2
fi
export PATH="$W/venv/bin:$PATH"
if [ ! -x build/bin/llama-server ]; then
  [ -f sdist/llama_cpp_python-$V.tar.gz ] ||
    pip download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$V" -d sdist >&2
  rm -rf src && mkdir src
  tar xzf sdist/llama_cpp_python-$V.tar.gz -C src --strip-components=3 \
      llama_cpp_python-$V/vendor/llama.cpp
  cmake -S src -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
      -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
      -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >&2
  cmake --build build --target llama-server -j "$(nproc)" >&2
fi
# Never regenerate a GGUF in place (a running server may have it mmapped): write once.
if [ ! -f tiny.gguf ] || [ ! -f tok/tokenizer.json ]; then
  rm -f tiny.gguf.tmp
  python "$HERE/make_tiny_gguf.py" tiny.gguf.tmp --hf-tokenizer tok >&2
  mv tiny.gguf.tmp tiny.gguf
fi
build/bin/llama-server --version 2>&1 | head -1 >&2 || true
echo "export INFERSCOPE_LLAMA_SERVER=$W/build/bin/llama-server"
echo "export INFERSCOPE_TINY_GGUF=$W/tiny.gguf"
