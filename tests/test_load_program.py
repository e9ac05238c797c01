"""uops.load_program, the checked loader of saved ProgramSpecs, and the ELF checks under it (issue 11, 2 and 13).

A wrong launch must get a named error before it reaches native code; bad launches run in a
subprocess so that a regression (an out-of-bounds write, a segfault) fails the test instead of
killing the run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import uops
from uops import AxisType, Ops, Tensor, UOp, dtypes, load_program
from uops.codegen.linearizer import linearize
from uops.codegen.program import ProgramSpec, get_program
from uops.dtypes import AddrSpace
from uops.frontend.load import LoadedProgram
from uops.frontend.realize import buffer_numpy
from uops.plugins import Device
from uops.runtime import Buffer, ProgramLoadError
from uops.runtime.elf import ElfError, SymbolNotDefinedError, read_shared_object

ROOT = Path(__file__).resolve().parents[1]
rng = np.random.default_rng(11)


def rnd(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def kernel_of(t: Tensor) -> tuple[ProgramSpec, list[np.ndarray]]:
    """The one kernel that realizes ``t`` and the host contents of its buffers, in slot order."""
    (item,) = [i for i in t.schedule() if i.kind == "kernel"]
    dev = Device[item.device]
    return get_program(item.ast, dev.renderer, dev.compiler), [buffer_numpy(b) for b in item.bufs]


def cat_kernel(device: str) -> tuple[ProgramSpec, list[np.ndarray], np.ndarray]:
    """out = concat(a, b, axis=1) * 2 + 1 (a: 4x6, b: 4x3): three slots, gated reads of both inputs."""
    a, b = rnd(4, 6), rnd(4, 3)
    spec, bufs = kernel_of(Tensor.cat(Tensor(a, device=device), Tensor(b, device=device), dim=1) * 2.0 + 1.0)
    return spec, bufs[1:], np.concatenate([a, b], axis=1) * 2 + 1


def with_global_size(spec: ProgramSpec, extra: int) -> ProgramSpec:
    """``spec`` with launch dimension 0 made ``extra`` workgroups larger (as an edited file would be)."""
    g0 = spec.launch_dims()[0][0]
    return dataclasses.replace(spec, global_size=(UOp.const(dtypes.index, g0 + extra), *spec.global_size[1:]))


def run_child(code: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, env=env
    )


# ---------------------------------------------------------------------------------------
# round trip


def test_load_program_is_exported() -> None:
    assert uops.load_program is load_program and "load_program" in uops.__all__


def test_saved_spec_round_trip_matches_numpy(device: str, tmp_path: Path) -> None:
    spec, (a, b), want = cat_kernel(device)
    assert sorted([a.size, b.size]) == [12, 24]
    path = tmp_path / "kernel.json"
    path.write_text(spec.to_json())
    prog = load_program(path, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    assert isinstance(prog, LoadedProgram) and prog.device == device
    assert prog.buffer_sizes() == [want.size, a.size, b.size]
    out = np.zeros(want.size, np.float32)
    assert prog(out, a, b) is None
    np.testing.assert_allclose(out.reshape(want.shape), want, rtol=1e-6)
    # Buffers are used as they are
    bufs = [Buffer(prog.runtime, n, dtypes.float32) for n in (want.size, a.size, b.size)]
    bufs[1].copyin(a)
    bufs[2].copyin(b)
    prog(*bufs)
    np.testing.assert_allclose(bufs[0].numpy().reshape(want.shape), want, rtol=1e-6)


def test_bad_launches_are_refused_before_native_code(device: str) -> None:
    """Finding 2: too few buffers, a small output, a wrong dtype, edited launch sizes: each a named error."""
    r = run_child(
        f"""
        import dataclasses, numpy as np
        from test_load_program import cat_kernel, with_global_size
        from uops import load_program
        from uops.runtime import Buffer
        from uops.dtypes import dtypes
        spec, (a, b), want = cat_kernel({device!r})
        print("small_slot", 1 if a.size == 12 else 2)
        prog = load_program(spec)
        out = np.zeros(want.size, np.float32)
        ro = np.zeros(want.size, np.float32); ro.flags.writeable = False
        cases = {{
            "few": lambda: prog(out, a),
            "none": lambda: prog(),
            "small_out": lambda: prog(np.zeros(want.size - 1, np.float32), a, b),
            "small_in": lambda: prog(out, *((a[:-1], b) if a.size == 12 else (a, b[:-1]))),
            "small_buffer": lambda: prog(Buffer(prog.runtime, 3, dtypes.float32), a, b),
            "dtype": lambda: prog(out, a.astype(np.float64), b),
            "buffer_dtype": lambda: prog(out, Buffer(prog.runtime, a.size, dtypes.int32), b),
            "not_array": lambda: prog(out, list(a), b),
            "read_only": lambda: prog(ro, a, b),
            "unknown_var": lambda: prog(out, a, b, n=3),
            "local": lambda: load_program(dataclasses.replace(spec, local_size=(64,)))(out, a, b),
            "global": lambda: load_program(with_global_size(spec, 1))(out, a, b),
        }}
        for name, call in cases.items():
            try:
                call()
                print(name, "NOT REFUSED")
            except (TypeError, ValueError) as e:
                print(name, type(e).__name__, str(e).replace(chr(10), " "))
        prog(out, a, b)
        print("good", bool(np.allclose(out.reshape(want.shape), want, rtol=1e-6)))
        """
    )
    assert r.returncode == 0, f"the child died (exit {r.returncode}): {r.stderr[-3000:]}"
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert got.pop("good") == "True"
    assert not [k for k, v in got.items() if v == "NOT REFUSED"], r.stdout
    n = 6 * 4 + 3 * 4
    small = got.pop("small_slot")
    assert got["few"].startswith("TypeError") and "takes 3 buffers" in got["few"] and "got 2" in got["few"]
    assert "got 0" in got["none"]
    assert (
        got["small_out"].startswith("ValueError") and f"slot 0: the kernel writes up to {n} float" in got["small_out"]
    )
    assert f"slot {small}: the kernel reads up to 12 float" in got["small_in"] and "ndarray has 11" in got["small_in"]
    assert "slot 0" in got["small_buffer"] and "Buffer has 3" in got["small_buffer"]
    assert got["dtype"].startswith("TypeError") and "slot 1: the array is float64" in got["dtype"]
    assert "slot 1: the Buffer holds int" in got["buffer_dtype"]
    assert "slot 1: expected a numpy array or a uops Buffer, got list" in got["not_array"]
    assert "slot 0: the kernel writes this slot and the array is read-only" in got["read_only"]
    assert got["unknown_var"].startswith("TypeError") and "no variable 'n'" in got["unknown_var"]
    assert "local_size[0] is 64" in got["local"] and "do not match" in got["local"]
    assert "global_size[0] is" in got["global"] and "do not match" in got["global"]


def _symbolic_spec(device: str) -> ProgramSpec:
    n = UOp.variable("n", 1, 1024)
    r = UOp.range(n, 0, AxisType.GLOBAL)
    g = [UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(), (), i) for i in range(2)]
    ast = UOp.sink(g[0].index(r).store(g[1].index(r).load() * 2.0))
    d = Device[device]
    return get_program(ast, d.renderer, d.compiler)


def test_sizes_follow_the_variables(device: str) -> None:
    prog = load_program(_symbolic_spec(device))
    assert prog.buffer_sizes(n=5) == [5, 5] and prog.buffer_sizes(n=300) == [300, 300]
    x = rnd(300)
    for n in (5, 300):
        out = np.zeros(n, np.float32)
        prog(out, x[:n], n=n)
        np.testing.assert_allclose(out, x[:n] * 2)
    with pytest.raises(ValueError, match="slot 1: the kernel reads up to 300 float"):
        prog(np.zeros(300, np.float32), x[:299], n=300)
    with pytest.raises(ValueError, match="outside its declared range"):
        prog(np.zeros(2000, np.float32), np.zeros(2000, np.float32), n=2000)
    with pytest.raises(ValueError, match="needs a value for variable 'n'"):
        prog(np.zeros(5, np.float32), x[:5])
    with pytest.raises(TypeError, match="n=True must be an int"):
        prog(np.zeros(5, np.float32), x[:5], n=True)


# ---------------------------------------------------------------------------------------
# the size bound is exact enough for every kind of kernel the front end makes

FRONTEND_CASES = {
    "pad": lambda d, a, b: Tensor(a, device=d).pad(((1, 2), (3, 0))) + 1.0,
    "pad_reshape": lambda d, a, b: Tensor(a, device=d).pad(((1, 2), (3, 1))).reshape(70) + 1.0,
    "pad_pad_sum": lambda d, a, b: Tensor(a, device=d).reshape(24).pad(((5, 7),)).reshape(6, 6).pad(((1, 1), (2, 0)))
    .sum(1),
    "cat_permute": lambda d, a, b: Tensor.cat(Tensor(a, device=d), Tensor(b, device=d)).reshape(8, 3, 2)
    .permute(2, 0, 1) * 3.0,
    "shrink_flip": lambda d, a, b: Tensor(a, device=d).shrink(((1, 3), (2, 6))).flip(1) + 1.0,
    "strided": lambda d, a, b: Tensor(a, device=d)[1:3, ::2] + 1.0,
    "matmul": lambda d, a, b: Tensor(a, device=d) @ Tensor(b, device=d).T,
    "max": lambda d, a, b: Tensor(a, device=d).max(0),
    "expand": lambda d, a, b: Tensor(a[:1], device=d).expand(4, 6) * Tensor(b, device=d),
    "stack_pad": lambda d, a, b: Tensor.stack(Tensor(a, device=d), Tensor(b, device=d), dim=1).reshape(8, 6)
    .pad(((0, 1), (1, 1))) + 1.0,
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(FRONTEND_CASES))
def test_every_frontend_kernel_loads_with_its_own_buffers(device: str, case: str) -> None:
    a, b = rnd(4, 6), rnd(4, 6)
    want = FRONTEND_CASES[case](device, a, b).numpy()
    spec, bufs = kernel_of(FRONTEND_CASES[case](device, a, b))
    prog = load_program(spec)
    need = prog.buffer_sizes()
    sizes = [x.size for x in bufs]
    assert all(n <= s for n, s in zip(need, sizes)), f"{spec.name} asks for {need}, the real buffers hold {sizes}"
    assert need[0] == sizes[0] == want.size, "the output is written in full"
    out = np.zeros(want.size, want.dtype)
    prog(out, *bufs[1:])
    np.testing.assert_allclose(out.reshape(want.shape), want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# files and pins


def test_sha256_pin(tmp_path: Path) -> None:
    spec, _, _ = cat_kernel("PYTHON")
    path = tmp_path / "k.json"
    path.write_text(spec.to_json())
    good = hashlib.sha256(path.read_bytes()).hexdigest()
    assert load_program(path, sha256=good.upper()).spec.name == spec.name
    with pytest.raises(ValueError, match="not the pinned"):
        load_program(path, sha256="0" * 64)
    with pytest.raises(ValueError, match="64 hex digits"):
        load_program(path, sha256="abc")
    assert load_program(spec, sha256=hashlib.sha256(spec.lib).hexdigest()).spec is spec
    with pytest.raises(ValueError, match="sha256 of the lib of kernel"):
        load_program(spec, sha256=good)


def test_spec_files_are_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="is not a saved ProgramSpec"):
        load_program(bad)
    with pytest.raises(FileNotFoundError):
        load_program(tmp_path / "missing.json")
    with pytest.raises(TypeError, match="takes a ProgramSpec or a path"):
        load_program(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a regular file"):
        load_program(tmp_path)
    spec, _, _ = cat_kernel("PYTHON")
    with pytest.raises(ValueError, match="not an identifier"):
        load_program(dataclasses.replace(spec, name="k(); system"))
    with pytest.raises(ValueError, match="the spec says slot 1 holds 'int'"):
        load_program(dataclasses.replace(spec, buffers={**spec.buffers, 1: "int"}))


def test_a_fifo_spec_file_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.json"
    os.mkfifo(fifo)
    r = run_child(
        f"""
        from uops import load_program
        try:
            load_program({str(fifo)!r})
        except ValueError as e:
            print(e)
        """,
        timeout=120,
    )
    assert r.returncode == 0 and "is not a regular file" in r.stdout, r.stderr


# ---------------------------------------------------------------------------------------
# finding 13: only what the library defines, only shared objects for this machine


def _cpu() -> Any:
    try:
        return Device["CPU"]
    except Exception as e:  # a missing clang, a quarantined plugin
        pytest.skip(f"CPU device unavailable: {e}")


CALLS_SINF = """
float sinf(float);
void k(float* restrict out, const float* restrict a) { out[0] = sinf(a[0]); }
"""


def test_kernel_named_after_a_dependency_symbol_is_refused() -> None:
    dev = _cpu()
    lib = dev.compiler.compile(CALLS_SINF)
    so = read_shared_object(lib)
    assert so.defined.get("k") == "function" and "sinf" not in so.defined and b"sinf" in lib
    for name in ("system", "sinf", "printf"):
        with pytest.raises(ProgramLoadError, match=f"no function {name!r} of its own") as info:
            dev.runtime.load(name, lib)
        assert isinstance(info.value.__cause__, SymbolNotDefinedError)
    out, a = np.zeros(1, np.float32), np.full(1, 0.5, np.float32)
    dev.runtime.load("k", lib)(out, a)
    np.testing.assert_allclose(out, np.sin(a), rtol=1e-6)


def test_spec_named_system_never_resolves_libc() -> None:
    _cpu()
    spec, _, _ = cat_kernel("CPU")
    with pytest.raises(ProgramLoadError, match="no function 'system' of its own"):
        load_program(dataclasses.replace(spec, name="system"))


def test_emulated_runtime_resolves_only_its_own_entries() -> None:
    if "CUDA_EMU" not in [r.device for r in Device.status() if r.status == "ok"]:
        pytest.skip("CUDA_EMU unavailable")
    spec, _, _ = cat_kernel("CUDA_EMU")
    rt = Device["CUDA_EMU"].runtime
    with pytest.raises(ProgramLoadError, match="uops_cuda could not load kernel 'system': no such kernel .*"
                       "no function 'uops_shim_entry_system' of its own"):  # fmt: skip
        rt.load("system", spec.lib)
    with pytest.raises(ProgramLoadError, match="not an ELF shared library") as info:
        rt.load(spec.name, b"// PTX\n")
    assert isinstance(info.value.__cause__, ElfError)


def _patched(lib: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(lib)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def _constructor_lib(tmp_path: Path, marker: Path) -> bytes:
    """A real shared library whose constructor creates ``marker`` and that defines ``k``."""
    from uops_cpu_clang.compiler import clang_path

    src = tmp_path / "ctor.c"
    src.write_text(
        "#include <stdio.h>\n"
        f'__attribute__((constructor)) static void mark(void) {{ fclose(fopen("{marker}", "w")); }}\n'
        "void k(float* out) { out[0] = 1.0f; }\n"
    )
    so = tmp_path / "ctor.so"
    subprocess.run([clang_path(), "-shared", "-fPIC", str(src), "-o", str(so)], check=True, capture_output=True)
    return so.read_bytes()


def test_nothing_is_dlopened_that_is_not_a_shared_object_for_this_machine(tmp_path: Path) -> None:
    dev = _cpu()
    marker = tmp_path / "constructor-ran"
    lib = _constructor_lib(tmp_path, marker)
    bad = {
        "aarch64": (_patched(lib, 18, "<H", 183), "built for aarch64"),
        "cuda": (_patched(lib, 18, "<H", 190), "built for cuda"),
        "32-bit": (_patched(lib, 4, "B", 1), "32-bit ELF"),
        "big-endian": (_patched(lib, 5, "B", 2), "wrong byte order"),
        "exec": (_patched(lib, 16, "<H", 2), "not a shared object"),
        "truncated": (lib[:200], "malformed|outside the file"),
        "not-elf": (b"MZ\x90\x00" + lib[4:], "not an ELF shared library"),
        "interpreter": (Path(os.path.realpath("/proc/self/exe")).read_bytes(), "executable|not a shared object"),
    }
    for what, (data, msg) in bad.items():
        with pytest.raises(ProgramLoadError, match=msg) as info:
            dev.runtime.load("k", data)
        assert isinstance(info.value.__cause__, ElfError), what
        assert not marker.exists(), f"the {what} library was dlopened (its constructor ran)"
    # the sha256 pin refuses a substituted library before loading it
    spec, _, _ = cat_kernel("CPU")
    path = tmp_path / "k.json"
    path.write_text(spec.to_json())
    pin = hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_text(dataclasses.replace(spec, lib=lib).to_json())
    with pytest.raises(ValueError, match="not the pinned"):
        load_program(path, sha256=pin)
    assert not marker.exists()
    dev.runtime.load("k", lib)
    assert marker.exists(), "the unpatched library is a valid one: the checks above refused only what was wrong"


def test_the_readme_example_of_a_saved_program(tmp_path: Path) -> None:
    _cpu()
    main = "import sys, uops.cli; sys.exit(uops.cli.main())"
    cmd = [sys.executable, "-c", main, "compile", "a+b", "--shape", "a=4", "--shape", "b=4", "--out", "kernel.json"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "kernel.json"
    prog = load_program(path, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    out = np.zeros(4, np.float32)
    prog(out, np.arange(4, dtype=np.float32), np.ones(4, np.float32))
    np.testing.assert_array_equal(out, [1, 2, 3, 4])
    with pytest.raises(TypeError, match=r"kernel E_4 takes 3 buffers \(0: float written, 1: float read"):
        prog(out, np.ones(4, np.float32))


def _tile_reverse(tile: int) -> UOp:
    """Each block reverses its 64 elements through a shared-memory tile of ``tile`` elements."""
    bs = 64
    lidx = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, bs),), "lidx0")
    gidx = UOp(Ops.SPECIAL, dtypes.int32, (UOp.const(dtypes.int32, 4),), "gidx0")
    g = [UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(), (), i) for i in range(2)]
    smem = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(tile, AddrSpace.LOCAL), (), "tile")
    st = smem.index(lidx).store(g[1].index(gidx * bs + lidx).load())
    bar = UOp(Ops.BARRIER, dtypes.void, (st,))
    rev = UOp(Ops.AFTER, smem.dtype, (smem, bar)).index(UOp.const(dtypes.int32, bs - 1) - lidx).load()
    return UOp.sink(g[0].index(gidx * bs + lidx).store(rev))


def test_shared_memory_kernel_is_checked_against_its_tile() -> None:
    if "CUDA_EMU" not in [r.device for r in Device.status() if r.status == "ok"]:
        pytest.skip("CUDA_EMU unavailable")
    d = Device["CUDA_EMU"]
    sink = _tile_reverse(64)
    uops_ = linearize(sink)
    src = d.renderer.render("rev_tile", uops_)
    spec = ProgramSpec(
        name="rev_tile", src=src, device="CUDA_EMU", target=d.renderer.target, ast=sink, uops=uops_,
        lib=d.compiler.compile(src), global_size=(UOp.const(dtypes.index, 4),), local_size=(64,), vars=[],
        outs=[0], ins=[1], buffers={0: "float", 1: "float"},
    )  # fmt: skip
    prog = load_program(ProgramSpec.from_json(spec.to_json()))
    x = rnd(256)
    out = np.zeros_like(x)
    prog(out, x)
    np.testing.assert_array_equal(out, x.reshape(4, 64)[:, ::-1].reshape(-1))
    with pytest.raises(ValueError, match="local_size\\[0\\] is 128"):
        load_program(dataclasses.replace(spec, local_size=(128,)))(out, x)
    small = _tile_reverse(32)
    bad = load_program(dataclasses.replace(spec, ast=small, uops=linearize(small)))
    with pytest.raises(ValueError, match="DEFINE_LOCAL tile holds 32 elements, its code may touch 64"):
        bad(out, x)


def test_randomly_edited_specs_get_named_errors_or_run_right(device: str) -> None:
    """A saved spec edited at random (fields dropped, retyped, names and sizes changed): a ValueError,
    TypeError or a refused symbol, or a correct result; never a crash or a wrong answer."""
    r = run_child(
        f"""
        import copy, json, random, tempfile
        import numpy as np
        from test_load_program import cat_kernel
        from uops import load_program
        spec, (a, b), want = cat_kernel({device!r})
        base = json.loads(spec.to_json())
        rng = random.Random(11)
        junk = [None, 0, -1, 10**12, "x", [], {{}}, [1, 2], [0], {{"0": "float"}}, True]
        counts = {{}}
        path = tempfile.mktemp(suffix=".json")
        for _ in range(150):
            d = copy.deepcopy(base)
            k = rng.choice(sorted(d))
            how = rng.randrange(5)
            if how == 0:
                del d[k]
            elif how == 1:
                d[k] = rng.choice(junk)
            elif how == 2:
                d["local_size"] = [rng.choice([0, 1, 2, 64, 10**9])]
            elif how == 3:
                d["name"] = rng.choice(["system", "E_1", "", "a" * 300, "k;rm"])
            else:
                d[rng.choice(["outs", "ins"])] = rng.choice([[0], [1], [0, 1, 2], [2, 1], [5]])
            open(path, "w").write(json.dumps(d))
            out = np.zeros(want.size, np.float32)
            try:
                load_program(path)(out, a, b)
            except (ValueError, TypeError, AttributeError, RuntimeError) as e:
                counts[type(e).__name__] = counts.get(type(e).__name__, 0) + 1
                continue
            assert np.allclose(out.reshape(want.shape), want, rtol=1e-6), (k, how, d.get(k))
            counts["ran"] = counts.get("ran", 0) + 1
        print(json.dumps(counts))
        """
    )
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-3000:]}"
    counts = json.loads(r.stdout.strip().splitlines()[-1])
    assert counts.get("ran", 0) > 0 and counts.get("ValueError", 0) > 0, counts
