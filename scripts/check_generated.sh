#!/usr/bin/env bash
# The `--check` mode of every generator of committed fixtures: run each one in a scratch copy of
# the working tree and fail, naming the generator and the files, when its output differs from
# what is committed. A generator whose output drifted (a schema change, a new field) is caught
# here, not in a later session. `scripts/test` runs this.
#
# Usage: scripts/check_generated.sh [path/to/inferscope]   (default target/debug/inferscope)
# Needs: python3; the model-file generator's pinned packages are installed into
# ${INFERSCOPE_GEN_VENV:-$HOME/.cache/inferscope-gen/venv} from PyPI on the first run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "${1:-$ROOT/target/debug/inferscope}")
VENV=${INFERSCOPE_GEN_VENV:-$HOME/.cache/inferscope-gen/venv}
fail() { echo "check_generated: $*" >&2; exit 1; }
[ -x "$BIN" ] || fail "no inferscope binary at $BIN (cargo build first)"

# scripts/make_model_file_fixtures.py says which versions wrote the committed files.
PINS=(safetensors==0.8.0 gguf==0.19.0 numpy==2.4.6)
if ! "$VENV/bin/python" -c 'import safetensors, gguf, numpy' 2>/dev/null; then
  echo "check_generated: installing ${PINS[*]} from PyPI into $VENV" >&2
  python3 -m venv "$VENV" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install -q "${PINS[@]}" >&2 || fail "pip install ${PINS[*]} failed (is PyPI reachable?)"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$ROOT" && git ls-files -co --exclude-standard -z |
  tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$tmp"
g() { git -C "$tmp" -c user.name=check -c user.email=check@invalid "$@"; }
g init -q
g add -A
g commit -qm base

run() {
  local name=$1; shift
  (cd "$tmp" && "$@" >/dev/null) || fail "$name failed to run"
  if [ -n "$(g status --porcelain)" ]; then
    echo "check_generated: $name does not reproduce the committed files:" >&2
    g status --short >&2
    g --no-pager diff --stat >&2 || true
    fail "rerun it in the repository and commit its output (or fix the generator)"
  fi
  echo "check_generated: $name reproduces its files" >&2
}
python3 "$ROOT/scripts/make_hosts.py" --check >/dev/null || fail "scripts/make_hosts.py --check failed"
echo "check_generated: scripts/make_hosts.py --check passed" >&2
run scripts/make_hosts.py python3 scripts/make_hosts.py
run scripts/make_torch_snapshots.py python3 scripts/make_torch_snapshots.py
run scripts/make_model_file_fixtures.py "$VENV/bin/python" scripts/make_model_file_fixtures.py
run scripts/make_fleet.py python3 scripts/make_fleet.py "$BIN"
