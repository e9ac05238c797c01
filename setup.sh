#!/usr/bin/env bash
# Sets up a virtual environment with the core and every plugin as separate packages, then
# runs the main job (`bash setup.sh demo`), the test suite (`bash setup.sh test`) or the static
# checks (`bash setup.sh lint`: ruff check, ruff format --check, mypy).
set -euo pipefail
cd "$(dirname "$0")"
job="${1:-demo}"
shift || true
case "$job" in demo|test|lint) ;; *) echo "usage: bash setup.sh demo|test|lint [args for uops demo / pytest]" >&2; exit 2 ;; esac

if ! command -v clang >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing clang (the CPU backend's compiler) with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang >/dev/null
  else
    echo "setup: clang is missing; the CPU backend needs it. Install it (e.g. 'sudo apt-get install clang')" \
         "and rerun. Continuing: the PYTHON backend works without it." >&2
  fi
fi

if ! command -v clang-19 >/dev/null 2>&1 && [ ! -x /usr/lib/llvm-19/bin/clang ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing clang-19 and lld-19 (the AMD backend's compiler, the METAL check) with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-19 lld-19 >/dev/null || \
      echo "setup: could not install clang-19/lld-19; the AMD compile target stays unavailable" >&2
  else
    echo "setup: clang-19 is missing; the AMD backend compiles with it (e.g. 'sudo apt-get install clang-19 lld-19')." \
         "Continuing: AMD_EMU runs without the code-object check." >&2
  fi
fi

PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
VPY=.venv/bin/python
"$VPY" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
plugins=()
for p in plugins/*/; do [ -f "$p/pyproject.toml" ] && plugins+=("./$p"); done
if [ "$job" = test ] || [ "$job" = lint ]; then
  "$VPY" -m pip install -q --disable-pip-version-check -e ".[test]" "${plugins[@]/#/-e}" 2>&1 | grep -v "^WARNING: Location" || true
  if [ "$job" = lint ]; then
    .venv/bin/ruff check .
    .venv/bin/ruff format --check .
    exec .venv/bin/mypy
  fi
  exec "$VPY" -m pytest -q -n "${UOPS_TEST_WORKERS:-auto}" "$@"  # one worker per core (pytest-xdist)
else
  "$VPY" -m pip install -q --disable-pip-version-check . "${plugins[@]}" 2>&1 | grep -v "^WARNING: Location" || true
  exec .venv/bin/uops demo "$@"
fi
