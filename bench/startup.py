"""Start-up cost of the core, of plugin discovery and of choosing a device, against bare Python and tinygrad.

Why: a script that does not name its device pays for `Device.DEFAULT` on every start, so
choosing one must stay cheap (entry points, the hook modules and probes that only look; no
vendor bindings, no numpy). Each case runs in a fresh interpreter N times; the table shows the
median wall time and the extra over `python -c pass`. Targets: `import uops; Device.DEFAULT`
and `import uops; Device["CPU"]` each at most 50 ms over bare Python (the median) with every
plugin installed. The in-process split that follows is the steadier figure on a loaded machine,
and says whether choosing the device imported pluggy or typing (it should not: 25 ms together).

    python bench/startup.py [-n 20] [--python PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

try:
    import resource
except ImportError:  # not on Windows: no CPU-time column there
    resource = None  # type: ignore[assignment]


def _children_cpu() -> float:
    if resource is None:
        return float("nan")
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _time(
    cases: list[tuple[str, list[str]]], runs: int, env: dict[str, str]
) -> list[tuple[float, float, float, float]]:
    """(median wall, min wall, median CPU, paired extra) seconds of each command over `runs` rounds (after
    one warm-up for the file cache). Each round runs every case once, so a change in the machine's load
    while the bench runs shifts all of them alike instead of one case; the paired extra is the median
    over rounds of the case's wall time minus the first case's (bare Python) in the same round. CPU time
    (user + system of the child) is the steadier figure on a shared, loaded machine.
    """
    for _, cmd in cases:
        subprocess.run(cmd, check=True, capture_output=True, env=env)
    walls: list[list[float]] = [[] for _ in cases]
    cpus: list[list[float]] = [[] for _ in cases]
    for _ in range(runs):
        for i, (_, cmd) in enumerate(cases):
            c0, t0 = _children_cpu(), time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            walls[i].append(time.perf_counter() - t0)
            cpus[i].append(_children_cpu() - c0)
    return [
        (statistics.median(w), min(w), statistics.median(c), statistics.median(a - b for a, b in zip(w, walls[0])))
        for w, c in zip(walls, cpus)
    ]


_GOAL_S = 0.050

_BREAKDOWN = """
import sys, time
w0, c0 = time.perf_counter(), time.process_time(); import uops
t2 = time.perf_counter(); import uops.plugins
t3 = time.perf_counter(); uops.plugins.Device.names()
t4 = time.perf_counter(); uops.plugins.Device.DEFAULT
t5, c5 = time.perf_counter(), time.process_time()
late = [m for m in ("pluggy", "typing") if m in sys.modules]
import numpy
t6 = time.perf_counter()
print(t2 - w0, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t5 - w0, c5 - c0)
print(*late)
"""


def _breakdown(python: str, env: dict[str, str]) -> tuple[list[float], list[str]]:
    """The split's seconds, and which of pluggy and typing choosing the device imported."""
    out = subprocess.run([python, "-c", _BREAKDOWN], check=True, capture_output=True, text=True, env=env).stdout
    times, late = (out + "\n").split("\n")[:2]
    return [float(x) for x in times.split()], late.split()


def _importable(python: str, module: str, env: dict[str, str]) -> bool:
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", code], capture_output=True, env=env).returncode == 0


def main(argv: list[str] | None = None) -> int:
    """Print the start-up table; returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=20, help="runs per case (median)")
    ap.add_argument("--python", default=sys.executable, help="interpreter to measure (e.g. a venv's python)")
    args = ap.parse_args(argv)
    py = args.python
    # as a user runs it: no uops settings, and byte-code caching on (the warm-up run writes the .pyc files)
    env = {k: v for k, v in os.environ.items() if not k.startswith("UOPS_") and k != "PYTHONDONTWRITEBYTECODE"}
    uops_script = shutil.which("uops", path=str(Path(py).parent)) or ""

    cases: list[tuple[str, list[str]]] = [
        ("python -c pass", [py, "-c", "pass"]),
        ("import numpy", [py, "-c", "import numpy"]),
        ("import uops", [py, "-c", "import uops"]),
        ("import uops; Device.names()", [py, "-c", "import uops; uops.Device.names()"]),
        ("import uops; Device.DEFAULT", [py, "-c", "import uops; uops.Device.DEFAULT"]),
        ('import uops; Device["CPU"]', [py, "-c", "import uops; uops.Device['CPU']"]),
        (
            "uops devices (loads + probes all)",
            [uops_script, "devices"]
            if uops_script
            else [py, "-c", "import sys; from uops.cli import main; sys.exit(main(['devices']))"],
        ),
    ]
    if _importable(py, "tinygrad", env):
        cases += [
            ("import tinygrad", [py, "-c", "import tinygrad"]),
            ("tinygrad Device.DEFAULT", [py, "-c", "from tinygrad import Device; Device.DEFAULT"]),
        ]
    names = subprocess.run(
        [py, "-c", "import uops; print(','.join(uops.Device.names()))"], capture_output=True, text=True, env=env
    ).stdout.strip()
    print(f"python: {py}\ninstalled uops devices: {names or '(none)'}\nmedian of {args.runs} runs")
    results = list(zip([label for label, _ in cases], _time(cases, args.runs, env)))
    bare, bare_min, bare_cpu, _ = results[0][1]
    width = max(len(label) for label, _ in results)
    head = f"{'median ms':>9}  {'extra ms':>8}  {'min ms':>7}  {'extra':>7}  {'cpu ms':>7}  {'extra':>7}"
    print(f"{'case'.ljust(width)}  {head}")
    for label, (t, lo, cpu, _paired) in results:
        cols = f"{t * 1e3:9.1f}  {(t - bare) * 1e3:8.1f}  {lo * 1e3:7.1f}  {(lo - bare_min) * 1e3:7.1f}"
        print(f"{label.ljust(width)}  {cols}  {cpu * 1e3:7.1f}  {(cpu - bare_cpu) * 1e3:7.1f}")
    lookup = dict(results)
    listing = lookup["import uops; Device.names()"][0] - lookup["import uops"][0]
    listing_min = lookup["import uops; Device.names()"][1] - lookup["import uops"][1]
    print(f"discovery alone (names() minus import uops): median {listing * 1e3:.1f} ms, min {listing_min * 1e3:.1f} ms")
    for label in ("import uops; Device.DEFAULT", 'import uops; Device["CPU"]'):
        extra, extra_min = lookup[label][0] - bare, lookup[label][1] - bare_min
        extra_cpu, paired = lookup[label][2] - bare_cpu, lookup[label][3]
        verdict = "within" if extra <= _GOAL_S else "OVER"
        print(
            f"{label}: {extra * 1e3:.1f} ms over bare Python (min {extra_min * 1e3:.1f}, CPU {extra_cpu * 1e3:.1f}, "
            f"paired {paired * 1e3:.1f}), {verdict} the 50 ms goal (median)"
        )
    print("(the machine's load shows as noise: compare the min columns when medians disagree)")
    # the same split measured inside one interpreter: immune to process start-up noise
    runs = [_breakdown(py, env) for _ in range(args.runs)]
    samples = [times for times, _ in runs]
    parts = (
        "import uops", "import uops.plugins", "Device.names()", "Device.DEFAULT", "then import numpy",
        "import uops through Device.DEFAULT", "the same in CPU time",
    )  # fmt: skip
    print("in-process, median ms (min):")
    for i, p in enumerate(parts):
        col = [s[i] for s in samples]
        print(f"  {p.ljust(34)} {statistics.median(col) * 1e3:6.1f} ({min(col) * 1e3:.1f})")
    loaded = sorted({m for _, late in runs for m in late})
    print(f"choosing the device imported: {', '.join(loaded) or 'neither pluggy nor typing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
