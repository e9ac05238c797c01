"""What a plugin hands the core for each device (`Backend`), the default-device priorities, and `PluginError`.

Why apart from `hooks`: listing devices and the registry's bookkeeping need these names but not
pluggy (about 25 ms with the ``typing`` and ``inspect`` it imports), which loads with the first
plugin module. Nothing here imports ``typing`` either: `Backend` is a plain class, not a NamedTuple
(which compiles code at every start).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: see the module docstring
if TYPE_CHECKING:
    from collections.abc import Callable

    from uops.compiler import Compiler
    from uops.renderer import Renderer
    from uops.runtime import Runtime

__all__ = ["PRIORITY", "Backend", "FrozenValue", "PluginError"]


class PluginError(RuntimeError):
    """A backend cannot be used: which plugin, what went wrong, and what to do about it."""


#: Documented priorities for `Device.DEFAULT` (highest usable wins; PYTHON is always last).
PRIORITY = {"CUDA": 100, "AMD": 90, "METAL": 80, "CPU": 50, "EMULATED": 20, "PYTHON": 0}


class FrozenValue:
    """An immutable value with named fields, compared and hashed by them: what a NamedTuple gives the plugins
    layer, without the ``typing`` import and the code a NamedTuple compiles at every start.

    A subclass lists its fields in ``__slots__`` and its ``__init__`` stores them with `_set`.
    """

    __slots__: tuple[str, ...] = ()

    def _set(self, values: tuple[object, ...]) -> None:
        for name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r} (make a new one instead)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def _asdict(self) -> dict[str, object]:
        """The fields by name, in order (as a NamedTuple's ``_asdict``)."""
        return dict(zip(self.__slots__, self._values()))

    def __eq__(self, other: object) -> bool:
        return self._values() == other._values() if type(other) is type(self) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v!r}" for k, v in self._asdict().items()) + ")"

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self._values()))


def _rebuild(cls: type[FrozenValue], values: tuple[object, ...]) -> FrozenValue:
    """Unpickle / copy a FrozenValue from its field values (whatever its ``__init__`` takes)."""
    value = cls.__new__(cls)
    value._set(values)
    return value


class Backend(FrozenValue):
    """One device's factories and probes.

    The factories are called lazily, so a plugin imports its heavy dependencies only when the
    device is used. ``renderer(arch)`` / ``compiler(arch)`` take an architecture from
    ``targets`` (``None`` = the backend's default, normally the host or the first target) and
    must work without the hardware, so cross-compiling works anywhere the toolchain does.
    ``probe_compile`` / ``probe_runtime`` return ``None`` when the toolchain / the hardware and
    driver are present, else a reason that says how to fix it. Probes run to choose
    `Device.DEFAULT`, so they must be cheap: no vendor bindings, no numpy (see docs/plugin-guide.md).

    ``priority`` picks `Device.DEFAULT` among the usable devices: CUDA 100, AMD 90, METAL 80,
    CPU 50, emulated devices 20, PYTHON 0 (always last). Unlisted real hardware: pick by analogy.
    """

    __slots__ = ("device", "renderer", "compiler", "runtime", "probe_compile", "probe_runtime", "targets", "priority")

    device: str
    renderer: Callable[[str | None], Renderer]
    compiler: Callable[[str | None], Compiler]
    runtime: Callable[[], Runtime]
    probe_compile: Callable[[], str | None]
    probe_runtime: Callable[[], str | None]
    targets: tuple[str, ...]
    priority: int

    def __init__(
        self, device: str, renderer: Callable[[str | None], Renderer], compiler: Callable[[str | None], Compiler],
        runtime: Callable[[], Runtime], probe_compile: Callable[[], str | None],
        probe_runtime: Callable[[], str | None], targets: tuple[str, ...] = (), priority: int = 10,
    ) -> None:  # fmt: skip
        self._set((device, renderer, compiler, runtime, probe_compile, probe_runtime, tuple(targets), priority))
