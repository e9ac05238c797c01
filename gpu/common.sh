# The steps every gpu/check_<backend>.sh shares; sourced, never run on its own.
#
# A check runs on a GPU machine with no package registry: it installs the core and one plugin
# from this working tree into a throwaway venv that sees the system packages (pip --no-deps
# --no-build-isolation: no network; or, when pip cannot build, the packages linked in by hand),
# runs tests and benches each under its own timeout, and writes a summary to
# $OUT/gpu-summary.txt (or ./gpu-summary.txt) with the logs beside it.
#
#   check_begin TITLE                 the summary file, the clock (CHECK_DEADLINE_S caps the whole run)
#   check_install PLUGIN_DIR          core + plugin into $VPY's venv (UOPS_CACHE_DIR fresh in it)
#   check_versions DIST...            one line of installed versions
#   run_tests NAME SECONDS [ENV=V...] -- PYTEST_ARGS...
#   run_step NAME SECONDS [ENV=V...] -- COMMAND...   (output to NAME.log, its tail into the summary)
#   torch_peer                        prints bench/ops.py's --torch-python argument where $VPY has torch
#   check_end                         elapsed time; the venv removed
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST="${OUT:-$ROOT}"
SUMMARY="$DEST/gpu-summary.txt"
PY="${PYTHON:-python3}"
START=$(date +%s)
DEADLINE=${CHECK_DEADLINE_S:-450}  # the whole script stays under 8 minutes

say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(( $(date +%s) - START )); }
limit() {  # limit WANT: WANT seconds, or what is left before the deadline if less (at least 5)
  local left=$(( DEADLINE - $(elapsed) ))
  [ "$left" -lt "$1" ] && echo $(( left > 5 ? left : 5 )) || echo "$1"
}

check_begin() {
  cd "$ROOT" || exit 1
  mkdir -p "$DEST"
  : >"$SUMMARY"
  say "== uops $1 check: $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
}

check_install() {  # check_install PLUGIN_DIR: sets VENV and VPY
  local plugin=$1
  VENV=$(mktemp -d /tmp/uops-gpu-venv.XXXXXX)
  "$PY" -m venv --system-site-packages "$VENV" >"$DEST/install.log" 2>&1
  VPY="$VENV/bin/python"
  export UOPS_CACHE_DIR="$VENV/cache"   # a fresh compile cache: every kernel is compiled by this run
  export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
  say "python: $("$VPY" --version 2>&1)"
  if timeout "$(limit 90)" "$VPY" -m pip install -q --no-deps --no-build-isolation "$ROOT" "$ROOT/$plugin" \
      >>"$DEST/install.log" 2>&1; then
    say "install: pip ok ($(elapsed) s)"
    return 0
  fi
  # an old setuptools without the wheel package cannot build; lay the packages out by hand:
  # the package directories linked into site-packages plus the dist-info metadata (version,
  # the plugin's requirement on uops, its entry points) that plugin discovery reads
  say "install: pip could not build (see install.log); linking the packages instead"
  if ! "$VPY" - "$ROOT" "$plugin" >>"$DEST/install.log" 2>&1 <<'PY'
import re, sys, sysconfig, tomllib
from pathlib import Path
root, plugin = Path(sys.argv[1]), Path(sys.argv[1]) / sys.argv[2]
site = Path(sysconfig.get_paths()["purelib"])
def dist(pyproject: Path, packages: list[Path]) -> None:
    proj = tomllib.loads(pyproject.read_text())["project"]
    if "version" not in proj:  # the core single-sources its version in the package
        init = (root / "core/uops/version.py").read_text()
        proj["version"] = re.search(r'^__version__ = "([^"]+)"', init, re.M).group(1)
    for pkg in packages:
        (site / pkg.name).symlink_to(pkg, target_is_directory=True)
    info = site / f"{proj['name'].replace('-', '_')}-{proj['version']}.dist-info"
    info.mkdir()
    meta = ["Metadata-Version: 2.1", f"Name: {proj['name']}", f"Version: {proj['version']}"]
    meta += [f"Requires-Dist: {r}" for r in proj.get("dependencies", [])]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    (info / "INSTALLER").write_text("gpu/common.sh\n")
    eps = proj.get("entry-points", {})
    text = "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in e.items()) + "\n" for g, e in eps.items())
    if text:
        (info / "entry_points.txt").write_text(text)
dist(root / "pyproject.toml", [root / "core/uops"])
dist(plugin / "pyproject.toml", sorted(p for p in plugin.glob("uops_*") if (p / "__init__.py").is_file()))
PY
  then
    say "install: FAILED (see install.log)"; tail -20 "$DEST/install.log" | tee -a "$SUMMARY"; exit 1
  fi
  say "install: linked ($(elapsed) s)"
}

check_versions() {  # check_versions DIST...: the installed version of each distribution present
  say "versions: $("$VPY" - "$@" <<'PY' 2>&1
import importlib.metadata as md, sys
out = []
for d in sys.argv[1:]:
    try:
        out.append(f"{d}={md.version(d)}")
    except md.PackageNotFoundError:
        pass
print(" ".join(out))
PY
)"
}

_split_env() {  # fills ENVS with the VAR=VALUE words before "--", CMD with the rest
  ENVS=(); while [ "$1" != "--" ]; do ENVS+=("$1"); shift; done; shift
  CMD=("$@")
}

run_tests() {  # run_tests NAME SECONDS [ENV=V...] -- PYTEST_ARGS...
  local name=$1 want=$2; shift 2
  _split_env "$@"
  env "${ENVS[@]}" timeout "$(limit "$want")" "$VPY" -m pytest -q -rs -p no:cacheprovider "${CMD[@]}" \
    >"$DEST/$name.log" 2>&1
  local rc=$?
  say "$name: rc=$rc $(grep -E '(passed|failed|error|skipped)' "$DEST/$name.log" | tail -1) ($(elapsed) s)"
  grep -E '^(FAILED|ERROR)' "$DEST/$name.log" | head -15 | tee -a "$SUMMARY"
}

run_step() {  # run_step NAME SECONDS [ENV=V...] -- COMMAND...: NAME.log, its last 40 lines in the summary
  local name=$1 want=$2; shift 2
  _split_env "$@"
  env "${ENVS[@]}" timeout "$(limit "$want")" "${CMD[@]}" >"$DEST/$name.log" 2>&1
  local rc=$?
  say "$name: rc=$rc ($(elapsed) s)"
  tail -40 "$DEST/$name.log" | sed "s/^/$name: /" | tee -a "$SUMMARY"
}

torch_peer() {  # the venv sees the system's packages: torch there is the peer (on the GPU: bench/peers.py)
  "$VPY" -c "import torch" >/dev/null 2>&1 && echo "--torch-python $VPY"
}

check_end() {
  say "== done in $(elapsed) s; logs in $DEST"
  rm -rf "$VENV"
}
