"""Peer frameworks for the op benchmarks, each in its own interpreter: jax, torch, tinygrad (or numpy, in a test).

A peer is a subprocess of the interpreter given for it running ``peer_worker.py`` (so jax and torch need not
share this venv, and never become uops dependencies). For each workload the bench saves the inputs as
``.npy`` files, every peer loads those very arrays, computes each of its variants once, and hands the
result back; a result that disagrees with numpy (``workloads.agrees``, the tolerance uops is held to) is
reported as wrong and never timed. Then ``time_in_turns`` times every side one run at a time, round after
round, so a busy spell on a shared machine slows all of them alike; each side's best run counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from workloads import agrees, max_error

from uops.errors import UopsError

_WORKER = Path(__file__).with_name("peer_worker.py")


class PeerError(UopsError, RuntimeError):
    """A peer interpreter did not start or stopped answering: names the interpreter and what it printed."""


@dataclass
class Outcome:
    """What became of one variant on one workload: ``ok`` (then timed: ``seconds``), ``wrong`` or ``error``
    (never timed; ``detail`` says why)."""

    status: str
    detail: str = ""
    seconds: float | None = None


@dataclass(eq=False)  # a peer is one process: hashed and compared by identity
class Peer:
    """One peer interpreter running ``peer_worker.py FRAMEWORK``; its variants' names come from the worker."""

    framework: str
    python: str
    workloads_file: str | None = None
    device: str = "cpu"  # where the peer computes (peer_worker.py --device)
    variants: list[str] = field(default_factory=list)
    version: str = ""
    _proc: subprocess.Popen[str] | None = None
    _stderr: TextIO | None = None

    def start(self) -> None:
        cmd = [self.python, str(_WORKER), self.framework]
        if self.workloads_file:
            cmd += ["--workloads", self.workloads_file]
        cmd += ["--device", self.device]
        self._stderr = tempfile.TemporaryFile("w+")
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, bufsize=1
            )
        except OSError as e:
            raise PeerError(f"cannot start the {self.framework} peer {self.python!r}: {e}") from e
        hello = self._read()
        self.variants, self.version = list(hello["variants"]), str(hello["version"])

    def _read(self) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise PeerError(f"the {self.framework} peer ({self.python}) stopped: {self.stderr_tail()}")
        msg: dict[str, Any] = json.loads(line)
        return msg

    def ask(self, **req: Any) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(req) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError as e:
            raise PeerError(f"the {self.framework} peer ({self.python}) stopped: {self.stderr_tail()}") from e
        return self._read()

    def stderr_tail(self, lines: int = 6) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        tail = self._stderr.read().strip().splitlines()[-lines:]
        return " | ".join(tail) or "(nothing on stderr)"

    def close(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None and proc.stdin is not None:
            try:
                proc.stdin.write('{"cmd": "quit"}\n')
                proc.stdin.close()
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> Peer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: uops device -> where the peers compute to be compared with it (torch calls a ROCm GPU ``cuda`` as well)
PEER_DEVICES = {"CUDA": "cuda", "AMD": "cuda", "METAL": "mps"}


def peer_device(uops_device: str) -> str:
    """Where the peers compute when uops runs on ``uops_device``: its GPU for a GPU backend, else the CPU."""
    return PEER_DEVICES.get(uops_device, "cpu")


def start_peers(pythons: dict[str, str], workloads_file: str | None = None, device: str = "cpu") -> list[Peer]:
    """A started peer per framework -> interpreter entry, computing on ``device``; closes the started ones if one
    fails."""
    peers: list[Peer] = []
    try:
        for framework, python in pythons.items():
            p = Peer(framework, python, workloads_file, device)
            peers.append(p)
            p.start()
    except BaseException:
        for p in peers:
            p.close()
        raise
    return peers


def set_up(
    peers: Sequence[Peer], workload_name: str, small: bool, xs: list[np.ndarray], want: np.ndarray, tmp: Path
) -> dict[tuple[Peer, str], Outcome]:
    """Hand every peer the inputs (as .npy files in ``tmp``), have it compute each variant once, and check
    each result against ``want``."""
    paths = []
    for i, x in enumerate(xs):
        paths.append(str(tmp / f"in{i}.npy"))
        np.save(paths[-1], x)
    outcomes: dict[tuple[Peer, str], Outcome] = {}
    for p in peers:
        out = tmp / p.framework
        out.mkdir(exist_ok=True)
        ans = p.ask(cmd="setup", workload=workload_name, small=small, inputs=paths, out=str(out))
        for variant in p.variants:
            if variant in ans["errors"]:
                outcomes[p, variant] = Outcome("error", ans["errors"][variant])
                continue
            got = np.load(ans["results"][variant])
            ok = agrees(got, want)
            outcomes[p, variant] = Outcome("ok" if ok else "wrong", "" if ok else max_error(got, want))
    return outcomes


#: seconds each side waits before its turn, so that a thread pool the side before it left spinning has gone to
#: sleep: OpenBLAS's workers spin for about 0.1 s after numpy's call, and 1023x1025x1031 timed right after it took
#: 23.9 ms, 12.9 ms after 0.2 s (numpy 12.0 ms either way; alternating rounds on the 2-core EPYC)
SETTLE_S = 0.2
#: seconds of untimed runs (two at least) between the quiet and the timed run: after an idle spell this machine's
#: cores take a few calls to come back to speed (a row sum of 2048^2 after 0.2 s idle, best of 6: uops 1.37 ms on
#: the first call, 0.43 after 5, 0.39 after 20; torch eager 0.90, 0.13 after 5)
WARM_S = 0.02


def settled_seconds(fn: Callable[[], Any], calls: int | None = None) -> float:
    """Seconds one call of ``fn`` takes, after ``settle``."""
    settle(fn, calls)
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def settle(fn: Callable[[], Any], calls: int | None = None) -> None:
    """``SETTLE_S`` of quiet, then untimed calls of ``fn``: exactly ``calls``, or else two at least until ``WARM_S``
    have passed (a side with state that must advance alike on every side, as a decoder's, gives a count)."""
    time.sleep(SETTLE_S)
    t0 = time.perf_counter()
    for n in range(calls if calls is not None else 1000):
        fn()
        if calls is None and n >= 1 and time.perf_counter() - t0 >= WARM_S:
            break


def time_in_turns(local: Sequence[Callable[[], Any]], remote: Sequence[tuple[Peer, str]], runs: int) -> list[float]:
    """Best seconds of each local function, then of each (peer, variant), over ``runs`` rounds of one run each,
    each timed run after ``SETTLE_S`` of quiet and ``WARM_S`` of untimed runs.

    Local sides are timed here around the call; a peer times its own call (the pipe is not in its time).
    The untimed runs of each turn (``settle``) also compile what the first run of a local side compiles.
    """
    best = [float("inf")] * (len(local) + len(remote))
    for _ in range(runs):
        for i, fn in enumerate(local):
            best[i] = min(best[i], settled_seconds(fn))
        for j, (p, variant) in enumerate(remote):
            settle(lambda p=p, variant=variant: p.ask(cmd="time", variant=variant))
            best[len(local) + j] = min(best[len(local) + j], float(p.ask(cmd="time", variant=variant)["seconds"]))
    return best


def compare(
    peers: Sequence[Peer],
    workload_name: str,
    small: bool,
    xs: list[np.ndarray],
    want: np.ndarray,
    local: Sequence[Callable[[], Any]],
    runs: int,
) -> tuple[list[float], dict[tuple[Peer, str], Outcome]]:
    """One workload on every side: the peers' results checked (``set_up``), then the local functions and the
    peers' right variants timed in turns. Returns the local best times and each peer variant's outcome."""
    with tempfile.TemporaryDirectory(prefix="uops-bench-") as tmp:
        outcomes = set_up(peers, workload_name, small, xs, want, Path(tmp))
    timed = [pv for pv, o in outcomes.items() if o.status == "ok"]
    times = time_in_turns(local, timed, runs)
    for pv, t in zip(timed, times[len(local) :], strict=True):
        outcomes[pv].seconds = t
    return times[: len(local)], outcomes


def peer_pythons(jax: str | None, torch: str | None, tinygrad: str | None) -> dict[str, str]:
    """framework -> interpreter for the peers asked for; tinygrad defaults to this interpreter where it has it."""
    import importlib.util

    got = {k: v for k, v in (("jax", jax), ("torch", torch)) if v}
    if tinygrad:
        got["tinygrad"] = tinygrad
    elif importlib.util.find_spec("tinygrad") is not None:
        got["tinygrad"] = sys.executable
    return got
