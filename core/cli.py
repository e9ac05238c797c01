"""The `uops` command: `uops devices`, and (filled in by their owners) `demo`, `compile`, `bench`.

Errors are one plain sentence on stderr and a non-zero exit; `--debug` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable, Sequence

import uops

EXIT_OK, EXIT_ERROR, EXIT_UNAVAILABLE = 0, 1, 2


# ---------------------------------------------------------------------------------------------
# uops devices
# ---------------------------------------------------------------------------------------------


_REASON_MAX = 160


def _status_text(row: dict[str, object], verbose: bool) -> str:
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


def cmd_devices(args: argparse.Namespace) -> int:
    """Every discovered backend: plugin, API range, status (and why not ok), targets, runtime."""
    from uops.plugins import Device

    rows = [s.as_dict() for s in Device.status()]
    if args.json:
        print(json.dumps({"uops_version": uops.__version__, "backends": rows}, indent=2))
        return EXIT_OK
    table = [("DEVICE", "PLUGIN", "API", "TARGETS", "COMPILE", "RUN", "STATUS")]
    for r in rows:
        plugin = f"{r['distribution'] or r['module']} {r['version'] or ''}".strip()
        api = "(undeclared)" if r["api_range"] is None else str(r["api_range"]) or "any"
        cells = (str(r["device"]), plugin, api, _targets_text(r["targets"]), _yes_no(r["compile_ok"]))
        table.append((*cells, _yes_no(r["runtime_ok"]), _status_text(r, args.verbose)))
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]) - 1)]
    print(f"uops {uops.__version__}")
    for line in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)) + "  " + line[-1])
    fixes = [(r["device"], r["fix"]) for r in rows if r["status"] != "ok" and r["fix"]]
    for device, fix in fixes:
        print(f"  {device}: {fix}")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# Stubs: owned by other work items; each replaces its function body.
# ---------------------------------------------------------------------------------------------


def _not_yet(name: str) -> Callable[[argparse.Namespace], int]:
    def stub(args: argparse.Namespace) -> int:
        print(f"uops {name}: not yet available in this version of uops", file=sys.stderr)
        return EXIT_UNAVAILABLE

    return stub


cmd_demo = _not_yet("demo")  # STUB: `uops demo` (to be implemented)
cmd_compile = _not_yet("compile")  # STUB: `uops compile --device D "expr" --stages` (to be implemented)
cmd_bench = _not_yet("bench")  # STUB: `uops bench` (to be implemented)


# ---------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (separate from main() so tests and docs can inspect it)."""
    parser = argparse.ArgumentParser(prog="uops", description="uops: a slim tensor compiler with plugin backends")
    parser.add_argument("--version", action="version", version=f"uops {uops.__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("devices", help="list installed backends, whether they work, and why not")
    p.add_argument("--json", action="store_true", help="machine-readable output (full reasons)")
    p.add_argument("-v", "--verbose", action="store_true", help="show reasons in full, not only their first line")
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("demo", help="run a small end-to-end example (not yet available)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("compile", help="compile one kernel and show its stages (not yet available)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_compile)
    p = sub.add_parser("bench", help="benchmarks (not yet available)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_bench)

    for p in sub.choices.values():
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `uops` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return EXIT_UNAVAILABLE
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("uops: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if args.debug:
            traceback.print_exc()
        else:
            lines = str(e).strip().splitlines() or [type(e).__name__]
            more = " (details: rerun with --debug)" if len(lines) > 1 else ""
            print(f"uops {args.command}: error: {lines[0]}{more}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
