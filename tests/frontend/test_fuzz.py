"""Randomized differential tests: small random Tensor programs against numpy, on every device.

A program is drawn step by step while a numpy mirror tracks each value (so every drawn op is
valid for the shapes and dtypes at hand), then replayed with ``Tensor`` on each device:
inputs of random shapes (size-1 and 0-size dims included) and dtypes (float32, int32, bool),
elementwise chains with broadcasting and promotion, casts, comparisons, ``where``, integer
floor division and modulo, movement ops (reshape, permute, expand, pad, shrink, flip, strided
and negative-step slicing, cat in each of its spellings), reductions over random axes (keepdim or not), argmax/argmin,
softmax/log_softmax/logsumexp, matmul, and shapes that make the scheduler split kernels (a
reduce feeding a reduce, a reduce read through an expanding view, explicit ``realize`` and
``contiguous`` mid-program, several outputs realized together).

Exactness is tracked per value: float inputs are multiples of 1/4, and a value stays *exact*
while every op keeps it on a coarse binary grid (so any summation order gives the same
float32). Ops whose outcome flips on a rounding difference (comparisons, floor, casts to
int, argmax ties, ``//`` and ``%`` on floats) are only drawn on exact values; inexact values
are compared with a tolerance scaled to their magnitude.

Integer programs over every int dtype draw the dtype's minimum and maximum, zero divisors and large
values (numpy's wrapping answers, never a crash: they run in a subprocess); float ``%`` is drawn with
large quotients, zeros, infinities and NaN.

``UOPS_FUZZ_EXAMPLES=n`` runs ``n`` examples per device (randomized) to hunt for new bugs;
``UOPS_FUZZ_STEPS=k`` draws programs of up to ``k`` steps (default 8).

Regression tests for the bugs the fuzzer found sit at the end of this file.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from tests import REPO
from uops import Tensor, dtypes
from uops.dtypes import DType
from uops.testing.kit.helpers import supports_dtype

F32, I32, BOOL = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)
UDT: dict[np.dtype, DType] = {F32: dtypes.float32, I32: dtypes.int32, BOOL: dtypes.bool}
MAX_NUMEL = 256
INT_LIMIT = 1 << 15  # int values stay this small: no int32 overflow anywhere (it is UB in C)
FLOAT_LIMIT = 1e5  # float values stay this small (and finite) outside the special-values test

_HUNT = int(os.environ.get("UOPS_FUZZ_EXAMPLES", "0"))
_STEPS = int(os.environ.get("UOPS_FUZZ_STEPS", "8"))
_FIXED = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))


def fuzz_settings(n: int) -> Any:
    if _HUNT:
        return settings(max_examples=_HUNT, derandomize=False, print_blob=True, **_FIXED)
    return settings(max_examples=n, derandomize=True, **_FIXED)


def promote(*dts: np.dtype) -> np.dtype:
    """The modelled promotion of the three dtypes here: bool < int32 < float32 (int32 with float32 is float64
    in uops and numpy 2; the steps cast both to float32 first, ``as_modelled``)."""
    return F32 if F32 in dts else I32 if I32 in dts else BOOL


def as_modelled(dt: np.dtype, *ts: Tensor) -> tuple[Tensor, ...]:
    """Operands cast to the modelled dtype when it is float32: int32 with float32 is float64 in uops (as in
    numpy 2), outside this model; tests/test_dtype_promotion.py checks that promotion."""
    return tuple(t.cast(UDT[dt]) for t in ts) if dt == F32 else ts


def on_grid(a: np.ndarray) -> bool:
    """Finite values multiples of 1/64 below 1024: sums of a few hundred of them are exact in float32 in any order."""
    if a.dtype != F32:
        return True
    if a.size == 0:
        return True
    x = a.astype(np.float64)
    x = x[np.isfinite(x)]  # nan and +-inf are exact values too
    return bool(np.all(np.abs(x) < 1024) and np.all(x * 64 == np.round(x * 64)))


@dataclass
class Step:
    desc: str
    srcs: tuple[int, ...]
    tf: Callable[..., Tensor]  # tf(device, *tensors)
    dtype: np.dtype


@dataclass(repr=False)
class Program:
    steps: list[Step] = field(default_factory=list)
    vals: list[np.ndarray] = field(default_factory=list)
    exact: list[bool] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    together: bool = False

    def __repr__(self) -> str:
        lines = [f"v{i} = {s.desc.format(*(f'v{j}' for j in s.srcs))}" for i, s in enumerate(self.steps)]
        lines.append(f"check {', '.join(f'v{i}' for i in self.outputs)}" + (" (realized together)" * self.together))
        return "\n".join(lines)


class Gen:
    """Draws one program; ``self.p.vals`` mirrors every value in numpy (in uops' dtypes)."""

    def __init__(self, draw: Callable[..., Any], specials: bool = False):
        self.draw = draw
        self.p = Program()
        self.specials = specials

    # ----- plumbing -----
    def d(self, strategy: Any) -> Any:
        return self.draw(strategy)

    def add(
        self,
        desc: str,
        srcs: tuple[int, ...],
        tf: Callable[..., Tensor],
        nf: Callable[..., np.ndarray],
        dtype: np.dtype,
        exact: bool | None = None,
    ) -> int | None:
        """Append a step unless its numpy value leaves the safe ranges; returns its index."""
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            ref = np.asarray(nf(*(self.p.vals[i] for i in srcs)))
        if ref.dtype != dtype:
            with np.errstate(all="ignore"):
                ref = ref.astype(dtype)
        if ref.size > MAX_NUMEL * 4:
            return None
        if dtype == I32 and ref.size and np.abs(ref.astype(np.int64)).max() > INT_LIMIT:
            return None
        if dtype == F32 and ref.size and not self.specials:
            if not np.all(np.isfinite(ref)) or np.abs(ref).max() > FLOAT_LIMIT:
                return None
        ex = all(self.p.exact[i] for i in srcs) if exact is None else exact
        self.p.steps.append(Step(desc, srcs, tf, dtype))
        self.p.vals.append(ref)
        self.p.exact.append(ex and on_grid(ref))
        return len(self.p.vals) - 1

    def pick(self, pred: Callable[[int], bool] = lambda i: True) -> int | None:
        """A value satisfying ``pred``; mostly the latest one, so programs are chains rather than bushes."""
        cands = [i for i in range(len(self.p.vals)) if pred(i)]
        if not cands:
            return None
        return cands[-1] if self.d(st.integers(0, 2)) else self.d(st.sampled_from(cands))

    def shape(self, ndim: int | None = None) -> tuple[int, ...]:
        n = self.d(st.integers(0, 4)) if ndim is None else ndim
        dims = st.sampled_from([1, 2, 3, 4, 5, 1, 2, 3, 0, 7, 16])
        shp = tuple(self.d(st.lists(dims, min_size=n, max_size=n)))
        while math.prod(shp) > MAX_NUMEL:
            shp = tuple(max(1, s // 2) for s in shp)
        return shp

    def array(self, shape: tuple[int, ...], dtype: np.dtype, nonzero: bool = False) -> np.ndarray:
        rng = np.random.default_rng(self.d(st.integers(0, 2**32 - 1)))
        if dtype == F32:
            a = (rng.integers(-12, 13, size=shape) / 4).astype(np.float32)
            if self.specials and a.size:
                sp = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32)
                a = np.where(rng.random(shape) < 0.3, sp[rng.integers(0, len(sp), size=shape)], a)
        elif dtype == I32:
            a = rng.integers(-9, 10, size=shape).astype(np.int32)
        else:
            a = rng.random(shape) < 0.5
        if nonzero and dtype != BOOL:
            a = np.where(a == 0, np.asarray(3, dtype), a).astype(dtype)
        return np.asarray(a, dtype)

    def input(self, shape: tuple[int, ...] | None = None, dtype: np.dtype | None = None, nonzero: bool = False) -> int:
        shp = self.shape() if shape is None else shape
        dt = self.d(st.sampled_from([F32, F32, I32, BOOL])) if dtype is None else dtype
        arr = self.array(shp, dt, nonzero)
        i = self.add(
            f"Tensor(np.array({arr.tolist()!r}, np.{dt.name}))" if arr.size <= 24 else f"Tensor({shp}, {dt.name})",
            (),
            lambda dev, a=arr: Tensor(a, device=dev),
            lambda a=arr: a,
            dt,
            exact=True,
        )
        assert i is not None
        return i

    def broadcast_partner(self, i: int, dtype: np.dtype | None = None, nonzero: bool = False) -> int:
        """An existing value that broadcasts with ``v[i]``, or a new input of a broadcastable shape."""
        shp = self.p.vals[i].shape
        if dtype is None and not nonzero and self.d(st.booleans()):
            j = self.pick(lambda k: k != i and _broadcasts(self.p.vals[k].shape, shp))
            if j is not None:
                return j
        drop = self.d(st.integers(0, len(shp)))
        sub = tuple(1 if self.d(st.integers(0, 3)) == 0 else s for s in shp[drop:])
        if self.d(st.integers(0, 5)) == 0 and shp:  # grow a size-1 dim of the other side
            grown = tuple(self.d(st.integers(2, 3)) if s == 1 else t for s, t in zip(shp[drop:], sub))
            if math.prod(grown) * max(1, math.prod(shp)) <= MAX_NUMEL * 4:
                sub = grown
        return self.input(sub, dtype, nonzero)

    # ----- op families -----
    def step(self) -> None:
        kind = self.d(
            st.sampled_from(["unary", "binary", "binary", "cast", "where", "move", "move", "reduce", "reduce", "misc"])
        )
        getattr(self, "op_" + kind)()

    def op_unary(self) -> None:
        i = self.pick()
        assert i is not None
        dt = self.p.vals[i].dtype
        if dt == F32:
            ops: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray], bool]] = {
                "neg": (lambda x: -x, np.negative, True),
                "abs": (lambda x: x.abs(), np.abs, True),
                "relu": (lambda x: x.relu(), lambda a: np.maximum(a, np.float32(0)), True),
                "square": (lambda x: x.square(), np.square, True),
                "exp": (lambda x: (x * 0.25).exp(), lambda a: np.exp(a * np.float32(0.25)), False),
                "sqrt": (lambda x: x.abs().sqrt(), lambda a: np.sqrt(np.abs(a)), False),
                "log": (lambda x: (x.abs() + 1).log(), lambda a: np.log(np.abs(a) + np.float32(1)), False),
                "sigmoid": (lambda x: x.sigmoid(), lambda a: 1 / (1 + np.exp(-a)), False),
                "tanh": (lambda x: x.tanh(), np.tanh, False),
                "sin": (lambda x: x.sin(), np.sin, False),
                "reciprocal": (
                    lambda x: (x.abs() + 0.5).reciprocal(),
                    lambda a: 1 / (np.abs(a) + np.float32(0.5)),
                    False,
                ),
            }
            if self.p.exact[i]:
                ops |= {
                    "floor": (lambda x: x.floor(), np.floor, True),
                    "ceil": (lambda x: x.ceil(), np.ceil, True),
                    "trunc": (lambda x: x.trunc(), np.trunc, True),
                    "sign": (lambda x: x.sign(), np.sign, True),
                }
        elif dt == I32:
            ops = {
                "neg": (lambda x: -x, np.negative, True),
                "abs": (lambda x: x.abs(), np.abs, True),
                "invert": (lambda x: ~x, np.invert, True),
                "relu": (lambda x: x.relu(), lambda a: np.maximum(a, 0), True),
                "square": (lambda x: x.square(), np.square, True),
                "sign": (lambda x: x.sign(), np.sign, True),
            }
        else:
            ops = {
                "logical_not": (lambda x: x.logical_not(), np.logical_not, True),
                "invert": (lambda x: ~x, np.invert, True),
                "neg": (lambda x: -x, np.logical_not, True),
            }
        name = self.d(st.sampled_from(sorted(ops)))
        tf, nf, keeps = ops[name]
        out_dt = self.p.vals[i].dtype
        if name in ("exp", "sqrt", "log", "sigmoid", "tanh", "sin", "reciprocal"):
            out_dt = F32
        self.add(f"{{}}.{name}()", (i,), lambda dev, x: tf(x), nf, out_dt, None if keeps else False)

    def op_cast(self) -> None:
        i = self.pick()
        assert i is not None
        src = self.p.vals[i].dtype
        to = self.d(st.sampled_from([F32, I32, BOOL]))
        if src == F32 and to != F32 and not self.p.exact[i]:
            return  # truncation / zero tests flip on a rounding difference
        if src == F32 and to == I32 and self.specials:
            return  # nan/inf -> int is undefined (numpy warns and gives INT_MIN)
        self.add(f"{{}}.cast({to.name})", (i,), lambda dev, x: x.cast(UDT[to]), lambda a: a.astype(to), to)

    def op_binary(self) -> None:
        i = self.pick()
        assert i is not None
        names = ["add", "sub", "mul", "div", "maximum", "minimum", "lt", "gt", "le", "ge", "eq", "ne"]
        names += ["floordiv", "mod", "and", "or", "xor", "scalar"]
        name = self.d(st.sampled_from(names))
        if name == "scalar":
            return self.op_scalar(i)
        if name in ("floordiv", "mod"):
            j = self.broadcast_partner(i, self.d(st.sampled_from([I32, I32, F32])), nonzero=True)
        else:
            j = self.broadcast_partner(i)
        a, b = self.p.vals[i], self.p.vals[j]
        dt = promote(a.dtype, b.dtype)
        if name in ("and", "or", "xor") and dt == F32:
            name = "add"
        if name == "sub" and dt == BOOL:
            name = "xor"
        if name in ("floordiv", "mod") and dt == BOOL:
            return
        flips = name in ("lt", "gt", "le", "ge", "eq", "ne", "floordiv", "mod")
        if dt == F32 and flips and not (self.p.exact[i] and self.p.exact[j]):
            return
        if name in ("floordiv", "mod") and dt == F32 and self.specials:
            return  # numpy's float // and % with inf/nan follow C's fmod corner cases; not modelled here
        tfs: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
            "add": lambda x, y: x + y,
            "sub": lambda x, y: x - y,
            "mul": lambda x, y: x * y,
            "div": lambda x, y: x / y,
            "maximum": lambda x, y: x.maximum(y),
            "minimum": lambda x, y: x.minimum(y),
            "lt": lambda x, y: x < y,
            "gt": lambda x, y: x > y,
            "le": lambda x, y: x <= y,
            "ge": lambda x, y: x >= y,
            "eq": lambda x, y: x == y,
            "ne": lambda x, y: x != y,
            "floordiv": lambda x, y: x // y,
            "mod": lambda x, y: x % y,
            "and": lambda x, y: x & y,
            "or": lambda x, y: x | y,
            "xor": lambda x, y: x ^ y,
        }
        nfs: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
            "add": np.logical_or if dt == BOOL else np.add,
            "sub": np.subtract,
            "mul": np.logical_and if dt == BOOL else np.multiply,
            "div": lambda x, y: x.astype(F32) / y.astype(F32),
            "maximum": np.maximum,
            "minimum": np.minimum,
            "lt": np.less,
            "gt": np.greater,
            "le": np.less_equal,
            "ge": np.greater_equal,
            "eq": np.equal,
            "ne": np.not_equal,
            "floordiv": np.floor_divide,
            "mod": np.mod,
            "and": np.bitwise_and,
            "or": np.bitwise_or,
            "xor": np.bitwise_xor,
        }
        out = BOOL if name in ("lt", "gt", "le", "ge", "eq", "ne") else F32 if name == "div" else dt
        tf, nf = tfs[name], nfs[name]
        sym = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "gt": ">", "le": "<=", "ge": ">="}
        sym |= {"eq": "==", "ne": "!=", "floordiv": "//", "mod": "%", "and": "&", "or": "|", "xor": "^"}
        desc = f"({{}} {sym[name]} {{}})" if name in sym else f"{{}}.{name}({{}})"
        self.add(
            desc,
            (i, j),
            lambda dev, x, y: tf(*as_modelled(dt, x, y)),
            lambda x, y: nf(x.astype(dt), y.astype(dt)),
            out,
            False if name == "div" else None,
        )

    def op_scalar(self, i: int) -> None:
        a = self.p.vals[i]
        v = self.d(st.sampled_from([2, -3, 1, 0, 0.5, -1.25, True]))
        if isinstance(v, bool):
            dt = a.dtype
        elif isinstance(v, int):
            dt = a.dtype if a.dtype != BOOL else I32
        else:
            dt = F32
        names = ["add", "mul", "rsub", "maximum", "floordiv", "mod", "rfloordiv", "rmod", "lt", "eq", "pow"]
        name = self.d(st.sampled_from(names))
        if name in ("floordiv", "mod") and (v == 0 or dt == BOOL or (dt == F32 and not self.p.exact[i])):
            return
        if name in ("rfloordiv", "rmod") and (dt != I32 or (a == 0).any()):
            return
        if name in ("floordiv", "mod") and dt == F32 and self.specials:
            return  # inf // 2: numpy says nan (divmod), uops floor(inf / 2) = inf, as torch does
        if name == "pow" and (isinstance(v, bool) or v not in (2, 0.5) or (v == 0.5 and dt != F32)):
            return
        if name in ("lt", "eq") and dt == F32 and not self.p.exact[i]:
            return
        if name == "rsub" and dt == BOOL:
            return
        tfs: dict[str, Callable[[Tensor], Tensor]] = {
            "add": lambda x: x + v,
            "mul": lambda x: x * v,
            "rsub": lambda x: v - x,
            "maximum": lambda x: x.maximum(v),
            "floordiv": lambda x: x // v,
            "mod": lambda x: x % v,
            "rfloordiv": lambda x: v // x,
            "rmod": lambda x: v % x,
            "lt": lambda x: x < v,
            "eq": lambda x: x == v,
            "pow": lambda x: (x.abs() ** v) if v == 0.5 else x**v,
        }
        sv = np.asarray(v, dt)
        nfs: dict[str, Callable[[np.ndarray], np.ndarray]] = {
            "add": lambda x: (x | sv) if dt == BOOL else x + sv,
            "mul": lambda x: (x & sv) if dt == BOOL else x * sv,
            "rsub": lambda x: sv - x,
            "maximum": lambda x: np.maximum(x, sv),
            "floordiv": lambda x: x // sv,
            "mod": lambda x: x % sv,
            "rfloordiv": lambda x: sv // x,
            "rmod": lambda x: sv % x,
            "lt": lambda x: x < sv,
            "eq": lambda x: x == sv,
            "pow": lambda x: (np.abs(x) ** sv) if v == 0.5 else x**sv,
        }
        out = BOOL if name in ("lt", "eq") else dt
        ex = False if name == "pow" and v == 0.5 else None
        self.add(f"{{}}.{name}({v!r})", (i,), lambda dev, x: tfs[name](x), lambda x: nfs[name](x.astype(dt)), out, ex)

    def op_where(self) -> None:
        c = self.pick(lambda k: self.p.vals[k].dtype == BOOL or self.p.exact[k])
        if c is None:
            return
        x = self.broadcast_partner(c)
        form = self.d(st.sampled_from(["tensors", "scalar"]))
        if form == "scalar":
            s = self.d(st.sampled_from([0, 2, -1.5]))
            dt = self.p.vals[x].dtype if not isinstance(s, float) or self.p.vals[x].dtype == F32 else F32
            dt = I32 if dt == BOOL and isinstance(s, int) else dt
            self.add(
                f"{{}}.where({{}}, {s!r})",
                (c, x),
                lambda dev, cc, xx: cc.where(xx, s),
                lambda cc, xx: np.where(cc.astype(bool), xx.astype(dt), np.asarray(s, dt)),
                dt,
            )
            return
        y = self.broadcast_partner(x)
        shapes = [self.p.vals[k].shape for k in (c, x, y)]
        if not all(_broadcasts(s1, s2) for s1 in shapes for s2 in shapes):
            return
        dt = promote(self.p.vals[x].dtype, self.p.vals[y].dtype)
        self.add(
            "{}.where({}, {})",
            (c, x, y),
            lambda dev, cc, xx, yy: cc.where(*as_modelled(dt, xx, yy)),
            lambda cc, xx, yy: np.where(cc.astype(bool), xx.astype(dt), yy.astype(dt)),
            dt,
        )

    def op_move(self) -> None:
        i = self.pick()
        assert i is not None
        a = self.p.vals[i]
        shp, n = a.shape, a.ndim
        dt = a.dtype
        kind = self.d(
            st.sampled_from(["reshape", "permute", "expand", "pad", "shrink", "flip", "getitem", "getitem", "cat"])
        )
        if kind == "reshape":
            new = self.reshape_target(shp)
            self.add(f"{{}}.reshape({new})", (i,), lambda dev, x: x.reshape(new), lambda x: x.reshape(new), dt)
        elif kind == "permute":
            order = tuple(self.d(st.permutations(list(range(n)))))
            self.add(f"{{}}.permute({order})", (i,), lambda dev, x: x.permute(order), lambda x: x.transpose(order), dt)
        elif kind == "expand":
            lead = tuple(self.d(st.lists(st.integers(1, 3), max_size=1)))
            new = lead + tuple(self.d(st.integers(1, 3)) if s == 1 else s for s in shp)
            if math.prod(new) > MAX_NUMEL:
                return
            self.add(f"{{}}.expand({new})", (i,), lambda dev, x: x.expand(new), lambda x: np.broadcast_to(x, new), dt)
        elif kind == "pad" and n:
            pads = tuple((self.d(st.integers(0, 2)), self.d(st.integers(0, 2))) for _ in shp)
            val = self.d(st.sampled_from([0, 1, -2])) if dt != BOOL else self.d(st.booleans())
            val = float(val) if dt == F32 else val
            self.add(
                f"{{}}.pad({pads}, value={val!r})",
                (i,),
                lambda dev, x: x.pad(pads, value=val),
                lambda x: np.pad(x, pads, constant_values=val),
                dt,
            )
        elif kind == "shrink":
            arg = []
            for s in shp:
                b = self.d(st.integers(0, s))
                arg.append((b, self.d(st.integers(b, s))))
            ar = tuple(arg)
            self.add(
                f"{{}}.shrink({ar})",
                (i,),
                lambda dev, x: x.shrink(ar),
                lambda x: x[tuple(slice(b, e) for b, e in ar)],
                dt,
            )
        elif kind == "flip":
            axes = tuple(self.d(st.lists(st.integers(-n, n - 1), unique_by=lambda k: k % n, max_size=n))) if n else ()
            self.add(f"{{}}.flip({axes})", (i,), lambda dev, x: x.flip(axes), lambda x: np.flip(x, axes), dt)
        elif kind == "getitem":
            idx: list[Any] = []
            for s in shp:
                if self.d(st.integers(0, 6)) == 0:
                    idx.append(None)
                r = self.d(st.integers(0, 3))
                if r == 0 and s > 0:
                    idx.append(self.d(st.integers(-s, s - 1)))
                elif r == 1:
                    idx.append(slice(None))
                else:
                    lo = self.d(st.one_of(st.none(), st.integers(-s - 1, s + 1)))
                    hi = self.d(st.one_of(st.none(), st.integers(-s - 1, s + 1)))
                    step = self.d(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
                    idx.append(slice(lo, hi, step))
            if idx and self.d(st.integers(0, 4)) == 0:  # an ellipsis standing for a trailing run
                k = self.d(st.integers(0, len(idx)))
                idx = idx[:k] + [Ellipsis]
            if self.d(st.integers(0, 6)) == 0:
                idx.append(None)
            ix = tuple(idx)
            self.add(f"{{}}[{_idx_str(ix)}]", (i,), lambda dev, x: x[ix], lambda x: x[ix], dt)
        else:
            if n == 0:
                return
            d = self.d(st.integers(-n, n - 1))
            other = list(shp)
            other[d] = self.d(st.integers(0, 3))
            j = self.input(tuple(other), self.d(st.sampled_from([dt, dt, F32, I32, BOOL])))
            k = self.d(st.integers(0, 2))
            parts = [i, j, i][: 2 + (k == 2)] if k else [j, i]
            out = promote(*(self.p.vals[p].dtype for p in parts))
            holes = ", ".join("{}" for _ in parts[1:])
            spellings: dict[str, Callable[..., Tensor]] = {  # every spelling of cat means the same concatenation
                f"Tensor.cat({{}}, {holes}, dim={d})": lambda dev, *xs: Tensor.cat(*as_modelled(out, *xs), dim=d),
                f"Tensor.cat([{{}}, {holes}], dim={d})": lambda dev, *xs: Tensor.cat(
                    list(as_modelled(out, *xs)), dim=d
                ),
                f"{{}}.cat({holes}, dim={d})": lambda dev, *xs: (lambda x, *r: x.cat(*r, dim=d))(
                    *as_modelled(out, *xs)
                ),
                f"{{}}.cat([{holes}], dim={d})": lambda dev, *xs: (lambda x, *r: x.cat(list(r), dim=d))(
                    *as_modelled(out, *xs)
                ),
            }
            desc = self.d(st.sampled_from(sorted(spellings)))
            self.add(
                desc,
                tuple(parts),
                spellings[desc],
                lambda *xs: np.concatenate([x.astype(out) for x in xs], axis=d),
                out,
            )

    def reshape_target(self, shp: tuple[int, ...]) -> tuple[int, ...]:
        total = math.prod(shp)
        if total == 0:
            new = list(self.shape(self.d(st.integers(1, 3))))
            new[self.d(st.integers(0, len(new) - 1))] = 0
            return tuple(new)
        factors = []
        m, p = total, 2
        while m > 1:
            while m % p == 0:
                factors.append(p)
                m //= p
            p += 1
        factors = list(self.d(st.permutations(factors)))
        dims: list[int] = []
        for f in factors:
            if dims and self.d(st.booleans()):
                dims[-1] *= f
            else:
                dims.append(f)
        ones = self.d(st.integers(0, 2))
        for _ in range(ones):
            dims.insert(self.d(st.integers(0, len(dims))), 1)
        if dims and self.d(st.integers(0, 5)) == 0:
            dims[self.d(st.integers(0, len(dims) - 1))] = -1
        return tuple(dims)

    def axes(self, n: int) -> Any:
        if n == 0 or self.d(st.integers(0, 4)) == 0:
            return None
        if self.d(st.booleans()):
            return self.d(st.integers(-n, n - 1))
        return tuple(self.d(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)))

    def op_reduce(self) -> None:
        i = self.pick()
        assert i is not None
        a = self.p.vals[i]
        n = a.ndim
        kind = self.d(st.sampled_from(["sum", "max", "min", "mean", "argmax", "argmin", "softmax", "sub_max", "prod"]))
        axis = self.axes(n)
        keep = self.d(st.booleans())
        red = tuple(range(n)) if axis is None else (axis % n,) if isinstance(axis, int) else axis
        empty = any(a.shape[k] == 0 for k in red)
        exact = self.p.exact[i]
        if kind in ("sum", "prod"):
            out = F32 if a.dtype == F32 else I32
            if kind == "prod" and (out == I32 or empty):
                return
            nf = np.sum if kind == "sum" else np.prod
            self.add(
                f"{{}}.{kind}({axis!r}, keepdim={keep})",
                (i,),
                lambda dev, x: getattr(x, kind)(axis, keepdim=keep).cast(UDT[out]),  # int sums are int64
                lambda x: nf(x.astype(out), axis=axis, keepdims=keep),
                out,
                exact if kind == "sum" else False,
            )
        elif kind in ("max", "min"):
            if empty:
                return
            nf = np.max if kind == "max" else np.min
            self.add(
                f"{{}}.{kind}({axis!r}, keepdim={keep})",
                (i,),
                lambda dev, x: getattr(x, kind)(axis, keepdim=keep),
                lambda x: nf(x, axis=axis, keepdims=keep),
                a.dtype,
            )
        elif kind == "mean":
            self.add(
                f"{{}}.mean({axis!r}, keepdim={keep})",
                (i,),
                lambda dev, x: x.mean(axis, keepdim=keep),
                lambda x: np.mean(x.astype(np.float64), axis=axis, keepdims=keep),
                F32,
                False,
            )
        elif kind in ("argmax", "argmin"):
            ax = None if axis is None or n == 0 else axis if isinstance(axis, int) else axis[0]
            if a.size == 0 or (ax is not None and a.shape[ax] == 0) or not exact:
                return
            nf = np.argmax if kind == "argmax" else np.argmin
            self.add(
                f"{{}}.{kind}({ax!r}, keepdim={keep})",
                (i,),
                lambda dev, x: getattr(x, kind)(ax, keepdim=keep).cast(dtypes.int32),  # int64 indices
                lambda x: nf(x, axis=ax, keepdims=keep),
                I32,
            )
        elif kind == "softmax":
            if n == 0:
                return
            ax = self.d(st.integers(-n, n - 1))
            if a.shape[ax] == 0:
                return
            fn = self.d(st.sampled_from(["softmax", "log_softmax", "logsumexp"]))
            self.add(
                f"{{}}.{fn}({ax})",
                (i,),
                lambda dev, x: getattr(x, fn)(ax),
                lambda x: _np_softmax(x, ax, fn),
                F32,
                False,
            )
        else:  # a reduce read back through an expanding view: x - x.max(axis, keepdim=True)
            if empty or n == 0:
                return
            fn = self.d(st.sampled_from(["max", "sum"]))
            nf = np.max if fn == "max" else np.sum
            dt = a.dtype if a.dtype != BOOL else I32
            self.add(
                f"({{0}} - {{0}}.{fn}({axis!r}, keepdim=True))",
                (i,),
                lambda dev, x: x.cast(UDT[dt]) - getattr(x.cast(UDT[dt]), fn)(axis, keepdim=True).cast(UDT[dt]),
                lambda x: x.astype(dt) - nf(x.astype(dt), axis=axis, keepdims=True),
                dt,
            )

    def op_misc(self) -> None:
        kind = self.d(st.sampled_from(["matmul", "matmul", "realize", "contiguous", "squeeze", "unsqueeze"]))
        i = self.pick()
        assert i is not None
        a = self.p.vals[i]
        if kind == "matmul":
            if a.ndim == 0:
                return
            k = a.shape[-1]
            nn = self.d(st.integers(1, 4))
            form = self.d(st.sampled_from(["mat", "vec", "batch"]))
            shp = (
                (k,)
                if form == "vec"
                else (k, nn)
                if form == "mat"
                else (self.d(st.sampled_from([1, a.shape[-3] if a.ndim >= 3 else 2])), k, nn)
            )
            j = self.input(shp, self.d(st.sampled_from([a.dtype, F32, I32])))
            out = promote(a.dtype, self.p.vals[j].dtype)
            left = self.d(st.booleans()) and a.ndim >= 2 and form == "mat"
            if left:  # (nn, rows) @ a where a is (..., rows, k): reuse j transposed on the left
                jt = self.add("{}.T", (j,), lambda dev, x: x.T, lambda x: x.T, self.p.vals[j].dtype)
                if jt is None or self.p.vals[jt].shape[-1] != a.shape[-2]:
                    return
                j, i = i, jt
            self.add(
                "({} @ {})",
                (i, j),
                lambda dev, x, y: (lambda a, b: a @ b)(*as_modelled(out, x, y)),
                lambda x, y: np.matmul(x, y) if out == BOOL else np.matmul(x.astype(np.float64), y.astype(np.float64)),
                out,
            )
        elif kind == "realize":
            self.add("{}.realize()", (i,), lambda dev, x: x.realize(), lambda x: x, a.dtype)
        elif kind == "contiguous":
            self.add("{}.contiguous()", (i,), lambda dev, x: x.contiguous(), lambda x: x, a.dtype)
        elif kind == "squeeze":
            self.add("{}.squeeze()", (i,), lambda dev, x: x.squeeze(), np.squeeze, a.dtype)
        else:
            d = self.d(st.integers(-a.ndim - 1, a.ndim))
            self.add(
                f"{{}}.unsqueeze({d})", (i,), lambda dev, x: x.unsqueeze(d), lambda x: np.expand_dims(x, d), a.dtype
            )


def _broadcasts(s1: tuple[int, ...], s2: tuple[int, ...]) -> bool:
    return all(a == b or a == 1 or b == 1 for a, b in zip(reversed(s1), reversed(s2)))


def _idx_str(ix: tuple[Any, ...]) -> str:
    def one(it: Any) -> str:
        if isinstance(it, slice):
            s = f"{'' if it.start is None else it.start}:{'' if it.stop is None else it.stop}"
            return s + ("" if it.step is None else f":{it.step}")
        return "..." if it is Ellipsis else repr(it)

    return ", ".join(one(it) for it in ix) if ix else "()"


def _np_softmax(x: np.ndarray, ax: int, fn: str) -> np.ndarray:
    x = x.astype(np.float64)
    m = np.max(x, axis=ax, keepdims=True)
    if fn == "logsumexp":  # uops shifts by 0 for an infinite max, so an all -inf row gives -inf, not nan
        m = np.where(np.isinf(m), 0, m)
    e = np.exp(x - m)
    s = e.sum(axis=ax, keepdims=True)
    if fn == "softmax":
        return e / s
    if fn == "log_softmax":
        return x - m - np.log(s)
    return np.squeeze(np.log(s) + m, axis=ax)


@st.composite
def programs(draw: Callable[..., Any], specials: bool = False, max_steps: int = _STEPS) -> Program:
    g = Gen(draw, specials)
    for _ in range(draw(st.integers(1, 2))):
        g.input()
    for _ in range(draw(st.integers(1, max_steps))):
        g.step()
    p = g.p
    last = len(p.vals) - 1
    extra = draw(st.lists(st.integers(0, last), max_size=2, unique=True))
    p.outputs = [last] + [e for e in extra if e != last and p.steps[e].srcs]
    p.together = len(p.outputs) > 1 and draw(st.booleans())
    return p


def run(p: Program, device: str) -> list[np.ndarray]:
    ts: list[Tensor] = []
    for s in p.steps:
        t = s.tf(device, *(ts[j] for j in s.srcs))
        assert t.dtype == UDT[s.dtype], f"{s.desc}: dtype {t.dtype.name}, expected {s.dtype.name}"
        ts.append(t)
    outs = [ts[i] for i in p.outputs]
    if p.together:
        outs[0].realize(*outs[1:])
    return [t.numpy() for t in outs]


def check(p: Program, device: str) -> None:
    for i, got in zip(p.outputs, run(p, device)):
        ref = p.vals[i]
        assert got.shape == ref.shape, f"v{i}: shape {got.shape}, numpy {ref.shape}"
        if ref.dtype != F32 or p.exact[i]:
            np.testing.assert_array_equal(got, ref, err_msg=f"v{i} (exact)")
        else:
            finite = ref[np.isfinite(ref)]
            scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
            np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3 * scale, err_msg=f"v{i}")


@fuzz_settings(120)
@given(p=programs())
def test_fuzz_programs(device: str, p: Program) -> None:
    note(f"program:\n{p!r}")
    check(p, device)


# ----- regressions: minimal forms of what the fuzzer found -----


def test_input_simplified_away_keeps_its_parameter_slot(device):
    # int x * 0 and x - x fold to 0: the kernel still takes every buffer in slot order, so b and c
    # are not shifted onto each other's arguments (wrong values on CPU, an error on PYTHON)
    a, b, c = (Tensor(np.array(v, np.int32), device=device) for v in ([7, 1], [1, 2], [3, 3]))
    np.testing.assert_array_equal(((b + a * 0) + c).numpy(), [4, 5])
    np.testing.assert_array_equal((c + (b + a * 0)).numpy(), [4, 5])
    np.testing.assert_array_equal((a - a).numpy(), [0, 0])


def test_gated_load_from_an_empty_buffer(device):
    # cat with a 0-size part: its load is gated off everywhere (the PYTHON interpreter used to
    # bounds-check the stand-in index of the gated-off lanes and fail)
    one = Tensor(np.array([2.25], np.float32), device=device)
    empty = Tensor(np.zeros(0, np.float32), device=device)
    x = Tensor.cat(empty, one).abs()
    np.testing.assert_array_equal(Tensor.cat(x, empty, x).numpy(), [2.25, 2.25])


@fuzz_settings(50)
@given(p=programs(specials=True, max_steps=5))
def test_fuzz_programs_nan_inf(device: str, p: Program) -> None:
    """Inputs sprinkled with nan, +-inf and -0.0: propagation through max/min/relu/where/softmax like numpy."""
    note(f"program:\n{p!r}")
    check(p, device)


NAN_X = np.array([np.nan, 1.0, -np.inf, np.inf, -0.0, 0.0, -2.0], np.float32)
NAN_Y = np.array([0.0, np.nan, 1.0, np.nan, 0.0, -0.0, np.inf], np.float32)


def test_nan_propagates_through_maximum_minimum_relu_like_numpy(device):
    # C's (a>b)?a:b dropped a NaN on the left, minimum's (a<b)?a:b one on the right, so CPU and
    # CUDA disagreed with PYTHON (np.maximum) and with numpy; MAX now propagates NaN everywhere
    x, y = Tensor(NAN_X, device=device), Tensor(NAN_Y, device=device)
    np.testing.assert_array_equal(x.maximum(y).numpy(), np.maximum(NAN_X, NAN_Y))
    np.testing.assert_array_equal(y.maximum(x).numpy(), np.maximum(NAN_Y, NAN_X))
    np.testing.assert_array_equal(x.minimum(y).numpy(), np.minimum(NAN_X, NAN_Y))
    np.testing.assert_array_equal(y.minimum(x).numpy(), np.minimum(NAN_Y, NAN_X))
    np.testing.assert_array_equal(x.relu().numpy(), np.maximum(NAN_X, 0))
    np.testing.assert_array_equal(x.clip(-1, 1).numpy(), np.clip(NAN_X, -1, 1))


def test_nan_propagates_through_max_min_argmax_reductions(device):
    x, y = Tensor(NAN_X, device=device), Tensor(NAN_Y, device=device)
    assert np.isnan(x.max().item()) and np.isnan(x.min().item()) and np.isnan(y.max().item())
    assert x[1:].max().item() == np.inf and x[1:].min().item() == -np.inf
    assert x.argmax().item() == 0 and y.argmax().item() == 1 and y.argmin().item() == 1  # the first NaN
    m = Tensor(np.stack([NAN_X, NAN_Y]), device=device)
    np.testing.assert_array_equal(m.max(axis=0).numpy(), np.max(np.stack([NAN_X, NAN_Y]), axis=0))
    np.testing.assert_array_equal(m.argmax(axis=1).numpy(), [0, 1])
    sm = Tensor(np.array([[np.nan, 1.0], [1.0, 2.0]], np.float32), device=device).softmax(-1).numpy()
    assert np.isnan(sm[0]).all() and np.isfinite(sm[1]).all()


def test_ordered_comparisons_with_nan_are_false(device):
    # a <= b was not (b < a): true for NaN, where numpy (and IEEE) say false
    x, y = Tensor(NAN_X, device=device), Tensor(NAN_Y, device=device)
    np.testing.assert_array_equal((x <= y).numpy(), NAN_X <= NAN_Y)
    np.testing.assert_array_equal((x >= y).numpy(), NAN_X >= NAN_Y)
    np.testing.assert_array_equal((x <= 1.0).numpy(), NAN_X <= 1.0)
    np.testing.assert_array_equal((1.0 >= x).numpy(), 1.0 >= NAN_X)
    np.testing.assert_array_equal(x.sign().numpy(), np.sign(NAN_X))


def test_max_decomposed_for_a_renderer_without_max_propagates_nan():
    from uops.codegen.program import get_program
    from uops.ir.ops import AxisType, Ops
    from uops.ir.uop import UOp
    from uops.plugins import Device

    dev = Device["PYTHON"]
    ren = type(dev.renderer)()
    ren.supported_ops = dev.renderer.supported_ops - {Ops.MAX}
    n = len(NAN_X)
    g = [UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), (), i) for i in range(3)]
    r = UOp.range(n, 0, AxisType.GLOBAL)
    val = UOp(Ops.MAX, dtypes.float32, (g[1].index(r).load(), g[2].index(r).load()))
    spec = get_program(UOp.sink(g[0].index(r).store(val)), ren, dev.compiler)
    assert not any(u.op is Ops.MAX for u in spec.uops)
    al = dev.runtime.allocator
    hs = [al.alloc(n * 4) for _ in range(3)]
    al.copyin(hs[1], memoryview(NAN_X.tobytes()))
    al.copyin(hs[2], memoryview(NAN_Y.tobytes()))
    gsz, lsz = spec.launch_dims()
    dev.runtime.load(spec.name, spec.lib)(*hs, global_size=gsz, local_size=lsz)
    out = np.zeros(n, np.float32)
    al.copyout(memoryview(out).cast("B"), hs[0])
    np.testing.assert_array_equal(out, np.maximum(NAN_X, NAN_Y))


def test_view_of_a_realized_empty_tensor(device):
    # cat with a realized 0-size part stacks a pad view on the empty buffer's view: unravelling an
    # index into a shape with a 0 dim divided by its zero stride
    # (the realized value replaces the lazy one under the pad when the cat is scheduled)
    one = Tensor(np.array([[[2.25], [0.75]]], np.float32), device=device)
    empty = (one[:, :, :0] + 1).contiguous()
    out = Tensor.cat(one, empty, dim=-1)
    (empty + 1).realize()
    np.testing.assert_array_equal(out.numpy(), [[[2.25], [0.75]]])


def test_bool_matmul_is_bool_like_numpy(device):
    a = np.array([[True, False], [True, True]])
    b = np.array([True, False])
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    assert (ta @ ta).dtype == dtypes.bool
    np.testing.assert_array_equal((ta @ ta).numpy(), a @ a)
    np.testing.assert_array_equal((ta @ tb).numpy(), a @ b)


def test_bool_to_an_int_power_is_int(device):
    # bool ** 2 multiplied bools (AND) and stayed bool; an int scalar promotes bool to int32 everywhere else
    t = Tensor(np.array([False, True]), device=device)
    for e in (0, 1, 2, 3):
        assert (t**e).dtype == dtypes.int32
        np.testing.assert_array_equal((t**e).numpy(), np.array([0, 1]) ** e)


# ----- integer extremes and float %: wraparound, zero divisors, INT_MIN // -1, large quotients -----
INT_NP = [np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)]


def int_pool(dt: np.dtype) -> list[int]:
    """The values where integer semantics differ between languages: the dtype's ends, 0, +-1."""
    info = np.iinfo(dt)
    return sorted(
        {int(info.min), int(info.min) + 1, -1 if info.min < 0 else 2, 0, 1, 2, int(info.max) - 1, int(info.max)}
    )


def int_array(draw: Callable[..., Any], dt: np.dtype, n: int) -> np.ndarray:
    """Extremes, large values over the whole range, small values and zeros, mixed lane by lane."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    info = np.iinfo(dt)
    pool = np.array(int_pool(dt), dt)
    parts = {
        "extremes": pool[rng.integers(0, len(pool), size=n)],
        "large": rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dt),
        "small": rng.integers(max(int(info.min), -9), 10, size=n).astype(dt),
    }
    pick = rng.integers(0, 3, size=n)
    return np.choose(pick, [parts["extremes"], parts["large"], parts["small"]]).astype(dt)


INT_BINARY: dict[str, tuple[Callable[[Any, Any], Any], Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "//": (lambda x, y: x // y, np.floor_divide),
    "%": (lambda x, y: x % y, np.remainder),
    "+": (lambda x, y: x + y, np.add),
    "-": (lambda x, y: x - y, np.subtract),
    "*": (lambda x, y: x * y, np.multiply),
    "&": (lambda x, y: x & y, np.bitwise_and),
    "|": (lambda x, y: x | y, np.bitwise_or),
    "^": (lambda x, y: x ^ y, np.bitwise_xor),
    "maximum": (lambda x, y: x.maximum(y), np.maximum),
    "minimum": (lambda x, y: x.minimum(y), np.minimum),
}
INT_SELECT: dict[str, tuple[Callable[[Any, Any], Any], Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "<": (lambda x, y: x < y, np.less),
    "==": (lambda x, y: x == y, np.equal),
    "!=": (lambda x, y: x != y, np.not_equal),
    ">=": (lambda x, y: x >= y, np.greater_equal),
}


@st.composite
def int_programs(draw: Callable[..., Any], max_steps: int = _STEPS) -> tuple[str, list[Any]]:
    """A chain over one integer dtype: binary ops with tensors or scalars, negation, selects; (dtype, steps)."""
    dt = draw(st.sampled_from(INT_NP))
    n = draw(st.integers(1, 24))
    steps: list[Any] = [("input", int_array(draw, dt, n))]
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(["binary", "binary", "binary", "scalar", "neg", "select"]))
        i = draw(st.integers(0, len(steps) - 1))
        if kind == "neg":
            steps.append(("neg", i))
            continue
        if kind == "scalar":
            v = draw(st.sampled_from(int_pool(dt)))
            steps.append(("scalar", draw(st.sampled_from(sorted(INT_BINARY))), i, v, draw(st.booleans())))
            continue
        if draw(st.booleans()):
            steps.append(("input", int_array(draw, dt, n)))
        j = draw(st.integers(0, len(steps) - 1))
        if kind == "binary":
            steps.append(("binary", draw(st.sampled_from(sorted(INT_BINARY))), i, j))
        else:
            k = draw(st.integers(0, len(steps) - 1))
            steps.append(("select", draw(st.sampled_from(sorted(INT_SELECT))), i, j, k))
    return dt.name, steps


def run_int_program(dt_name: str, steps: list[Any], device: str | None) -> list[np.ndarray]:
    """Every step's value: with numpy (``device`` None, wrapping as numpy does) or with Tensor on ``device``."""
    dt = np.dtype(dt_name)
    vals: list[Any] = []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in steps:
            if s[0] == "input":
                vals.append(s[1] if device is None else Tensor(s[1], device=device))
            elif s[0] == "neg":
                vals.append(np.negative(vals[s[1]]) if device is None else -vals[s[1]])
            elif s[0] == "scalar":
                _, name, i, v, rev = s
                tf, nf = INT_BINARY[name]
                x, y = (vals[i], dt.type(v) if device is None else v)
                if device is None:
                    vals.append(np.asarray(nf(y, x) if rev else nf(x, y), dt))
                elif rev and name not in ("+", "*"):
                    vals.append(tf(Tensor(np.full(vals[i].shape, v, dt), device=device), x))
                else:
                    vals.append(tf(y, x) if rev and name in ("+", "*") else tf(x, y))
            elif s[0] == "binary":
                tf, nf = INT_BINARY[s[1]]
                x, y = vals[s[2]], vals[s[3]]
                vals.append(np.asarray(nf(x, y), dt) if device is None else tf(x, y))
            else:
                tf, nf = INT_SELECT[s[1]]
                x, y, z = vals[s[2]], vals[s[3]], vals[s[4]]
                vals.append(np.where(nf(x, y), z, x) if device is None else tf(x, y).where(z, x))
    return [v if device is None else v.numpy() for v in vals]


def _int_steps_repr(dt_name: str, steps: list[Any]) -> str:
    lines = [f"dtype {dt_name}"]
    for i, s in enumerate(steps):
        lines.append(f"v{i} = " + (f"Tensor({s[1].tolist()})" if s[0] == "input" else repr(s)))
    return "\n".join(lines)


def check_int_program(dt_name: str, steps: list[Any], device: str) -> None:
    want = run_int_program(dt_name, steps, None)
    for i, (g, w) in enumerate(zip(run_int_program(dt_name, steps, device), want)):
        np.testing.assert_array_equal(g, w, err_msg=f"v{i}")


@fuzz_settings(40)
@given(prog=int_programs())
def fuzz_integer_extremes(device: str, prog: tuple[str, list[Any]]) -> None:
    note(_int_steps_repr(*prog))
    check_int_program(*prog, device)


def test_fuzz_integer_extremes(device: str) -> None:
    """Every int dtype at its minimum and maximum, zero divisors (tensor and scalar), large values: numpy's
    wrapping answers. The whole search runs in a subprocess, so a trapping division fails the test."""
    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r})\nfrom tests.frontend.test_fuzz import fuzz_integer_extremes\n"
    )
    code += f"fuzz_integer_extremes({device!r})\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, f"exit {r.returncode} on {device}\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"


FMOD_A = [1e10, -1e10, 5e7, 1e30, -3.0e38, 7.5, -7.5, 3.0, -3.0, 0.0, -0.0, 1.0, 0.25, np.inf, -np.inf, np.nan]
FMOD_B = [3.0, 0.3, -0.3, 7.0, -2.0, 2.0, 1e-3, 0.1, 1e20, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0]


@fuzz_settings(20)
@given(
    dt=st.sampled_from([np.dtype(np.float32), np.dtype(np.float64)]),
    a=st.lists(st.sampled_from(FMOD_A) | st.floats(-1e12, 1e12), min_size=1, max_size=16),
    b=st.lists(st.sampled_from(FMOD_B) | st.floats(-1e3, 1e3), min_size=1, max_size=16),
    scalar=st.booleans(),
)
def test_fuzz_float_mod(device: str, dt: np.dtype, a: list[float], b: list[float], scalar: bool) -> None:
    """float % with large quotients, zeros, infinities and NaN: numpy's exact remainder, sign of zero included."""
    assume(supports_dtype(device, dt))
    n = min(len(a), len(b))
    an, bn = np.array(a[:n], dt), np.array(b[:n], dt)
    x = Tensor(an, device=device)
    with np.errstate(all="ignore"):
        if scalar:
            want = an % dt.type(b[0])
            got = (x % float(dt.type(b[0]))).numpy()
        else:
            want = an % bn
            got = (x % Tensor(bn, device=device)).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))


# ----- gradients: random differentiable programs against finite differences -----


def _grad_program(
    rng: np.random.Generator, n_inputs: int, steps: int
) -> tuple[Callable[..., Tensor], list[np.ndarray]]:
    """A random smooth float64 program (elementwise with broadcasting, reductions, movement, matmul) and its
    inputs. Values are random reals, so max ties and kinks are hit with probability zero."""
    shapes = [tuple(int(s) for s in rng.integers(1, 5, size=rng.integers(1, 4))) for _ in range(n_inputs)]
    arrays = [rng.uniform(-1.5, 1.5, s) for s in shapes]
    ops: list[tuple[str, int]] = []
    for _ in range(steps):
        ops.append((str(rng.choice(_GRAD_OPS)), int(rng.integers(0, 1 << 30))))

    def fn(*ts: Tensor) -> Tensor:
        vals = list(ts)
        for name, seed in ops:
            r = np.random.default_rng(seed)
            x = vals[int(r.integers(len(vals)))]
            y = vals[int(r.integers(len(vals)))]
            vals.append(_GRAD_STEP[name](x, y, r))
        return vals[-1]

    return fn, arrays


def _bcast_partner(x: Tensor, y: Tensor) -> Tensor:
    """``y`` cut to something that broadcasts against ``x`` (a trailing slice of it, summed down)."""
    y = y.sum() if y.ndim > x.ndim else y
    for d in range(y.ndim):
        xs = x.shape[x.ndim - y.ndim + d]
        if y.shape[d] not in (1, xs):
            y = y.sum(d, keepdim=True)
    return y


def _reshape_step(x: Tensor, r: np.random.Generator) -> Tensor:
    n = x.numel()
    divs = [k for k in range(1, n + 1) if n % k == 0]
    k = int(r.choice(divs))
    return x.reshape(k, n // k)


_GRAD_STEP: dict[str, Callable[[Tensor, Tensor, np.random.Generator], Tensor]] = {
    "add": lambda x, y, r: x + _bcast_partner(x, y),
    "mul": lambda x, y, r: x * _bcast_partner(x, y),
    "div": lambda x, y, r: x / (_bcast_partner(x, y).square() + 1.0),
    "sub_rev": lambda x, y, r: _bcast_partner(x, y) - x,
    "tanh": lambda x, y, r: x.tanh(),
    "sigmoid": lambda x, y, r: x.sigmoid(),
    "exp": lambda x, y, r: (x * 0.5).exp(),
    "log": lambda x, y, r: (x.square() + 0.5).log(),
    "sqrt": lambda x, y, r: (x.square() + 1.0).sqrt(),
    "sin": lambda x, y, r: x.sin(),
    "pow": lambda x, y, r: (x.square() + 0.5) ** 1.5,
    "sum": lambda x, y, r: x.sum(int(r.integers(x.ndim)), keepdim=bool(r.integers(2))) if x.ndim else x,
    "mean": lambda x, y, r: x.mean(int(r.integers(x.ndim)), keepdim=True) * x if x.ndim else x,
    "max": lambda x, y, r: x.max(int(r.integers(x.ndim))) if x.ndim else x,
    "softmax": lambda x, y, r: x.softmax(-1) if x.ndim else x,
    "reshape": lambda x, y, r: _reshape_step(x, r),
    "permute": lambda x, y, r: x.permute(tuple(int(i) for i in r.permutation(x.ndim))),
    "expand": lambda x, y, r: x.unsqueeze(0).expand(int(r.integers(1, 4)), *x.shape),
    "pad": lambda x, y, r: x.pad(tuple((int(r.integers(3)), int(r.integers(3))) for _ in x.shape)),
    "shrink": lambda x, y, r: x.shrink(tuple((0, max(1, s - int(r.integers(2)))) for s in x.shape)),
    "flip": lambda x, y, r: x.flip(int(r.integers(x.ndim))) if x.ndim else x,
    "slice": lambda x, y, r: x[::-2] if x.ndim else x,
    "cat": lambda x, y, r: x.cat(x * 2.0, dim=int(r.integers(x.ndim))) if x.ndim else x,
    "matmul": lambda x, y, r: x @ x.transpose(-1, -2) if x.ndim >= 2 else x * x,
}
_GRAD_OPS = sorted(_GRAD_STEP)


@fuzz_settings(25)
@given(seed=st.integers(0, 2**32 - 1), n_inputs=st.integers(1, 2), steps=st.integers(1, 6))
def test_fuzz_gradients(seed: int, n_inputs: int, steps: int) -> None:
    from tests.frontend.test_autograd import check_grad

    fn, arrays = _grad_program(np.random.default_rng(seed), n_inputs, steps)
    probe = fn(*(Tensor(a, dtype="float64", device="CPU") for a in arrays))
    assume(probe.numel() <= MAX_NUMEL)
    for device in ("CPU", "PYTHON"):
        check_grad(fn, arrays, device, rtol=1e-4)
