"""The root of every public uops error.

Why a root: a caller can catch everything uops raises on purpose with one ``except UopsError``
while each error keeps its builtin base (a bad argument stays a ``ValueError``), so code that
catches builtins keeps working.
"""


class UopsError(Exception):
    """Raised by uops on purpose: each subclass names the op, shape, device or plugin at fault."""


__all__ = ["UopsError"]
