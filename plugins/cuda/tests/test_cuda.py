"""The CUDA plugin: NVRTC compiles (no GPU needed), the CPU shim runs CUDA source, the GPU runtime when present.

Without a GPU the numbers are proven by running the rendered CUDA source on the CPU through
gpu_shim.h (uops.backends.gpu_emu); the same source is compiled by NVRTC to real CUBIN.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from uops import AxisType, Ops, UOp, dtypes
from uops.codegen.linearizer import linearize
from uops.codegen.program import ProgramSpec, get_program
from uops.compiler import CompileError, CompilerUnavailableError
from uops.dtypes import AddrSpace, bf16_to_f32, f32_to_bf16
from uops.plugins import Device
from uops.runtime import ProgramLoadError

nvrtc_compiler = pytest.importorskip("uops_cuda.compiler", reason="the uops-cuda plugin is not installed")
from uops_cuda.compiler import NVRTCCompiler, cuda_include_dir, nvrtc_available  # noqa: E402
from uops_cuda.renderer import CUDARenderer  # noqa: E402

NVRTC_REASON = nvrtc_available()
needs_nvrtc = pytest.mark.skipif(NVRTC_REASON is not None, reason=f"NVRTC unavailable: {NVRTC_REASON}")


def _shim_reason() -> str | None:
    from uops.backends.gpu_emu import cxx_path, shim_runtime

    try:
        cxx_path()
        shim_runtime()
    except (CompilerUnavailableError, CompileError, OSError) as e:
        return str(e)
    return None


SHIM_REASON = _shim_reason()
needs_shim = pytest.mark.skipif(SHIM_REASON is not None, reason=f"GPU shim unavailable: {SHIM_REASON}")


# ---------------------------------------------------------------------------------------
# helpers


def elf_symbols(blob: bytes) -> dict[str, int]:
    """Symbol name -> st_info of an ELF64 little-endian file (section headers + .symtab/.strtab)."""
    assert blob[:4] == b"\x7fELF" and blob[4] == 2 and blob[5] == 1, "not an ELF64 little-endian file"
    (e_shoff,) = struct.unpack_from("<Q", blob, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", blob, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", blob, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    out: dict[str, int] = {}
    for sh in sections:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        offset, size, link, entsize = sh[4], sh[5], sh[6], sh[9]
        stroff = sections[link][4]
        for k in range(size // entsize):
            st_name, st_info = struct.unpack_from("<IB", blob, offset + k * entsize)
            end = blob.index(b"\x00", stroff + st_name)
            out[blob[stroff + st_name : end].decode()] = st_info
    return out


def glob(slot: int, dt=dtypes.float32) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), slot)


SAXPY = r"""
extern "C" __global__ void __launch_bounds__(128) saxpy(float* __restrict__ out, const float* __restrict__ x,
                                                       const float* __restrict__ y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
"""

BLOCK_SUM = r"""
extern "C" __global__ void __launch_bounds__(256) block_sum(float* out, const float* x) {
  __shared__ float buf[256];
  unsigned t = threadIdx.x;
  buf[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = buf[0];
}
"""

# wrong without a real barrier: thread t reads the slot thread (n-1-t) writes
BLOCK_REVERSE = r"""
extern "C" __global__ void block_reverse(int* out, const int* x) {
  __shared__ int tile[128];
  unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;
  tile[t] = x[base + t];
  __syncthreads();
  out[base + t] = tile[blockDim.x - 1 - t];
}
"""

GRID_2D = r"""
extern "C" __global__ void __launch_bounds__(32) grid2d(int* out, int width) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  out[y * width + x] = 1000 * y + x + (int)(gridDim.x * 100000 * (blockDim.y == 4));
}
"""

CONVERT = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void convert(half* h, __nv_bfloat16* b, float* back_h, float* back_b, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  h[i] = __float2half(x[i]);
  b[i] = __float2bfloat16(x[i]);
  back_h[i] = __half2float(h[i]);
  back_b[i] = (float)b[i];
}
"""

ATOMIC = r"""
extern "C" __global__ void count(unsigned int* counter, float* total) {
  atomicAdd(counter, 1u);
  atomicAdd(total, 0.5f);
}
"""


# ---------------------------------------------------------------------------------------
# NVRTC: real CUBIN and PTX, no GPU needed


@needs_nvrtc
def test_cubin_is_cuda_elf_holding_the_entry_symbol():
    lib = NVRTCCompiler("sm_90").compile(SAXPY)
    assert lib[:4] == b"\x7fELF"
    (e_machine,) = struct.unpack_from("<H", lib, 0x12)
    assert e_machine == 190, f"ELF machine {e_machine} is not EM_CUDA (190)"
    syms = elf_symbols(lib)
    assert "saxpy" in syms, f"no saxpy symbol; symbols: {sorted(syms)[:20]}"
    assert syms["saxpy"] & 0xF == 2, "saxpy is not a function symbol (STT_FUNC)"


@needs_nvrtc
@pytest.mark.parametrize("how", ["flag", "arch"])
def test_ptx_on_request(how):
    comp = NVRTCCompiler("sm_80", ptx=True) if how == "flag" else NVRTCCompiler("compute_80")
    assert comp.ptx and comp.arch == "compute_80"
    ptx = comp.compile(SAXPY).decode()
    assert ".entry saxpy" in ptx
    assert ".target sm_80" in ptx
    assert ptx.endswith("\x00"), "PTX images are NUL-terminated for cuModuleLoadData"


@needs_nvrtc
def test_arch_is_part_of_the_cache_identity():
    a, b = NVRTCCompiler("sm_80"), NVRTCCompiler("sm_90")
    assert a.identity() != b.identity()
    assert a.cache_key(SAXPY) != b.cache_key(SAXPY)
    assert NVRTCCompiler("sm_90").identity() != NVRTCCompiler("sm_90", ptx=True).identity()


@needs_nvrtc
def test_compile_error_carries_nvrtc_log_and_numbered_source():
    bad = SAXPY.replace("y[i];", "y[i] + undefined_name;")
    with pytest.raises(CompileError) as ei:
        NVRTCCompiler().compile(bad)
    e = ei.value
    assert "undefined_name" in e.message and "error" in e.message
    assert e.source == bad
    text = str(e)
    assert "NVRTC" in text and " | " in text and "undefined_name" in text.split("--- source")[1]


@needs_nvrtc
def test_nvrtc_library_search_finds_the_wheel():
    from uops_cuda.compiler import _preload_nvrtc, find_nvrtc_libraries

    libs = find_nvrtc_libraries()
    if not libs:
        pytest.skip("NVRTC comes from the system loader path here, not from a wheel or CUDA_HOME")
    assert all(p.is_file() and p.name.startswith("libnvrtc.so") for p in libs)
    assert set(_preload_nvrtc()) <= {str(p) for p in libs}


def test_bad_architectures_are_specific_errors():
    with pytest.raises(ValueError, match="unknown CUDA architecture"):
        NVRTCCompiler("hopper")
    if NVRTC_REASON is None:
        with pytest.raises(CompilerUnavailableError, match="cannot target sm_20"):
            NVRTCCompiler("sm_20").compile(SAXPY)


@needs_nvrtc
@pytest.mark.parametrize("headers", ["found", "fallback"])
def test_half_and_bfloat16_compile(headers, monkeypatch):
    if headers == "fallback":
        monkeypatch.setenv("UOPS_CUDA_INCLUDE", "none")
    cuda_include_dir.cache_clear()
    try:
        comp = NVRTCCompiler("sm_90")
        if headers == "found" and cuda_include_dir() is None:
            pytest.skip("no CUDA toolkit headers on this machine (the fallback case covers it)")
        assert (comp.include_dir.name == "include") and (comp.include_dir / "cuda_fp16.h").is_file()
        assert "convert" in elf_symbols(comp.compile(CONVERT))
    finally:
        cuda_include_dir.cache_clear()


# ---------------------------------------------------------------------------------------
# the CPU shim runs hand-written CUDA


@pytest.fixture(scope="module")
def emu():
    from uops.backends.gpu_emu import EmulatedCompiler
    from uops_cuda.emulated import CUDA_DIALECT, emulated_runtime

    if SHIM_REASON is not None:
        pytest.skip(f"GPU shim unavailable: {SHIM_REASON}")
    return EmulatedCompiler("CUDA_EMU", CUDA_DIALECT), emulated_runtime()


def test_shim_elementwise_with_tail(emu):
    comp, rt = emu
    prg = rt.load("saxpy", comp.compile(SAXPY))
    n = 1000  # 8 blocks of 128: the last is partly out of range
    x, y = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    out = np.zeros(n + 24, np.float32)  # slack past n must stay untouched
    # a float parameter travels as its 32-bit pattern (vals are int32 cells)
    a = np.float32(2.5).view(np.int32).item()
    prg(out, x, y, global_size=(8, 1, 1), local_size=(128, 1, 1), vals=(a, n))
    np.testing.assert_allclose(out[:n], 2.5 * x + y, rtol=1e-6)
    assert not out[n:].any()


def test_shim_block_reduction_with_shared_memory_and_barriers(emu):
    comp, rt = emu
    prg = rt.load("block_sum", comp.compile(BLOCK_SUM))
    blocks = 37
    x = np.random.rand(blocks * 256).astype(np.float32)
    out = np.zeros(blocks, np.float32)
    t = prg(out, x, global_size=(blocks,), local_size=(256,), wait=True)
    assert t is not None and t > 0
    np.testing.assert_allclose(out, x.reshape(blocks, 256).sum(axis=1), rtol=1e-5)


def test_shim_barrier_is_real_and_shared_memory_is_per_block(emu):
    comp, rt = emu
    prg = rt.load("block_reverse", comp.compile(BLOCK_REVERSE))
    blocks = 64  # many blocks in flight at once on the worker threads
    x = np.arange(blocks * 128, dtype=np.int32)
    out = np.zeros_like(x)
    prg(out, x, global_size=(blocks,), local_size=(128,))
    np.testing.assert_array_equal(out, x.reshape(blocks, 128)[:, ::-1].reshape(-1))


def test_shim_2d_grid_and_dims(emu):
    comp, rt = emu
    prg = rt.load("grid2d", comp.compile(GRID_2D))
    gx, gy, bx, by = 3, 5, 8, 4
    w, h = gx * bx, gy * by
    out = np.zeros(w * h, np.int32)
    prg(out, global_size=(gx, gy), local_size=(bx, by), vals=(w,))
    yy, xx = np.mgrid[0:h, 0:w]
    np.testing.assert_array_equal(out.reshape(h, w), 1000 * yy + xx + gx * 100000)


def test_shim_half_and_bfloat16_round_like_numpy(emu):
    comp, rt = emu
    prg = rt.load("convert", comp.compile(CONVERT))
    special = [0.0, -0.0, 1.0, 65504.0, 65520.0, 1e6, 6e-8, 3e-8, 1e-5, 2.0**-24, np.inf, -np.inf, np.nan, 1 / 3]
    x = np.concatenate([np.float32(special), np.random.randn(500).astype(np.float32) * 100]).astype(np.float32)
    n = x.size
    h, b = np.zeros(n, np.float16), np.zeros(n, np.uint16)
    bh, bb = np.zeros(n, np.float32), np.zeros(n, np.float32)
    prg(h, b, bh, bb, x, global_size=((n + 63) // 64,), local_size=(64,), vals=(n,))
    with np.errstate(over="ignore"):  # 1e6 -> inf is the rounding under test
        want = x.astype(np.float16)
    np.testing.assert_array_equal(h.view(np.uint16)[~np.isnan(x)], want.view(np.uint16)[~np.isnan(x)])
    assert np.isnan(h[np.isnan(x)]).all()
    np.testing.assert_array_equal(b, f32_to_bf16(x))
    np.testing.assert_array_equal(bh, h.astype(np.float32))
    np.testing.assert_array_equal(bb, bf16_to_f32(b))


def test_shim_atomics_across_concurrent_blocks(emu):
    comp, rt = emu
    prg = rt.load("count", comp.compile(ATOMIC))
    counter, total = np.zeros(1, np.uint32), np.zeros(1, np.float32)
    prg(counter, total, global_size=(50, 2), local_size=(32,))
    assert counter[0] == 3200 and total[0] == 1600.0


def test_shim_errors_are_specific(emu):
    from uops.backends.gpu_emu import LaunchError

    comp, rt = emu
    with pytest.raises(CompileError, match="no CUDA kernel"):
        comp.compile("int f(int x) { return x; }")
    with pytest.raises(CompileError) as ei:
        comp.compile(SAXPY.replace("y[i];", "y[i] + nope;"))
    assert "nope" in ei.value.message
    prg = rt.load("saxpy", comp.compile(SAXPY))
    with pytest.raises(LaunchError, match="global_size"):
        prg(np.zeros(1, np.float32), global_size=(0,), local_size=(1,))
    with pytest.raises(ProgramLoadError, match="could not load kernel 'missing': no such kernel"):
        rt.load("missing", comp.compile(SAXPY))


@needs_nvrtc
def test_nvrtc_writes_no_python_object():
    """An empty NVRTC log is 1 byte: written into ``b" " * 1`` it zeroed CPython's shared one-byte b" "."""
    NVRTCCompiler().compile(SAXPY)
    assert (b" " * 1)[0] == 32 and " ".join("ab") == "a b"


_REFUSED_LAUNCHES = r"""
import dataclasses, sys
import numpy as np
from uops import AxisType, Ops, UOp, dtypes
from uops.backends.gpu_emu import LaunchError
from uops.codegen.program import get_program
from uops.plugins import Device

d = Device["CUDA_EMU"]
n = 4096
r = UOp.range(n, 0, AxisType.GLOBAL)
out, x = (UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(), (), i) for i in (0, 1))
spec = get_program(UOp.sink(out.index(r).store(x.index(r).load() + 1.0)), d.renderer, d.compiler)
grid, block = spec.launch_dims()
prg = d.runtime.load(spec.name, spec.lib)
bufs = [np.zeros(n, np.float32), np.arange(n, dtype=np.float32)]
prg(*bufs, global_size=grid, local_size=block)
assert (bufs[0] == bufs[1] + 1).all(), "the spec's own launch runs"
print("BOUND", prg.bound, "GRID", grid, "BLOCK", block)
big = dataclasses.replace(spec, local_size=tuple(4 * b for b in spec.local_size))
for g, loc in [(grid, big.local_size), ((0,), block), ((-1,), block), (grid, (0,)), ((1, 65536), block),
               (grid, (1, 1, 65)), (grid, (1, 2, 3, 4)), (grid, ("a",))]:
    try:
        prg(*bufs, global_size=g, local_size=loc)
    except LaunchError as e:
        print("REFUSED", e)
    else:
        print("LAUNCHED", g, loc)
        sys.exit(3)
"""


@needs_shim
def test_launches_a_gpu_would_reject_are_refused_in_a_subprocess(tmp_path):
    """A block larger than the kernel's launch bound would write past the end of its buffers: refused by name."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _REFUSED_LAUNCHES], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stdout}{r.stderr}"
    lines = r.stdout.splitlines()
    _, bound, *_ = lines[0].split()
    refused = [ln for ln in lines if ln.startswith("REFUSED")]
    assert len(refused) == 8
    name_ok = all("kernel 'E_" in ln for ln in refused)
    assert name_ok, refused
    assert f"more than the {bound} it was compiled for" in refused[0] and "threads per block" in refused[0]
    assert "global_size must be 1 to 3 positive ints, got (0,)" in refused[1]
    assert "got (-1,)" in refused[2] and "local_size must be 1 to 3 positive ints, got (0,)" in refused[3]
    assert "global_size (1, 65536, 1) exceeds the CUDA limit (2147483647, 65535, 65535)" in refused[4]
    assert "local_size (1, 1, 65) exceeds the CUDA limit (1024, 1024, 64)" in refused[5]
    assert "got (1, 2, 3, 4)" in refused[6] and "got ('a',)" in refused[7]


def test_dialect_parses_kernels_and_bounds():
    from uops_cuda.emulated import CUDA_DIALECT

    src = SAXPY + BLOCK_SUM + 'extern "C" __global__ void unbounded(int* p) { p[0] = 1; }\n'
    decls = [(k.name, k.bound) for k in CUDA_DIALECT.kernels(src)]
    assert decls == [("saxpy", 128), ("block_sum", 256), ("unbounded", 1024)]
    assert CUDA_DIALECT.barrier_token == "__syncthreads"
    macros = CUDA_DIALECT.macros()
    assert "#define threadIdx (uops_shim_cur->thread_idx)" in macros
    assert "#define __syncthreads() uops_shim_barrier()" in macros


def test_dialect_rejects_what_would_break_the_emulation():
    from uops.backends.gpu_emu import Dialect

    with pytest.raises(ValueError, match="needs a group named 'name'"):
        Dialect("X", r"kernel void \w+\(", (), "b()")
    with pytest.raises(ValueError, match="launch index 'a.b' is not an identifier"):
        Dialect("X", r"kernel void (?P<name>\w+)\(", (("a.b", "0"),), "b()")
    d = Dialect("X", r"kernel void (?P<name>\w+)\(", (), "b()", rewrites=((r";", ";\n"),))
    with pytest.raises(ValueError, match="changed the number of lines"):
        d.rewrite("int x;")


# ---------------------------------------------------------------------------------------
# kernels from get_program: CUDA source -> NVRTC CUBIN, and the same source run on the CPU


def _run_emu(ast: UOp, inputs: list[np.ndarray], out: np.ndarray, var_vals=None) -> tuple[np.ndarray, ProgramSpec]:
    d = Device["CUDA_EMU"]
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


def _cubin_for(ast: UOp) -> ProgramSpec:
    d = Device["CUDA"]
    return get_program(ast, d.renderer, d.compiler)


needs_both = pytest.mark.skipif(
    NVRTC_REASON is not None or SHIM_REASON is not None,
    reason=f"needs NVRTC and the shim: {NVRTC_REASON or SHIM_REASON}",
)


@needs_both
def test_program_elementwise_2d():
    rows, cols = 24, 40
    r0, r1 = UOp.range(rows, 0, AxisType.GLOBAL), UOp.range(cols, 1, AxisType.GLOBAL)
    flat = r0 * cols + r1
    val = (glob(1).index(flat).load() * glob(2).index(r1).load()).maximum(0.25).sqrt()
    ast = UOp.sink(glob(0).index(flat).store(val))
    a, b = np.random.rand(rows, cols).astype(np.float32), np.random.rand(cols).astype(np.float32)
    got, spec = _run_emu(ast, [a, b], np.zeros((rows, cols), np.float32))
    np.testing.assert_allclose(got, np.sqrt(np.maximum(a * b, 0.25)), rtol=1e-6)
    assert "blockIdx." in spec.src and "threadIdx." in spec.src and "__launch_bounds__" in spec.src
    cuda = _cubin_for(ast)
    assert cuda.src == spec.src, "CUDA and CUDA_EMU render the same source"
    assert cuda.lib[:4] == b"\x7fELF" and cuda.name in elf_symbols(cuda.lib)


@needs_both
def test_program_matmul_reduce():
    m, k, n = 16, 29, 12
    a, b = np.random.randn(m, k).astype(np.float32), np.random.randn(k, n).astype(np.float32)
    i, j, kk = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.GLOBAL), UOp.range(k, 2, AxisType.REDUCE)
    prod = glob(1).index(i * k + kk).load() * glob(2).index(kk * n + j).load()
    ast = UOp.sink(glob(0).index(i * n + j).store(prod.reduce(kk, op=Ops.ADD)))
    got, spec = _run_emu(ast, [a, b], np.zeros((m, n), np.float32))
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    assert spec.local_size != (1,) * len(spec.local_size), "a GPU kernel should use threads"


@needs_both
def test_program_symbolic_size():
    nvar = UOp.variable("n", 1, 4096)
    r = UOp.range(nvar, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1).index(r).load().exp2() * 0.5))
    for n in (3, 700):
        x = np.random.rand(n).astype(np.float32)
        got, spec = _run_emu(ast, [x], np.zeros(n, np.float32), var_vals={"n": n})
        np.testing.assert_allclose(got, np.exp2(x) * 0.5, rtol=1e-6)
    assert "int n" in spec.src


@needs_both
def test_program_half_and_bfloat16_with_nonfinite_constants():
    n = 64
    r = UOp.range(n, 0, AxisType.GLOBAL)
    h = glob(1, dtypes.float16).index(r).load()
    val = (h * UOp.const(dtypes.float16, 2.0)).cast(dtypes.float32).maximum(float("-inf"))
    ast = UOp.sink(glob(0).index(r).store(val))
    x = (np.random.randn(n) * 10).astype(np.float16)
    got, spec = _run_emu(ast, [x], np.zeros(n, np.float32))
    np.testing.assert_array_equal(got, (x * np.float16(2)).astype(np.float32))
    assert "#include <cuda_fp16.h>" in spec.src and "__int_as_float" in spec.src
    # bfloat16 in, float out
    b = glob(1, dtypes.bfloat16).index(r).load().cast(dtypes.float32) + 1.0
    ast = UOp.sink(glob(0).index(r).store(b))
    xb = f32_to_bf16(np.random.randn(n).astype(np.float32))
    got, spec = _run_emu(ast, [xb], np.zeros(n, np.float32))
    np.testing.assert_allclose(got, bf16_to_f32(xb) + 1.0, rtol=1e-6)
    assert "#include <cuda_bf16.h>" in spec.src


@needs_both
def test_program_bitcast_and_int_math():
    n = 50
    r = UOp.range(n, 0, AxisType.GLOBAL)
    bits = glob(1).index(r).load().bitcast(dtypes.int32)
    ast = UOp.sink(glob(0, dtypes.int32).index(r).store((bits >> 23) & 0xFF))
    x = np.random.rand(n).astype(np.float32) * 1000
    got, spec = _run_emu(ast, [x], np.zeros(n, np.int32))
    np.testing.assert_array_equal(got, (x.view(np.int32) >> 23) & 0xFF)
    assert "uops_bitcast" in spec.src


@needs_both
def test_renderer_local_memory_and_barrier_run_on_the_shim():
    """DEFINE_LOCAL + BARRIER (not produced by the lowering yet): rendered, NVRTC-compiled, run."""
    bs = 64
    lidx = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, bs),), "lidx0")
    gidx = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, 4),), "gidx0")
    smem = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(bs, AddrSpace.LOCAL), (), "tile")
    st = smem.index(lidx).store(glob(1).index(gidx * bs + lidx).load())
    bar = UOp(Ops.BARRIER, dtypes.void, (st,))
    rev = UOp(Ops.AFTER, smem.dtype, (smem, bar)).index(UOp.const(dtypes.int32, bs - 1) - lidx).load()
    sink = UOp.sink(glob(0).index(gidx * bs + lidx).store(rev))
    ren = Device["CUDA_EMU"].renderer
    src = ren.render("rev_tile", linearize(sink))
    assert "__shared__ float" in src and "__syncthreads();" in src and "__launch_bounds__(64)" in src
    if NVRTC_REASON is None:
        assert "rev_tile" in elf_symbols(NVRTCCompiler().compile(src))
    lib = Device["CUDA_EMU"].compiler.compile(src)
    x = np.random.rand(4 * bs).astype(np.float32)
    out = np.zeros_like(x)
    Device["CUDA_EMU"].runtime.load("rev_tile", lib)(out, x, global_size=(4,), local_size=(bs,))
    np.testing.assert_array_equal(out, x.reshape(4, bs)[:, ::-1].reshape(-1))


def test_renderer_launch_indices_and_signature():
    ren = CUDARenderer("sm_80")
    assert ren.target == "sm_80" and ren.global_max is not None and ren.local_max is not None
    g = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, 7),), "gidx2")
    loc = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, 8),), "lidx1")
    assert ren.render_uop(g) == "blockIdx.z" and ren.render_uop(loc) == "threadIdx.y"
    sink = UOp.sink(glob(0).index(g * 8 + loc).store(UOp.const(dtypes.float32, 1.0)))
    src = ren.render("k", linearize(sink))
    assert src.startswith('extern "C" __global__ void __launch_bounds__(8) k(float* __restrict__ data0)')
    assert "cuda_fp16" not in src, "the half header is included only when half is used"


# ---------------------------------------------------------------------------------------
# the plugin and the GPU runtime


def test_backends_are_discovered_and_compile_without_a_gpu():
    from importlib.metadata import entry_points

    names = {ep.name for ep in entry_points(group="uops.backends") if ep.value == "uops_cuda"}
    assert names == {"CUDA", "CUDA_EMU"}
    d = Device["CUDA"]
    assert d.backend.priority == 100 and Device["CUDA_EMU"].backend.priority == 20
    assert d.backend.targets[0] == "sm_90"
    reason = d.backend.probe_runtime()
    if reason is not None:
        assert reason.startswith("no NVIDIA driver/GPU: ")
    if NVRTC_REASON is None:
        comp = d.backend.compiler("sm_86")
        assert isinstance(comp, NVRTCCompiler) and comp.arch == "sm_86"
        assert d.backend.renderer("sm_86").target == "sm_86"


def _gpu_reason() -> str | None:
    from uops_cuda import probe_runtime

    return probe_runtime()


GPU_REASON = _gpu_reason()
needs_gpu = pytest.mark.skipif(GPU_REASON is not None, reason=str(GPU_REASON))


@needs_gpu
def test_gpu_copies_and_launch():
    from uops_cuda.runtime import CUDARuntime, device_arch

    rt = CUDARuntime()
    comp = NVRTCCompiler(device_arch())
    prg = rt.load("saxpy", comp.compile(SAXPY))
    n = 100_000
    x, y = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    hx, hy, ho = rt.allocator.alloc(x.nbytes), rt.allocator.alloc(y.nbytes), rt.allocator.alloc(x.nbytes)
    rt.allocator.copyin(hx, memoryview(x.view(np.uint8)))
    rt.allocator.copyin(hy, memoryview(y.view(np.uint8)))
    a = np.float32(3.0).view(np.int32).item()
    t = prg(ho, hx, hy, global_size=((n + 127) // 128,), local_size=(128,), vals=(a, n), wait=True)
    assert t is not None and 0 < t < 10
    out = np.empty(n, np.float32)
    rt.allocator.copyout(memoryview(out.view(np.uint8)), ho)
    np.testing.assert_allclose(out, 3.0 * x + y, rtol=1e-6)
    for hnd, nb in ((hx, x.nbytes), (hy, y.nbytes), (ho, x.nbytes)):
        rt.allocator.free(hnd, nb)


@needs_gpu
def test_gpu_ptx_loads_and_block_reduction():
    from uops_cuda.runtime import CUDARuntime, device_arch

    rt = CUDARuntime()
    arch = device_arch().replace("sm_", "compute_")
    prg = rt.load("block_sum", NVRTCCompiler(arch).compile(BLOCK_SUM))
    x = np.random.rand(64 * 256).astype(np.float32)
    hx, ho = rt.allocator.alloc(x.nbytes), rt.allocator.alloc(64 * 4)
    rt.allocator.copyin(hx, memoryview(x.view(np.uint8)))
    prg(ho, hx, global_size=(64,), local_size=(256,))
    rt.synchronize()
    out = np.empty(64, np.float32)
    rt.allocator.copyout(memoryview(out.view(np.uint8)), ho)
    np.testing.assert_allclose(out, x.reshape(64, 256).sum(1), rtol=1e-5)


@pytest.mark.skipif(GPU_REASON is None, reason="a CUDA GPU is present: the no-driver path cannot be shown here")
def test_load_without_a_usable_driver_is_a_program_load_error():
    """Without a GPU the driver calls fail (no libcuda, or no device): ProgramLoadError, the driver's error as cause."""
    from uops_cuda.runtime import CUDAProgram

    with pytest.raises(ProgramLoadError, match="uops_cuda could not load kernel 'saxpy': ") as info:
        CUDAProgram("saxpy", b"// PTX text: the driver is needed to read it")
    assert info.value.plugin == "uops_cuda" and info.value.kernel == "saxpy"
    assert isinstance(info.value.__cause__, RuntimeError | ImportError), info.value.__cause__


@needs_nvrtc
def test_a_cut_or_foreign_cubin_is_refused_before_the_driver_sees_it():
    """cuModuleLoadData takes no length: a CUBIN cut short would be read past its end, so it never gets there."""
    from uops.runtime.elf import ElfError
    from uops_cuda.runtime import CUDAProgram

    cubin = NVRTCCompiler("sm_80").compile(SAXPY)
    for cut in (len(cubin) - 1, len(cubin) // 2, 80):
        with pytest.raises(ProgramLoadError, match=r"'saxpy': ElfError: .*(past its|outside its) \d+ bytes") as info:
            CUDAProgram("saxpy", cubin[:cut])
        assert isinstance(info.value.__cause__, ElfError)
    host = bytearray(cubin)
    host[18:20] = (62).to_bytes(2, "little")  # e_machine: x86_64
    with pytest.raises(ProgramLoadError, match=r"built for x86_64 \(e_machine 62\), not cuda \(e_machine 190\)"):
        CUDAProgram("saxpy", bytes(host))


@needs_gpu
def test_gpu_corrupt_image_and_missing_kernel_are_program_load_errors():
    from uops_cuda.runtime import CUDARuntime, device_arch

    rt = CUDARuntime()
    cubin = NVRTCCompiler(device_arch()).compile(SAXPY)
    with pytest.raises(ProgramLoadError, match="'saxpy': CUDAError: cuModuleLoadData\\(saxpy\\) failed: CUDA_ERROR_"):
        rt.load("saxpy", b"neither a CUBIN nor PTX")  # not a cut CUBIN: the driver takes no length, reads past it
    with pytest.raises(ProgramLoadError, match="'nope': CUDAError: cuModuleGetFunction\\('nope'\\) failed"):
        rt.load("nope", cubin)


@needs_both
def test_renderer_vector_types_run_on_the_shim():
    """VECTORIZE -> make_float4, GEP -> .x/.y/.z/.w: rendered, NVRTC-compiled, run (lanes reversed)."""
    g = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, 8),), "gidx0")
    lanes = [glob(1).index(g * 4 + i).load() for i in range(4)]
    vec = UOp(Ops.VECTORIZE, dtypes.float32.vec(4), tuple(lanes))
    stores = [glob(0).index(g * 4 + i).store(UOp(Ops.GEP, dtypes.float32, (vec,), (3 - i,))) for i in range(4)]
    ren = Device["CUDA_EMU"].renderer
    src = ren.render("rev4", linearize(UOp.sink(*stores)))
    assert "float4" in src and "make_float4(" in src and ".w" in src
    if NVRTC_REASON is None:
        assert "rev4" in elf_symbols(NVRTCCompiler().compile(src))
    x = np.random.rand(32).astype(np.float32)
    out = np.zeros_like(x)
    Device["CUDA_EMU"].runtime.load("rev4", Device["CUDA_EMU"].compiler.compile(src))(out, x, global_size=(8,))
    np.testing.assert_array_equal(out, x.reshape(8, 4)[:, ::-1].reshape(-1))
