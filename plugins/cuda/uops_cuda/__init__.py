"""uops backends "CUDA" and "CUDA_EMU": CUDA C rendered once, run on an NVIDIA GPU or on the CPU.

CUDA      CUDARenderer -> NVRTCCompiler (CUBIN) -> CUDA driver API (cuda-bindings). Compiling
          needs no GPU (NVRTC is a pip wheel), so `uops compile --device CUDA` works in CI.
CUDA_EMU  the same CUDARenderer source, compiled for the host by clang++ with the core's
          gpu_shim.h and launched by uops.backends.gpu_emu: the numerical proof of the CUDA renderer on
          machines without a GPU. When NVRTC is installed, each kernel is also compiled by
          NVRTC first (UOPS_CUDA_EMU_NVRTC=0 skips that), so the source is proven to be CUDA too.

Only this module is imported when the core loads the plugin. The probes run to choose
`Device.DEFAULT`, so they use only the file system and ctypes: the driver's device node is
looked for, then the driver is dlopened and asked for a device count; NVRTC and the C++
compiler are looked up, not loaded. Neither cuda-bindings nor numpy is imported until a
factory below needs them.
"""

from __future__ import annotations

import functools
import os
import sys

from uops.plugin import Backend, any_path_exists, emulation_probe, hookimpl

TYPE_CHECKING = False  # typing is not imported at run time: it would cost every start ~5 ms
if TYPE_CHECKING:
    import ctypes
    from pathlib import Path

    from uops.plugin import Compiler, Runtime
    from uops_cuda.renderer import CUDARenderer

__version__ = "0.1.0"

DEFAULT_ARCH = "sm_90"  # Hopper: the target when there is no GPU to ask
TARGETS = (DEFAULT_ARCH, "sm_75", "sm_80", "sm_86", "sm_89", "sm_100", "sm_120", "compute_90")
NVRTC_INSTALL_HINT = "install NVRTC with `pip install nvidia-cuda-nvrtc cuda-bindings` (no GPU needed to compile)"
_LIBCUDA = ("libcuda.so.1", "libcuda.so")
_DRIVER_NODES = ("/dev/nvidiactl", "/dev/dxg")  # the Linux driver's control node; WSL2's GPU paravirtualization
_NVRTC_SONAMES = ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12")


# ----- probes: ctypes and the file system only -----


@functools.lru_cache(maxsize=1)
def probe_runtime() -> str | None:
    """None when the NVIDIA driver loads and sees a GPU; else ``no NVIDIA driver/GPU: <reason>``.

    Without the driver's device node the answer is "no" at the cost of a stat. Otherwise
    ``cuInit`` and ``cuDeviceGetCount`` through ctypes: the same answer cuda-bindings would give,
    without importing it (the bindings and numpy cost ~130 ms).
    """
    if not any_path_exists(*_DRIVER_NODES):
        return f"no NVIDIA driver/GPU: {' and '.join(_DRIVER_NODES)} do not exist (the NVIDIA driver is not loaded)"
    import ctypes

    lib = None
    for name in _LIBCUDA:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return "no NVIDIA driver/GPU: libcuda.so (the NVIDIA driver library) was not found"
    err = lib.cuInit(0)
    if err != 0:
        return f"no NVIDIA driver/GPU: cuInit failed with CUresult {err}{_cu_error_name(lib, err)}"
    count = ctypes.c_int(0)
    err = lib.cuDeviceGetCount(ctypes.byref(count))
    if err != 0:
        return f"no NVIDIA driver/GPU: cuDeviceGetCount failed with CUresult {err}{_cu_error_name(lib, err)}"
    if count.value < 1:
        return "no NVIDIA driver/GPU: the driver is installed but sees no CUDA device (check CUDA_VISIBLE_DEVICES)"
    return None


def _cu_error_name(lib: ctypes.CDLL, err: int) -> str:
    import ctypes

    name = ctypes.c_char_p()
    if lib.cuGetErrorName(err, ctypes.byref(name)) == 0 and name.value:
        return f" ({name.value.decode(errors='replace')})"
    return ""


def find_nvrtc_libraries() -> list[Path]:
    """libnvrtc.so files in NVIDIA wheels on sys.path (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib) and CUDA_HOME."""
    from pathlib import Path

    return [Path(p) for p in _nvrtc_library_paths()]


def _nvrtc_library_paths() -> list[str]:
    """The paths of `find_nvrtc_libraries`, for the probe: strings, so choosing a device never imports pathlib.

    Directory listings, not glob patterns: globbing compiles regular expressions (milliseconds).
    """
    roots = [os.path.join(p, "nvidia") for p in sys.path if p]
    roots += [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    found: list[str] = []
    for root in roots:
        try:
            libdirs = [os.path.join(root, d, "lib") for d in sorted(os.listdir(root))]
        except OSError:
            continue
        for d in [*libdirs, os.path.join(root, "lib64"), os.path.join(root, "lib")]:
            try:
                names = sorted(os.listdir(d))
            except OSError:
                continue
            found += [
                os.path.join(d, n)
                for n in names
                if n.startswith("libnvrtc.so") and "builtins" not in n and os.path.isfile(os.path.join(d, n))
            ]
    return found


def _cuda_bindings_installed() -> bool:
    """Whether ``cuda.bindings`` can be imported, decided without importing the ``cuda`` package."""
    for entry in sys.path:
        if os.path.isdir(os.path.join(entry or ".", "cuda", "bindings")):
            return True
    return False


def probe_compile() -> str | None:
    """None when cuda-bindings is installed and a libnvrtc is found (a wheel, CUDA_HOME, or the loader path)."""
    if not _cuda_bindings_installed():
        return f"the CUDA compiler needs cuda-bindings, which is not installed; {NVRTC_INSTALL_HINT}"
    if _nvrtc_library_paths():
        return None
    import ctypes

    for name in _NVRTC_SONAMES:
        try:
            ctypes.CDLL(name)
            return None
        except OSError:
            continue
    where = "no nvidia wheel on sys.path, no CUDA_HOME, not on the loader path"
    return f"cannot find libnvrtc ({where}); {NVRTC_INSTALL_HINT}"


# ----- factories -----


def _arch(arch: str | None) -> str:
    """The requested arch, else the GPU's own when one is present, else DEFAULT_ARCH."""
    if arch is not None:
        return arch
    if probe_runtime() is None:
        from uops_cuda.runtime import device_arch

        return device_arch()
    return DEFAULT_ARCH


def _renderer(arch: str | None) -> CUDARenderer:
    from uops_cuda.renderer import CUDARenderer

    return CUDARenderer(_arch(arch))


def _compiler(arch: str | None) -> Compiler:
    from uops_cuda.compiler import NVRTCCompiler

    return NVRTCCompiler(_arch(arch))


def _runtime() -> Runtime:
    from uops_cuda.runtime import CUDARuntime

    return CUDARuntime("CUDA")


def _emu_renderer(arch: str | None) -> CUDARenderer:
    from uops_cuda.renderer import CUDARenderer

    return CUDARenderer(arch or DEFAULT_ARCH, device="CUDA_EMU")


def _emu_compiler(arch: str | None) -> Compiler:
    from uops_cuda.compiler import nvrtc_available
    from uops_cuda.emulated import EmulatedCUDACompiler

    check = os.environ.get("UOPS_CUDA_EMU_NVRTC", "1").strip() != "0" and nvrtc_available() is None
    return EmulatedCUDACompiler(arch or DEFAULT_ARCH, nvrtc_check=check)


def _emu_runtime() -> Runtime:
    from uops_cuda.emulated import emulated_runtime

    return emulated_runtime()


@hookimpl
def uops_backends() -> list[Backend]:
    """CUDA (priority 100, the preferred device when a GPU is present) and CUDA_EMU (20)."""
    return [
        Backend(
            device="CUDA",
            renderer=_renderer,
            compiler=_compiler,
            runtime=_runtime,
            probe_compile=probe_compile,
            probe_runtime=probe_runtime,
            targets=TARGETS,
            priority=100,
            plugin_api=(1, 1),  # the uops.plugin API this release is built for
        ),
        Backend(
            device="CUDA_EMU",
            renderer=_emu_renderer,
            compiler=_emu_compiler,
            runtime=_emu_runtime,
            probe_compile=emulation_probe,
            probe_runtime=emulation_probe,
            targets=(DEFAULT_ARCH,),
            priority=20,
            plugin_api=(1, 1),  # the uops.plugin API this release is built for
        ),
    ]
