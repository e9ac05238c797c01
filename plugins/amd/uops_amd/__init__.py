"""uops backends "AMD" and "AMD_EMU": HIP-style C rendered once, run on an AMD GPU or on the CPU.

AMD       AMDRenderer -> HIPCompiler (clang-19 + lld: an HSA code object) -> HIP runtime
          (libamdhip64 through ctypes). Compiling needs no GPU and no ROCm, so
          `uops compile --device AMD --arch gfx1100` works in CI.
AMD_EMU   the same AMDRenderer source, compiled for the host with the core's gpu_shim.h and the
          AMD dialect (uops_amd.emulated), launched by uops.backends.gpu_emu: the numerical proof
          of the AMD renderer on machines without a GPU. When clang-19 is installed each kernel
          is also compiled to a real code object first (UOPS_AMD_EMU_CHECK=0 skips that).

Only this module is imported when the core loads the plugin. The probes run to choose
`Device.DEFAULT`, so they only look: clang-19 and lld on PATH, the amdgpu driver's /dev/kfd
(only when it exists is the HIP runtime asked), a host C++ compiler for AMD_EMU.
"""

from __future__ import annotations

import functools
import os

from uops.plugin import Backend, any_path_exists, emulation_probe, hookimpl, which

TYPE_CHECKING = False  # typing is not imported at run time: it would cost every start ~5 ms
if TYPE_CHECKING:
    from uops.plugin import Compiler, Runtime
    from uops_amd.renderer import AMDRenderer

__version__ = "0.1.0"

DEFAULT_ARCH = "gfx942"  # MI300: the target when there is no GPU to ask
TARGETS = (DEFAULT_ARCH, "gfx90a", "gfx1100", "gfx1201")
CLANG_INSTALL_HINT = (
    "install clang-19 and lld-19 (Debian/Ubuntu: apt-get install clang-19 lld-19) or set UOPS_AMD_CLANG"
)
_KFD = "/dev/kfd"  # the amdgpu kernel driver's compute node


def locate_clang() -> tuple[str | None, str | None]:
    """(clang-19 with lld beside it, None) or (None, what is missing): ``UOPS_AMD_CLANG``, else clang-19."""
    env = os.environ.get("UOPS_AMD_CLANG")
    found = next((f for f in map(which, [env] if env else ["clang-19", "/usr/lib/llvm-19/bin/clang"]) if f), None)
    if found is None:
        what = f"UOPS_AMD_CLANG={env!r} was not found" if env else "the AMD compiler needs clang-19, not found"
        return None, f"{what}; {CLANG_INSTALL_HINT}"
    clang = os.path.realpath(found)
    if not any(os.path.exists(os.path.join(os.path.dirname(clang), n)) for n in ("lld", "ld.lld")):
        return None, f"{clang} has no lld beside it to link code objects; {CLANG_INSTALL_HINT}"
    return clang, None


def probe_compile() -> str | None:
    """clang-19 and its lld looked up (not run); a clang that exists but fails is reported at compile."""
    return locate_clang()[1]


@functools.lru_cache(maxsize=1)
def probe_runtime() -> str | None:
    """No /dev/kfd: no AMD GPU, at the cost of a stat. Otherwise the HIP runtime is loaded and asked."""
    if not any_path_exists(_KFD):
        return f"no AMD GPU/HIP runtime: {_KFD} does not exist (the amdgpu driver is not loaded)"
    from uops_amd.runtime import probe_runtime as hip_probe

    return hip_probe()


def _arch(arch: str | None) -> str:
    """The requested arch, else the GPU's own when one is present, else DEFAULT_ARCH."""
    if arch is not None:
        return arch
    if probe_runtime() is None:
        from uops_amd.runtime import device_arch

        return device_arch()
    return DEFAULT_ARCH


def _renderer(arch: str | None) -> AMDRenderer:
    from uops_amd.renderer import AMDRenderer

    return AMDRenderer(_arch(arch))


def _compiler(arch: str | None) -> Compiler:
    from uops_amd.compiler import HIPCompiler

    return HIPCompiler(_arch(arch))


def _runtime() -> Runtime:
    from uops_amd.runtime import HIPRuntime

    return HIPRuntime("AMD")


# ----- AMD_EMU -----


def _emu_renderer(arch: str | None) -> AMDRenderer:
    from uops_amd.renderer import AMDRenderer

    return AMDRenderer(arch or DEFAULT_ARCH, device="AMD_EMU")


def _emu_compiler(arch: str | None) -> Compiler:
    from uops_amd.compiler import clang_available
    from uops_amd.emulated import EmulatedAMDCompiler

    check = os.environ.get("UOPS_AMD_EMU_CHECK", "1").strip() != "0" and clang_available() is None
    return EmulatedAMDCompiler(arch or DEFAULT_ARCH, amd_check=check)


def _emu_runtime() -> Runtime:
    from uops_amd.emulated import emulated_runtime

    return emulated_runtime()


@hookimpl
def uops_backends() -> list[Backend]:
    """AMD (priority 90: preferred when its GPU is present) and AMD_EMU (15)."""
    return [
        Backend(
            device="AMD",
            renderer=_renderer,
            compiler=_compiler,
            runtime=_runtime,
            probe_compile=probe_compile,
            probe_runtime=probe_runtime,
            targets=TARGETS,
            priority=90,
            plugin_api=(1, 1),  # the uops.plugin API this release is built for
        ),
        Backend(
            device="AMD_EMU",
            renderer=_emu_renderer,
            compiler=_emu_compiler,
            runtime=_emu_runtime,
            probe_compile=emulation_probe,
            probe_runtime=emulation_probe,
            targets=TARGETS,
            priority=15,
            plugin_api=(1, 1),  # the uops.plugin API this release is built for
        ),
    ]
