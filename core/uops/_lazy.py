"""Module attributes imported on first use: how ``uops``, ``uops.plugins`` and ``uops.plugin`` stay cheap
to import while naming everything they export."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: this loads with ``import uops``
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def lazy_attributes(
    module: str, namespace: dict[str, Any], table: dict[str, str], hint: str = ""
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for ``table`` (public name -> the module defining it)."""

    def getattr_(name: str) -> object:
        source = table.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}{hint}")
        value = getattr(__import__(source, fromlist=(name,)), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *table})

    return getattr_, dir_
