#!/usr/bin/env bash
# Checks the AMD backend on a machine with an AMD GPU (ROCm's HIP runtime installed) and no package registry.
#
# Expects: Python 3.11+ with numpy, pytest, pluggy, setuptools; clang-19 + lld-19 (or UOPS_AMD_CLANG naming a
# clang that knows the GPU's gfx target); libamdhip64 (ROCm, or UOPS_HIP_LIB naming it).
# Installs the core and plugins/amd from this working tree (gpu/common.sh), then runs
#   1. plugins/amd/tests/test_amd.py    (code objects, AMD_EMU, the HIP runtime)
#   2. the cross-device suite on AMD    (UOPS_TEST_DEVICES=AMD pytest tests/frontend/test_tensor.py)
#   3. bench/models.py --only train     (digits CNN steps/s and conv2d fwd+bwd, torch on the GPU where ROCm's is)
#   4. bench/ops.py --device AMD        (torch.compile/eager on the GPU beside, where ROCm's torch is)
# and writes a summary to $OUT/gpu-summary.txt (or ./gpu-summary.txt). Logs go beside it.
# What only this script can prove: the kernarg packing and launch on real hardware, the GPU's own
# numerics (pow/sin/exp2 lowerings, half/bf16 instructions), wave-size-dependent behaviour.
# Budget: under 6 minutes (CHECK_DEADLINE_S, default 330 here); every step has its own timeout.
set -uo pipefail
CHECK_DEADLINE_S=${CHECK_DEADLINE_S:-330}
source "$(dirname "$0")/common.sh"

check_begin AMD
if command -v rocminfo >/dev/null 2>&1; then
  say "$(rocminfo 2>&1 | grep -E '^ *(Marketing Name|Name: +gfx)' | head -4)"
else
  say "rocminfo: not found"
fi
check_install plugins/amd
check_versions uops uops-amd numpy torch

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

# ---- tests, bench ----
run_tests test_amd 120 UOPS_STRICT_PLUGINS=1 -- plugins/amd/tests/test_amd.py
run_tests tensor_suite_AMD 150 UOPS_TEST_DEVICES=AMD -- tests/frontend/test_tensor.py
run_step train 60 -- "$VPY" bench/models.py --device AMD --only train --runs 3
run_step bench 90 -- "$VPY" bench/ops.py --device AMD --runs 3 $(torch_peer)

check_end
