"""``Tensor``: a lazy, numpy-like array. Operations build a UOp graph; ``realize()`` schedules it
into fused kernels and runs them on the tensor's device.

Why lazy: the scheduler sees whole expressions, so an elementwise chain, a reduction with its
inputs and epilogue, and movement ops (index math) become one kernel instead of one per op.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from uops.dtypes import DType, bf16_to_f32, dtypes, f32_to_bf16, from_numpy, least_upper_dtype, to_numpy
from uops.ir.ops import Ops
from uops.ir.uop import UOp

from .schedule import ScheduleItem, create_schedule, device_of, new_buffer, shape_of
from .view import ShapeTracker

Scalar = bool | int | float
_LOG2_E = 1.0 / math.log(2.0)
_LN_2 = math.log(2.0)
SPLIT_THRESHOLD = 1 << 16  # reductions over more elements than this run in two stages


def _canonical_device(device: str | None) -> str:
    if device is None:
        from uops.plugins import Device

        return Device.DEFAULT
    if not isinstance(device, str):
        raise TypeError(f"device must be a string like 'CPU' or 'PYTHON', got {type(device).__name__}")
    name = device.strip().upper()
    if name not in _known_devices:
        from uops.plugins import Device

        Device[name]  # an unknown device fails here, naming the installed ones, not later at realize()
        _known_devices.add(name)
    return name


_known_devices: set[str] = set()


def _to_dtype(dtype: DType | str | type | np.dtype | None) -> DType | None:
    if dtype is None or isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        from uops.dtypes import dtype_from_name

        return dtype_from_name(dtype)
    if dtype is bool:
        return dtypes.bool
    if dtype is int:
        return dtypes.default_int
    if dtype is float:
        return dtypes.default_float
    return from_numpy(dtype)


def _shape_arg(shape: tuple[Any, ...]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = tuple(int(s) for s in shape)
    if any(s < 0 for s in out):
        raise ValueError(f"negative dimension in shape {out}")
    return out


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy broadcasting of shapes; a clear error names all shapes when they do not broadcast."""
    n = max(len(s) for s in shapes)
    padded = [(1,) * (n - len(s)) + s for s in shapes]
    out = []
    for d in range(n):
        sizes = {p[d] for p in padded if p[d] != 1}
        if len(sizes) > 1:
            raise ValueError(
                f"shapes {' and '.join(str(s) for s in shapes)} do not broadcast: "
                f"sizes {sorted(sizes)} at dimension {d - n}"
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


class _Casts:
    """Casts named like Python types; kept out of Tensor's namespace so annotations see the builtins."""

    def cast(self, dtype: DType | str | type) -> Tensor:
        raise NotImplementedError

    def float(self) -> Tensor:
        return self.cast(dtypes.float32)

    def int(self) -> Tensor:
        return self.cast(dtypes.int32)

    def bool(self) -> Tensor:
        return self.cast(dtypes.bool)


class Tensor(_Casts):
    """A lazy n-dimensional array on one device."""

    __slots__ = ("uop", "device")
    _seed: ClassVar[int] = 0
    _rng_counter: ClassVar[int] = 0

    def __init__(
        self,
        data: Tensor | UOp | np.ndarray | Sequence[Any] | Scalar,
        device: str | None = None,
        dtype: DType | str | type | None = None,
    ):
        dt = _to_dtype(dtype)
        self.device = _canonical_device(device)
        if isinstance(data, UOp):
            self.uop: UOp = data if dt is None or dt == data.dtype else data.cast(dt)
            return
        if isinstance(data, Tensor):
            src = data.to(self.device) if device is not None else data
            self.device = src.device
            self.uop = src.uop if dt is None else src.cast(dt).uop
            return
        if isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
            d = dt or (
                dtypes.bool
                if isinstance(data, bool)
                else dtypes.default_int
                if isinstance(data, int)
                else dtypes.default_float
            )
            self.uop = UOp.const(d, data)
            return
        if isinstance(data, (list, tuple)):
            arr = np.array(data)
            if dt is None:
                if arr.dtype == np.bool_:
                    dt = dtypes.bool
                elif np.issubdtype(arr.dtype, np.integer):
                    dt = dtypes.default_int
                elif np.issubdtype(arr.dtype, np.floating):
                    dt = dtypes.default_float
                else:
                    raise TypeError(f"cannot make a Tensor from a list of {arr.dtype} values")
        elif isinstance(data, (np.ndarray, np.generic)):
            arr = np.asarray(data)
        else:
            raise TypeError(f"cannot make a Tensor from {type(data).__name__}; pass a numpy array, a list or a scalar")
        if dt is None:
            dt = from_numpy(arr.dtype)
        self.uop = _upload(arr, dt, self.device)

    # ----- basic properties -----
    @property
    def shape(self) -> tuple[int, ...]:
        return shape_of(self.uop)

    @property
    def dtype(self) -> DType:
        return self.uop.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        state = "realized" if self.uop.op is Ops.VIEW and self.uop.src[0].op is Ops.BUFFER else "lazy"
        return f"<Tensor shape={self.shape} dtype={self.dtype.name} device={self.device} {state}>"

    __hash__ = object.__hash__

    # ----- creation -----
    @staticmethod
    def _const(value: Scalar, shape: tuple[int, ...], dtype: DType, device: str | None) -> Tensor:
        t = Tensor(UOp.const(dtype, value), device=device)
        return t.reshape((1,) * len(shape)).expand(shape) if shape else t

    @staticmethod
    def full(
        shape: tuple[int, ...] | int, fill_value: Scalar, dtype: DType | str | None = None, device: str | None = None
    ) -> Tensor:
        """A tensor of one value (no memory until realized)."""
        shp = _shape_arg((shape,) if isinstance(shape, int) else tuple(shape))
        dt = _to_dtype(dtype) or (
            dtypes.bool
            if isinstance(fill_value, bool)
            else dtypes.default_int
            if isinstance(fill_value, int)
            else dtypes.default_float
        )
        return Tensor._const(fill_value, shp, dt, device)

    @staticmethod
    def zeros(*shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        return Tensor.full(_shape_arg(shape), 0, dtype=_to_dtype(dtype) or dtypes.default_float, device=device)

    @staticmethod
    def ones(*shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        return Tensor.full(_shape_arg(shape), 1, dtype=_to_dtype(dtype) or dtypes.default_float, device=device)

    @staticmethod
    def empty(*shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """Uninitialised memory (zeroed on the host allocators)."""
        shp = _shape_arg(shape)
        dev = _canonical_device(device)
        dt = _to_dtype(dtype) or dtypes.default_float
        buf = new_buffer(dev, math.prod(shp), dt)
        return Tensor(UOp(Ops.VIEW, dt, (buf,), ShapeTracker.from_shape(shp)), device=dev)

    @staticmethod
    def arange(
        start: Scalar,
        stop: Scalar | None = None,
        step: Scalar = 1,
        dtype: DType | str | None = None,
        device: str | None = None,
    ) -> Tensor:
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ValueError("arange: step must not be zero")
        dt = _to_dtype(dtype) or (
            dtypes.default_float if any(isinstance(v, float) for v in (start, stop, step)) else dtypes.default_int
        )
        n = max(0, math.ceil((stop - start) / step))
        arr = (start + np.arange(n, dtype=np.float64) * step) if dtypes.is_float(dt) else np.arange(start, stop, step)
        return Tensor(arr.astype(to_numpy(dt)) if dt != dtypes.bfloat16 else arr, device=device, dtype=dt)

    @staticmethod
    def eye(n: int, m: int | None = None, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        dt = _to_dtype(dtype) or dtypes.default_float
        return Tensor(np.eye(n, m, dtype=np.float32), device=device).cast(dt)

    @staticmethod
    def manual_seed(seed: int = 0) -> None:
        """Seed rand/randn: the same seed gives the same numbers on every device."""
        Tensor._seed = int(seed)
        Tensor._rng_counter = 0

    @staticmethod
    def _rng() -> np.random.Generator:
        # counter-based (Philox) on the host: identical streams whatever device gets the data
        seq = np.random.SeedSequence([Tensor._seed & 0xFFFFFFFF, Tensor._rng_counter])
        Tensor._rng_counter += 1
        return np.random.Generator(np.random.Philox(seq))

    @staticmethod
    def rand(*shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """Uniform in [0, 1)."""
        dt = _to_dtype(dtype) or dtypes.default_float
        arr = Tensor._rng().random(_shape_arg(shape), dtype=np.float32)
        return Tensor(arr, device=device).cast(dt)

    @staticmethod
    def randn(*shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
        """Standard normal."""
        dt = _to_dtype(dtype) or dtypes.default_float
        arr = Tensor._rng().standard_normal(_shape_arg(shape), dtype=np.float32)
        return Tensor(arr, device=device).cast(dt)

    @staticmethod
    def uniform(
        *shape: Any, low: float = 0.0, high: float = 1.0, dtype: DType | str | None = None, device: str | None = None
    ) -> Tensor:
        return Tensor.rand(*shape, dtype=dtype, device=device) * (high - low) + low

    def full_like(self, fill_value: Scalar, dtype: DType | str | None = None) -> Tensor:
        return Tensor.full(self.shape, fill_value, dtype=_to_dtype(dtype) or self.dtype, device=self.device)

    def zeros_like(self, dtype: DType | str | None = None) -> Tensor:
        return self.full_like(0, dtype)

    def ones_like(self, dtype: DType | str | None = None) -> Tensor:
        return self.full_like(1, dtype)

    def empty_like(self, dtype: DType | str | None = None) -> Tensor:
        return Tensor.empty(*self.shape, dtype=_to_dtype(dtype) or self.dtype, device=self.device)

    def rand_like(self, dtype: DType | str | None = None) -> Tensor:
        return Tensor.rand(*self.shape, dtype=_to_dtype(dtype) or self.dtype, device=self.device)

    def randn_like(self, dtype: DType | str | None = None) -> Tensor:
        return Tensor.randn(*self.shape, dtype=_to_dtype(dtype) or self.dtype, device=self.device)

    # ----- realization -----
    def schedule(self, *others: Tensor) -> list[ScheduleItem]:
        """The kernels and copies realizing this tensor (and ``others``) would run; runs nothing."""
        ts = (self, *others)
        return create_schedule([t.uop for t in ts], self.device).items

    def realize(self, *others: Tensor) -> Tensor:
        """Compute this tensor (and ``others``) now; afterwards each is backed by a buffer."""
        from .realize import run_schedule

        ts = (self, *others)
        sched = create_schedule([t.uop for t in ts], self.device)
        run_schedule(sched)
        for t, v in zip(ts, sched.root_views):
            t.uop = v
        return self

    def numpy(self) -> np.ndarray:
        """A host copy as a numpy array (bfloat16 comes back as float32)."""
        from .realize import buffer_numpy

        t = self.realize()
        u = t.uop
        st: ShapeTracker = u.arg
        if not (st.contiguous and st.size == u.src[0].arg[1]):
            t = Tensor(UOp(Ops.CONTIGUOUS, u.dtype, (u,)), device=self.device).realize()
            u = t.uop
        flat = buffer_numpy(u.src[0])
        if self.dtype == dtypes.bfloat16:
            flat = bf16_to_f32(flat)
        return flat.reshape(self.shape)

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def item(self) -> Scalar:
        if self.numel() != 1:
            raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
        return self.numpy().reshape(()).item()

    def to(self, device: str) -> Tensor:
        """This tensor on another device (a copy, through host memory between backends)."""
        dev = _canonical_device(device)
        if dev == self.device:
            return self
        if device_of(self.uop) is None:  # pure constants live nowhere yet
            return Tensor(self.uop, device=dev)
        return Tensor(UOp(Ops.COPY, self.dtype, (self.uop,), dev), device=dev)

    def contiguous(self) -> Tensor:
        """A kernel boundary: the value is materialised in its own buffer."""
        u = self.uop
        if u.op is Ops.VIEW and u.src[0].op is Ops.BUFFER and u.arg.contiguous:
            return self
        return Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (u,)), device=self.device)

    # ----- dtypes -----
    def cast(self, dtype: DType | str | type) -> Tensor:
        dt = _to_dtype(dtype)
        assert dt is not None
        if dt == self.dtype:
            return self
        return Tensor(UOp(Ops.CAST, dt, (self.uop,)), device=self.device)

    # ----- movement -----
    def _view(self, fn: Any) -> Tensor:
        u = self.uop
        if u.op is Ops.VIEW:
            base, st = u.src[0], u.arg
        else:
            base, st = u, ShapeTracker.from_shape(shape_of(u))
        new = fn(st)
        if base.op is not Ops.BUFFER and new.contiguous and new.shape == shape_of(base):
            return Tensor(base, device=self.device)
        return Tensor(UOp(Ops.VIEW, u.dtype, (base,), new), device=self.device)

    def _axis(self, axis: int, ndim: int | None = None) -> int:
        n = self.ndim if ndim is None else ndim
        if not isinstance(axis, (int, np.integer)) or not -max(n, 1) <= axis < max(n, 1):
            raise IndexError(f"axis {axis} is out of range for a tensor of shape {self.shape} ({n} dimensions)")
        return int(axis) % max(n, 1)

    def reshape(self, *shape: Any) -> Tensor:
        shp = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        new = [int(s) for s in shp]
        if new.count(-1) > 1:
            raise ValueError(f"reshape: only one dimension can be -1, got {tuple(new)}")
        if -1 in new:
            known = math.prod(s for s in new if s != -1)
            if known == 0 or self.numel() % known:
                raise ValueError(
                    f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) to {tuple(new)}"
                )
            new[new.index(-1)] = self.numel() // known
        if any(s < 0 for s in new):
            raise ValueError(f"reshape: negative dimension in {tuple(new)}")
        if math.prod(new) != self.numel():
            raise ValueError(
                f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) "
                f"to {tuple(new)} ({math.prod(new)} elements)"
            )
        if tuple(new) == self.shape:
            return self
        return self._view(lambda st: st.reshape(tuple(new)))

    def view(self, *shape: Any) -> Tensor:
        return self.reshape(*shape)

    def permute(self, *order: Any) -> Tensor:
        o = tuple(order[0]) if len(order) == 1 and isinstance(order[0], (tuple, list)) else tuple(order)
        o = tuple(self._axis(a) for a in o)
        if sorted(o) != list(range(self.ndim)):
            raise ValueError(f"permute order {o} is not a permutation of the {self.ndim} axes of shape {self.shape}")
        if o == tuple(range(self.ndim)):
            return self
        return self._view(lambda st: st.permute(o))

    def transpose(self, dim0: int = -2, dim1: int = -1) -> Tensor:
        order = list(range(self.ndim))
        a, b = self._axis(dim0), self._axis(dim1)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self) -> Tensor:  # noqa: N802
        return self.permute(tuple(reversed(range(self.ndim))))

    def expand(self, *shape: Any) -> Tensor:
        shp = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)
        if len(shp) < self.ndim:
            raise ValueError(f"cannot expand shape {self.shape} to {shp}: fewer dimensions")
        x = self.reshape((1,) * (len(shp) - self.ndim) + self.shape) if len(shp) > self.ndim else self
        new = tuple(s if n == -1 else int(n) for s, n in zip(x.shape, shp))
        for s, n in zip(x.shape, new):
            if s != n and s != 1:
                raise ValueError(f"cannot expand shape {self.shape} to {shp}: only size-1 dimensions can grow")
        if new == x.shape:
            return x
        return x._view(lambda st: st.expand(new))

    def broadcast_to(self, shape: tuple[int, ...]) -> Tensor:
        return self.expand(shape)

    def pad(self, padding: Sequence[tuple[int, int] | None], value: Scalar = 0) -> Tensor:
        """Constant padding: ``padding[d] = (before, after)`` for each dim (None: no padding)."""
        if len(padding) != self.ndim:
            raise ValueError(f"pad needs one (before, after) per dimension of {self.shape}, got {len(padding)}")
        pads = tuple((0, 0) if p is None else (int(p[0]), int(p[1])) for p in padding)
        if any(b < 0 or a < 0 for b, a in pads):
            raise ValueError(f"pad amounts must be >= 0, got {pads}; use shrink to cut")
        if all(p == (0, 0) for p in pads):
            return self
        out = self._view(lambda st: st.pad(pads))
        if value == 0:
            return out
        mask = Tensor._const(True, self.shape, dtypes.bool, self.device)._view(lambda st: st.pad(pads))
        return mask.where(out, value)

    def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
        """Keep ``[start, end)`` of each dim (None: all of it)."""
        if len(arg) != self.ndim:
            raise ValueError(f"shrink needs one (start, end) per dimension of {self.shape}, got {len(arg)}")
        a = tuple((0, s) if r is None else (int(r[0]), int(r[1])) for r, s in zip(arg, self.shape))
        for d, ((b, e), s) in enumerate(zip(a, self.shape)):
            if not 0 <= b <= e <= s:
                raise ValueError(f"shrink range {(b, e)} is invalid for axis {d} of size {s} (shape {self.shape})")
        if all(r == (0, s) for r, s in zip(a, self.shape)):
            return self
        return self._view(lambda st: st.shrink(a))

    def flip(self, axis: int | Sequence[int] | None = None) -> Tensor:
        axes = tuple(range(self.ndim)) if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
        ax = tuple(self._axis(a) for a in axes)
        return self._view(lambda st: st.flip(ax)) if ax else self

    def _stride(self, steps: tuple[int, ...]) -> Tensor:
        if all(s == 1 for s in steps):
            return self
        return self._view(lambda st: st.stride(steps))

    def squeeze(self, dim: int | None = None) -> Tensor:
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        d = self._axis(dim)
        if self.ndim == 0 or self.shape[d] != 1:
            return self
        return self.reshape(self.shape[:d] + self.shape[d + 1 :])

    def unsqueeze(self, dim: int) -> Tensor:
        d = self._axis(dim, self.ndim + 1)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if self.ndim == 0:
            return self.reshape(1)
        s, e = self._axis(start_dim), self._axis(end_dim)
        return self.reshape(self.shape[:s] + (math.prod(self.shape[s : e + 1]),) + self.shape[e + 1 :])

    def __getitem__(self, idx: Any) -> Tensor:
        items = list(idx) if isinstance(idx, tuple) else [idx]
        for it in items:
            if not (it is None or it is Ellipsis or isinstance(it, (int, np.integer, slice))) or isinstance(it, bool):
                raise TypeError(f"unsupported index {it!r}: use ints, slices, None and ...")
        n_real = sum(1 for it in items if it is not None and it is not Ellipsis)
        if items.count(Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if n_real > self.ndim:
            raise IndexError(f"too many indices ({n_real}) for a tensor of shape {self.shape}")
        if Ellipsis in items:
            i = items.index(Ellipsis)
            items = items[:i] + [slice(None)] * (self.ndim - n_real) + items[i + 1 :]
        else:
            items = items + [slice(None)] * (self.ndim - n_real)
        x = self
        shrink, flips, steps, out_shape = [], [], [], []
        d = 0
        for it in items:
            if it is None:
                out_shape.append(1)
                continue
            size = self.shape[d]
            if isinstance(it, (int, np.integer)):
                i = int(it)
                if not -size <= i < size:
                    raise IndexError(f"index {i} is out of range for axis {d} with size {size}")
                i %= size
                shrink.append((i, i + 1))
                flips.append(False)
                steps.append(1)
            else:
                start, stop, step = it.indices(size)
                cnt = len(range(start, stop, step))
                if cnt == 0:
                    shrink.append((0, 0))
                    flips.append(False)
                    steps.append(1)
                elif step > 0:
                    shrink.append((start, start + (cnt - 1) * step + 1))
                    flips.append(False)
                    steps.append(step)
                else:
                    shrink.append((start + (cnt - 1) * step, start + 1))
                    flips.append(True)
                    steps.append(-step)
                out_shape.append(cnt)
            d += 1
        x = x.shrink(shrink)
        fl = tuple(i for i, f in enumerate(flips) if f)
        if fl:
            x = x.flip(fl)
        x = x._stride(tuple(steps))
        return x.reshape(tuple(out_shape))

    @staticmethod
    def cat(*tensors: Tensor, dim: int = 0) -> Tensor:
        ts = list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)
        if not ts:
            raise ValueError("cat needs at least one tensor")
        first = ts[0]
        d = first._axis(dim)
        for t in ts[1:]:
            if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != d):
                raise ValueError(f"cat along axis {d}: shapes {first.shape} and {t.shape} differ outside that axis")
            first._same_device(t)
        dt = least_upper_dtype(*(t.dtype for t in ts))
        total = sum(t.shape[d] for t in ts)
        out: Tensor | None = None
        off = 0
        for t in ts:
            pads: list[tuple[int, int] | None] = [None] * first.ndim
            pads[d] = (off, total - off - t.shape[d])
            p = t.cast(dt).pad(pads)
            out = p if out is None else out + p
            off += t.shape[d]
        assert out is not None
        return out

    def cat_with(self, *others: Tensor, dim: int = 0) -> Tensor:
        return Tensor.cat(self, *others, dim=dim)

    @staticmethod
    def stack(*tensors: Tensor, dim: int = 0) -> Tensor:
        ts = list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)
        if not ts:
            raise ValueError("stack needs at least one tensor")
        for t in ts[1:]:
            if t.shape != ts[0].shape:
                raise ValueError(f"stack needs equal shapes, got {ts[0].shape} and {t.shape}")
        d = ts[0]._axis(dim, ts[0].ndim + 1)
        return Tensor.cat(*[t.unsqueeze(d) for t in ts], dim=d)

    # ----- elementwise helpers -----
    def _same_device(self, other: Tensor) -> None:
        if other.device != self.device:
            raise ValueError(
                f"tensors are on different devices ({self.device} and {other.device}); "
                f"move one with .to({self.device!r})"
            )

    def _operands(self, other: Tensor | Scalar, reverse: bool = False) -> tuple[Tensor, Tensor]:
        """Both operands promoted to one dtype and broadcast to one shape (Python scalars are weak)."""
        if isinstance(other, Tensor):
            self._same_device(other)
            dt = least_upper_dtype(self.dtype, other.dtype)
            y = other
        elif isinstance(other, (bool, int, float, np.generic)):
            v = other.item() if isinstance(other, np.generic) else other
            if isinstance(v, bool):
                dt = self.dtype
            elif isinstance(v, int):
                dt = self.dtype if not dtypes.is_bool(self.dtype) else dtypes.default_int
            else:
                dt = self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float
            y = Tensor(UOp.const(dt, v), device=self.device)
        else:
            raise TypeError(f"unsupported operand type {type(other).__name__} for a Tensor operation")
        x, y = self.cast(dt), y.cast(dt)
        shape = broadcast_shape(x.shape, y.shape)
        x, y = x.expand(shape), y.expand(shape)
        return (y, x) if reverse else (x, y)

    def _alu(self, op: Ops, *srcs: Tensor, dtype: DType | None = None) -> Tensor:
        dt = dtype or self.dtype
        return Tensor(UOp(op, dt, (self.uop, *(s.uop for s in srcs))), device=self.device)

    def _float(self) -> Tensor:
        return self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)

    # ----- arithmetic -----
    def add(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
        a, b = self._operands(y, reverse)
        return a._alu(Ops.ADD if not dtypes.is_bool(a.dtype) else Ops.OR, b)

    def sub(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
        a, b = self._operands(y, reverse)
        if dtypes.is_bool(a.dtype):
            raise TypeError("subtracting bool tensors is not supported (numpy neither); use ^ or logical ops")
        return a._alu(Ops.SUB, b)

    def mul(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
        a, b = self._operands(y, reverse)
        return a._alu(Ops.MUL if not dtypes.is_bool(a.dtype) else Ops.AND, b)

    def div(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
        """True division: integers divide as floats."""
        a, b = self._operands(y, reverse)
        a, b = a._float(), b._float()
        return a._alu(Ops.FDIV, b)

    def floordiv(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
        """numpy's floor division (rounds toward -inf). Floats compute ``floor(a / b)``, so an infinite
        dividend gives +-inf (``inf // 2``) where numpy, going through divmod, gives nan."""
        a, b = self._operands(y, reverse)
        if dtypes.is_float(a.dtype):
            return (a / b).floor()
        if dtypes.is_bool(a.dtype):
            a, b = a.cast(dtypes.int8), b.cast(dtypes.int8)
        q = a._alu(Ops.IDIV, b)
        if dtypes.is_unsigned(a.dtype):
            return q
        r = a._alu(Ops.MOD, b)
        fix = (r != 0) & ((r < 0) != (b < 0))
        return q - fix.cast(q.dtype)

    def mod(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
        """numpy's remainder: the result has the sign of the divisor."""
        a, b = self._operands(y, reverse)
        if dtypes.is_float(a.dtype):
            return a - (a / b).floor() * b
        if dtypes.is_bool(a.dtype):
            a, b = a.cast(dtypes.int8), b.cast(dtypes.int8)
        r = a._alu(Ops.MOD, b)
        if dtypes.is_unsigned(a.dtype):
            return r
        fix = (r != 0) & ((r < 0) != (b < 0))
        return fix.where(r + b, r)

    def pow(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
        int_exponent = y if not reverse and isinstance(y, int) and not isinstance(y, bool) else None
        if int_exponent is not None and int_exponent < 0 and not dtypes.is_float(self.dtype):
            raise ValueError(
                f"integers to negative integer powers are not allowed ({self.dtype.name} ** {y}); cast to float first"
            )
        # square-and-multiply: exact for integer dtypes at any exponent, a few roundings for floats
        if int_exponent is not None and 0 <= int_exponent and (int_exponent <= 8 or not dtypes.is_float(self.dtype)):
            y = int_exponent
            x = self.cast(dtypes.default_int) if dtypes.is_bool(self.dtype) else self  # bool ** int is int
            if y == 0:
                return x.ones_like()
            result: Tensor | None = None
            base, n = x, y
            while n:  # square-and-multiply: exact for ints
                if n & 1:
                    result = base if result is None else result * base
                n >>= 1
                if n:
                    base = base * base
            assert result is not None
            return result
        if not reverse and isinstance(y, float) and y == 0.5:
            return self._float().sqrt()
        a, b = self._operands(y, reverse)
        af, bf = a._float(), b._float()
        mag = (bf * af.abs().log2()).exp2()
        is_int = bf.trunc() == bf
        odd = is_int & ((bf * 0.5).trunc() != bf * 0.5)
        neg = mag._alu(Ops.NEG)
        res = (af < 0).where(is_int.where(odd.where(neg, mag), math.nan), mag)
        res = (bf == 0).where(1.0, res)
        return res if dtypes.is_float(a.dtype) else res.round_half_away().cast(a.dtype)

    def __add__(self, y: Tensor | Scalar) -> Tensor:
        return self.add(y)

    def __radd__(self, y: Scalar) -> Tensor:
        return self.add(y, True)

    def __sub__(self, y: Tensor | Scalar) -> Tensor:
        return self.sub(y)

    def __rsub__(self, y: Scalar) -> Tensor:
        return self.sub(y, True)

    def __mul__(self, y: Tensor | Scalar) -> Tensor:
        return self.mul(y)

    def __rmul__(self, y: Scalar) -> Tensor:
        return self.mul(y, True)

    def __truediv__(self, y: Tensor | Scalar) -> Tensor:
        return self.div(y)

    def __rtruediv__(self, y: Scalar) -> Tensor:
        return self.div(y, True)

    def __floordiv__(self, y: Tensor | Scalar) -> Tensor:
        return self.floordiv(y)

    def __rfloordiv__(self, y: Scalar) -> Tensor:
        return self.floordiv(y, True)

    def __mod__(self, y: Tensor | Scalar) -> Tensor:
        return self.mod(y)

    def __rmod__(self, y: Scalar) -> Tensor:
        return self.mod(y, True)

    def __pow__(self, y: Tensor | Scalar) -> Tensor:
        return self.pow(y)

    def __rpow__(self, y: Scalar) -> Tensor:
        return self.pow(y, True)

    def __matmul__(self, y: Tensor) -> Tensor:
        return self.matmul(y)

    def __rmatmul__(self, y: Tensor) -> Tensor:
        return y.matmul(self)

    def __neg__(self) -> Tensor:
        if dtypes.is_bool(self.dtype):
            return self.logical_not()
        return self._alu(Ops.NEG)

    def __abs__(self) -> Tensor:
        return self.abs()

    def __and__(self, y: Tensor | Scalar) -> Tensor:
        a, b = self._operands(y)
        return a._alu(Ops.AND, b)

    def __or__(self, y: Tensor | Scalar) -> Tensor:
        a, b = self._operands(y)
        return a._alu(Ops.OR, b)

    def __xor__(self, y: Tensor | Scalar) -> Tensor:
        a, b = self._operands(y)
        return a._alu(Ops.XOR, b)

    def __invert__(self) -> Tensor:
        if dtypes.is_bool(self.dtype):
            return self.logical_not()
        return self._alu(Ops.XOR, Tensor(UOp.const(self.dtype, -1), device=self.device))

    # ----- comparisons -----
    def _cmp(self, op: Ops, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
        a, b = self._operands(y, reverse)
        return a._alu(op, b, dtype=dtypes.bool)

    def __lt__(self, y: Tensor | Scalar) -> Tensor:
        return self._cmp(Ops.CMPLT, y)

    def __gt__(self, y: Tensor | Scalar) -> Tensor:
        return self._cmp(Ops.CMPLT, y, reverse=True)

    def __le__(self, y: Tensor | Scalar) -> Tensor:
        a, b = self._operands(y)
        if dtypes.is_float(a.dtype):  # not (b < a) would be true for NaN; numpy says false
            return (a < b) | (a == b)
        return (b < a).logical_not()

    def __ge__(self, y: Tensor | Scalar) -> Tensor:
        a, b = self._operands(y)
        if dtypes.is_float(a.dtype):
            return (b < a) | (a == b)
        return (a < b).logical_not()

    def __eq__(self, y: Tensor | Scalar) -> Tensor:  # type: ignore[override]
        return self._cmp(Ops.CMPEQ, y)

    def __ne__(self, y: Tensor | Scalar) -> Tensor:  # type: ignore[override]
        return self._cmp(Ops.CMPNE, y)

    def logical_not(self) -> Tensor:
        b = self.cast(dtypes.bool)
        return b._alu(Ops.CMPNE, Tensor(UOp.const(dtypes.bool, True), device=self.device).expand(b.shape))

    def maximum(self, y: Tensor | Scalar) -> Tensor:
        a, b = self._operands(y)
        if dtypes.is_bool(a.dtype):
            return a._alu(Ops.OR, b)
        return a._alu(Ops.MAX, b)

    def minimum(self, y: Tensor | Scalar) -> Tensor:
        """Elementwise minimum; NaN on either side gives NaN, like numpy (through maximum)."""
        a, b = self._operands(y)
        if dtypes.is_bool(a.dtype):
            return a._alu(Ops.AND, b)
        return a._order_flip().maximum(b._order_flip())._order_flip()

    def where(self, x: Tensor | Scalar, y: Tensor | Scalar) -> Tensor:
        """``x`` where this (as bool) is true, else ``y``; all three broadcast."""
        if isinstance(x, Tensor):
            x_, y_ = x._operands(y)
        elif isinstance(y, Tensor):
            y_, x_ = y._operands(x)
        else:
            dt = least_upper_dtype(*(_scalar_dtype(v) for v in (x, y)))
            x_, y_ = Tensor(UOp.const(dt, x), device=self.device), Tensor(UOp.const(dt, y), device=self.device)
        self._same_device(x_)
        cond = self.cast(dtypes.bool)
        shape = broadcast_shape(cond.shape, x_.shape, y_.shape)
        cond, x_, y_ = cond.expand(shape), x_.expand(shape), y_.expand(shape)
        return cond._alu(Ops.WHERE, x_, y_, dtype=x_.dtype)

    # ----- unary math -----
    def exp2(self) -> Tensor:
        return self._float()._alu(Ops.EXP2)

    def log2(self) -> Tensor:
        return self._float()._alu(Ops.LOG2)

    def exp(self) -> Tensor:
        return (self._float() * _LOG2_E).exp2()

    def log(self) -> Tensor:
        return self.log2() * _LN_2

    def sqrt(self) -> Tensor:
        return self._float()._alu(Ops.SQRT)

    def rsqrt(self) -> Tensor:
        return self.sqrt().reciprocal()

    def reciprocal(self) -> Tensor:
        return self._float()._alu(Ops.RECIPROCAL)

    def sin(self) -> Tensor:
        return self._float()._alu(Ops.SIN)

    def cos(self) -> Tensor:
        return (self._float() + math.pi / 2).sin()

    def tan(self) -> Tensor:
        return self.sin() / self.cos()

    def trunc(self) -> Tensor:
        return self._alu(Ops.TRUNC) if dtypes.is_float(self.dtype) else self

    def floor(self) -> Tensor:
        if not dtypes.is_float(self.dtype):
            return self
        t = self.trunc()
        return (self < t).where(t - 1, t)

    def ceil(self) -> Tensor:
        if not dtypes.is_float(self.dtype):
            return self
        t = self.trunc()
        return (self > t).where(t + 1, t)

    def round_half_away(self) -> Tensor:
        return (self < 0).where((self - 0.5).ceil(), (self + 0.5).floor()) if dtypes.is_float(self.dtype) else self

    def abs(self) -> Tensor:
        if dtypes.is_unsigned(self.dtype) or dtypes.is_bool(self.dtype):
            return self
        return (self < 0).where(-self, self)

    def sign(self) -> Tensor:
        s = (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)
        return (self != self).where(self, s) if dtypes.is_float(self.dtype) else s  # sign(NaN) is NaN

    def relu(self) -> Tensor:
        return self.maximum(0)

    def sigmoid(self) -> Tensor:
        return 1.0 / (1.0 + (-self._float()).exp())

    def tanh(self) -> Tensor:
        return 2.0 * (2.0 * self._float()).sigmoid() - 1.0

    def gelu(self) -> Tensor:
        """The tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
        x = self._float()
        return 0.5 * x * (1.0 + (math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)).tanh())

    def clip(self, min_: Scalar | Tensor | None = None, max_: Scalar | Tensor | None = None) -> Tensor:
        if min_ is None and max_ is None:
            raise ValueError("clip needs min_ or max_")
        out = self
        if min_ is not None:
            out = out.maximum(min_)
        if max_ is not None:
            out = out.minimum(max_)
        return out

    def square(self) -> Tensor:
        return self * self

    # ----- reductions -----
    def _axes(self, axis: int | Sequence[int] | None) -> tuple[int, ...]:
        if axis is None:
            return tuple(range(self.ndim))
        ax = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        out = tuple(sorted({self._axis(a) for a in ax}))
        if len(out) != len(ax):
            raise ValueError(f"repeated axis in {ax} for shape {self.shape}")
        return out

    def _reduce(self, op: Ops, axis: int | Sequence[int] | None, keepdim: bool) -> Tensor:
        axes = self._axes(axis)
        kept = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
        final = kept if keepdim else tuple(s for i, s in enumerate(self.shape) if i not in axes)
        if not axes:
            return self
        n_red = math.prod(self.shape[a] for a in axes)
        if n_red == 0:
            if op is Ops.MAX:
                raise ValueError(f"max/min of an empty axis: axes {axes} of shape {self.shape} have no elements")
            return Tensor.full(final, 0 if op is Ops.ADD else 1, dtype=self.dtype, device=self.device)
        if n_red > SPLIT_THRESHOLD and self.numel() > 0:
            return self._split_reduce(op, axes, final)
        u = UOp(Ops.REDUCE_AXIS, self.dtype, (self.uop,), (op, axes))
        return Tensor(u, device=self.device).reshape(final)

    def _split_reduce(self, op: Ops, axes: tuple[int, ...], final: tuple[int, ...]) -> Tensor:
        """Two stages: contiguous chunks of about sqrt(n) first, then the partials (precision and parallelism)."""
        keep = [i for i in range(self.ndim) if i not in axes]
        x = self.permute(keep + list(axes))
        outer = tuple(self.shape[i] for i in keep)
        n = math.prod(self.shape[a] for a in axes)
        k = 1 << math.ceil(math.log2(math.isqrt(n)))
        m = -(-n // k)
        x = x.reshape(outer + (n,))
        if m * k != n:
            ident: Scalar = 0 if op is Ops.ADD else 1 if op is Ops.MUL else dtypes.min(self.dtype)
            x = x.pad([None] * len(outer) + [(0, m * k - n)], value=ident)
        x = x.reshape(outer + (m, k))
        part = Tensor(UOp(Ops.REDUCE_AXIS, x.dtype, (x.uop,), (op, (len(outer) + 1,))), device=self.device)
        part = part.reshape(outer + (m,)).contiguous()
        out = Tensor(UOp(Ops.REDUCE_AXIS, x.dtype, (part.uop,), (op, (len(outer),))), device=self.device)
        return out.reshape(final)

    def _acc_dtype(self) -> DType:
        if dtypes.is_bool(self.dtype):
            return dtypes.default_int
        if dtypes.is_int(self.dtype) and self.dtype.itemsize < 4:
            return dtypes.uint32 if dtypes.is_unsigned(self.dtype) else dtypes.int32
        return self.dtype

    def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        acc = self._acc_dtype()
        if self.dtype in (dtypes.float16, dtypes.bfloat16):
            return self.cast(dtypes.float32)._reduce(Ops.ADD, axis, keepdim).cast(self.dtype)
        return self.cast(acc)._reduce(Ops.ADD, axis, keepdim)

    def prod(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self.cast(self._acc_dtype())._reduce(Ops.MUL, axis, keepdim)

    def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        if dtypes.is_bool(self.dtype):
            return self.cast(dtypes.uint8)._reduce(Ops.MAX, axis, keepdim).cast(dtypes.bool)
        return self._reduce(Ops.MAX, axis, keepdim)

    def _order_flip(self) -> Tensor:
        """A map reversing the order of values (its own inverse), for min via max."""
        if dtypes.is_bool(self.dtype):
            return self.logical_not()
        if dtypes.is_unsigned(self.dtype):
            return Tensor.full(self.shape, dtypes.max(self.dtype), dtype=self.dtype, device=self.device) - self
        if dtypes.is_int(self.dtype):
            return ~self  # -x overflows for the minimum value, ~x does not
        return -self

    def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self._order_flip().max(axis, keepdim)._order_flip()

    def mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        axes = self._axes(axis)
        n = math.prod(self.shape[a] for a in axes)
        s = self._float().sum(axis, keepdim)
        return s / n if n else s * math.nan

    def var(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, ddof: int = 0) -> Tensor:
        """Variance like numpy (``ddof=0``: divide by n)."""
        axes = self._axes(axis)
        n = math.prod(self.shape[a] for a in axes)
        x = self._float()
        d = x - x.mean(axis, keepdim=True)
        return (d * d).sum(axis, keepdim) / max(n - ddof, 0) if n - ddof > 0 else (d * d).sum(axis, keepdim) * math.nan

    def std(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, ddof: int = 0) -> Tensor:
        return self.var(axis, keepdim, ddof).sqrt()

    def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the first maximum (int32)."""
        if axis is None:
            out = self.flatten().argmax(0)
            return out.reshape((1,) * self.ndim) if keepdim else out
        a = self._axis(axis)
        n = self.shape[a]
        if n == 0:
            raise ValueError(f"argmax of an empty axis {a} of shape {self.shape}")
        m = self.max(a, keepdim=True)
        rev = Tensor.arange(n, 0, -1, dtype=dtypes.int32, device=self.device)
        rev = rev.reshape((n,) + (1,) * (self.ndim - a - 1))
        hit = self == m
        if dtypes.is_float(self.dtype):  # max is NaN when a NaN is there: the first NaN, as in numpy
            hit = hit | (self != self)
        cand = hit.where(rev, 0)
        return (n - cand.max(a, keepdim=keepdim)).cast(dtypes.int32)

    def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        return self._order_flip().argmax(axis, keepdim)

    def logsumexp(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        x = self._float()
        m = x.max(axis, keepdim=True)
        mm = (m.abs() == math.inf).where(0.0, m)  # keep -inf rows from producing nan
        out = (x - mm).exp().sum(axis, keepdim=True).log() + mm
        return out if keepdim else out.squeeze_axes(self._axes(axis))

    def squeeze_axes(self, axes: tuple[int, ...]) -> Tensor:
        return self.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

    def softmax(self, axis: int = -1) -> Tensor:
        x = self._float()
        e = (x - x.max(axis, keepdim=True)).exp()
        return e / e.sum(axis, keepdim=True)

    def log_softmax(self, axis: int = -1) -> Tensor:
        x = self._float()
        m = x - x.max(axis, keepdim=True)
        return m - m.exp().sum(axis, keepdim=True).log()

    # ----- linear algebra -----
    def matmul(self, y: Tensor) -> Tensor:
        """numpy matmul: batched over leading dims (broadcast), vectors promoted and squeezed."""
        if not isinstance(y, Tensor):
            raise TypeError(f"matmul needs a Tensor operand, got {type(y).__name__}")
        self._same_device(y)
        if self.ndim == 0 or y.ndim == 0:
            raise ValueError(f"matmul needs at least 1-D operands, got shapes {self.shape} and {y.shape}")
        a = self.unsqueeze(0) if self.ndim == 1 else self
        b = y.unsqueeze(-1) if y.ndim == 1 else y
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(
                f"matmul inner dimensions differ: {self.shape} has {a.shape[-1]} columns, "
                f"{y.shape} has {b.shape[-2]} rows"
            )
        batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
        dt = least_upper_dtype(a.dtype, b.dtype)
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        a3 = a.cast(dt).reshape(a.shape[:-1] + (1, k))  # (..., M, 1, K)
        b3 = b.cast(dt).transpose(-1, -2).reshape(b.shape[:-2] + (1, n, k))  # (..., 1, N, K)
        out = (a3.expand(batch + (m, n, k)) * b3.expand(batch + (m, n, k))).sum(-1)
        if dtypes.is_bool(dt):  # numpy: bool @ bool is bool (any of the ANDs), not a count
            out = out.cast(dtypes.bool)
        if self.ndim == 1:
            out = out.squeeze(-2)
        if y.ndim == 1:
            out = out.squeeze(-1)
        return out

    def dot(self, y: Tensor) -> Tensor:
        return self.matmul(y)

    def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """``self @ weight.T + bias`` with ``weight`` shaped (out_features, in_features), as in PyTorch."""
        out = self.matmul(weight.T)
        return out + bias if bias is not None else out


def _scalar_dtype(v: Any) -> DType:
    if isinstance(v, bool):
        return dtypes.bool
    if isinstance(v, int):
        return dtypes.default_int
    return dtypes.default_float


def _upload(arr: np.ndarray, dt: DType, device: str) -> UOp:
    from .realize import pending

    if dt == dtypes.bfloat16:
        host = f32_to_bf16(np.asarray(arr, dtype=np.float32))
    else:
        host = np.asarray(arr).astype(to_numpy(dt), copy=False)
    host = np.ascontiguousarray(host).reshape(-1)
    buf = new_buffer(device, host.size, dt)
    pending[buf] = np.array(host, copy=True)  # never alias the caller's array
    return UOp(Ops.VIEW, dt, (buf,), ShapeTracker.from_shape(tuple(arr.shape)))
