"""The Metal plugin: MSL rendered and checked on Linux, run on the CPU as METAL_EMU, the macOS runtime against a fake.

What Linux proves: the rendered MSL passes clang's check against the plugin's <metal_stdlib>
stand-in (and planted mistakes do not); METAL_EMU runs that same source and its numbers match
numpy; the runtime sends the Metal message sequence it should (a recording fake stands in for
the Objective-C runtime). What only a Mac proves: Apple's compiler accepts the source, and the
messages do what Metal documents.
"""

from __future__ import annotations

import ctypes
import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from uops import AxisType, Ops, Tensor, UOp, dtypes
from uops.codegen.linearizer import linearize
from uops.codegen.program import ProgramSpec, get_program
from uops.compiler import CompileError, CompilerUnavailableError
from uops.dtypes import AddrSpace
from uops.plugins import Device
from uops.renderer import DTypeNotSupportedError
from uops.runtime import LaunchError, ProgramLoadError

pytest.importorskip("uops_metal", reason="the uops-metal plugin is not installed")
from uops_metal import compiler as metal_compiler  # noqa: E402
from uops_metal.compiler import MetalCompiler  # noqa: E402
from uops_metal.renderer import MetalRenderer  # noqa: E402
from uops_metal.runtime import COMMAND_BUFFER_ERROR, MetalError, MetalRuntime, MTLSize, probe_runtime  # noqa: E402


def _checker_reason() -> str | None:
    try:
        metal_compiler.checker()
    except CompilerUnavailableError as e:
        return str(e)
    return None


CHECK_REASON = _checker_reason()
needs_check = pytest.mark.skipif(CHECK_REASON is not None, reason=f"no MSL checker: {CHECK_REASON}")
linux_only = pytest.mark.skipif(sys.platform == "darwin", reason="checks the Linux behaviour")
UOPS = shutil.which("uops", path=str(Path(sys.executable).parent)) or "uops"


def glob(slot: int, dt=dtypes.float32) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), slot)


def special(name: str, size: int) -> UOp:
    return UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, size),), name)


def msl_program(ast: UOp, target: str | None = None) -> ProgramSpec:
    t = Device["METAL"].target(target)
    return get_program(ast, t.renderer, t.compiler)


def check(src: str, target: str = "metal3.1") -> None:
    MetalCompiler(target, mode="msl").check(src)


# ---------------------------------------------------------------------------------------
# the renderer's MSL passes the Linux check


@needs_check
def test_elementwise_2d_is_checked_msl_with_buffer_bindings():
    rows, cols = 24, 40
    r0, r1 = UOp.range(rows, 0, AxisType.GLOBAL), UOp.range(cols, 1, AxisType.GLOBAL)
    flat = r0 * cols + r1
    val = (glob(1).index(flat).load() * glob(2).index(r1).load()).maximum(0.25).sqrt()
    spec = msl_program(UOp.sink(glob(0).index(flat).store(val)))
    src = spec.src
    assert src.startswith("#include <metal_stdlib>\nusing namespace metal;\nkernel void ")
    assert "device float* data0 [[buffer(0)]]" in src and "device const float* data1 [[buffer(1)]]" in src
    assert "[[threadgroup_position_in_grid]]" in src and "[[thread_position_in_threadgroup]]" in src
    assert "sqrt(" in src and "gid.x" in src and "lid.x" in src
    if sys.platform != "darwin":
        assert spec.target == "metal3.1:msl" and spec.lib == src.encode(), "the BINARY stage is the checked source"


@needs_check
def test_reductions_are_checked_msl():
    m, k, n = 16, 29, 12
    i, j, kk = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.GLOBAL), UOp.range(k, 2, AxisType.REDUCE)
    prod = glob(1).index(i * k + kk).load() * glob(2).index(kk * n + j).load()
    spec = msl_program(UOp.sink(glob(0).index(i * n + j).store(prod.reduce(kk, op=Ops.ADD))))
    assert "for (int ridx" in spec.src
    r = UOp.range(64, 0, AxisType.REDUCE)
    spec = msl_program(UOp.sink(glob(0).index(UOp.const(dtypes.int32, 0)).store(
        glob(1).index(r).load().reduce(r, op=Ops.MAX))))  # fmt: skip
    assert "acc0" in spec.src


@needs_check
def test_half_math_nonfinite_constants_and_symbolic_sizes_are_checked_msl():
    nvar = UOp.variable("n", 1, 4096)
    r = UOp.range(nvar, 0, AxisType.GLOBAL)
    h = glob(1, dtypes.float16).index(r).load()
    val = (h * UOp.const(dtypes.float16, 2.0)).exp2().log2().sin().reciprocal().cast(dtypes.float32)
    spec = msl_program(UOp.sink(glob(0).index(r).store(val.maximum(float("-inf")))))
    assert "device const half* data1" in spec.src and "constant int& n [[buffer(2)]]" in spec.src
    assert "-INFINITY" in spec.src and "exp2(" in spec.src and "((half)1.0f)" in spec.src


@needs_check
def test_bfloat_from_metal_3_1_on_and_refused_before():
    r = UOp.range(8, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1, dtypes.bfloat16).index(r).load().cast(dtypes.float32) + 1.0))
    assert "device const bfloat* data1" in msl_program(ast, "metal3.1").src
    with pytest.raises(Exception, match="bfloat16"):
        msl_program(ast, "metal2.4")
    with pytest.raises(DTypeNotSupportedError, match="bfloat needs Metal 3.1"):
        MetalRenderer("metal3.0").render_dtype(dtypes.bfloat16)


def test_double_is_a_clear_dtype_error():
    with pytest.raises(DTypeNotSupportedError, match="Metal has no double"):
        MetalRenderer().render_dtype(dtypes.float64.ptr())
    with pytest.raises(DTypeNotSupportedError, match="device METAL does not support dtype double"):
        (Tensor(np.ones(3), device="METAL") * 2).realize()


@needs_check
def test_local_memory_barrier_bitcast_and_vectors_are_checked_msl():
    bs = 64
    lidx, gidx = special("lidx0", bs), special("gidx0", 4)
    smem = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(bs, AddrSpace.LOCAL), (), "tile")
    st = smem.index(lidx).store(glob(1).index(gidx * bs + lidx).load())
    bar = UOp(Ops.BARRIER, dtypes.void, (st,))
    rev = UOp(Ops.AFTER, smem.dtype, (smem, bar)).index(UOp.const(dtypes.int32, bs - 1) - lidx).load()
    src = MetalRenderer().render("rev_tile", linearize(UOp.sink(glob(0).index(gidx * bs + lidx).store(rev))))
    assert "threadgroup float smem0[64];" in src and "threadgroup_barrier(mem_flags::mem_threadgroup);" in src
    check(src)
    bits = glob(1).index(gidx).load().bitcast(dtypes.int32)
    src = MetalRenderer().render("bits", linearize(UOp.sink(glob(0, dtypes.int32).index(gidx).store(bits >> 23))))
    assert "as_type<int>(" in src
    check(src)
    lanes = [glob(1).index(gidx * 4 + i).load() for i in range(4)]
    vec = UOp(Ops.VECTORIZE, dtypes.float32.vec(4), tuple(lanes))
    stores = [glob(0).index(gidx * 4 + i).store(UOp(Ops.GEP, dtypes.float32, (vec,), (3 - i,))) for i in range(4)]
    src = MetalRenderer().render("rev4", linearize(UOp.sink(*stores)))
    assert "float4 vec0 = float4(" in src and "vec0.w" in src
    check(src)


# ---------------------------------------------------------------------------------------
# planted mistakes are rejected, with clang's message and the numbered source

GOOD = """#include <metal_stdlib>
using namespace metal;
kernel void k(device float* data0 [[buffer(0)]], uint3 gid [[threadgroup_position_in_grid]]) {
  int gidx0 = gid.x;
  BODY
}
"""


@needs_check
@pytest.mark.parametrize(
    ("body", "expect"),
    [
        ("*(data0+gidx0) = undeclared_value;", "use of undeclared identifier 'undeclared_value'"),
        ("double d = 1.0; *(data0+gidx0) = (float)d;", "Metal has no double"),
        ("float4 v = float4(1.0f, 2.0f, 3.0f); *(data0+gidx0) = v.x;", "components given do not add up"),
        ("*(data0+gidx0) = as_type<float>(short(1));", "must have the same size"),
        ("threadgroup_barrier(mem_flags::mem_shared);", "no member named 'mem_shared'"),
    ],
)
def test_planted_mistakes_are_rejected_readably(body: str, expect: str):
    check(GOOD.replace("BODY", "*(data0+gidx0) = 1.0f;"))
    with pytest.raises(CompileError) as info:
        check(GOOD.replace("BODY", body))
    text = str(info.value)
    assert expect in text and "kernel.metal:5:" in text, text
    assert "5 |   " + body[:20] in text, "the numbered source is shown"


@needs_check
def test_a_misspelt_attribute_is_rejected():
    with pytest.raises(CompileError, match="unknown attribute 'threadgroup_position_in_grd'"):
        check(GOOD.replace("threadgroup_position_in_grid", "threadgroup_position_in_grd").replace("BODY", ""))


SIMD_MATMUL = """#include <metal_stdlib>
using namespace metal;
kernel void mm8(device float* c [[buffer(0)]], const device float* a [[buffer(1)]], const device float* b [[buffer(2)]],
                uint3 lid [[thread_position_in_threadgroup]]) {
  threadgroup float ta[64], tb[64];
  ta[lid.x] = a[lid.x]; ta[lid.x + 32] = a[lid.x + 32]; tb[lid.x] = b[lid.x]; tb[lid.x + 32] = b[lid.x + 32];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 ma, mb, mc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_load(ma, ta);
  simdgroup_load(mb, tb, 8, 0, true);
  simdgroup_multiply_accumulate(mc, ma, mb, mc);
  mc.thread_elements()[0] = simd_sum(mc.thread_elements().x);
  simdgroup_store(mc, c);
}
"""


@needs_check
def test_simdgroup_matrices_are_checked():
    check(SIMD_MATMUL)
    with pytest.raises(CompileError, match="no matching function for call to 'simdgroup_multiply_accumulate'"):
        check(SIMD_MATMUL.replace("(mc, ma, mb, mc)", "(mc, ma, mb)"))
    with pytest.raises(CompileError, match="unknown type name 'simdgroup_bfloat8x8'"):
        check(SIMD_MATMUL.replace("simdgroup_float8x8 ma, mb, mc", "simdgroup_bfloat8x8 ma, mb, mc"), "metal3.0")


def test_missing_checker_says_how_to_install(monkeypatch):
    monkeypatch.setenv("UOPS_METAL_CLANG", "no-such-clang++")
    metal_compiler.checker.cache_clear()
    try:
        with pytest.raises(CompilerUnavailableError, match="apt-get install clang-19"):
            metal_compiler.checker()
    finally:
        monkeypatch.delenv("UOPS_METAL_CLANG")
        metal_compiler.checker.cache_clear()


def test_targets_and_bad_target():
    assert Device["METAL"].targets[0] == "metal3.1"
    assert MetalCompiler("metal2.4", mode="msl").identity() != MetalCompiler("metal3.1", mode="msl").identity()
    with pytest.raises(ValueError, match="unknown Metal target 'metal9'"):
        MetalRenderer("metal9")
    with pytest.raises(ValueError, match="unknown Metal compile mode"):
        MetalCompiler("metal3.1", mode="air")


# ---------------------------------------------------------------------------------------
# the macOS runtime against a recording fake of the Objective-C runtime


class RecordingObjC:
    """Records every message; buffers are real host memory, so copies can be checked."""

    def __init__(self, fail: dict[str, str] | None = None, status: int = 4) -> None:
        self.calls: list[tuple[Any, str, tuple[Any, ...]]] = []
        self.fail = fail or {}
        self.status = status
        self.memory: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self.strings: dict[int, str] = {}
        self.made: list[tuple[str, int]] = []  # (selector, object) for the objects a caller owns
        self._next = 0x1000

    def _handle(self, kind: str) -> int:
        self._next += 0x10
        return self._next

    @staticmethod
    def _plain(a: Any) -> Any:
        if isinstance(a, MTLSize):
            return (a.width, a.height, a.depth)
        return getattr(a, "value", a)

    def send(self, obj: Any, sel: str, *args: Any, restype: Any = ctypes.c_void_p) -> Any:
        obj = self._plain(obj)
        self.calls.append((obj, sel, tuple(self._plain(a) for a in args)))
        if sel in self.fail:
            return None
        if sel in ("init", "newFunctionWithName:"):
            self.made.append((sel, self._handle(sel)))
            return self.made[-1][1]
        if sel == "newBufferWithLength:options:":
            mem = ctypes.create_string_buffer(self._plain(args[0]))
            self.memory[ctypes.addressof(mem)] = mem
            return ctypes.addressof(mem)
        if sel == "contents":
            return obj
        if sel == "maxTotalThreadsPerThreadgroup":
            return 1024
        if sel == "status":
            return self.status
        if sel in ("GPUStartTime", "GPUEndTime"):
            return 1.0 if sel == "GPUStartTime" else 1.25
        if sel == "retain":
            return obj
        if sel in ("UTF8String", "error", "localizedDescription"):
            return {"UTF8String": b"Fake GPU", "error": self._handle("e"), "localizedDescription": 7}[sel]
        return None if restype is None else self._handle(sel)

    def send_error(self, obj: Any, sel: str, *args: Any) -> tuple[Any, str | None]:
        self.calls.append((self._plain(obj), sel, tuple(self._plain(a) for a in args)))
        if sel in self.fail:
            return None, self.fail[sel]
        self.made.append((sel, self._handle(sel)))
        return self.made[-1][1], None

    def cls(self, name: str) -> Any:
        return self._handle(name)

    def nsstring(self, s: str) -> Any:
        h = self._handle("NSString")
        self.strings[h] = s
        return h

    def pystring(self, ns: Any) -> str:
        return "Fake GPU" if ns != 7 else "Execution of the command buffer was aborted"

    def create_device(self) -> Any:
        self.calls.append((None, "MTLCreateSystemDefaultDevice", ()))
        return 0xD0

    def dispatch_data(self, data: bytes) -> Any:
        self.calls.append((None, "dispatch_data_create", (len(data),)))
        return 0xDA

    def pool_push(self) -> Any:
        return 0xB0

    def pool_pop(self, pool: Any) -> None:
        assert pool == 0xB0


# what MetalProgram creates from source, in order: library, function, pipeline state
LOAD_SELECTORS = (
    "newLibraryWithSource:options:error:",
    "newFunctionWithName:",
    "newComputePipelineStateWithFunction:error:",
)


def selectors(fake: RecordingObjC) -> list[str]:
    return [sel for _, sel, _ in fake.calls]


def test_runtime_message_sequence_from_source_to_timed_launch():
    fake = RecordingObjC()
    rt = MetalRuntime("METAL", objc=fake)
    assert selectors(fake) == ["MTLCreateSystemDefaultDevice", "newCommandQueue"]
    x = np.arange(6, dtype=np.float32)
    out_h, in_h = rt.allocator.alloc(24), rt.allocator.alloc(24)
    rt.allocator.copyin(in_h, memoryview(x).cast("B"))
    back = np.zeros(6, np.float32)
    rt.allocator.copyout(memoryview(back).cast("B"), in_h)
    np.testing.assert_array_equal(back, x)  # shared storage: the bytes went through `contents`
    fake.calls.clear()
    prog = rt.load("k", b"#include <metal_stdlib>\nkernel void k() {}\n")
    assert selectors(fake) == [
        "alloc", "init", "setFastMathEnabled:", "newLibraryWithSource:options:error:", "release",
        "newFunctionWithName:", "newComputePipelineStateWithFunction:error:", "maxTotalThreadsPerThreadgroup",
    ]  # fmt: skip
    assert fake.calls[2][2] == (False,), "fast math is off: NaN and infinity rules as in the other backends"
    assert fake.strings[fake.calls[5][2][0]] == "k", "the kernel is looked up by its name"
    fake.calls.clear()
    t = prog(out_h, in_h, global_size=(3, 2), local_size=(32,), vals=(6,), wait=True)
    assert t == pytest.approx(0.25)
    assert selectors(fake) == [
        "commandBuffer", "computeCommandEncoder", "setComputePipelineState:", "setBuffer:offset:atIndex:",
        "setBuffer:offset:atIndex:", "setBytes:length:atIndex:", "dispatchThreadgroups:threadsPerThreadgroup:",
        "endEncoding", "commit", "retain", "waitUntilCompleted", "status", "GPUStartTime", "GPUEndTime", "release",
    ]  # fmt: skip
    args = {sel: a for _, sel, a in fake.calls}
    assert args["setBuffer:offset:atIndex:"] == (in_h, 0, 1)
    assert args["setBytes:length:atIndex:"][1:] == (4, 2), "vals are bound after the buffers"
    assert args["dispatchThreadgroups:threadsPerThreadgroup:"] == ((3, 2, 1), (32, 1, 1))


def test_runtime_async_launches_are_waited_for_before_the_host_reads():
    fake = RecordingObjC()
    rt = MetalRuntime("METAL", objc=fake)
    h = rt.allocator.alloc(4)
    prog = rt.load("k", b"\x4d\x54\x4c\x42metallib bytes")
    assert "newLibraryWithData:error:" in selectors(fake) and "dispatch_data_create" in selectors(fake)
    assert prog(h, global_size=(1,)) is None and len(rt.in_flight) == 1
    fake.calls.clear()
    rt.allocator.copyout(memoryview(bytearray(4)), h)
    assert selectors(fake)[:3] == ["waitUntilCompleted", "status", "release"] and not rt.in_flight


def test_runtime_failures_are_specific():
    fake = RecordingObjC(fail={"newLibraryWithSource:options:error:": "program_source:3:5: error: bad"})
    rt = MetalRuntime("METAL", objc=fake)
    with pytest.raises(ProgramLoadError, match="(?s)load kernel 'k': CompileError: .*3:5: error: bad") as info:
        rt.load("k", b"kernel void k() {}")
    assert isinstance(info.value.__cause__, CompileError) and info.value.plugin == "uops_metal"
    fake = RecordingObjC(fail={"newLibraryWithData:error:": "invalid library file"})
    with pytest.raises(ProgramLoadError, match="MetalError: newLibraryWithData failed for 'k': invalid library file"):
        MetalRuntime("METAL", objc=fake).load("k", b"MTLB garbage")
    fake = RecordingObjC(status=COMMAND_BUFFER_ERROR)
    rt = MetalRuntime("METAL", objc=fake)
    prog = rt.load("k", b"kernel void k() {}")
    with pytest.raises(MetalError, match="command buffer failed: Execution of the command buffer was aborted"):
        prog(global_size=(1,), wait=True)
    with pytest.raises(LaunchError, match=r"'k': local_size \(64, 32, 1\) is 2048 threads per block, more than"):
        prog(global_size=(1,), local_size=(64, 32), wait=True)


def _released(fake: RecordingObjC) -> list[Any]:
    return [obj for obj, sel, _ in fake.calls if sel == "release"]


def test_program_releases_its_library_function_and_pipeline():
    fake = RecordingObjC()
    rt = MetalRuntime("METAL", objc=fake)
    prog = rt.load("k", b"kernel void k() {}")
    made = dict(fake.made)
    lib, fn, pso = (made[s] for s in LOAD_SELECTORS)
    assert _released(fake) == [made["init"]], "while the program lives only the compile options are released"
    prog(global_size=(1,), wait=True)
    fake.calls.clear()
    del prog
    gc.collect()
    assert _released(fake) == [pso, fn, lib], "what the program made is released, newest first"


@pytest.mark.parametrize("failing", LOAD_SELECTORS[1:])
def test_a_load_failing_part_way_releases_what_it_made(failing: str):
    fake = RecordingObjC(fail={failing: "function uses too many registers"})
    rt = MetalRuntime("METAL", objc=fake)
    with pytest.raises(ProgramLoadError, match="uops_metal could not load kernel 'k': MetalError: "):
        rt.load("k", b"kernel void k() {}")
    made = dict(fake.made)
    before = [made[s] for s in LOAD_SELECTORS[: LOAD_SELECTORS.index(failing)]]
    assert _released(fake) == [made["init"], *reversed(before)]


@linux_only
@needs_check
def test_linux_probe_and_devices_table():
    assert probe_runtime().startswith("Metal needs macOS")
    env = {k: v for k, v in os.environ.items() if k != "UOPS_DEVICE"}
    r = subprocess.run([UOPS, "devices"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    metal = next(line for line in r.stdout.splitlines() if line.startswith("METAL "))
    assert "metal3.1" in metal and " yes " in metal and " no " in metal and "Metal needs macOS" in metal
    emu = next(line for line in r.stdout.splitlines() if line.startswith("METAL_EMU "))
    assert emu.split()[-1] == "ok" and " yes " in emu


@needs_check
def test_uops_compile_shows_all_four_stages():
    r = subprocess.run([UOPS, "compile", "--device", "METAL", "(a+b).sum()", "--stages"],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    for stage in ("SINK", "LINEAR", "SOURCE", "BINARY"):
        assert f"===== {stage}" in r.stdout
    assert "kernel void" in r.stdout and "[[buffer(0)]]" in r.stdout


# ---------------------------------------------------------------------------------------
# METAL_EMU: the same MSL run on the CPU, against numpy


def run_emu(ast: UOp, inputs: list[np.ndarray], out: np.ndarray, var_vals=None) -> tuple[np.ndarray, ProgramSpec]:
    d = Device["METAL_EMU"]
    spec = get_program(ast, d.renderer, d.compiler)
    al = d.runtime.allocator
    handles = [al.alloc(out.nbytes)] + [al.alloc(x.nbytes) for x in inputs]
    for hnd, x in zip(handles[1:], inputs):
        al.copyin(hnd, memoryview(np.ascontiguousarray(x).reshape(-1).view(np.uint8)))
    g, loc = spec.launch_dims(var_vals)
    d.runtime.load(spec.name, spec.lib)(*handles, global_size=g, local_size=loc, vals=spec.vals(var_vals))
    res = np.empty_like(out)
    al.copyout(memoryview(res.reshape(-1).view(np.uint8)), handles[0])
    return res, spec


def run_src(name: str, src: str, out: np.ndarray, *inputs: np.ndarray, **launch: Any) -> np.ndarray:
    lib = Device["METAL_EMU"].compiler.compile(src)
    Device["METAL_EMU"].runtime.load(name, lib)(out, *inputs, **launch)
    return out


@needs_check
def test_emu_runs_the_source_metal_renders():
    rows, cols = 24, 40
    r0, r1 = UOp.range(rows, 0, AxisType.GLOBAL), UOp.range(cols, 1, AxisType.GLOBAL)
    flat = r0 * cols + r1
    ast = UOp.sink(glob(0).index(flat).store((glob(1).index(flat).load() * glob(2).index(r1).load()).sqrt()))
    a, b = np.random.rand(rows, cols).astype(np.float32), np.random.rand(cols).astype(np.float32)
    got, spec = run_emu(ast, [a, b], np.zeros((rows, cols), np.float32))
    np.testing.assert_allclose(got, np.sqrt(a * b), rtol=1e-6)
    assert spec.src == msl_program(ast).src, "METAL and METAL_EMU render the same MSL"
    assert spec.target == "metal3.1:host" and spec.lib[:4] == b"\x7fELF"


@needs_check
def test_emu_matmul_reduce_and_symbolic_size():
    m, k, n = 16, 29, 12
    a, b = np.random.randn(m, k).astype(np.float32), np.random.randn(k, n).astype(np.float32)
    i, j, kk = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.GLOBAL), UOp.range(k, 2, AxisType.REDUCE)
    prod = glob(1).index(i * k + kk).load() * glob(2).index(kk * n + j).load()
    got, _ = run_emu(
        UOp.sink(glob(0).index(i * n + j).store(prod.reduce(kk, op=Ops.ADD))), [a, b], np.zeros((m, n), np.float32)
    )
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    nvar = UOp.variable("n", 1, 4096)
    r = UOp.range(nvar, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1).index(r).load().exp2() * 0.5))
    for size in (3, 700):
        x = np.random.rand(size).astype(np.float32)
        got, spec = run_emu(ast, [x], np.zeros(size, np.float32), var_vals={"n": size})
        np.testing.assert_allclose(got, np.exp2(x) * 0.5, rtol=1e-6)
    assert "constant int& n" in spec.src


@needs_check
def test_emu_half_and_bfloat_round_like_numpy():
    n = 64
    r = UOp.range(n, 0, AxisType.GLOBAL)
    h = glob(1, dtypes.float16).index(r).load()
    ast = UOp.sink(glob(0, dtypes.float16).index(r).store(h * h + UOp.const(dtypes.float16, 0.1)))
    x = (np.random.randn(n) * 10).astype(np.float16)
    got, _ = run_emu(ast, [x], np.zeros(n, np.float16))
    np.testing.assert_array_equal(got, x * x + np.float16(0.1))
    from uops.dtypes import bf16_to_f32, f32_to_bf16

    ast = UOp.sink(glob(0).index(r).store(glob(1, dtypes.bfloat16).index(r).load().cast(dtypes.float32) + 1.0))
    xb = f32_to_bf16(np.random.randn(n).astype(np.float32))
    got, _ = run_emu(ast, [xb], np.zeros(n, np.float32))
    np.testing.assert_allclose(got, bf16_to_f32(xb) + 1.0, rtol=1e-6)


@needs_check
def test_emu_threadgroup_memory_barrier_bitcast_and_vectors():
    bs = 64
    lidx, gidx = special("lidx0", bs), special("gidx0", 4)
    smem = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(bs, AddrSpace.LOCAL), (), "tile")
    st = smem.index(lidx).store(glob(1).index(gidx * bs + lidx).load())
    bar = UOp(Ops.BARRIER, dtypes.void, (st,))
    rev = UOp(Ops.AFTER, smem.dtype, (smem, bar)).index(UOp.const(dtypes.int32, bs - 1) - lidx).load()
    src = MetalRenderer().render("rev_tile", linearize(UOp.sink(glob(0).index(gidx * bs + lidx).store(rev))))
    x = np.random.rand(4 * bs).astype(np.float32)
    # wrong without a real barrier and one threadgroup array per threadgroup: each thread reads another's slot
    out = run_src("rev_tile", src, np.zeros_like(x), x, global_size=(4,), local_size=(bs,))
    np.testing.assert_array_equal(out, x.reshape(4, bs)[:, ::-1].reshape(-1))
    bits = glob(1).index(gidx).load().bitcast(dtypes.int32)
    src = MetalRenderer().render("bits", linearize(UOp.sink(glob(0, dtypes.int32).index(gidx).store(bits >> 23))))
    y = np.random.rand(4).astype(np.float32) * 1000
    np.testing.assert_array_equal(
        run_src("bits", src, np.zeros(4, np.int32), y, global_size=(4,)), y.view(np.int32) >> 23
    )
    g8 = special("gidx0", 8)
    lanes = [glob(1).index(g8 * 4 + i).load() for i in range(4)]
    vec = UOp(Ops.VECTORIZE, dtypes.float32.vec(4), tuple(lanes))
    stores = [glob(0).index(g8 * 4 + i).store(UOp(Ops.GEP, dtypes.float32, (vec,), (3 - i,))) for i in range(4)]
    src = MetalRenderer().render("rev4", linearize(UOp.sink(*stores)))
    z = np.random.rand(32).astype(np.float32)
    out = run_src("rev4", src, np.zeros_like(z), z, global_size=(8,))
    np.testing.assert_array_equal(out, z.reshape(8, 4)[:, ::-1].reshape(-1))


@needs_check
def test_emu_rejects_what_is_not_msl_and_launches_metal_would_refuse():
    from uops.backends.gpu_emu import LaunchError

    with pytest.raises(CompileError, match="unknown type name '__global__'|expected"):
        Device["METAL_EMU"].compiler.compile('extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }')
    src = GOOD.replace("BODY", "*(data0+gidx0) = 2.0f;")
    with pytest.raises(LaunchError, match="exceeds the MSL limit"):
        run_src("k", src, np.zeros(4, np.float32), global_size=(1,), local_size=(1, 1, 2048))
    np.testing.assert_array_equal(run_src("k", src, np.zeros(4, np.float32), global_size=(4,)), np.full(4, 2.0))


@needs_check
def test_emu_tensor_programs_and_double_refused():
    a, b = np.random.rand(33, 17).astype(np.float32), np.random.rand(17, 5).astype(np.float32)
    ta, tb = Tensor(a, device="METAL_EMU"), Tensor(b, device="METAL_EMU")
    np.testing.assert_allclose((ta @ tb).relu().sum(axis=0).numpy(), np.maximum(a @ b, 0).sum(axis=0), rtol=1e-5)
    with pytest.raises(DTypeNotSupportedError, match="device METAL_EMU does not support dtype double"):
        (Tensor(np.ones(3), device="METAL_EMU") + 1).numpy()
