"""Entry-point discovery and distribution metadata, read from the installed files without importing plugins.

Why by hand: ``importlib.metadata`` (and the ``email``/``csv``/``zipfile`` modules it pulls in)
costs ~20 ms, more than everything else that choosing a device does. The common case, plain
directories on ``sys.path`` searched by the standard path finder, is read directly: the same
``entry_points.txt`` files in the same order with the same first-wins rule per distribution,
and a plugin's ``METADATA`` (Name, Version, Requires-Dist) parsed line by line, only when the
plugin is loaded. Zip files, eggs and custom finders go through ``importlib.metadata``.
"""

from __future__ import annotations

import os
import sys

from uops.plugins.backend import FrozenValue
from uops.plugins.versions import normalize_dist

TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ENTRY_POINT_GROUP", "DistMetadata", "EntryPoint", "entry_points", "parse_metadata", "scan_sys_path"]

ENTRY_POINT_GROUP = "uops.backends"


class DistMetadata(FrozenValue):
    """What the registry needs of a distribution: its name, version and requirements."""

    __slots__ = ("name", "version", "requires")

    name: str | None
    version: str | None
    requires: tuple[str, ...]

    def __init__(self, name: str | None, version: str | None, requires: list[str] | tuple[str, ...]) -> None:
        self._set((name, version, tuple(requires)))


class EntryPoint:
    """An entry point and where its distribution's metadata lives (read only when the plugin is loaded).

    ``dist_name``/``dist_version`` come from the ``.dist-info`` directory's name, so a plugin
    disabled by distribution name is matched without opening any of its files. A plain class:
    a NamedTuple costs a compile at every start.
    """

    __slots__ = ("name", "value", "dist_path", "dist", "dist_name", "dist_version")

    def __init__(
        self, name: str, value: str, dist_path: str | None = None, dist: Any = None, dist_name: str | None = None,
        dist_version: str | None = None,
    ) -> None:  # fmt: skip
        self.name = name
        self.value = value
        self.dist_path = dist_path  # the .dist-info / .egg-info directory (fast scan)
        self.dist = dist  # an importlib.metadata.Distribution (fallback scan)
        self.dist_name = dist_name
        self.dist_version = dist_version

    def __repr__(self) -> str:
        return f"EntryPoint({self.name!r}, {self.value!r}, dist_path={self.dist_path!r})"

    @property
    def module(self) -> str:
        return self.value.split(":")[0].strip()

    def metadata(self) -> DistMetadata | None:
        """Name, version and Requires-Dist of the distribution (None when it is not known)."""
        if self.dist is not None:
            return DistMetadata(self.dist.metadata["Name"] or None, self.dist.version, self.dist.requires or ())
        if self.dist_path is None:
            return None
        if self.dist_path.lower().endswith(".egg-info"):
            meta = parse_metadata(_read_headers(os.path.join(self.dist_path, "PKG-INFO")))
            return DistMetadata(meta.name, meta.version, _egg_requires(self.dist_path))
        return parse_metadata(_read_headers(os.path.join(self.dist_path, "METADATA")))

    def distribution(self) -> Any:
        """The importlib.metadata Distribution (for tools that want the full metadata API)."""
        if self.dist is None and self.dist_path is not None:
            from importlib.metadata import PathDistribution
            from pathlib import Path

            return PathDistribution(Path(self.dist_path))
        return self.dist


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _read_headers(path: str) -> str:
    """The header block of a METADATA / PKG-INFO file: the lines up to the first blank one (not the description)."""
    lines = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                break
            lines.append(line)
    return "".join(lines)


def parse_metadata(text: str) -> DistMetadata:
    """Name, Version and Requires-Dist from the header block of a METADATA / PKG-INFO file (RFC 822 style)."""
    fields: dict[str, list[str]] = {}
    last: list[str] | None = None
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        if line[0] in " \t" and last is not None:
            last[-1] += " " + line.strip()  # a folded continuation line
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        last = fields.setdefault(key.strip().lower(), [])
        last.append(value.strip())
    name, version = fields.get("name", [None])[0], fields.get("version", [None])[0]
    return DistMetadata(name or None, version or None, fields.get("requires-dist", []))


def _egg_requires(path: str) -> list[str]:
    """An .egg-info's requires.txt: the lines before the first [extra] section are the unconditional ones."""
    try:
        text = _read(os.path.join(path, "requires.txt"))
    except OSError:
        return []
    out: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith("["):
            break
        if line.strip():
            out.append(line.strip())
    return out


def entry_points(group: str) -> list[EntryPoint]:
    """Entry points of `group`, as importlib.metadata.entry_points(group=...) finds them."""
    fast = scan_sys_path(group)
    if fast is not None:
        return fast
    from importlib.metadata import entry_points as _importlib_entry_points

    return [
        EntryPoint(ep.name, ep.value, dist=ep.dist, dist_name=ep.dist.name if ep.dist else None)
        for ep in _importlib_entry_points(group=group)
    ]


def scan_sys_path(group: str) -> list[EntryPoint] | None:
    """The fast scan of plain sys.path directories; None when only importlib.metadata can see everything."""
    PathFinder = _path_finder()  # noqa: N806 - the class's own name
    for finder in sys.meta_path:
        if finder is not PathFinder and getattr(finder, "find_distributions", None) is not None:
            return None  # a finder that provides distributions we would not see
    seen: set[str] = set()
    found: list[EntryPoint] = []
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
            stem = child.rpartition(".")[0]
            raw_name, _, rest = stem.partition("-")
            # the distribution's normalized name, as importlib.metadata derives it from the path
            name = normalize_dist(raw_name)
            if name in seen:
                continue
            seen.add(name)
            path = os.path.join(root, child)
            try:
                text = _read(os.path.join(path, "entry_points.txt"))
            except OSError:
                continue
            if f"[{group}]" not in text:
                continue  # most distributions declare other groups only: no need to parse them
            version = rest.partition("-")[0] or None
            found += [
                EntryPoint(n, v, dist_path=path, dist_name=raw_name, dist_version=version)
                for n, v in parse_entry_points(text, group)
            ]
    return found


def _path_finder() -> type:
    """``importlib.machinery.PathFinder``, taken from the import system's own frozen module when it is there:
    importing the ``importlib`` package costs ~3 ms where nothing else needs it (a regular install)."""
    external = sys.modules.get("_frozen_importlib_external")
    finder = getattr(external, "PathFinder", None)
    if isinstance(finder, type):
        return finder
    from importlib.machinery import PathFinder

    return PathFinder


def parse_entry_points(text: str, group: str) -> list[tuple[str, str]]:
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
