"""Deprecated: uops 0.1's path of what is now `uops.ir.ops`: import from `uops.plugin` (CHANGELOG.md)."""

from uops.plugins.aliases import alias_getattr

__getattr__ = alias_getattr(__name__)
