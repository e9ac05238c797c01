"""The compile cache with ``device``'s compiler: its identity is part of every key (an upgraded
toolchain never loads an old binary), its own output passes its ``check_binary``, and a corrupt
disk entry is recompiled, replaced, and runs right."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from uops import AxisType, UOp
from uops.codegen.program import ProgramSpec, get_program
from uops.compiler import Compiler, clear_memory_cache, read_entry
from uops.plugins import Device
from uops.testing.kit.helpers import glob, private_compile_cache, run_kernel

N = 9


def _kernel(device: str) -> tuple[UOp, ProgramSpec]:
    r = UOp.range(N, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1).index(r).load() * 3.0 + 0.5))
    d = Device[device]
    return ast, get_program(ast, d.renderer, d.compiler)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private, empty disk cache and an empty memo."""
    with private_compile_cache(tmp_path / "cache", monkeypatch) as d:
        yield d


def _count_compiles(compiler: Compiler, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = compiler.compile

    def counting(src: str) -> bytes:
        calls.append(src)
        return real(src)

    monkeypatch.setattr(compiler, "compile", counting)
    return calls


def test_identity_is_in_the_cache_key(device: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c = Device[device].compiler
    _, spec = _kernel(device)
    assert type(c).identity is not Compiler.identity, (
        f"{type(c).__name__} does not override identity(): name the compiler, its version and target there"
    )
    ident = c.identity()
    assert isinstance(ident, str) and ident.strip() and c.identity() == ident, "identity() must be a stable string"
    key = c.cache_key(spec.src)
    calls = _count_compiles(c, monkeypatch)  # get_program compiled and cached the kernel already
    monkeypatch.setattr(c, "identity", lambda: ident + " (upgraded)")
    assert c.cache_key(spec.src) != key, "a new compiler identity must give a new cache key"
    clear_memory_cache()  # the in-process memo is keyed by process_identity(); the disk by identity()
    c.compile_cached(spec.src)
    assert len(calls) == 1, "an entry compiled by another compiler identity was reused"
    monkeypatch.setattr(c, "identity", lambda: ident)
    clear_memory_cache()
    c.compile_cached(spec.src)
    assert len(calls) == 1, "the entry of the unchanged identity was not found on disk"
    monkeypatch.setattr(c, "flags", (*c.flags, "-DUOPS_KIT_FLAG"))
    assert c.cache_key(spec.src) != key, "other flags must give another cache key"


def test_corrupt_entry_is_recompiled_and_runs(device: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c = Device[device].compiler
    ast, spec = _kernel(device)
    lib = c.compile_cached(spec.src)
    c.check_binary(lib)  # its own output is a valid binary, or every cached entry would be recompiled
    path = cache / f"{c.cache_key(spec.src)}.bin"
    assert read_entry(path) == lib, f"compile_cached did not store {device}'s binary on disk"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    path.write_bytes(bytes(raw))
    clear_memory_cache()
    calls = _count_compiles(c, monkeypatch)
    with pytest.warns(RuntimeWarning, match="recompiling"):
        again = c.compile_cached(spec.src)
    assert len(calls) == 1, "a corrupt entry must be recompiled, never loaded"
    assert read_entry(path) == again, "the corrupt entry must be replaced"
    x = np.linspace(-2, 2, N, dtype=np.float32)
    got, _ = run_kernel(ast, device, [x], (N,), spec=dataclasses.replace(spec, lib=again))
    np.testing.assert_allclose(got, x * 3 + 0.5, rtol=1e-6)
