#!/usr/bin/env bash
# Build llama.cpp's own `llama-server` from the llama.cpp sources vendored in the
# llama-cpp-python sdist on PyPI, and generate a tiny random-weight GGUF model plus a
# matching Hugging Face tokenizer folder, for the end-to-end tests and
# scripts/bench_client_cpu.sh. `scripts/test` runs this for you.
#
# Adapted from the project's research recipe (docs/decisions.md, "A real llama-server in the
# tests"); llama.cpp is MIT-licensed (https://github.com/ggml-org/llama.cpp), llama-cpp-python is
# MIT-licensed.
#
# Usage: scripts/setup_llama_server.sh [WORKDIR]
#   WORKDIR defaults to ${INFERSCOPE_LLAMA_DIR:-$HOME/.cache/inferscope-llama}. Keep it outside the
#   clone: a machine that keeps its disk skips the ~9-minute build next time (idempotent).
#
# The build is portable: no -march=native (a cache reused on another CPU must not die with
# SIGILL). On x86-64 it targets x86-64-v2 (SSE4.2, every x86 server since 2009); elsewhere the
# compiler's default target. Each build lives in build-<version>-<hash of its flags>, so changing
# the version or the flags never reuses a stale binary, and a build is moved into place only when
# it finished and its binary runs.
#
# Prints, as its last lines, the two variables the e2e tests read, and writes the same lines to
# WORKDIR/env, where a plain `cargo test` finds them after one set-up:
#   export INFERSCOPE_LLAMA_SERVER=WORKDIR/build-.../bin/llama-server
#   export INFERSCOPE_TINY_GGUF=WORKDIR/tiny.gguf
# Needs: python3 (venv + pip, PyPI reachable on the first run), a C/C++ compiler.
# Exits non-zero, with the failing step named on stderr, when anything fails.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=${1:-${INFERSCOPE_LLAMA_DIR:-$HOME/.cache/inferscope-llama}}
V=0.3.36   # llama-cpp-python version whose vendored llama.cpp we build (pinned: it moves every release)
fail() { echo "setup_llama_server: $*" >&2; exit 1; }

FLAGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF
       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON
       -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF)
case "$(uname -m)" in
  # With GGML_NATIVE=OFF ggml turns AVX/AVX2/BMI2/FMA/F16C on by default (ggml/CMakeLists.txt,
  # INS_ENB): name the baseline explicitly.
  x86_64) FLAGS+=(-DGGML_SSE42=ON -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_BMI2=OFF
                  -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_AVX512=OFF) ;;
esac
KEY="$V-$(printf '%s\n' "${FLAGS[@]}" | sha256sum | cut -c1-12)"

command -v python3 >/dev/null || fail "python3 is not installed (Debian: apt-get install python3 python3-venv)"
command -v c++ >/dev/null || fail "no C++ compiler (Debian: apt-get install g++)"
# (Not `mkdir && cd`: set -e does not stop on the left side of `&&`.)
mkdir -p "$W" || fail "cannot create the cache folder $W"
cd "$W" || fail "cannot enter the cache folder $W"
W=$(pwd)
if [ ! -x venv/bin/python ]; then
  python3 -m venv venv || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
fi
if ! venv/bin/python -c 'import gguf, numpy' 2>/dev/null || [ ! -x venv/bin/cmake ]; then
  echo "setup_llama_server: installing cmake, ninja, numpy, gguf from PyPI into $W/venv" >&2
  venv/bin/pip install -q cmake ninja numpy gguf >&2 || fail "pip install from PyPI failed (is PyPI reachable?)"
fi
export PATH="$W/venv/bin:$PATH"

B="$W/build-$KEY"
# A cached binary that does not run (another CPU, a broken copy) is rebuilt, not trusted.
if [ -x "$B/bin/llama-server" ] && ! "$B/bin/llama-server" --version >/dev/null 2>&1; then
  echo "setup_llama_server: cached $B/bin/llama-server does not run here; rebuilding" >&2
  rm -rf "$B"
fi
if [ ! -x "$B/bin/llama-server" ]; then
  echo "setup_llama_server: building llama-server from llama-cpp-python $V (~9 min on 2 cores, once)" >&2
  [ -f "sdist/llama_cpp_python-$V.tar.gz" ] ||
    pip download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$V" -d sdist >&2 ||
    fail "pip download llama-cpp-python==$V failed (is PyPI reachable?)"
  rm -rf src "$B.partial"
  mkdir src
  tar xzf "sdist/llama_cpp_python-$V.tar.gz" -C src --strip-components=3 \
      "llama_cpp_python-$V/vendor/llama.cpp" || fail "unpacking the sdist failed"
  cmake -S src -B "$B.partial" -G Ninja "${FLAGS[@]}" >&2 || fail "cmake configure failed"
  cmake --build "$B.partial" --target llama-server -j "$(nproc)" >&2 || fail "building llama-server failed"
  "$B.partial/bin/llama-server" --version >/dev/null 2>&1 || fail "the freshly built llama-server does not run"
  rm -rf src
  mv "$B.partial" "$B"
fi
# Never regenerate a GGUF in place (a running server may have it mmapped): write once.
if [ ! -f tiny.gguf ] || [ ! -f tok/tokenizer.json ]; then
  rm -f tiny.gguf.tmp
  python "$HERE/make_tiny_gguf.py" tiny.gguf.tmp --hf-tokenizer tok >&2 || fail "generating the tiny GGUF failed"
  mv tiny.gguf.tmp tiny.gguf
fi
"$B/bin/llama-server" --version 2>&1 | head -1 >&2
printf 'export INFERSCOPE_LLAMA_SERVER=%s\nexport INFERSCOPE_TINY_GGUF=%s\n' \
  "$B/bin/llama-server" "$W/tiny.gguf" > env.tmp
mv env.tmp env
cat env
