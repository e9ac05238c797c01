#!/usr/bin/env bash
# Checks the CUDA backend on a machine with an NVIDIA GPU and no package registry.
#
# Expects: Python 3.11+ with numpy, pytest, pluggy, cuda-bindings (and libnvrtc, e.g. from
# torch's nvidia-cuda-nvrtc wheel), setuptools; torch is optional (the cuBLAS peer of the matmul goal, and the
# peer on the same GPU in steps 4 and 5); scikit-learn is optional (the digits of step 6).
# Installs the core and plugins/cuda from this working tree (gpu/common.sh), then runs
#   1. plugins/cuda/tests/test_cuda.py    (NVRTC, shim, and the GPU runtime tests)
#   2. bench/gpu.py --device CUDA         (the issue-12 goals: elementwise GB/s as % of 4.3 TB/s,
#                                          fp32 matmul 4096^3 vs torch.matmul or 67 TFLOP/s x 0.5)
#   3. the cross-device suite on CUDA     (UOPS_TEST_DEVICES=CUDA pytest tests/frontend/test_tensor.py)
#   4. bench/models.py --only train       (digits CNN steps/s and conv2d fwd+bwd ms, torch on the GPU beside)
#   5. bench/ops.py --device CUDA         (the CPU bench's cases on the GPU, torch.compile/eager on the GPU)
#   6. examples/train_digits.py           (the digits CNN trained on CUDA: held-out accuracy, steps/s)
#   7. bench/gpu.py --only matmul --beam 2 (BEAM-searched matmul, with what time is left)
# and writes a summary to $OUT/gpu-summary.txt (or ./gpu-summary.txt), the goal table to
# gpu-goals.txt, logs beside them. Budget: under 9 minutes (CHECK_DEADLINE_S, default 540);
# every step has its own timeout, cut to what is left.
set -uo pipefail
CHECK_DEADLINE_S=${CHECK_DEADLINE_S:-540}
source "$(dirname "$0")/common.sh"

check_begin CUDA
if command -v nvidia-smi >/dev/null 2>&1; then
  say "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4)"
else
  say "nvidia-smi: not found"
fi
check_install plugins/cuda
check_versions uops uops-cuda cuda-bindings nvidia-cuda-nvrtc numpy torch

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

# ---- tests, goals, benches ----
run_tests test_cuda 90 UOPS_STRICT_PLUGINS=1 -- plugins/cuda/tests/test_cuda.py
run_step goals 120 -- "$VPY" bench/gpu.py --device CUDA --runs 10 --summary "$DEST/gpu-goals.txt"
run_tests tensor_suite_CUDA 120 UOPS_TEST_DEVICES=CUDA -- tests/frontend/test_tensor.py
run_step train 90 -- "$VPY" bench/models.py --device CUDA --only train --runs 3
run_step bench 120 -- "$VPY" bench/ops.py --device CUDA --runs 3 $(torch_peer)
if "$VPY" -c "import sklearn" >/dev/null 2>&1; then
  run_step train_digits 60 -- "$VPY" examples/train_digits.py --device CUDA --epochs 30
else
  say "train_digits: skipped (no scikit-learn: the held-out accuracy needs the real digits)"
fi
run_step beam_matmul 90 -- "$VPY" bench/gpu.py --device CUDA --only matmul --beam 2 --runs 5

check_end
