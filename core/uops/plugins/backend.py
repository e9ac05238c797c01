"""What a plugin hands the core for each device (`Backend`), the mark on its hook (`hookimpl`), the
default-device priorities, and `PluginError`.

Why apart from `hooks`: choosing a device needs these names but not pluggy (about 25 ms with the
``typing`` and ``inspect`` it imports, half the start-up budget), so a plugin module that imports
only this contract loads without it. `hookimpl` leaves its options where pluggy's own
``HookimplMarker("uops")`` does, so pluggy reads a plugin marked here exactly as one marked with
pluggy. Nothing here imports ``typing`` either: `Backend` is a plain class, not a NamedTuple
(which compiles code at every start).
"""

from __future__ import annotations

from uops.errors import UopsError

TYPE_CHECKING = False  # typing is not imported at run time: see the module docstring
if not TYPE_CHECKING:

    def overload(function: object) -> object:
        """typing's overload, which only type checkers read, without importing typing at every start."""
        return function

else:
    from collections.abc import Callable
    from typing import TypeVar, overload

    from uops.compiler import Compiler
    from uops.renderer import Renderer
    from uops.runtime import Runtime

__all__ = ["BACKENDS_HOOK", "HOOKIMPL_ATTR", "PRIORITY", "PROJECT", "Backend", "FrozenValue", "PluginError", "hookimpl"]

#: the pluggy project name of the hooks, the attribute a hookimpl's options are kept in, and the name of
#: the hook every plugin implements (`uops.plugins.hooks.UopsHookSpec` specifies it)
PROJECT = "uops"
HOOKIMPL_ATTR = PROJECT + "_impl"
BACKENDS_HOOK = "uops_backends"


class PluginError(UopsError, RuntimeError):
    """A backend cannot be used: which plugin, what went wrong, and what to do about it."""


#: Documented priorities for `Device.DEFAULT` (highest usable wins; PYTHON is always last).
PRIORITY = {"CUDA": 100, "AMD": 90, "METAL": 80, "CPU": 50, "EMULATED": 20, "PYTHON": 0}


if TYPE_CHECKING:
    _F = TypeVar("_F", bound=Callable[..., object])


@overload
def hookimpl(
    function: _F, *, hookwrapper: bool = ..., optionalhook: bool = ..., tryfirst: bool = ...,
    trylast: bool = ..., specname: str | None = ..., wrapper: bool = ...,
) -> _F: ...  # fmt: skip


@overload
def hookimpl(
    function: None = ..., *, hookwrapper: bool = ..., optionalhook: bool = ..., tryfirst: bool = ...,
    trylast: bool = ..., specname: str | None = ..., wrapper: bool = ...,
) -> Callable[[_F], _F]: ...  # fmt: skip


def hookimpl(
    function: _F | None = None, *, hookwrapper: bool = False, optionalhook: bool = False,
    tryfirst: bool = False, trylast: bool = False, specname: str | None = None, wrapper: bool = False,
) -> _F | Callable[[_F], _F]:  # fmt: skip
    """Mark a plugin's hook implementation (``@hookimpl`` or ``@hookimpl(tryfirst=True)``), as pluggy's
    ``HookimplMarker("uops")`` does: the same options (a plain dict) in the same attribute.
    """
    opts = {
        "wrapper": wrapper, "hookwrapper": hookwrapper, "optionalhook": optionalhook,
        "tryfirst": tryfirst, "trylast": trylast, "specname": specname,
    }  # fmt: skip

    def mark(func: _F) -> _F:
        setattr(func, HOOKIMPL_ATTR, opts)
        return func

    return mark if function is None else mark(function)


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

    ``plugin_api`` is the ``(major, minor)`` of `uops.plugin` the plugin was built for (None: built for
    uops 0.1, before the API had a number, which is 1.0): discovery refuses another major, or a newer minor,
    in one line. ``compile_needs_runtime`` says the compiler works only inside the device's driver (OpenCL,
    a JIT in the runtime): such a backend cannot cross-compile, and ``uops devices`` says so.
    ``unsupported`` and ``expected_failures`` map conformance-kit check names (as ``uops conformance DEVICE
    --list`` prints them, or a prefix of one such as ``test_opts.py::test_local``) to a reason: checks the
    device never supports (skipped), and ones that fail today (an expected failure that passes is reported
    as stale and fails the run). Both are stored as sorted ``(name, reason)`` pairs.
    """

    __slots__ = (
        "device", "renderer", "compiler", "runtime", "probe_compile", "probe_runtime", "targets", "priority",
        "plugin_api", "compile_needs_runtime", "unsupported", "expected_failures",
    )  # fmt: skip

    device: str
    renderer: Callable[[str | None], Renderer]
    compiler: Callable[[str | None], Compiler]
    runtime: Callable[[], Runtime]
    probe_compile: Callable[[], str | None]
    probe_runtime: Callable[[], str | None]
    targets: tuple[str, ...]
    priority: int
    plugin_api: tuple[int, int] | None
    compile_needs_runtime: bool
    unsupported: tuple[tuple[str, str], ...]
    expected_failures: tuple[tuple[str, str], ...]

    def __init__(
        self, device: str, renderer: Callable[[str | None], Renderer], compiler: Callable[[str | None], Compiler],
        runtime: Callable[[], Runtime], probe_compile: Callable[[], str | None],
        probe_runtime: Callable[[], str | None], targets: tuple[str, ...] = (), priority: int = 10, *,
        plugin_api: tuple[int, int] | None = None, compile_needs_runtime: bool = False,
        unsupported: dict[str, str] | tuple[tuple[str, str], ...] = (),
        expected_failures: dict[str, str] | tuple[tuple[str, str], ...] = (),
    ) -> None:  # fmt: skip
        self._set((
            device, renderer, compiler, runtime, probe_compile, probe_runtime, tuple(targets), priority,
            None if plugin_api is None else tuple(plugin_api), bool(compile_needs_runtime),
            _reasons(unsupported), _reasons(expected_failures),
        ))  # fmt: skip


def _reasons(entries: dict[str, str] | tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """Kit-check declarations as sorted (name, reason) pairs; a reason is required."""
    pairs = tuple(sorted(dict(entries).items()))
    for name, reason in pairs:
        if not isinstance(name, str) or not isinstance(reason, str) or not reason.strip():
            raise TypeError(
                f"a kit-check declaration maps a check name to a reason (a sentence), not {name!r}: {reason!r}"
            )
    return pairs
