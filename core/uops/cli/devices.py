"""`uops devices`: the registry's status rows as plain data (``--json``) and as a table."""

from __future__ import annotations

from typing import Any

from uops.plugins import PluginStatus

__all__ = ["row_dict", "table_lines"]

_REASON_MAX = 160


def row_dict(row: PluginStatus) -> dict[str, Any]:
    """One row as plain data for ``uops devices --json`` (targets as a list)."""
    out = row._asdict()
    out["targets"] = list(row.targets)
    return out


def _status_text(row: dict[str, Any], verbose: bool) -> str:
    """The status and its reason; in the table, the reason's first line, shortened (the rest: -v or --json)."""
    status, reason = str(row["status"]), str(row["reason"] or "")
    if status == "ok" or not reason:
        return status
    if not verbose:
        first = reason.strip().splitlines()[0] if reason.strip() else reason
        cut = len(first) > _REASON_MAX or first != reason.strip()
        reason = (first[:_REASON_MAX].rstrip() + " ...") if cut else first
    return f"{status}: {reason}"


def _yes_no(ok: object) -> str:
    return "-" if ok is None else "yes" if ok else "no"


def _targets_text(targets: object, limit: int = 4) -> str:
    if not isinstance(targets, list) or not targets:
        return "-"
    shown = ",".join(targets[:limit])
    return shown if len(targets) <= limit else f"{shown},+{len(targets) - limit} more"


def table_lines(rows: list[dict[str, Any]], verbose: bool) -> list[str]:
    """The aligned table, then one line per fix of a device that is not ok."""
    table = [("DEVICE", "PLUGIN", "API", "TARGETS", "COMPILE", "RUN", "STATUS")]
    for r in rows:
        plugin = f"{r['distribution'] or r['module']} {r['version'] or ''}".strip()
        api = "(undeclared)" if r["api_range"] is None else str(r["api_range"]) or "any"
        if r["status"] == "disabled":
            api = "-"  # a disabled plugin's metadata is not read
        compiles = _yes_no(r["compile_ok"]) + (" (on the device)" if r.get("compile_needs_runtime") else "")
        cells = (str(r["device"]), plugin, api, _targets_text(r["targets"]), compiles)
        table.append((*cells, _yes_no(r["runtime_ok"]), _status_text(r, verbose)))
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)) + "  " + line[-1] for line in table]
    lines += [f"  {r['device']}: {r['fix']}" for r in rows if r["status"] != "ok" and r["fix"]]
    return lines
