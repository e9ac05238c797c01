"""Saved programs on ``device``: a ProgramSpec saved to JSON runs in a fresh process, and
`uops.load_program` checks every launch (buffer count, sizes, dtypes, variables, launch sizes)
before it reaches native code. Bad launches run in a child process, so a regression (an
out-of-bounds write, a crash) fails the check instead of killing the run."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from uops import AxisType, Ops, Tensor, UOp, dtypes, load_program
from uops.codegen.program import ProgramSpec, get_program
from uops.frontend.load import LoadedProgram
from uops.frontend.realize import buffer_numpy
from uops.plugins import Device
from uops.runtime import Buffer
from uops.testing.kit.helpers import glob, require_api, run_child

rng = np.random.default_rng(11)


def rnd(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def kernel_of(t: Tensor) -> tuple[ProgramSpec, list[np.ndarray]]:
    """The one kernel that realizes ``t`` and the host contents of its buffers, in slot order."""
    (item,) = [i for i in t.schedule() if i.kind == "kernel"]
    assert item.ast is not None
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


def test_spec_runs_in_a_fresh_process(device: str, tmp_path: Path) -> None:
    """to_json -> a new interpreter that only loads the spec and runs it through the runtime: no compile."""
    d = Device[device]
    n = 12
    r = UOp.range(n, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1).index(r).load().exp2()))
    spec = get_program(ast, d.renderer, d.compiler)
    again = ProgramSpec.from_dict(spec.to_dict())
    assert again.ast is spec.ast and again.uops == spec.uops and again.lib == spec.lib
    path = tmp_path / "kernel.json"
    path.write_text(spec.to_json())
    child = run_child(
        f"""
        import json, numpy as np
        from uops.codegen.program import ProgramSpec
        from uops.plugins import Device
        spec = ProgramSpec.from_json(open({str(path)!r}).read())
        d = Device[spec.device]
        al = d.runtime.allocator
        x = np.arange({n}, dtype=np.float32) / 4
        out, inp = al.alloc(x.nbytes), al.alloc(x.nbytes)
        al.copyin(inp, memoryview(x.tobytes()))
        g, l = spec.launch_dims()
        d.runtime.load(spec.name, spec.lib)(out, inp, global_size=g, local_size=l)
        d.runtime.synchronize()
        res = np.zeros_like(x); al.copyout(memoryview(res), out)
        print(json.dumps([spec.device, res.tolist()]))
        """
    )
    assert child.returncode == 0, child.stderr[-3000:]
    dev, values = json.loads(child.stdout.strip().splitlines()[-1])
    assert dev == device
    np.testing.assert_allclose(values, np.exp2(np.arange(n, dtype=np.float32) / 4), rtol=1e-6)


def test_saved_spec_round_trip_matches_numpy(device: str, tmp_path: Path) -> None:
    spec, (a, b), want = cat_kernel(device)
    assert sorted([a.size, b.size]) == [12, 24]
    path = tmp_path / "kernel.json"
    path.write_text(spec.to_json())
    prog = load_program(path, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    assert isinstance(prog, LoadedProgram) and prog.device == device
    assert prog.buffer_sizes() == [want.size, a.size, b.size]
    out = np.zeros(want.size, np.float32)
    prog(out, a, b)
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
        from uops.testing.kit.test_program_spec import cat_kernel, with_global_size
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


def test_randomly_edited_specs_get_named_errors_or_run_right(device: str) -> None:
    """A saved spec edited at random (fields dropped, retyped, names and sizes changed): a ValueError,
    TypeError or a refused symbol, or a correct result; never a crash or a wrong answer."""
    require_api(device, (1, 1), "checked loading of edited binaries (ProgramLoadError)")
    r = run_child(
        f"""
        import copy, json, random, tempfile
        import numpy as np
        from uops.testing.kit.test_program_spec import cat_kernel
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
