#!/usr/bin/env bash
# Checks the CUDA backend on a machine with an NVIDIA GPU and no package registry.
#
# Expects: Python 3.11+ with numpy, pytest, pluggy, cuda-bindings (and libnvrtc, e.g. from
# torch's nvidia-cuda-nvrtc wheel), setuptools; cupy and torch are optional bench peers.
# Installs the core and plugins/cuda from this working tree into a throwaway venv that sees
# the system packages (pip --no-deps --no-build-isolation: no network), runs
#   1. tests/test_cuda.py               (NVRTC, shim, and the GPU runtime tests)
#   2. the cross-device suite on CUDA   (UOPS_TEST_DEVICES=CUDA pytest tests/test_tensor.py)
#   3. bench/ops.py --device CUDA       (when present; cupy/torch as peers when installed)
# and writes a summary to $OUT/gpu-summary.txt (or ./gpu-summary.txt). Logs go beside it.
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

say "== uops CUDA check: $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
if command -v nvidia-smi >/dev/null 2>&1; then
  say "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4)"
else
  say "nvidia-smi: not found"
fi
say "python: $("$PY" --version 2>&1)"

# ---- install (no network) ----
VENV=$(mktemp -d /tmp/uops-gpu-venv.XXXXXX)
"$PY" -m venv --system-site-packages "$VENV" >"$DEST/install.log" 2>&1
VPY="$VENV/bin/python"
export UOPS_CACHE_DIR="$VENV/cache"   # a fresh compile cache: every kernel is compiled by this run
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
if timeout "$(limit 90)" "$VPY" -m pip install -q --no-deps --no-build-isolation "$ROOT" "$ROOT/plugins/cuda" >>"$DEST/install.log" 2>&1; then
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
    (info / "INSTALLER").write_text("check_cuda.sh\n")
    eps = proj.get("entry-points", {})
    text = "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in e.items()) + "\n" for g, e in eps.items())
    if text:
        (info / "entry_points.txt").write_text(text)
dist(root / "pyproject.toml", {"uops": root / "core/uops"})
dist(root / "plugins/cuda/pyproject.toml", {"uops_cuda": root / "plugins/cuda/uops_cuda"})
PY
  then
    say "install: FAILED (see install.log)"; tail -20 "$DEST/install.log" | tee -a "$SUMMARY"; exit 1
  fi
  say "install: linked ($(elapsed) s)"
fi
say "versions: $("$VPY" - <<'PY' 2>&1
import importlib.metadata as md
out = []
for d in ("uops", "uops-cuda", "cuda-bindings", "numpy", "cupy-cuda12x", "cupy-cuda13x", "cupy", "torch"):
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
b = Device["CUDA"].backend
print("probe_compile:", b.probe_compile() or "ok")
print("probe_runtime:", b.probe_runtime() or "ok")
from uops_cuda.compiler import nvrtc_version, cuda_include_dir
print("nvrtc:", nvrtc_version(), "headers:", cuda_include_dir() or "fallback")
if b.probe_runtime() is None:
    from uops_cuda.runtime import device_arch, device_name
    print("gpu:", device_name(), device_arch())
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
run_tests test_cuda 90 UOPS_STRICT_PLUGINS=1 -- tests/test_cuda.py
run_tests tensor_suite_CUDA 150 UOPS_TEST_DEVICES=CUDA -- tests/test_tensor.py

# ---- bench ----
if [ -f bench/ops.py ]; then
  if timeout "$(limit 90)" "$VPY" bench/ops.py --device CUDA >"$DEST/bench.log" 2>&1; then
    say "bench: ok ($(elapsed) s)"
  else
    say "bench: rc=$? (see bench.log)"
  fi
  tail -40 "$DEST/bench.log" | sed 's/^/bench: /' | tee -a "$SUMMARY"
else
  say "bench: bench/ops.py not found in this tree"
fi

# ---- peers: the same cases in cupy and torch, timed the same way (best of 5 after a warm-up) ----
timeout "$(limit 90)" "$VPY" - "$ROOT/bench" >"$DEST/peers.log" 2>&1 <<'PY'
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
try:
    from ops import _best, _cases, _uops_fn  # bench/ops.py: same cases, same timing rule
except (ImportError, AttributeError) as e:
    sys.exit(f"bench/ops.py does not provide _cases/_best/_uops_fn ({e}); peers not measured")

def cupy_fn(kind, xs):
    import cupy as cp
    ts = [cp.asarray(x) for x in xs]
    def sm(a):
        e = cp.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    f = {"ew": lambda: cp.exp((ts[0] + ts[1]) * ts[2]), "sum": lambda: ts[0].sum(),
         "softmax": lambda: sm(ts[0]), "matmul": lambda: ts[0] @ ts[1]}[kind]
    def run():
        out = f(); cp.cuda.Device().synchronize(); return out
    return run

def torch_fn(kind, xs):
    import torch
    ts = [torch.from_numpy(x).cuda() for x in xs]
    f = {"ew": lambda: torch.exp((ts[0] + ts[1]) * ts[2]), "sum": lambda: ts[0].sum(),
         "softmax": lambda: torch.softmax(ts[0], dim=1), "matmul": lambda: ts[0] @ ts[1]}[kind]
    def run():
        out = f(); torch.cuda.synchronize(); return out
    return run

rng = np.random.default_rng(0)
print(f"{'case':36s} {'uops':>9s} {'cupy':>9s} {'torch':>9s} {'uops/cupy':>10s} {'uops/torch':>11s}")
for name, (shapes, kind) in _cases(False).items():
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    t_u = _best(_uops_fn(kind, xs, "CUDA")[0], 5)
    row = [t_u]
    for mk in (cupy_fn, torch_fn):
        try:
            row.append(_best(mk(kind, xs), 5))
        except Exception as e:  # a peer that is missing or broken here: report it and go on
            print(f"  {mk.__name__[:-3]}: {type(e).__name__}: {e}")
            row.append(None)
    fmt = lambda t: f"{t:9.3g}" if t else f"{'n/a':>9s}"
    rat = lambda t, w: f"{t_u / t:{w}.2f}" if t else f"{'n/a':>{w}s}"
    print(f"{name:36s} {fmt(t_u)} {fmt(row[1])} {fmt(row[2])} {rat(row[1], 10)} {rat(row[2], 11)}")
PY
say "peers: rc=$? ($(elapsed) s)"
sed 's/^/peers: /' "$DEST/peers.log" | tail -20 | tee -a "$SUMMARY"

say "== done in $(elapsed) s; logs in $DEST"
rm -rf "$VENV"
