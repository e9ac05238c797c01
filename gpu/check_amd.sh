#!/usr/bin/env bash
# Checks the AMD backend on a machine with an AMD GPU (ROCm's HIP runtime installed) and no package registry.
#
# Expects: Python 3.11+ with numpy, pytest, pluggy, setuptools; clang-19 + lld-19 (or UOPS_AMD_CLANG naming a
# clang that knows the GPU's gfx target); libamdhip64 (ROCm, or UOPS_HIP_LIB naming it).
# Installs the core and plugins/amd from this working tree into a throwaway venv that sees
# the system packages (pip --no-deps --no-build-isolation: no network), runs
#   1. tests/test_amd.py                (code objects, AMD_EMU, the HIP runtime)
#   2. the cross-device suite on AMD    (UOPS_TEST_DEVICES=AMD pytest tests/test_tensor.py)
#   3. bench/ops.py --device AMD        (when present)
# and writes a summary to $OUT/gpu-summary.txt (or ./gpu-summary.txt). Logs go beside it.
# What only this script can prove: the kernarg packing and launch on real hardware, the GPU's own
# numerics (pow/sin/exp2 lowerings, half/bf16 instructions), wave-size-dependent behaviour.
# Budget: under 6 minutes; every step has its own timeout.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DEST="${OUT:-$ROOT}"
mkdir -p "$DEST"
SUMMARY="$DEST/gpu-summary.txt"
PY="${PYTHON:-python3}"
START=$(date +%s)
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(( $(date +%s) - START )); }
DEADLINE=${CHECK_DEADLINE_S:-330}  # the whole script stays under 6 minutes
limit() {  # limit WANT: WANT seconds, or what is left before the deadline if less (at least 5)
  local left=$(( DEADLINE - $(elapsed) ))
  [ "$left" -lt "$1" ] && echo $(( left > 5 ? left : 5 )) || echo "$1"
}

say "== uops AMD check: $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
if command -v rocminfo >/dev/null 2>&1; then
  say "$(rocminfo 2>&1 | grep -E '^ *(Marketing Name|Name: +gfx)' | head -4)"
else
  say "rocminfo: not found"
fi
say "python: $("$PY" --version 2>&1)"

# ---- install (no network) ----
VENV=$(mktemp -d /tmp/uops-gpu-venv.XXXXXX)
"$PY" -m venv --system-site-packages "$VENV" >"$DEST/install.log" 2>&1
VPY="$VENV/bin/python"
export UOPS_CACHE_DIR="$VENV/cache"   # a fresh compile cache: every kernel is compiled by this run
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
if timeout "$(limit 90)" "$VPY" -m pip install -q --no-deps --no-build-isolation "$ROOT" "$ROOT/plugins/amd" >>"$DEST/install.log" 2>&1; then
  say "install: pip ok ($(elapsed) s)"
else
  # an old setuptools without the wheel package cannot build; lay the packages out by hand:
  # the package directories linked into site-packages plus the dist-info metadata (version,
  # the plugin's requirement on uops, its entry points) that plugin discovery reads
  say "install: pip could not build (see install.log); linking the packages instead"
  if ! "$VPY" - "$ROOT" >>"$DEST/install.log" 2>&1 <<'PY'
import os, re, sys, sysconfig, tomllib
from pathlib import Path
root = Path(sys.argv[1]); site = Path(sysconfig.get_paths()["purelib"])
def dist(pyproject: Path, links: dict[str, Path]) -> None:
    proj = tomllib.loads(pyproject.read_text())["project"]
    if "version" not in proj:  # the core single-sources its version in the package
        init = (root / "core/uops/version.py").read_text()
        proj["version"] = re.search(r'^__version__ = "([^"]+)"', init, re.M).group(1)
    for name, target in links.items():
        (site / name).symlink_to(target, target_is_directory=True)
    info = site / f"{proj['name'].replace('-', '_')}-{proj['version']}.dist-info"
    info.mkdir()
    meta = [f"Metadata-Version: 2.1", f"Name: {proj['name']}", f"Version: {proj['version']}"]
    meta += [f"Requires-Dist: {r}" for r in proj.get("dependencies", [])]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    (info / "INSTALLER").write_text("check_amd.sh\n")
    eps = proj.get("entry-points", {})
    text = "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in e.items()) + "\n" for g, e in eps.items())
    if text:
        (info / "entry_points.txt").write_text(text)
dist(root / "pyproject.toml", {"uops": root / "core/uops"})
dist(root / "plugins/amd/pyproject.toml", {"uops_amd": root / "plugins/amd/uops_amd"})
PY
  then
    say "install: FAILED (see install.log)"; tail -20 "$DEST/install.log" | tee -a "$SUMMARY"; exit 1
  fi
  say "install: linked ($(elapsed) s)"
fi
say "versions: $("$VPY" - <<'PY' 2>&1
import importlib.metadata as md
out = []
for d in ("uops", "uops-amd", "numpy", "torch"):
    try:
        out.append(f"{d}={md.version(d)}")
    except md.PackageNotFoundError:
        pass
print(" ".join(out))
PY
)"

# ---- probe ----
timeout "$(limit 60)" "$VPY" - >"$DEST/probe.log" 2>&1 <<'PY'
from uops.plugins import Device
b = Device["AMD"].backend
print("probe_compile:", b.probe_compile() or "ok")
print("probe_runtime:", b.probe_runtime() or "ok")
from uops_amd.compiler import find_clang
from uops_amd.runtime import find_hip_library
print("clang:", find_clang(), "hip:", find_hip_library())
if b.probe_runtime() is None:
    from uops_amd.runtime import device_arch
    print("gpu:", device_arch())
PY
sed 's/^/probe: /' "$DEST/probe.log" | tee -a "$SUMMARY"

# ---- tests ----
run_tests() {  # name, timeout, env..., -- pytest args...
  local name=$1 limit=$2; shift 2
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout "$(limit "$limit")" "$VPY" -m pytest -q -rs -p no:cacheprovider "$@" >"$DEST/$name.log" 2>&1
  local rc=$?
  say "$name: rc=$rc $(grep -E '(passed|failed|error|skipped)' "$DEST/$name.log" | tail -1) ($(elapsed) s)"
  grep -E '^(FAILED|ERROR)' "$DEST/$name.log" | head -15 | tee -a "$SUMMARY"
}
run_tests test_amd 120 UOPS_STRICT_PLUGINS=1 -- tests/test_amd.py
run_tests tensor_suite_AMD 150 UOPS_TEST_DEVICES=AMD -- tests/test_tensor.py

# ---- bench ----
if [ -f bench/ops.py ]; then
  if timeout "$(limit 90)" "$VPY" bench/ops.py --device AMD >"$DEST/bench.log" 2>&1; then
    say "bench: ok ($(elapsed) s)"
  else
    say "bench: rc=$? (see bench.log)"
  fi
  tail -40 "$DEST/bench.log" | sed 's/^/bench: /' | tee -a "$SUMMARY"
else
  say "bench: bench/ops.py not found in this tree"
fi

say "== done in $(elapsed) s; logs in $DEST"
rm -rf "$VENV"
