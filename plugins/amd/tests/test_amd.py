"""The AMD plugin: clang-19 builds real HSA code objects (no GPU, no ROCm), AMD_EMU runs the same source on
the CPU, and the HIP runtime's error paths are exercised against Debian's libamdhip64 (which finds no device).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from uops import AxisType, Ops, UOp, dtypes
from uops.codegen.linearizer import linearize
from uops.codegen.program import get_program
from uops.compiler import CompileError, CompilerUnavailableError
from uops.dtypes import AddrSpace, bf16_to_f32, f32_to_bf16
from uops.plugins import Device

pytest.importorskip("uops_amd", reason="the uops-amd plugin is not installed")
from uops_amd.compiler import (  # noqa: E402
    EM_AMDGPU,
    TARGETS,
    HIPCompiler,
    clang_available,
    code_object_kernels,
    elf_machine_flags,
)
from uops_amd.renderer import AMDRenderer, wave_size  # noqa: E402

CLANG_REASON = clang_available()
needs_clang = pytest.mark.skipif(CLANG_REASON is not None, reason=f"clang-19 unavailable: {CLANG_REASON}")
EMU_REASON = Device["AMD_EMU"].backend.probe_runtime() if "AMD_EMU" in Device.names() else "no AMD_EMU"
needs_emu = pytest.mark.skipif(EMU_REASON is not None, reason=f"AMD_EMU unavailable: {EMU_REASON}")
# EF_AMDGPU_MACH (the low byte of e_flags) per target, from LLVM's ELF.h
MACH = {"gfx90a": 0x3F, "gfx942": 0x4C, "gfx1100": 0x41, "gfx1201": 0x4E}


def glob(slot: int, dt=dtypes.float32) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), slot)


TWO_KERNELS = r"""
extern "C" __attribute__((global)) void __attribute__((amdgpu_flat_work_group_size(1, 64)))
scale(float* __restrict__ out, const float* __restrict__ x, const int* __restrict__ idx, int n, int k) {
  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = x[idx[i]] * (float)k;
}
extern "C" __attribute__((global)) void fill(int* out, int v) { out[__builtin_amdgcn_workitem_id_x()] = v; }
"""


def _run(device: str, ast: UOp, inputs: list[np.ndarray], out: np.ndarray, var_vals=None):
    d = Device[device]
    spec = get_program(ast, d.renderer, d.compiler)
    al = d.runtime.allocator
    handles = [al.alloc(out.nbytes)] + [al.alloc(x.nbytes) for x in inputs]
    for h, x in zip(handles[1:], inputs):
        al.copyin(h, memoryview(np.ascontiguousarray(x).reshape(-1).view(np.uint8)))
    g, loc = spec.launch_dims(var_vals)
    d.runtime.load(spec.name, spec.lib)(*handles, global_size=g, local_size=loc, vals=spec.vals(var_vals))
    res = np.empty_like(out)
    al.copyout(memoryview(res.reshape(-1).view(np.uint8)), handles[0])
    return res, spec


# ---------------------------------------------------------------------------------------
# the compiler: real code objects for every target


@needs_clang
@pytest.mark.parametrize("arch", TARGETS)
def test_code_object_is_amdgpu_elf_with_a_descriptor_per_kernel(arch):
    blob = HIPCompiler(arch).compile(TWO_KERNELS)
    machine, flags = elf_machine_flags(blob)
    assert machine == EM_AMDGPU == 224
    assert flags & 0xFF == MACH[arch], f"e_flags 0x{flags:x} is not {arch}"
    kernels = code_object_kernels(blob)
    assert set(kernels) == {"scale", "fill"}
    assert {k.symbol for k in kernels.values()} == {"scale.kd", "fill.kd"}
    assert kernels["scale"].max_flat_workgroup_size == 64 and kernels["fill"].max_flat_workgroup_size == 1024
    assert kernels["scale"].wavefront_size == wave_size(arch)


@needs_clang
def test_kernarg_layout_from_metadata_is_what_the_runtime_packs():
    import struct

    from uops_amd.runtime import pack_kernargs

    meta = code_object_kernels(HIPCompiler().compile(TWO_KERNELS))["scale"]
    assert [(a.offset, a.size, a.kind) for a in meta.explicit_args] == [
        (0, 8, "global_buffer"),
        (8, 8, "global_buffer"),
        (16, 8, "global_buffer"),
        (24, 4, "by_value"),
        (28, 4, "by_value"),
    ]
    seg = pack_kernargs(meta, (0x1000, 0x2000, 0x3000), (7, -3))
    assert len(seg) == meta.kernarg_size >= 32
    assert struct.unpack_from("<QQQii", seg, 0) == (0x1000, 0x2000, 0x3000, 7, -3)
    with pytest.raises(ValueError, match=r"'scale' takes 3 buffers and 2 int variables, got 2 buffers and 2"):
        pack_kernargs(meta, (1, 2), (7, -3))
    with pytest.raises(ValueError, match="got 3 buffers and 1 variables"):
        pack_kernargs(meta, (1, 2, 3), (7,))


@needs_clang
def test_kernarg_layout_of_a_rendered_kernel_with_variables():
    """A kernel from get_program with a symbolic size: buffers first, then the int variable."""
    from uops_amd.runtime import pack_kernargs

    n = UOp.variable("n", 1, 4096)
    r = UOp.range(n, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1).index(r).load() + glob(2).index(r).load()))
    d = Device["AMD"]
    spec = get_program(ast, d.renderer, d.compiler)
    meta = code_object_kernels(spec.lib)[spec.name]
    kinds = [a.kind for a in meta.explicit_args]
    assert kinds == ["global_buffer"] * 3 + ["by_value"] * len(spec.vals({"n": 10}))
    seg = pack_kernargs(meta, (8, 16, 24), spec.vals({"n": 10}))
    assert int.from_bytes(seg[24:28], "little") == 10


@needs_clang
def test_compile_errors_are_readable():
    comp = HIPCompiler("gfx1100")
    with pytest.raises(CompileError) as ei:
        comp.compile(TWO_KERNELS.replace("(float)k", "(float)nope"))
    msg = str(ei.value)
    assert "nope" in msg and "undeclared identifier" in msg and "gfx1100" in msg
    assert "kernel.hip:5:" in msg, "clang names the source's own line"
    assert "5 |   if (i < n) out[i] = x[idx[i]] * (float)nope;" in ei.value.numbered_source()
    ocml = 'extern "C" __attribute__((device)) float __ocml_sin_f32(float);\n' + TWO_KERNELS.replace(
        "(float)k", "__ocml_sin_f32((float)k)"
    )
    with pytest.raises(CompileError, match="__ocml_sin_f32"):
        comp.compile(ocml)  # no device libraries: an undefined symbol at link time, named
    with pytest.raises(ValueError, match="unknown AMD GPU architecture 'sm_90'"):
        HIPCompiler("sm_90")
    with pytest.raises(CompileError, match="invalid target ID 'gfx999'"):
        HIPCompiler("gfx999").compile(TWO_KERNELS)  # a gfx name clang does not know: clang's own words


def test_missing_toolchain_says_what_to_install(monkeypatch):
    from uops_amd.compiler import find_clang

    monkeypatch.setenv("UOPS_AMD_CLANG", "/nonexistent/clang-19")
    with pytest.raises(CompilerUnavailableError, match="apt-get install clang-19 lld-19"):
        find_clang()
    assert "UOPS_AMD_CLANG='/nonexistent/clang-19' was not found" in str(clang_available())


@needs_clang
def test_cli_compiles_for_amd_without_a_gpu_and_shows_four_stages():
    uops = Path(sys.executable).with_name("uops")
    r = subprocess.run([str(uops), "compile", "--device", "AMD", "--arch", "gfx942", "--stages", "(a*b).sum()"],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    for stage in ("SINK", "LINEAR", "SOURCE", "BINARY"):
        assert f"===== {stage}" in r.stdout
    assert "amdgpu_flat_work_group_size" in r.stdout and "7f 45 4c 46" in r.stdout
    r = subprocess.run([str(uops), "devices"], capture_output=True, text=True, timeout=300)
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln.startswith("AMD")}
    assert rows["AMD"].split()[5:7] == ["yes", "no"] and "no AMD GPU/HIP runtime" in rows["AMD"]
    assert rows["AMD_EMU"].split()[5:8] == ["yes", "yes", "ok"]


# ---------------------------------------------------------------------------------------
# the renderer


def test_renderer_signature_indices_and_wave_size():
    ren = AMDRenderer("gfx1100")
    assert ren.wave_size == 32 and AMDRenderer("gfx942").wave_size == 64 and wave_size("gfx90a") == 64
    g = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, 7),), "gidx2")
    loc = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, 8),), "lidx1")
    assert ren.render_uop(g) == "__builtin_amdgcn_workgroup_id_z()"
    assert ren.render_uop(loc) == "__builtin_amdgcn_workitem_id_y()"
    src = ren.render("k", linearize(UOp.sink(glob(0).index(g * 8 + loc).store(UOp.const(dtypes.float32, 1.0)))))
    assert src.startswith(
        'extern "C" __attribute__((global)) void __attribute__((amdgpu_flat_work_group_size(1, 8))) '
        "k(float* __restrict__ data0)"
    )
    with pytest.raises(ValueError, match="unknown AMD GPU architecture"):
        wave_size("sm_90")


def test_renderer_refuses_float64_transcendentals_by_name():
    r = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, 4),), "gidx0")
    x = glob(1, dtypes.float64).index(r).load()
    sink = UOp.sink(glob(0, dtypes.float64).index(r).store(UOp(Ops.EXP2, dtypes.float64, (x,))))
    with pytest.raises(ValueError, match="float64 EXP2 has no AMDGPU instruction"):
        Device["AMD_EMU"].renderer.render("k", linearize(sink))


# ---------------------------------------------------------------------------------------
# AMD_EMU: the rendered source proven by clang-19 and run on the CPU


@needs_emu
def test_emulated_elementwise_with_variable_matches_numpy():
    n = UOp.variable("n", 1, 4096)
    r = UOp.range(n, 0, AxisType.GLOBAL)
    val = (glob(1).index(r).load() * glob(2).index(r).load()).maximum(0.25).sqrt()
    ast = UOp.sink(glob(0).index(r).store(val))
    a, b = np.random.rand(1000).astype(np.float32), np.random.rand(1000).astype(np.float32)
    got, spec = _run("AMD_EMU", ast, [a, b], np.zeros(1000, np.float32), var_vals={"n": 1000})
    np.testing.assert_allclose(got, np.sqrt(np.maximum(a * b, 0.25)), rtol=1e-6)
    assert "__builtin_amdgcn_workgroup_id_x()" in spec.src


@needs_emu
def test_emulated_half_and_bfloat16_round_like_numpy():
    r = UOp.range(300, 0, AxisType.GLOBAL)
    x = glob(1, dtypes.float16).index(r).load()
    ast = UOp.sink(glob(0, dtypes.float16).index(r).store(x * x + x))
    h = (np.random.randn(300) * 30).astype(np.float16)
    got, spec = _run("AMD_EMU", ast, [h], np.zeros(300, np.float16))
    with np.errstate(over="ignore"):
        want = (h * h + h).astype(np.float16)
    np.testing.assert_array_equal(got, want)
    assert "_Float16" in spec.src
    xb = glob(1, dtypes.bfloat16).index(r).load()
    ast = UOp.sink(glob(0).index(r).store(xb.cast(dtypes.float32) + 1.0))
    bits = f32_to_bf16(np.random.randn(300).astype(np.float32))
    got, spec = _run("AMD_EMU", ast, [bits], np.zeros(300, np.float32))
    np.testing.assert_allclose(got, bf16_to_f32(bits) + 1.0, rtol=1e-6)
    assert "__bf16" in spec.src


@needs_emu
def test_emulated_local_memory_and_barrier():
    """LDS + s_barrier: the same source builds a code object for gfx942 and reverses tiles on the shim."""
    bs = 64
    lidx = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, bs),), "lidx0")
    gidx = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, 4),), "gidx0")
    smem = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(bs, AddrSpace.LOCAL), (), "tile")
    st = smem.index(lidx).store(glob(1).index(gidx * bs + lidx).load())
    bar = UOp(Ops.BARRIER, dtypes.void, (st,))
    rev = UOp(Ops.AFTER, smem.dtype, (smem, bar)).index(UOp.const(dtypes.int32, bs - 1) - lidx).load()
    src = Device["AMD_EMU"].renderer.render("rev_tile", linearize(UOp.sink(glob(0).index(gidx * bs + lidx).store(rev))))
    assert "__attribute__((shared)) float" in src and "__builtin_amdgcn_s_barrier();" in src
    if CLANG_REASON is None:
        assert code_object_kernels(HIPCompiler().compile(src))["rev_tile"].max_flat_workgroup_size == bs
    prg = Device["AMD_EMU"].runtime.load("rev_tile", Device["AMD_EMU"].compiler.compile(src))
    x = np.random.rand(4 * bs).astype(np.float32)
    out = np.zeros_like(x)
    prg(out, x, global_size=(4,), local_size=(bs,))
    np.testing.assert_array_equal(out, x.reshape(4, bs)[:, ::-1].reshape(-1))
    from uops.backends.gpu_emu import LaunchError

    with pytest.raises(LaunchError, match=r"'rev_tile': local_size \(128, 1, 1\) is 128 threads per block, more than"):
        prg(out, x, global_size=(4,), local_size=(2 * bs,))


@needs_emu
def test_emulated_vectors_are_ext_vector_types():
    g = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, 8),), "gidx0")
    lanes = [glob(1).index(g * 4 + i).load() for i in range(4)]
    vec = UOp(Ops.VECTORIZE, dtypes.float32.vec(4), tuple(lanes))
    stores = [glob(0).index(g * 4 + i).store(UOp(Ops.GEP, dtypes.float32, (vec,), (3 - i,))) for i in range(4)]
    src = Device["AMD_EMU"].renderer.render("rev4", linearize(UOp.sink(*stores)))
    assert "typedef float float4 __attribute__((ext_vector_type(4)));" in src
    x = np.random.rand(32).astype(np.float32)
    out = np.zeros_like(x)
    Device["AMD_EMU"].runtime.load("rev4", Device["AMD_EMU"].compiler.compile(src))(out, x, global_size=(8,))
    np.testing.assert_array_equal(out, x.reshape(8, 4)[:, ::-1].reshape(-1))


@needs_emu
def test_emulated_compile_is_checked_by_the_amd_compiler():
    comp = Device["AMD_EMU"].compiler
    if CLANG_REASON is not None:
        pytest.skip(CLANG_REASON)
    assert "+amd:" in comp.identity()
    ocml = 'extern "C" __attribute__((device)) float __ocml_sin_f32(float);\n' + TWO_KERNELS.replace(
        "(float)k", "__ocml_sin_f32((float)k)"
    )
    with pytest.raises(CompileError, match="__ocml_sin_f32"):
        comp.compile(ocml)  # valid host C++ with a declaration, yet no AMD code object: refused


# ---------------------------------------------------------------------------------------
# the HIP runtime: probes and error paths (Debian's libamdhip64 answers hipErrorNoDevice here)

_PROBE = r"""
from uops_amd.runtime import HIPError, HIPRuntime, probe_runtime
print("PROBE", probe_runtime())
try:
    HIPRuntime()
except HIPError as e:
    print("ERROR", e)
else:
    print("RUNTIME ok")
"""


def _probe(env: dict[str, str]) -> list[str]:
    r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120,
                       env={**os.environ, **env})  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_probe_without_the_hip_library_says_how_to_install_it():
    probe, err = _probe({"UOPS_HIP_LIB": "/nonexistent/libamdhip64.so"})
    assert probe.startswith("PROBE no AMD GPU/HIP runtime: UOPS_HIP_LIB='/nonexistent/libamdhip64.so' is not a file")
    assert "apt-get install libamdhip64-5" in probe and err.startswith("ERROR UOPS_HIP_LIB=")


def _debian_hip() -> str | None:
    for p in ("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5", "/usr/lib/aarch64-linux-gnu/libamdhip64.so.5"):
        if os.path.exists(p):
            return p
    return None


@pytest.mark.skipif(_debian_hip() is None, reason="Debian's libamdhip64-5 is not installed")
def test_probe_with_the_library_and_no_device_names_hip_error():
    probe, err = _probe({"UOPS_HIP_LIB": str(_debian_hip())})
    if probe == "PROBE None":
        pytest.skip("an AMD GPU is present: the no-device path cannot be shown here")
    assert probe == (
        "PROBE no AMD GPU/HIP runtime: hipGetDeviceCount failed: hipErrorNoDevice: hipErrorNoDevice"
        " (device AMD, call hipGetDeviceCount, driver code 100)"
    )
    assert err.startswith("ERROR hipGetDeviceCount failed: hipErrorNoDevice")


@pytest.mark.skipif(_debian_hip() is None, reason="Debian's libamdhip64-5 is not installed")
@needs_clang
def test_device_calls_fail_with_hip_errors_not_crashes():
    """Module load, malloc and copies on a machine without a device: HIPError naming the call, in a subprocess."""
    code = r"""
import ctypes
from uops_amd import runtime as rt
from uops_amd.compiler import HIPCompiler
lib = rt._hip()
blob = HIPCompiler().compile('extern "C" __attribute__((global)) void fill(int* o, int v) { o[0] = v; }')
m, p = ctypes.c_void_p(), ctypes.c_void_p()
for call, rc in (("hipModuleLoadData", lib.hipModuleLoadData(ctypes.byref(m), blob)),
                 ("hipMalloc", lib.hipMalloc(ctypes.byref(p), 16))):
    try:
        rt._check(rc, call)
    except rt.HIPError as e:
        print(e)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "UOPS_HIP_LIB": str(_debian_hip())})  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("hipModuleLoadData failed: hipError")
    assert lines[1].startswith("hipMalloc failed: hipError")


@needs_clang
def test_unreadable_code_object_and_missing_kernel_are_program_load_errors():
    from uops.runtime import ProgramLoadError
    from uops_amd.runtime import HIPProgram

    blob = HIPCompiler().compile('extern "C" __attribute__((global)) void fill(int* o, int v) { o[0] = v; }')
    with pytest.raises(ProgramLoadError, match=r"uops_amd could not load kernel 'fill': not a readable AMDGPU code"):
        HIPProgram("fill", blob[:18] + EM_AMDGPU.to_bytes(2, "little") + bytes(44))  # a header, no tables
    for cut in (len(blob) - 1, len(blob) // 2):  # hipModuleLoadData takes no length: never handed a cut image
        with pytest.raises(ProgramLoadError, match=r"'fill': ElfError: .*(past its|outside its) \d+ bytes"):
            HIPProgram("fill", blob[:cut])
    with pytest.raises(ProgramLoadError, match=r"'nope': the code object has no such kernel \(it has \['fill'\]\)"):
        HIPProgram("nope", blob)


@pytest.mark.skipif(_debian_hip() is None, reason="Debian's libamdhip64-5 is not installed")
@needs_clang
def test_module_load_against_the_real_library_is_a_program_load_error():
    """The real libamdhip64 with no GPU: loading a valid code object fails as ProgramLoadError, HIP's error as cause."""
    code = r"""
from uops.runtime import ProgramLoadError
from uops_amd.compiler import HIPCompiler
from uops_amd.runtime import HIPError, HIPProgram
blob = HIPCompiler().compile('extern "C" __attribute__((global)) void fill(int* o, int v) { o[0] = v; }')
try:
    HIPProgram("fill", blob)
except ProgramLoadError as e:
    print(type(e.__cause__).__name__, e.plugin, e.kernel)
    print(e)
else:
    print("LOADED")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "UOPS_HIP_LIB": str(_debian_hip())})  # fmt: skip
    assert r.returncode == 0, r.stderr
    if r.stdout.startswith("LOADED"):
        pytest.skip("an AMD GPU is present: the no-device path cannot be shown here")
    head, msg = r.stdout.splitlines()
    assert head == "HIPError uops_amd fill"
    assert msg.startswith("uops_amd could not load kernel 'fill': HIPError: hipGetDeviceCount failed: hipErrorNoDevice")
