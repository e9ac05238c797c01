"""Backend plugins: entry-point discovery, API-range check, lazy loading, quarantine, and `Device`.

Why this shape: a backend ships as its own pip distribution, released on its own schedule.
The core finds it through the entry-point group ``uops.backends`` by reading installed
metadata only (no plugin import), checks the distribution's requirement on ``uops`` against
this core's version, and imports the plugin the first time its device is used. A plugin that
fails in any way is quarantined with a plain-words reason; every other backend keeps working.

Environment:
  UOPS_DEVICE=NAME           the device `Device.DEFAULT` names
  UOPS_STRICT_PLUGINS=1      a broken or incompatible plugin is a hard error (for CI)
  UOPS_DISABLE_PLUGINS=a,b   skip plugins, by entry-point (device) name or distribution name
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pluggy

from uops.plugins.versions import SpecifierError, normalize_dist, specifier_contains, uops_range

if TYPE_CHECKING:
    from uops.compiler import Compiler
    from uops.renderer import Renderer
    from uops.runtime import Allocator, Runtime

__all__ = [
    "Backend",
    "Device",
    "DeviceHandle",
    "PluginError",
    "PluginStatus",
    "UopsHookSpec",
    "hookimpl",
    "hookspec",
    "register_backend",
    "unregister_backend",
]

ENTRY_POINT_GROUP = "uops.backends"

hookspec = pluggy.HookspecMarker("uops")
hookimpl = pluggy.HookimplMarker("uops")


class UopsHookSpec:
    """The hooks a plugin module may implement (mark them with ``@uops.plugins.hookimpl``)."""

    @hookspec
    def uops_backends(self) -> list[Backend]:  # type: ignore[empty-body]
        """Return the backends this plugin provides, one per device name it declared as an entry point."""


class PluginError(RuntimeError):
    """A backend cannot be used: which plugin, what went wrong, and what to do about it."""


# ---------------------------------------------------------------------------------------------
# Backend: what a plugin hands the core
# ---------------------------------------------------------------------------------------------

#: Documented priorities for `Device.DEFAULT` (highest usable wins; PYTHON is always last).
PRIORITY = {"CUDA": 100, "AMD": 90, "METAL": 80, "CPU": 50, "EMULATED": 20, "PYTHON": 0}


@dataclass
class Backend:
    """One device's factories and probes.

    The factories are called lazily, so a plugin imports its heavy dependencies only when the
    device is used. ``renderer(arch)`` / ``compiler(arch)`` take an architecture from
    ``targets`` (``None`` = the backend's default, normally the host or the first target) and
    must work without the hardware, so cross-compiling works anywhere the toolchain does.
    ``probe_compile`` / ``probe_runtime`` return ``None`` when the toolchain / the hardware and
    driver are present, else a reason that says how to fix it.

    ``priority`` picks `Device.DEFAULT` among the usable devices: CUDA 100, AMD 90, METAL 80,
    CPU 50, emulated devices 20, PYTHON 0 (always last). Unlisted real hardware: pick by analogy.
    """

    device: str
    renderer: Callable[[str | None], Renderer]
    compiler: Callable[[str | None], Compiler]
    runtime: Callable[[], Runtime]
    probe_compile: Callable[[], str | None]
    probe_runtime: Callable[[], str | None]
    targets: tuple[str, ...] = ()
    priority: int = 10


# ---------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------


def _core_version() -> str:
    from uops.version import __version__

    return __version__


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class PluginStatus:
    """One row of `uops devices`: what is installed for a device, and whether it works."""

    device: str
    module: str
    distribution: str | None
    version: str | None
    api_range: str | None  # the distribution's requirement on uops; None: declares none
    status: str  # ok | unavailable | incompatible | broken | disabled
    reason: str | None  # why not ok, in plain words
    fix: str | None  # what to do about it
    targets: tuple[str, ...]
    compile_ok: bool | None  # None: not known (plugin not loaded)
    compile_reason: str | None
    runtime_ok: bool | None
    runtime_reason: str | None
    priority: int | None
    builtin: bool

    def as_dict(self) -> dict[str, Any]:
        """Plain data for ``uops devices --json``."""
        return {
            "device": self.device,
            "module": self.module,
            "distribution": self.distribution,
            "version": self.version,
            "api_range": self.api_range,
            "status": self.status,
            "reason": self.reason,
            "fix": self.fix,
            "targets": list(self.targets),
            "compile_ok": self.compile_ok,
            "compile_reason": self.compile_reason,
            "runtime_ok": self.runtime_ok,
            "runtime_reason": self.runtime_reason,
            "priority": self.priority,
            "builtin": self.builtin,
        }


@dataclass
class _Record:
    """What the registry knows about one device name (mutable; guarded by the registry lock)."""

    device: str
    module: str
    entry_point: _EntryPoint | None = None  # None for built-ins and registered backends
    builtin: bool = False
    registered: Backend | None = None  # from register_backend()
    conflicts: list[_Record] = field(default_factory=list)  # more enabled providers of the same device
    # filled on load
    state: str = "discovered"  # discovered | ok | unavailable | incompatible | broken | disabled
    reason: str | None = None
    fix: str | None = None
    error: BaseException | None = None
    meta_read: bool = False
    distribution: str | None = None
    version: str | None = None
    api_range: str | None = None
    backend: Backend | None = None
    compile_reason: str | None = None
    runtime_reason: str | None = None

    def who(self) -> str:
        """The plugin, for messages: distribution + version + module."""
        if self.registered is not None:
            return f"backend {self.device} (registered with register_backend)"
        dist = f"{self.distribution} {self.version}" if self.distribution else "an unknown distribution"
        kind = "built-in backend" if self.builtin else "plugin"
        return f"{kind} {self.device} ({dist}, module {self.module})"

    def message(self) -> str:
        """One plain sentence (plus the fix) for a plugin that is not ok."""
        return f"{self.who()} is {self.state}: {self.reason}." + (
            f" {self.fix[:1].upper()}{self.fix[1:]}." if self.fix else ""
        )

    def status(self) -> PluginStatus:
        loaded = self.backend is not None
        return PluginStatus(
            device=self.device,
            module=self.module,
            distribution=self.distribution,
            version=self.version,
            api_range=self.api_range,
            status=self.state,
            reason=self.reason,
            fix=self.fix,
            targets=self.backend.targets if self.backend else (),
            compile_ok=(self.compile_reason is None) if loaded else None,
            compile_reason=self.compile_reason,
            runtime_ok=(self.runtime_reason is None) if loaded else None,
            runtime_reason=self.runtime_reason,
            priority=self.backend.priority if self.backend else None,
            builtin=self.builtin,
        )


@dataclass(frozen=True)
class _EntryPoint:
    """An entry point and where its distribution's metadata lives (read only when the plugin is loaded)."""

    name: str
    value: str
    dist_path: str | None = None  # the .dist-info / .egg-info directory (fast scan)
    dist: Any = None  # an importlib.metadata.Distribution (fallback scan)

    def distribution(self) -> Any:
        """The importlib.metadata Distribution (for Name, Version, Requires-Dist)."""
        if self.dist is None and self.dist_path is not None:
            from importlib.metadata import PathDistribution
            from pathlib import Path

            object.__setattr__(self, "dist", PathDistribution(Path(self.dist_path)))
        return self.dist


def _entry_points(group: str) -> list[_EntryPoint]:
    """Entry points of `group`, as importlib.metadata.entry_points(group=...) finds them.

    Importing importlib.metadata costs ~20 ms, more than everything else discovery does, so the
    common case (plain directories on sys.path, the standard path finder) is read directly:
    the same files, the same order, the same first-wins rule per distribution. Anything else
    (zip files or eggs on sys.path, a custom finder) goes through importlib.metadata.
    """
    fast = _scan_sys_path(group)
    if fast is not None:
        return fast
    from importlib.metadata import entry_points

    return [_EntryPoint(ep.name, ep.value, dist=ep.dist) for ep in entry_points(group=group)]


def _scan_sys_path(group: str) -> list[_EntryPoint] | None:
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and getattr(finder, "find_distributions", None) is not None:
            return None  # a finder that provides distributions we would not see
    seen: set[str] = set()
    found: list[_EntryPoint] = []
    for entry in sys.path:
        root = entry or "."
        if root.lower().endswith(".egg") or os.path.isfile(root):
            return None  # eggs and zip files: let importlib.metadata read them
        try:
            children = os.listdir(root)
        except OSError:
            continue
        for child in children:
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            # the distribution's normalized name, as importlib.metadata derives it from the path
            name = re.sub(r"[-_.]+", "_", low.rpartition(".")[0].partition("-")[0])
            if name in seen:
                continue
            seen.add(name)
            path = os.path.join(root, child)
            try:
                with open(os.path.join(path, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            found += [_EntryPoint(n, v, dist_path=path) for n, v in _parse_entry_points(text, group)]
    return found


def _parse_entry_points(text: str, group: str) -> list[tuple[str, str]]:
    """(name, value) pairs of one section of an entry_points.txt (INI-style, '#' comments)."""
    pairs: list[tuple[str, str]] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group:
            name, _, value = line.partition("=")
            pairs.append((name.strip(), value.strip()))
    return pairs


#: Built-in backends, registered through the same hook path as installed plugins.
_BUILTINS = {"PYTHON": "uops.backends.python"}


class _Registry:
    """All known devices. `Device` is the one instance."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._records: dict[str, _Record] | None = None
        self._handles: dict[str, DeviceHandle] = {}
        self._module_results: dict[str, list[Backend] | BaseException] = {}
        self._registered: dict[str, Backend] = {}
        self._pm: pluggy.PluginManager | None = None
        self._default: str | None = None

    # ----- discovery (metadata only) -----
    def _discover(self) -> dict[str, _Record]:
        if self._records is not None:
            return self._records
        with self._lock:
            if self._records is not None:
                return self._records
            disabled = {d.strip() for d in os.environ.get("UOPS_DISABLE_PLUGINS", "").split(",") if d.strip()}
            candidates = [
                _Record(device=ep.name.strip().upper(), module=ep.value.split(":")[0].strip(), entry_point=ep)
                for ep in _entry_points(ENTRY_POINT_GROUP)
            ]
            candidates += [_Record(device=n, module=m, builtin=True) for n, m in _BUILTINS.items()]
            records: dict[str, _Record] = {}
            for rec in candidates:
                if disabled:
                    self._apply_disabled(rec, disabled)
                first = records.get(rec.device)
                if first is None or (first.state == "disabled" and rec.state != "disabled"):
                    if first is not None:
                        rec.conflicts = first.conflicts
                    records[rec.device] = rec
                elif rec.state != "disabled":
                    first.conflicts.append(rec)  # more than one enabled provider: reported when loaded
            for name, backend in self._registered.items():
                records[name] = _Record(device=name, module="<register_backend>", registered=backend)
            self._records = records
            return records

    def _apply_disabled(self, rec: _Record, disabled: set[str]) -> None:
        self._read_metadata(rec)
        dist = normalize_dist(rec.distribution) if rec.distribution else None
        for d in disabled:
            if d.upper() == rec.device or (dist is not None and normalize_dist(d) == dist and not rec.builtin):
                rec.state = "disabled"
                rec.reason = "disabled by UOPS_DISABLE_PLUGINS"
                rec.fix = f"remove {d} from UOPS_DISABLE_PLUGINS to use it"

    def _read_metadata(self, rec: _Record) -> None:
        if rec.meta_read:
            return
        rec.meta_read = True
        if rec.builtin:
            rec.distribution, rec.version = "uops", _core_version()
            rec.api_range = f"=={rec.version}"
            return
        dist = rec.entry_point.distribution() if rec.entry_point is not None else None
        if dist is None:
            return
        rec.distribution = dist.metadata["Name"] or None
        rec.version = dist.version
        rec.api_range = uops_range(dist.requires)

    def names(self) -> list[str]:
        """Device names of every installed, non-disabled backend, from metadata alone (imports no plugin)."""
        return sorted(n for n, r in self._discover().items() if r.state != "disabled")

    def refresh(self) -> None:
        """Forget discovery and load results (re-reads metadata and the environment; for tests and tools)."""
        with self._lock:
            self._records = None
            self._handles.clear()
            self._module_results.clear()
            self._pm = None
            self._default = None

    # ----- loading -----
    def _plugin_manager(self) -> pluggy.PluginManager:
        if self._pm is None:
            pm = pluggy.PluginManager("uops")
            pm.add_hookspecs(UopsHookSpec)
            self._pm = pm
        return self._pm

    def _quarantine(self, rec: _Record, state: str, reason: str, fix: str, error: BaseException | None = None) -> None:
        rec.state, rec.reason, rec.fix, rec.error = state, reason, fix, error
        if _env_flag("UOPS_STRICT_PLUGINS"):
            raise PluginError(f"{rec.message()} (UOPS_STRICT_PLUGINS=1 makes this an error.)") from error

    def _load(self, rec: _Record) -> None:
        if rec.state != "discovered":
            return
        with self._lock:
            if rec.state != "discovered":
                return
            self._load_locked(rec)

    def _load_locked(self, rec: _Record) -> None:
        disable_hint = f"or disable it with UOPS_DISABLE_PLUGINS={rec.device}"
        if rec.registered is not None:
            backend: Backend | None = rec.registered
        else:
            try:
                self._read_metadata(rec)
            except Exception as e:
                return self._quarantine(
                    rec, "broken", f"its installed metadata cannot be read ({type(e).__name__}: {e})",
                    f"reinstall it {disable_hint}", e,
                )  # fmt: skip
            if rec.conflicts:
                for other in rec.conflicts:
                    self._read_metadata(other)
                dists = [r.distribution or r.module for r in rec.conflicts if not r.builtin]
                names = ", ".join(f"{r.distribution} {r.version} (module {r.module})" for r in [rec, *rec.conflicts])
                return self._quarantine(
                    rec, "broken", f"more than one installed plugin provides {rec.device}: {names}",
                    f"uninstall all but one (pip uninstall {' '.join(dists)}) or disable the others by distribution "
                    f"name (UOPS_DISABLE_PLUGINS={','.join(dists)})",
                )  # fmt: skip
            if not self._check_api(rec):
                return
            backend = self._call_hook(rec)
        if backend is None:
            return
        rec.backend = backend
        for which in ("compile", "runtime"):
            probe = backend.probe_compile if which == "compile" else backend.probe_runtime
            try:
                result = probe()
            except Exception as e:
                rec.backend = None
                return self._quarantine(
                    rec, "broken", f"its probe_{which}() raised {type(e).__name__}: {e}",
                    f"report this to the plugin's authors; upgrade it "
                    f"(pip install -U {rec.distribution or rec.module}) {disable_hint}", e,
                )  # fmt: skip
            if result is not None and not isinstance(result, str):
                rec.backend = None
                return self._quarantine(
                    rec, "broken", f"its probe_{which}() returned {type(result).__name__}, not None or a reason string",
                    f"report this to the plugin's authors {disable_hint}",
                )  # fmt: skip
            if which == "compile":
                rec.compile_reason = result
            else:
                rec.runtime_reason = result
        if rec.compile_reason is None and rec.runtime_reason is None:
            rec.state = "ok"
        else:
            rec.state = "unavailable"
            parts = []
            if rec.compile_reason is not None:
                parts.append(f"cannot compile: {rec.compile_reason}")
            if rec.runtime_reason is not None:
                parts.append(f"cannot run: {rec.runtime_reason}")
            rec.reason = "; ".join(parts)  # a probe's reason already says how to fix it

    def _check_api(self, rec: _Record) -> bool:
        if rec.builtin or not rec.api_range:
            return True
        core = _core_version()
        dist = rec.distribution or rec.module
        try:
            fits = specifier_contains(rec.api_range, core)
        except SpecifierError as e:
            self._quarantine(
                rec, "broken", f"its requirement on uops ({rec.api_range!r}) cannot be parsed: {e}",
                f"report this to the plugin's authors; upgrade it (pip install -U {dist}) or disable it with "
                f"UOPS_DISABLE_PLUGINS={rec.device}", e,
            )  # fmt: skip
            return False
        if not fits:
            self._quarantine(
                rec, "incompatible", f"{dist} {rec.version} supports uops {rec.api_range} but this is uops {core}",
                f'Install a {dist} release made for uops {core} (pip install -U {dist}), or a uops it supports '
                f'(pip install "uops{rec.api_range}")',
            )  # fmt: skip
            return False
        return True

    def _call_hook(self, rec: _Record) -> Backend | None:
        disable_hint = f"or disable it with UOPS_DISABLE_PLUGINS={rec.device}"
        dist = rec.distribution or rec.module
        result = self._module_results.get(rec.module)
        if result is None:
            result = self._run_module_hook(rec.module)
            self._module_results[rec.module] = result
        if isinstance(result, BaseException):
            e = result
            if isinstance(e, _HookMissing):
                reason, fix = str(e), f"the module must define a function marked @uops.plugins.hookimpl {disable_hint}"
            elif isinstance(e, _ImportFailed):
                e = e.__cause__ or e
                reason = f"importing {rec.module} failed ({type(e).__name__}: {e})"
                fix = f"reinstall or upgrade it (pip install -U {dist}) {disable_hint}"
            else:
                reason = f"its uops_backends() hook raised {type(e).__name__}: {e}"
                fix = f"report this to the plugin's authors; upgrade it (pip install -U {dist}) {disable_hint}"
            self._quarantine(rec, "broken", reason, fix, e)
            return None
        for b in result:
            if isinstance(b, Backend) and b.device.upper() == rec.device:
                return b
        provided = sorted({b.device for b in result if isinstance(b, Backend)})
        bad = [type(b).__name__ for b in result if not isinstance(b, Backend)]
        what = (
            f"returned non-Backend objects ({', '.join(bad)})"
            if bad
            else f"returned backends for {provided or 'nothing'}"
        )
        self._quarantine(
            rec, "broken", f"its entry point names device {rec.device} but uops_backends() {what}",
            f"report this to the plugin's authors {disable_hint}",
        )  # fmt: skip
        return None

    def _run_module_hook(self, module_name: str) -> list[Backend] | BaseException:
        try:
            module = importlib.import_module(module_name)
        except Exception as e:
            err = _ImportFailed(module_name)
            err.__cause__ = e
            return err
        pm = self._plugin_manager()
        try:
            if not pm.is_registered(module):
                pm.register(module, name=module_name)
            impls = [i for i in pm.hook.uops_backends.get_hookimpls() if i.plugin is module]
            if not impls:
                return _HookMissing(f"{module_name} implements no uops_backends() hook")
            backends: list[Backend] = []
            for impl in impls:
                out = impl.function()
                if not isinstance(out, (list, tuple)):
                    return TypeError(f"uops_backends() returned {type(out).__name__}, not a list of Backend")
                backends.extend(out)
            return backends
        except Exception as e:
            return e

    def _record(self, device: str) -> _Record:
        name = _canonical(device)
        rec = self._discover().get(name)
        if rec is None:
            known = ", ".join(self.names()) or "none"
            raise PluginError(
                f"unknown device {device!r}; installed devices: {known}. A device comes from a plugin package "
                f"(e.g. pip install uops-cpu-clang for CPU); `uops devices` shows what is installed and why not."
            )
        return rec

    # ----- public API -----
    def __getitem__(self, device: str) -> DeviceHandle:
        """The handle of a device; loads its plugin on first use. Raises PluginError if it is unusable."""
        rec = self._record(device)
        handle = self._handles.get(rec.device)
        if handle is not None:
            return handle
        self._load(rec)
        if rec.backend is None:
            raise PluginError(rec.message()) from rec.error
        with self._lock:
            handle = self._handles.setdefault(rec.device, DeviceHandle(rec))
        return handle

    def __contains__(self, device: object) -> bool:
        return isinstance(device, str) and _canonical(device) in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def status(self) -> list[PluginStatus]:
        """Load and probe every discovered backend; one row each, for `uops devices`."""
        rows = []
        for _name, rec in sorted(self._discover().items()):
            if rec.state != "disabled":
                self._load(rec)
            else:
                self._read_metadata(rec)
            rows.append(rec.status())
        return rows

    @property
    def DEFAULT(self) -> str:  # noqa: N802 - the established name
        """UOPS_DEVICE if set, else the usable device with the highest priority (PYTHON last)."""
        env = os.environ.get("UOPS_DEVICE", "").strip()
        if env:
            return self[env].name
        if self._default is not None:
            return self._default
        usable = []
        for name, rec in self._discover().items():
            if rec.state == "disabled":
                continue
            self._load(rec)
            if rec.state == "ok" and rec.backend is not None:
                usable.append((name == "PYTHON", -rec.backend.priority, name))
        if not usable:
            rows = "; ".join(f"{s.device}: {s.status} ({s.reason})" for s in self.status())
            raise PluginError(f"no usable device: {rows or 'no backends installed'}. Run `uops devices` for details.")
        self._default = min(usable)[2]
        return self._default

    def register(self, backend: Backend, *, replace: bool = False) -> None:
        """See `register_backend`."""
        if not isinstance(backend, Backend):
            raise TypeError(f"register_backend() takes a uops.plugins.Backend, not {type(backend).__name__}")
        name = _canonical(backend.device)
        with self._lock:
            records = self._discover()
            if name in records and not replace:
                raise PluginError(
                    f"device {name} is already provided by {records[name].who()}; "
                    f"pass replace=True to register_backend() to override it"
                )
            self._registered[name] = backend
            records[name] = _Record(device=name, module="<register_backend>", registered=backend)
            self._handles.pop(name, None)
            self._default = None

    def unregister(self, device: str) -> None:
        """Undo `register_backend`: a plugin it replaced comes back; other devices keep their state."""
        name = _canonical(device)
        with self._lock:
            if self._registered.pop(name, None) is None:
                raise PluginError(f"device {name} was not added with register_backend(); nothing to unregister")
            self._handles.pop(name, None)
            self._default = None
            saved, self._records = self._records, None
            fresh = self._discover()
            for n, rec in (saved or {}).items():
                if n != name:
                    fresh[n] = rec


def _canonical(device: str) -> str:
    return device.strip().upper()


class _ImportFailed(Exception):
    pass


class _HookMissing(Exception):
    pass


class DeviceHandle:
    """A usable device: its backend and lazily created renderer, compiler and runtime."""

    def __init__(self, rec: _Record) -> None:
        assert rec.backend is not None
        self._rec = rec
        self.name: str = rec.device
        self.backend: Backend = rec.backend
        self.compile_reason: str | None = rec.compile_reason  # None: this machine can compile for the device
        self.runtime_reason: str | None = rec.runtime_reason  # None: this machine can run on the device
        self._targets: dict[str | None, tuple[Renderer, Compiler]] = {}
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"<DeviceHandle {self.name} from {self._rec.who()}>"

    @property
    def targets(self) -> tuple[str, ...]:
        """Known compile architectures, the default first."""
        return self.backend.targets

    def _make(self, what: str, factory: Callable[[], Any]) -> Any:
        try:
            return factory()
        except PluginError:
            raise
        except Exception as e:
            raise PluginError(
                f"{self._rec.who()} failed to create its {what}: {type(e).__name__}: {e}. "
                f"Upgrade or reinstall the plugin, or choose another device."
            ) from e

    def _need_compile(self) -> None:
        if self.compile_reason is not None:
            raise PluginError(f"{self.name} cannot compile on this machine: {self.compile_reason}")

    @cached_property
    def renderer(self) -> Renderer:
        """The renderer for the default target (rendering needs no toolchain)."""
        return self._make("renderer", lambda: self.backend.renderer(None))

    @cached_property
    def compiler(self) -> Compiler:
        """The compiler for the default target; raises PluginError when the toolchain is missing."""
        self._need_compile()
        return self._make("compiler", lambda: self.backend.compiler(None))

    @cached_property
    def runtime(self) -> Runtime:
        """The runtime; raises PluginError when the hardware or driver is missing."""
        if self.runtime_reason is not None:
            raise PluginError(f"{self.name} cannot run on this machine: {self.runtime_reason}")
        return self._make("runtime", self.backend.runtime)

    @property
    def allocator(self) -> Allocator:
        """The runtime's allocator."""
        return self.runtime.allocator

    def target(self, arch: str | None = None) -> tuple[Renderer, Compiler]:
        """A (renderer, compiler) pair for `arch`: cross-compiling, without the hardware."""
        with self._lock:
            pair = self._targets.get(arch)
            if pair is None:
                self._need_compile()
                pair = (
                    self._make(f"renderer for target {arch!r}", lambda: self.backend.renderer(arch)),
                    self._make(f"compiler for target {arch!r}", lambda: self.backend.compiler(arch)),
                )
                self._targets[arch] = pair
            return pair


Device = _Registry()


def register_backend(backend: Backend, *, replace: bool = False) -> None:
    """Register a backend at run time, without packaging (tests, experiments).

    Raises PluginError if the device already exists, unless `replace` is true.
    """
    Device.register(backend, replace=replace)


def unregister_backend(device: str) -> None:
    """Undo `register_backend` (for tests)."""
    Device.unregister(device)
