"""New hardware needs no change to the core: real pip installs into a fresh virtual environment.

A third-party plugin, written here in a temporary directory outside the repository, adds a
device whose renderer subclasses the cpu_clang renderer and whose compiler is gcc. It is
installed with pip next to the core and cpu_clang, and runs kernels. The conformance kit's
hand-built kernels then run through `uops conformance` inside that environment, on CPU and on
the third-party device, from a real install.
"""

from __future__ import annotations

import shutil

import pytest

from tests.venv_helpers import REPO_ROOT, Venv, make_venv, write_plugin

pytestmark = pytest.mark.slow

GCC_PLUGIN = '''
"""uops-gcc-cpu: device GCCCPU, C from the cpu_clang renderer, compiled by gcc."""
import os, subprocess, tempfile, shutil

from uops.compiler import CompileError, Compiler
from uops.plugins import Backend, hookimpl


class GccCompiler(Compiler):
    flags = ("-O2", "-shared", "-fPIC", "-ffreestanding", "-fno-math-errno")

    def identity(self):
        out = subprocess.run(["gcc", "--version"], capture_output=True, text=True, check=True)
        return "gcc " + out.stdout.splitlines()[0]

    def compile(self, src):
        with tempfile.TemporaryDirectory() as d:
            c, so = os.path.join(d, "k.c"), os.path.join(d, "k.so")
            with open(c, "w") as f:
                f.write(src)
            p = subprocess.run(["gcc", *self.flags, c, "-o", so, "-lm"], capture_output=True, text=True)
            if p.returncode != 0:
                raise CompileError(p.stderr, src, "gcc")
            with open(so, "rb") as f:
                return f.read()


def _renderer(arch):
    from uops_cpu_clang.renderer import ClangRenderer

    class GccRenderer(ClangRenderer):
        device = "GCCCPU"

    return GccRenderer()


def _runtime():
    from uops_cpu_clang.runtime import ClangRuntime

    rt = ClangRuntime()
    rt.device = "GCCCPU"
    return rt


@hookimpl
def uops_backends():
    return [Backend(device="GCCCPU", renderer=_renderer, compiler=lambda arch: GccCompiler(), runtime=_runtime,
                    probe_compile=lambda: None if shutil.which("gcc") else "gcc is not installed",
                    probe_runtime=lambda: None, targets=("x86_64",), priority=40)]
'''

RUN_KERNEL = """
import numpy as np
from uops import AxisType, Ops, UOp, dtypes
from uops.codegen.program import get_program
from uops.plugins import Device

d = Device["GCCCPU"]
n, k = 6, 5
i, r = UOp.range(n, 0, AxisType.GLOBAL), UOp.range(k, 1, AxisType.REDUCE)
g = [UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(), (), s) for s in range(2)]
ast = UOp.sink(g[0].index(i).store(g[1].index(i * k + r).load().reduce(r, op=Ops.ADD).sqrt()))
spec = get_program(ast, d.renderer, d.compiler)
x = np.random.rand(n, k).astype(np.float32)
al = d.runtime.allocator
out, inp = al.alloc(n * 4), al.alloc(x.nbytes)
al.copyin(inp, memoryview(x.tobytes()))
d.runtime.load(spec.name, spec.lib)(out, inp)
res = np.zeros(n, np.float32)
al.copyout(memoryview(res), out)
np.testing.assert_allclose(res, np.sqrt(x.sum(1)), rtol=1e-5)
print("GCCCPU OK", spec.device, "gcc" in d.compiler.identity())
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    if shutil.which("gcc") is None or shutil.which("clang") is None:
        pytest.skip("needs gcc and clang on PATH")
    outside = tmp_path_factory.mktemp("third_party")
    assert REPO_ROOT not in outside.parents
    src = write_plugin(outside, dist="uops-gcc-cpu", devices=("GCCCPU",), init_source=GCC_PLUGIN)
    (src / "pyproject.toml").write_text(
        (src / "pyproject.toml")
        .read_text()
        .replace('dependencies = ["uops>=0.1"]', 'dependencies = ["uops>=0.1", "uops-cpu-clang>=0.1"]')
    )
    return make_venv(outside / "venv", plugins=("cpu_clang", src), extra=("pytest",))


def test_third_party_plugin_runs_a_kernel(venv: Venv) -> None:
    devices = venv.devices_json()
    assert devices["GCCCPU"]["status"] == "ok", devices["GCCCPU"]
    assert devices["GCCCPU"]["distribution"] == "uops-gcc-cpu"
    proc = venv.run_python(RUN_KERNEL, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "GCCCPU OK GCCCPU True" in proc.stdout


@pytest.mark.parametrize("device", ["CPU", "GCCCPU"])
def test_the_kits_kernels_pass_from_a_real_install(venv: Venv, device: str) -> None:
    """`uops conformance` from the installed core (not this checkout) runs the kit's hand-built kernels."""
    where = venv.run_python("import uops; print(uops.__file__)").stdout
    assert "site-packages" in where, where
    proc = venv.uops("conformance", device, "-k", "test_kernels")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout
