"""uops.load_program, the checked loader of saved ProgramSpecs, and the ELF checks under it (issue 11, 2 and 13).

The per-device round trip and launch checks are the conformance kit's (`uops.testing.kit.test_program_spec`).

A wrong launch must get a named error before it reaches native code; bad launches run in a
subprocess so that a regression (an out-of-bounds write, a segfault) fails the test instead of
killing the run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import uops
from uops import Ops, UOp, dtypes, load_program
from uops.codegen.linearizer import linearize
from uops.codegen.program import ProgramSpec
from uops.dtypes import AddrSpace
from uops.plugins import Device
from uops.runtime import ProgramLoadError
from uops.runtime.elf import ElfError, SymbolNotDefinedError, read_shared_object
from uops.testing.kit.helpers import run_child
from uops.testing.kit.test_program_spec import cat_kernel, rnd

# ---------------------------------------------------------------------------------------
# round trip


def test_load_program_is_exported() -> None:
    assert uops.load_program is load_program and "load_program" in uops.__all__


# ---------------------------------------------------------------------------------------
# the size bound is exact enough for every kind of kernel the front end makes


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
