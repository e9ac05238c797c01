"""The cold first call: no toolchain probe without a disk cache, kernels compiled concurrently, same results."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import uops_cpu_clang.compiler as clang_compiler
from uops.compiler import clear_memory_cache
from uops_cpu_clang.compiler import ClangCompiler, clang_available

needs_clang = pytest.mark.skipif(clang_available() is not None, reason="clang is not installed")

ADD = "void add(float* restrict o, const float* restrict a) { for (int i = 0; i < 4; i++) o[i] = a[i] + 1.0f; }\n"


@needs_clang
def test_compile_without_disk_cache_never_runs_the_version_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_probe(clang: str, arch: str) -> tuple[str, str, str]:
        raise AssertionError("the toolchain probe ran with the disk cache off")

    monkeypatch.setenv("UOPS_CACHE", "0")
    monkeypatch.setattr(clang_compiler, "_probe", no_probe)
    clear_memory_cache()
    lib = ClangCompiler().compile_cached(ADD)
    assert lib.startswith(b"\x7fELF")
    assert ClangCompiler().compile_cached(ADD) is lib  # the memo hit needs no probe either


def test_process_identity_changes_with_the_executable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "clang"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("UOPS_CLANG", str(fake))
    before = ClangCompiler().process_identity()
    assert str(fake) in before
    fake.write_text("#!/bin/sh\necho upgraded\nexit 0\n")
    os.utime(fake, ns=(1, 1))
    assert ClangCompiler().process_identity() != before
    assert ClangCompiler(arch="x86-64").process_identity() != ClangCompiler().process_identity()
