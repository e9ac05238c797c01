"""The registry: every known device, its plugin's API-range check, lazy loading, quarantine, default policy.

Why this shape: a backend ships as its own pip distribution, released on its own schedule.
The registry finds it through the entry-point group ``uops.backends`` (`discovery`), checks the
distribution's requirement on ``uops`` against this core's version, and imports the plugin the
first time its device is used. A plugin that fails in any way is quarantined with a
plain-words reason; every other backend keeps working.

Environment:
  UOPS_DEVICE=NAME           the device `Device.DEFAULT` names
  UOPS_STRICT_PLUGINS=1      a broken or incompatible plugin is a hard error (for CI)
  UOPS_DISABLE_PLUGINS=a,b   skip plugins, by entry-point (device) name or distribution name;
                             a disabled plugin's module and metadata are never read
"""

from __future__ import annotations

import _thread  # threading's RLock without importing threading (~1 ms at every start)
import os
import sys
import types

from uops.plugins.api import LEGACY_API, api_mismatch, format_api
from uops.plugins.backend import BACKENDS_HOOK, HOOKIMPL_ATTR, Backend, FrozenValue, PluginError, hookimpl
from uops.plugins.discovery import ENTRY_POINT_GROUP, DistMetadata, EntryPoint, entry_points
from uops.plugins.versions import SpecifierError, normalize_dist, specifier_contains, uops_range
from uops.version import PLUGIN_API
from uops.version import __version__ as _core_version

TYPE_CHECKING = False  # typing is not imported at run time (nor pluggy: see `_plugin_manager`)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from uops.plugins.hooks import HookManager

__all__ = ["PluginStatus", "Registry", "canonical_device", "plain_backend_hooks"]

#: Built-in backends, registered through the same hook path as installed plugins.
_BUILTINS = {"PYTHON": "uops.backends.python"}


def canonical_device(device: str) -> str:
    """The one spelling of a device name: ``" cpu "`` -> ``"CPU"``."""
    return device.strip().upper()


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


class PluginStatus(FrozenValue):
    """What is installed for a device, and whether it works (one row of `uops devices`)."""

    __slots__ = (
        "device", "module", "distribution", "version", "api_range", "status", "reason", "fix", "targets",
        "compile_ok", "compile_reason", "runtime_ok", "runtime_reason", "priority", "builtin", "compile_needs_runtime",
    )  # fmt: skip

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
    compile_needs_runtime: bool | None  # its compiler runs inside its runtime (no cross-compiling); None: not loaded

    def __init__(
        self, *, device: str, module: str, distribution: str | None, version: str | None, api_range: str | None,
        status: str, reason: str | None, fix: str | None, targets: tuple[str, ...], compile_ok: bool | None,
        compile_reason: str | None, runtime_ok: bool | None, runtime_reason: str | None, priority: int | None,
        builtin: bool, compile_needs_runtime: bool | None = None,
    ) -> None:  # fmt: skip
        self._set((
            device, module, distribution, version, api_range, status, reason, fix, targets, compile_ok,
            compile_reason, runtime_ok, runtime_reason, priority, builtin, compile_needs_runtime,
        ))  # fmt: skip


class _Record:
    """What the registry knows about one device name (mutable; guarded by the registry lock)."""

    __slots__ = (
        "device", "module", "entry_point", "builtin", "registered", "conflicts", "state", "reason", "fix", "error",
        "meta_read", "distribution", "version", "api_range", "backend", "compile_reason", "runtime_reason",
        "runtime_probed",
    )  # fmt: skip

    def __init__(
        self, device: str, module: str, entry_point: EntryPoint | None = None, builtin: bool = False,
        registered: Backend | None = None,
    ) -> None:  # fmt: skip
        self.device = device
        self.module = module
        self.entry_point = entry_point  # None for built-ins and registered backends
        self.builtin = builtin
        self.registered = registered  # from register_backend()
        self.conflicts: list[_Record] = []  # more enabled providers of the same device
        # discovered -> hooked (backend known, not probed) -> ok | unavailable; or incompatible | broken | disabled
        self.state = "discovered"
        self.reason: str | None = None
        self.fix: str | None = None
        self.error: BaseException | None = None
        self.meta_read = False
        self.distribution: str | None = None
        self.version: str | None = None
        self.api_range: str | None = None
        self.backend: Backend | None = None
        self.compile_reason: str | None = None
        self.runtime_reason: str | None = None
        self.runtime_probed = False  # Device.DEFAULT runs the runtime probe alone first

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
        probed = self.backend is not None and self.state in ("ok", "unavailable")
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
            compile_ok=(self.compile_reason is None) if probed else None,
            compile_reason=self.compile_reason,
            runtime_ok=(self.runtime_reason is None) if probed else None,
            runtime_reason=self.runtime_reason,
            priority=self.backend.priority if self.backend else None,
            builtin=self.builtin,
            compile_needs_runtime=self.backend.compile_needs_runtime if self.backend else None,
        )


class _ImportFailed(Exception):
    pass


class _HookMissing(Exception):
    pass


#: the options `hookimpl` leaves when given none, less ``specname``
_PLAIN_HOOKIMPL = {k: v for k, v in getattr(hookimpl(lambda: None), HOOKIMPL_ATTR).items() if k != "specname"}
_VARARGS_FLAGS = 0x04 | 0x08  # CO_VARARGS | CO_VARKEYWORDS
_MARKABLE = (staticmethod, classmethod, types.MethodType)


def plain_backend_hooks(module: types.ModuleType) -> list[Callable[[], object]] | None:
    """The module's ``uops_backends`` hookimpls when every hookimpl it holds is a plain one, else None.

    Plain: one function named ``uops_backends`` (or ``specname``'d so), marked with no other option,
    that takes no arguments. pluggy's PluginManager would register exactly these functions for the
    hook and call them with nothing, so the registry calls them itself and choosing a device does not
    import pluggy (half the start-up budget). Anything else a module marks (a wrapper, an ordering
    option, another hook, a method) returns None: the registry then registers it through pluggy,
    which validates and orders it. The conformance kit checks every plugin both ways.
    """
    hooks: list[Callable[[], object]] = []
    for name, value in module.__dict__.items():
        if type(value) is types.FunctionType:
            opts = value.__dict__.get(HOOKIMPL_ATTR)
            if opts is None:
                continue
            code = value.__code__
            if (
                type(opts) is not dict
                or (opts.get("specname") or name) != BACKENDS_HOOK
                or {k: v for k, v in opts.items() if k != "specname"} != _PLAIN_HOOKIMPL
                or code.co_argcount or code.co_kwonlyargcount or code.co_flags & _VARARGS_FLAGS
            ):  # fmt: skip
                return None
            hooks.append(value)
            if len(hooks) > 1:  # pluggy orders several implementations of one hook
                return None
        elif isinstance(value, _MARKABLE) and getattr(value, "__func__", None) is not None:
            if HOOKIMPL_ATTR in getattr(value.__func__, "__dict__", {}):
                return None
    return hooks


class Registry:
    """All known devices: discovery, loading and quarantine, and the default-device policy.

    `uops.plugins.device.Devices` adds the device handles on top; `Device` is its one instance.
    """

    def __init__(self) -> None:
        self._lock = _thread.RLock()
        self._records: dict[str, _Record] | None = None
        self._module_results: dict[str, list[Backend] | BaseException] = {}
        self._dist_metadata: dict[str, DistMetadata | None] = {}  # by .dist-info path: read once per distribution
        self._registered: dict[str, Backend] = {}
        self._pm: HookManager | None = None
        self._default: str | None = None

    # ----- discovery (entry points only) -----
    def _discover(self) -> dict[str, _Record]:
        if self._records is not None:
            return self._records
        with self._lock:
            if self._records is not None:
                return self._records
            disabled = {d.strip() for d in os.environ.get("UOPS_DISABLE_PLUGINS", "").split(",") if d.strip()}
            candidates = [
                _Record(device=canonical_device(ep.name), module=ep.module, entry_point=ep)
                for ep in entry_points(ENTRY_POINT_GROUP)
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

    @staticmethod
    def _apply_disabled(rec: _Record, disabled: set[str]) -> None:
        """Match by device name, or by the distribution name the entry point's directory carries (no file read)."""
        ep = rec.entry_point
        dist = normalize_dist(ep.dist_name) if ep is not None and ep.dist_name else None
        for d in disabled:
            if canonical_device(d) == rec.device or (dist is not None and normalize_dist(d) == dist):
                rec.state = "disabled"
                rec.reason = "disabled by UOPS_DISABLE_PLUGINS"
                rec.fix = f"remove {d} from UOPS_DISABLE_PLUGINS to use it"
                if ep is not None:
                    rec.distribution, rec.version = dist, ep.dist_version

    def _read_metadata(self, rec: _Record) -> None:
        if rec.meta_read:
            return
        rec.meta_read = True
        if rec.builtin:
            rec.distribution, rec.version = "uops", _core_version
            rec.api_range = f"=={rec.version}"
            return
        ep = rec.entry_point
        if ep is None:
            return
        if ep.dist_path is None:
            meta = ep.metadata()
        else:  # a distribution with several devices (CUDA and CUDA_EMU) has its METADATA read once
            if ep.dist_path not in self._dist_metadata:
                self._dist_metadata[ep.dist_path] = ep.metadata()
            meta = self._dist_metadata[ep.dist_path]
        if meta is None:
            return
        rec.distribution, rec.version = meta.name, meta.version
        rec.api_range = uops_range(meta.requires)

    def names(self) -> list[str]:
        """Device names of every installed, non-disabled backend, from entry points alone (imports no plugin)."""
        return sorted(n for n, r in self._discover().items() if r.state != "disabled")

    def refresh(self) -> None:
        """Forget discovery and load results (re-reads metadata and the environment; for tests and tools)."""
        with self._lock:
            self._records = None
            self._module_results.clear()
            self._dist_metadata.clear()
            self._pm = None
            self._default = None

    # ----- loading -----
    def _plugin_manager(self) -> HookManager:
        if self._pm is None:
            from uops.plugins.hooks import HookManager  # pluggy loads with the first hook called, not to list devices

            self._pm = HookManager()
        return self._pm

    def _quarantine(self, rec: _Record, state: str, reason: str, fix: str, error: BaseException | None = None) -> None:
        rec.state, rec.reason, rec.fix, rec.error = state, reason, fix, error
        if _env_flag("UOPS_STRICT_PLUGINS"):
            raise PluginError(f"{rec.message()} (UOPS_STRICT_PLUGINS=1 makes this an error.)") from error

    def _load(self, rec: _Record) -> None:
        """Hook and probe: the record ends ok, unavailable, incompatible or broken."""
        self._hook(rec)
        self._probe(rec)

    def _hook(self, rec: _Record) -> None:
        """Metadata, API range, import and hook: the record gets its Backend (state `hooked`) or is quarantined."""
        if rec.state != "discovered":
            return
        with self._lock:
            if rec.state != "discovered":
                return
            backend = rec.registered if rec.registered is not None else self._hook_locked(rec)
            if backend is not None:
                rec.backend, rec.state = backend, "hooked"

    def _hook_locked(self, rec: _Record) -> Backend | None:
        try:
            self._read_metadata(rec)
        except Exception as e:
            self._quarantine(
                rec, "broken", f"its installed metadata cannot be read ({type(e).__name__}: {e})",
                f"reinstall it or disable it with UOPS_DISABLE_PLUGINS={rec.device}", e,
            )  # fmt: skip
            return None
        if rec.conflicts:
            for other in rec.conflicts:
                self._read_metadata(other)
            dists = [r.distribution or r.module for r in rec.conflicts if not r.builtin]
            names = ", ".join(f"{r.distribution} {r.version} (module {r.module})" for r in [rec, *rec.conflicts])
            self._quarantine(
                rec, "broken", f"more than one installed plugin provides {rec.device}: {names}",
                f"uninstall all but one (pip uninstall {' '.join(dists)}) or disable the others by distribution "
                f"name (UOPS_DISABLE_PLUGINS={','.join(dists)})",
            )  # fmt: skip
            return None
        if not self._check_api(rec):
            return None
        return self._call_hook(rec)

    def _probe(self, rec: _Record, runtime_only: bool = False) -> None:
        """Both probes (the record ends ok or unavailable), or with `runtime_only` the runtime probe alone
        (the record stays hooked: a device that cannot run is passed over without its compile probe)."""
        if rec.state != "hooked":
            return
        with self._lock:
            if rec.state != "hooked":
                return
            self._probe_locked(rec, runtime_only)

    def _probe_locked(self, rec: _Record, runtime_only: bool) -> None:
        backend = rec.backend
        assert backend is not None
        disable_hint = f"or disable it with UOPS_DISABLE_PLUGINS={rec.device}"
        for which in ("runtime",) if runtime_only else ("runtime", "compile"):
            if which == "runtime" and rec.runtime_probed:
                continue
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
                rec.runtime_reason, rec.runtime_probed = result, True
        if runtime_only:
            return
        if backend.compile_needs_runtime and rec.runtime_reason is not None and rec.compile_reason is None:
            rec.compile_reason = (
                f"its compiler runs inside the {rec.device} runtime (the backend declares compile_needs_runtime), "
                f"so it cannot cross-compile where the runtime cannot run: {rec.runtime_reason}"
            )
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
        dist = rec.distribution or rec.module
        try:
            fits = specifier_contains(rec.api_range, _core_version)
        except SpecifierError as e:
            self._quarantine(
                rec, "broken", f"its requirement on uops ({rec.api_range!r}) cannot be parsed: {e}",
                f"report this to the plugin's authors; upgrade it (pip install -U {dist}) or disable it with "
                f"UOPS_DISABLE_PLUGINS={rec.device}", e,
            )  # fmt: skip
            return False
        if not fits:
            self._quarantine(
                rec, "incompatible",
                f"{dist} {rec.version} supports uops {rec.api_range} but this is uops {_core_version}",
                f'Install a {dist} release made for uops {_core_version} (pip install -U {dist}), or a uops it '
                f'supports (pip install "uops{rec.api_range}")',
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
            if isinstance(b, Backend) and canonical_device(b.device) == rec.device:
                mismatch = None if rec.builtin else api_mismatch(b.plugin_api, dist)
                if mismatch is None and not rec.builtin and (b.plugin_api or LEGACY_API) < PLUGIN_API:
                    mismatch = self._removed_names(rec, b)
                if mismatch is not None:
                    self._quarantine(rec, "incompatible", *mismatch)
                    return None
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

    @staticmethod
    def _removed_names(rec: _Record, backend: Backend) -> tuple[str, str] | None:
        """A plugin built for an older API that imports a name this core removed is refused here, at discovery,
        with what replaces the name, rather than failing when its runtime module loads at the first kernel."""
        from uops.plugins.imports import package_files, removed_names_used  # ast: only for plugins of an older API

        used = removed_names_used(package_files(rec.module))
        if not used:
            return None
        dist = rec.distribution or rec.module
        built = format_api(backend.plugin_api or LEGACY_API)
        return (
            f"built for plugin API {built}, it uses a name this core removed: " + "; ".join(used),
            f"upgrade it (pip install -U {dist}), or disable it with UOPS_DISABLE_PLUGINS={rec.device}",
        )

    def _run_module_hook(self, module_name: str) -> list[Backend] | BaseException:
        try:
            __import__(module_name)  # not importlib.import_module: the importlib package costs a millisecond
            module = sys.modules[module_name]
        except Exception as e:
            err = _ImportFailed(module_name)
            err.__cause__ = e
            return err
        try:
            hooks = plain_backend_hooks(module)
            if hooks is None:
                outs = self._call_through_pluggy(module, module_name)
                if outs is None:
                    return _HookMissing(f"{module_name} implements no uops_backends() hook")
            elif not hooks:
                return _HookMissing(f"{module_name} implements no uops_backends() hook")
            else:
                outs = [hook() for hook in hooks]
            backends: list[Backend] = []
            for out in outs:
                if not isinstance(out, (list, tuple)):
                    return TypeError(f"uops_backends() returned {type(out).__name__}, not a list of Backend")
                backends.extend(out)
            return backends
        except Exception as e:
            return e

    def _call_through_pluggy(self, module: types.ModuleType, module_name: str) -> list[object] | None:
        """The results of the module's hook implementations called by pluggy (None: it has none).

        pluggy validates them, orders them (``tryfirst`` first, ``trylast`` last) and runs wrappers
        (``wrapper=True`` and the old ``hookwrapper=True``) around them. Only this module's implementations
        take part: another plugin's hook never runs for, or wraps, this one."""
        pm = self._plugin_manager()
        if not pm.is_registered(module):
            pm.register(module, name=module_name)
        others = [p for p in pm.get_plugins() if p is not module]
        caller = pm.subset_hook_caller(BACKENDS_HOOK, remove_plugins=others)
        if not caller.get_hookimpls():
            return None
        outs: list[object] = caller()
        return outs

    def _record(self, device: str) -> _Record:
        name = canonical_device(device)
        rec = self._discover().get(name)
        if rec is None:
            known = ", ".join(self.names()) or "none"
            raise PluginError(
                f"unknown device {device!r}; installed devices: {known}. A device comes from a plugin package "
                f"(e.g. pip install uops-cpu-clang for CPU); `uops devices` shows what is installed and why not."
            )
        return rec

    def _usable(self, device: str) -> _Record:
        """The loaded and probed record of `device`; raises PluginError naming why it is unusable."""
        rec = self._record(device)
        self._load(rec)
        if rec.backend is None:
            raise PluginError(rec.message()) from rec.error
        return rec

    # ----- public API -----
    def __contains__(self, device: object) -> bool:
        return isinstance(device, str) and canonical_device(device) in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def errors(self) -> dict[str, BaseException]:
        """The exception behind each quarantined plugin (import, hook or probe failure), by device.

        `status` gives the reason in words; this keeps the traceback for `uops --debug devices`.
        Call it after `status` (which loads every plugin).
        """
        return {name: rec.error for name, rec in sorted(self._discover().items()) if rec.error is not None}

    def status(self) -> list[PluginStatus]:
        """Load and probe every discovered backend; one row each, for `uops devices`."""
        rows = []
        for _name, rec in sorted(self._discover().items()):
            if rec.state != "disabled":
                self._load(rec)
            rows.append(rec.status())
        return rows

    @property
    def DEFAULT(self) -> str:  # noqa: N802 - the established name
        """UOPS_DEVICE if set, else the usable device with the highest priority (PYTHON last).

        Every enabled plugin's hook is called (cheap: the hook module imports nothing heavy), but
        only the probes of devices above the winner run (of one that cannot run here, only its runtime
        probe), and PYTHON is loaded only when nothing else works.
        """
        env = os.environ.get("UOPS_DEVICE", "").strip()
        if env:
            return self._usable(env).device
        if self._default is not None:
            return self._default
        records = [(n, r) for n, r in self._discover().items() if r.state != "disabled"]
        ranked: list[tuple[bool, int, str, _Record]] = []
        for name, rec in records:
            if name in _BUILTINS:
                ranked.append((True, 0, name, rec))
                continue
            self._hook(rec)
            if rec.backend is not None:
                ranked.append((False, -rec.backend.priority, name, rec))
        for _last, _prio, name, rec in sorted(ranked, key=lambda t: t[:3]):
            self._hook(rec)
            self._probe(rec, runtime_only=True)  # no GPU here: its compile probe is not needed to pass it over
            if rec.runtime_reason is None:
                self._probe(rec)
            if rec.state == "ok":
                self._default = name
                return name
        rows = "; ".join(f"{s.device}: {s.status} ({s.reason})" for s in self.status())
        raise PluginError(f"no usable device: {rows or 'no backends installed'}. Run `uops devices` for details.")

    def register(self, backend: Backend, *, replace: bool = False) -> None:
        """See `register_backend`."""
        if not isinstance(backend, Backend):
            raise TypeError(f"register_backend() takes a uops.plugins.Backend, not {type(backend).__name__}")
        name = canonical_device(backend.device)
        with self._lock:
            records = self._discover()
            if name in records and not replace:
                raise PluginError(
                    f"device {name} is already provided by {records[name].who()}; "
                    f"pass replace=True to register_backend() to override it"
                )
            self._registered[name] = backend
            records[name] = _Record(device=name, module="<register_backend>", registered=backend)
            self._forget(name)

    def unregister(self, device: str) -> None:
        """Undo `register_backend`: a plugin it replaced comes back; other devices keep their state."""
        name = canonical_device(device)
        with self._lock:
            if self._registered.pop(name, None) is None:
                raise PluginError(f"device {name} was not added with register_backend(); nothing to unregister")
            self._forget(name)
            saved, self._records = self._records, None
            fresh = self._discover()
            for n, rec in (saved or {}).items():
                if n != name:
                    fresh[n] = rec

    def _forget(self, name: str) -> None:
        """A device's provider changed: drop what was derived from the old one."""
        self._default = None
