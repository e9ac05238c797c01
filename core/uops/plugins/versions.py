"""Version specifiers, a small PEP 440 subset, so the core checks plugins' API ranges without `packaging`.

A plugin's requirement on `uops` (its Requires-Dist) is the core API range it supports.
"""

from __future__ import annotations

from uops.errors import UopsError

TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


class SpecifierError(UopsError, ValueError):
    """A version or a version specifier that cannot be parsed."""


# patterns are compiled on first use (by re's own cache): listing devices never needs them
_VERSION_RE = r"""^\s*v?
    (?:(?P<epoch>\d+)!)?
    (?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>a|b|c|rc|alpha|beta|pre|preview)[-_.]?(?P<pre_n>\d+)?)?
    (?:-(?P<post_n1>\d+)|[-_.]?(?:post|rev|r)[-_.]?(?P<post_n2>\d+)?(?P<post_l>))?
    (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$"""
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_CLAUSE_RE = r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*([^\s,;]+)\s*$"


class _Version:
    """A parsed version (a plain class: a NamedTuple costs a compile at every start, for a rarely used type)."""

    __slots__ = ("epoch", "release", "pre", "post", "dev")

    def __init__(
        self, epoch: int, release: tuple[int, ...], pre: tuple[int, int] | None, post: int | None, dev: int | None
    ) -> None:
        self.epoch, self.release, self.pre, self.post, self.dev = epoch, release, pre, post, dev

    @staticmethod
    def parse(text: str) -> _Version:
        import re  # only plain versions are common: listing and choosing a device do without re

        m = re.match(_VERSION_RE, text, re.IGNORECASE | re.VERBOSE)
        if m is None:
            raise SpecifierError(f"{text!r} is not a PEP 440 version")
        pre = None
        if m["pre_l"]:
            pre = (_PRE_RANK[m["pre_l"].lower()], int(m["pre_n"] or 0))
        post = None
        if m["post_n1"] is not None:
            post = int(m["post_n1"])
        elif m["post_l"] is not None:
            post = int(m["post_n2"] or 0)
        dev = int(m["dev_n"] or 0) if m["dev_l"] else None
        return _Version(int(m["epoch"] or 0), tuple(int(p) for p in m["release"].split(".")), pre, post, dev)

    @property
    def is_pre(self) -> bool:
        return self.pre is not None or self.dev is not None

    def key(self) -> tuple[Any, ...]:
        rel = list(self.release)
        while len(rel) > 1 and rel[-1] == 0:
            rel.pop()
        # ordering as in PEP 440: X.devN < X.aN < X.bN < X.rcN < X < X.postN
        pre: tuple[int, ...] = (
            (-1,)
            if self.pre is None and self.post is None and self.dev is not None
            else (1,)
            if self.pre is None
            else (0, *self.pre)
        )
        post: tuple[int, ...] = (-1,) if self.post is None else (0, self.post)
        dev: tuple[int, ...] = (1,) if self.dev is None else (0, self.dev)
        return (self.epoch, tuple(rel), pre, post, dev)


def _prefix_match(version: _Version, prefix: str) -> bool:
    want = _Version.parse(prefix)
    if want.pre is not None or want.post is not None or want.dev is not None:
        raise SpecifierError(f"'{prefix}.*': a wildcard prefix must be a plain release like 0.1")
    rel = version.release + (0,) * max(0, len(want.release) - len(version.release))
    return version.epoch == want.epoch and rel[: len(want.release)] == want.release


def _clause_contains(op: str, spec: str, v: _Version, raw: str) -> bool:
    if op == "===":
        return raw.strip().lower() == spec.lower()
    if op in ("==", "!=") and spec.endswith(".*"):
        hit = _prefix_match(v, spec[:-2])
        return hit if op == "==" else not hit
    s = _Version.parse(spec)
    if op in ("==", "!="):
        # a local label (+xyz) on the candidate is ignored when the specifier has none
        hit = v.key() == s.key()
        return hit if op == "==" else not hit
    if op == ">=":
        return v.key() >= s.key()
    if op == "<=":
        return v.key() <= s.key()
    if op == "<":
        # `<0.2` does not admit 0.2.dev1 / 0.2rc1 (pre-releases of the excluded version)
        same_base = (
            _Version(v.epoch, v.release, None, None, None).key() == _Version(s.epoch, s.release, None, None, None).key()
        )
        return v.key() < s.key() and not (v.is_pre and not s.is_pre and same_base)
    if op == ">":
        same_base = (
            _Version(v.epoch, v.release, None, None, None).key() == _Version(s.epoch, s.release, None, None, None).key()
        )
        return v.key() > s.key() and not (v.post is not None and s.post is None and same_base)
    if op == "~=":
        if len(s.release) < 2:
            raise SpecifierError(f"'~={spec}': a compatible-release clause needs at least two components (like ~=0.1)")
        prefix = ".".join(str(p) for p in s.release[:-1])
        return v.key() >= s.key() and _prefix_match(v, prefix)
    raise SpecifierError(f"unknown operator {op!r}")  # pragma: no cover - the regex admits only the above


_PLAIN_OPS = (">=", "<=", "==", "!=", "<", ">")


def _plain_release(text: str) -> tuple[int, ...] | None:
    """``"0.1.0"`` -> ``(0, 1)`` (trailing zeros dropped); None unless the text is digits and dots only."""
    parts = text.strip().split(".")
    if not all(p.isascii() and p.isdigit() for p in parts):
        return None
    rel = [int(p) for p in parts]
    while len(rel) > 1 and rel[-1] == 0:
        rel.pop()
    return tuple(rel)


def _plain_contains(specifier: str, version: str) -> bool | None:
    """The answer for plain releases and plain comparisons (the common ``>=0.1,<0.2``) without the
    regular expressions, whose compilation costs more than the rest of choosing a device; None: use the full parser.
    """
    v = _plain_release(version)
    if v is None:
        return None
    for clause in specifier.split(","):
        clause = clause.strip()
        if not clause:
            continue
        op = next((o for o in _PLAIN_OPS if clause.startswith(o)), None)
        if op is None or clause.startswith(("===", "~=")):
            return None
        s = _plain_release(clause[len(op) :])
        if s is None:
            return None
        ok = {">=": v >= s, "<=": v <= s, "==": v == s, "!=": v != s, "<": v < s, ">": v > s}[op]
        if not ok:
            return False
    return True


def specifier_contains(specifier: str, version: str) -> bool:
    """Whether `version` satisfies `specifier` (e.g. ``">=0.1,<0.2"``, ``"~=0.1"``, ``"==0.1.*"``).

    Supports ``~= == != <= >= < > ===`` and ``.*`` wildcards. Pre-releases of the candidate are
    admitted (a development core must still load plugins), except that ``<X`` excludes X's own
    pre-releases. An empty specifier admits everything.
    """
    plain = _plain_contains(specifier, version)
    return plain if plain is not None else _parsed_contains(specifier, version)


def _parsed_contains(specifier: str, version: str) -> bool:
    v = _Version.parse(version)
    clauses = [c for c in specifier.split(",") if c.strip()]
    import re

    for clause in clauses:
        m = re.match(_CLAUSE_RE, clause)
        if m is None:
            raise SpecifierError(f"{clause.strip()!r} is not a version clause like '>=0.1'")
        if not _clause_contains(m[1], m[2], v, version):
            return False
    return True


def normalize_dist(name: str) -> str:
    """A distribution name as PEP 503 compares them: lower case, runs of ``-_.`` as one ``-``."""
    out = name.lower().replace("_", "-").replace(".", "-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


def _split_requirement(req: str) -> tuple[str, str, str | None] | None:
    """``"uops[x] >=0.1 ; python_version >= '3.11'"`` -> ``("uops", ">=0.1", " python_version >= '3.11'")``."""
    text = req.strip()
    end = 0
    while end < len(text) and (text[end].isalnum() or text[end] in "._-"):
        end += 1
    name, rest = text[:end], text[end:]
    if not name or not name[0].isalnum():
        return None
    rest, semi, marker = rest.partition(";")
    rest = rest.strip()
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            return None
        rest = rest[close + 1 :].strip()
    return name, rest, marker if semi else None


def uops_range(requires: Iterable[str] | None) -> str | None:
    """The version range a distribution requires of `uops` (None when it declares none)."""
    for req in requires or ():
        parts = _split_requirement(req)
        if parts is None or normalize_dist(parts[0]) != "uops":
            continue
        if parts[2] and "extra" in parts[2]:
            continue  # a requirement of an optional extra, not of the plugin itself
        spec = parts[1]
        if spec.startswith("@"):
            return ""  # a direct URL: no version range to check
        return spec.removeprefix("(").removesuffix(")").strip()
    return None
