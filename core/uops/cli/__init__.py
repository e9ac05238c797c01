"""The `uops` command: `uops devices`, `demo`, `compile`, `bench`, `conformance`, `new-plugin`.

Errors are one plain sentence on stderr and a non-zero exit; `--debug` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import uops
from uops.errors import UopsError

EXIT_OK, EXIT_ERROR, EXIT_UNAVAILABLE = 0, 1, 2


# ---------------------------------------------------------------------------------------------
# uops devices
# ---------------------------------------------------------------------------------------------


def cmd_devices(args: argparse.Namespace) -> int:
    """Every discovered backend: plugin, API range, status (and why not ok), targets, runtime."""
    from uops.cli.devices import row_dict, table_lines
    from uops.plugins import Device

    rows = [row_dict(s) for s in Device.status()]
    if getattr(args, "debug", False):
        for device, error in Device.errors().items():
            print(f"--- {device}: the error that quarantined it ---", file=sys.stderr)
            traceback.print_exception(error, file=sys.stderr)
    if args.json:
        print(json.dumps({"uops_version": uops.__version__, "backends": rows}, indent=2))
        return EXIT_OK
    print(f"uops {uops.__version__}")
    print("\n".join(table_lines(rows, args.verbose)))
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# uops demo / compile / bench
# ---------------------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    """A small real program on every usable device, checked against numpy; exit 1 on a mismatch."""
    from uops.cli import demo
    from uops.plugins import canonical_device

    devices = [canonical_device(d) for d in args.devices.split(",")] if args.devices else None
    return demo.run(devices, stages_device=args.stages_device, show_devices=lambda: cmd_devices(_plain_devices()))


def _plain_devices() -> argparse.Namespace:
    return argparse.Namespace(json=False, verbose=False)


def cmd_compile(args: argparse.Namespace) -> int:
    """Compile an expression (or show a saved ProgramSpec) for a target; never needs the hardware."""
    from uops.cli import compile as compile_cmd
    from uops.plugins import Device

    if args.expr.endswith(".json"):
        if not Path(args.expr).is_file():
            raise FileNotFoundError(f"no saved ProgramSpec at {args.expr} (make one: uops compile EXPR --out FILE)")
        print(compile_cmd.describe_spec_file(Path(args.expr)))
        return EXIT_OK
    shapes = compile_cmd.parse_shapes(args.shape or [])
    default = compile_cmd.parse_shapes([f"default={args.default_shape}"])["default"]
    target = Device[args.device].target(args.arch)
    print(f"compiling {args.expr!r} for {target.device} ({target.renderer.target}) ...", file=sys.stderr)
    results = compile_cmd.compile_expression(args.expr, target, shapes, default, args.dtype, beam=args.beam)
    for i, (spec, stages) in enumerate(results):
        g, loc = spec.launch_dims()
        print(
            f"kernel {i}: {spec.name} on {spec.device} ({spec.target}), global {g}, local {loc}, "
            f"{len(spec.lib)} bytes, ~{spec.estimates.ops} ops, "
            f"{spec.estimates.bytes_read + spec.estimates.bytes_written} bytes moved"
        )
        if args.opts or args.beam:
            print(f"  opts: {spec.opts}")
        if args.stages:
            print(stages)
        if args.out:
            out = Path(args.out if len(results) == 1 else f"{Path(args.out).with_suffix('')}.{i}.json")
            out.write_text(spec.to_json())
            print(f"saved {out}")
    return EXIT_OK


BENCH_SUITES = ("ops", "rewrite", "startup")


class BenchSuitesNotFoundError(UopsError, FileNotFoundError):
    """The bench/ suites are not where `uops bench` looks (they ship with the source, not the wheel)."""


def bench_dir() -> Path:
    """The bench/ suites: ``UOPS_BENCH_DIR`` when set, else ./bench, else the checkout this package runs from."""
    import os

    if env := os.environ.get("UOPS_BENCH_DIR"):
        if (Path(env) / "ops.py").is_file():
            return Path(env)
        raise BenchSuitesNotFoundError(f"UOPS_BENCH_DIR={env} has no bench suites (no ops.py there)")
    # a checkout: <repo>/core/uops/cli/__init__.py -> <repo>/bench (an editable install runs from there)
    for c in (Path("bench"), Path(__file__).resolve().parents[3] / "bench"):
        if (c / "ops.py").is_file():
            return c
    raise BenchSuitesNotFoundError(
        "the bench suites are the bench/ folder of the uops source, which the wheel does not ship: get the source "
        "(a clone of the uops repository or its sdist) and run `uops bench` there, or set UOPS_BENCH_DIR to that "
        "bench/ folder"
    )


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the bench/ suites (each prints its own ratio table) in this interpreter."""
    import subprocess

    suites = args.suites or ["ops", "rewrite"]
    unknown = [s for s in suites if s not in BENCH_SUITES]
    if unknown:
        raise ValueError(f"unknown bench suite(s) {unknown}; choose from {list(BENCH_SUITES)}")
    bench = bench_dir()
    status = EXIT_OK
    for suite in suites:
        extra: list[str] = []
        if suite == "ops":
            extra = [*(["--device", args.device] if args.device else []), *(["--small"] if args.quick else [])]
        elif suite == "rewrite" and args.quick:
            extra = ["--quick"]
        elif suite == "startup" and args.quick:
            extra = ["--runs", "5"]
        print(f"== bench/{suite}.py {' '.join(extra)}".rstrip(), flush=True)
        rc = subprocess.run([sys.executable, str(bench / f"{suite}.py"), *extra], check=False).returncode
        if rc != 0:
            print(f"bench/{suite}.py exited {rc}", file=sys.stderr)
            status = EXIT_ERROR
    return status


def cmd_conformance(args: argparse.Namespace) -> int:
    """The conformance kit on one installed device: exit 0 only when every check passes, 2 when it cannot run."""
    from uops.cli import conformance

    extra = [a for a in args.pytest_args if a != "--list"]
    try:
        rc = conformance.run(args.device, extra, list_only=args.list or len(extra) < len(args.pytest_args))
    except conformance.NotRunnable as e:
        print(f"uops conformance: error: {e}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    return EXIT_OK if rc == 0 else EXIT_ERROR


def cmd_new_plugin(args: argparse.Namespace) -> int:
    """Write a plugin distribution from the shipped template, then say how to build and check it."""
    from uops.cli.new_plugin import PluginNames, write_plugin

    root = write_plugin(args.name, like=args.like, dest=Path(args.dest))
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        print(f"wrote {path}")
    device = PluginNames(args.name).device
    print(f"next: pip install {root} && uops conformance {device}; then adapt it (the uops plugin guide)")
    return EXIT_OK


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

    p = sub.add_parser("demo", help="run an MLP, a softmax and a matmul on every usable device, checked against numpy")
    p.add_argument("--devices", help="comma-separated devices (default: every device that can run)")
    p.add_argument("--stages-device", help="device whose four PROGRAM stages are shown (default: CPU, else the first)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("compile", help="compile a tensor expression for a target and show its stages")
    p.add_argument("expr", metavar="EXPR|FILE", help='an expression like "(a+b).sum()", or a saved ProgramSpec .json')
    p.add_argument("--device", default="CPU", help="target device (hardware not needed; default CPU)")
    p.add_argument("--arch", help="target architecture (e.g. sm_80 for CUDA; default: the device's own or default)")
    p.add_argument("--shape", action="append", metavar="NAME=D0,D1", help="shape of a named input (repeatable)")
    p.add_argument("--default-shape", default="16,16", help="shape of inputs without --shape (default 16,16)")
    p.add_argument("--dtype", default="float32", help="dtype of the inputs (default float32)")
    p.add_argument("--stages", action="store_true", help="print SINK, LINEAR, SOURCE and BINARY of each kernel")
    p.add_argument("--out", help="save the ProgramSpec as JSON (runs later anywhere the runtime is installed)")
    p.add_argument("--opts", action="store_true", help="print the kernel optimizations chosen for each kernel")
    p.add_argument("--beam", type=int, default=0, metavar="N", help="BEAM-search the opts on the device (width N)")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("bench", help="run the bench/ suites (ratios against numpy and tinygrad)")
    p.add_argument("suites", nargs="*", help=f"suites to run: {', '.join(BENCH_SUITES)} (default: ops rewrite)")
    p.add_argument("--device", help="device for the ops suite (default: CPU if available)")
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser(
        "conformance",
        help="run the conformance kit every backend must pass on an installed device (needs uops[testing])",
        description="Run the conformance kit (uops.testing) on DEVICE with pytest; "
        "arguments after DEVICE go to pytest (e.g. -k tensor -x).",
    )
    p.add_argument("device", metavar="DEVICE", help="an installed device (see `uops devices`)")
    p.add_argument("--list", action="store_true", help="list the checks instead of running them")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="passed on to pytest")
    p.set_defaults(func=cmd_conformance)

    p = sub.add_parser("new-plugin", help="write a ready-to-build backend plugin distribution (uops-NAME/)")
    p.add_argument("name", metavar="NAME", help="the device name (an identifier; module uops_NAME, dist uops-NAME)")
    p.add_argument("--like", choices=("cpu", "gpu"), default="cpu", help="cpu: C via the system cc; gpu: GPU-style C")
    p.add_argument("--dest", default=".", metavar="DIR", help="where uops-NAME/ is written (default: here)")
    p.set_defaults(func=cmd_new_plugin)

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
            first, more = error_summary(e)
            hint = " (details: rerun with --debug)" if more else ""
            print(f"uops {args.command}: error: {first}{hint}", file=sys.stderr)
        return EXIT_ERROR


def error_summary(e: BaseException) -> tuple[str, bool]:
    """The one line the CLI shows for an error, and whether --debug would show more.

    A CompileError's own first line only names the compiler, so the line shown is that name and
    the first line of the compiler's message (where the actual error is).
    """
    from uops.compiler import CompileError

    if isinstance(e, CompileError):
        said = next((line.strip() for line in e.message.splitlines() if line.strip()), "(no message)")
        return f"{e.compiler or 'the compiler'} failed: {said}", True
    lines = str(e).strip().splitlines() or [type(e).__name__]
    return lines[0], len(lines) > 1


if __name__ == "__main__":
    sys.exit(main())
