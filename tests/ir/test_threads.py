"""Hash-consing under threads: building the same graph concurrently yields one live object per node."""

from __future__ import annotations

import sys
import threading

from uops import Ops, UOp, dtypes


def _chain(n: int, start: UOp) -> list[UOp]:
    out = [start]
    for i in range(n):
        out.append(UOp(Ops.ADD, dtypes.int32, (out[-1], UOp.const(dtypes.int32, i % 7)), None))
    return out


def _build_in_threads(n_threads: int, fn, *args) -> list:
    barrier = threading.Barrier(n_threads)
    results: list = [None] * n_threads
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            barrier.wait()
            results[k] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - reported by the test below
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up within a few nodes
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors
    return results


def test_four_threads_building_one_chain_share_every_node():
    root = UOp.variable("thread_chain_root", 0, 100)
    chains = _build_in_threads(4, _chain, 20_000, root)
    assert all(len(c) == 20_001 for c in chains)
    distinct = [i for i in range(20_001) if len({id(c[i]) for c in chains}) != 1]
    assert not distinct, f"{len(distinct)} nodes exist more than once, the first at position {distinct[0]}"
    # and the cache still answers with those objects
    assert _chain(20_000, root)[-1] is chains[0][-1]


def test_threads_rebuilding_freed_nodes_share_them():
    """Nodes freed and rebuilt while other threads build them too: dead cache entries are replaced once."""

    def rebuild() -> list[UOp]:
        keep: list[UOp] = []
        for r in range(20):
            c = _chain(500, UOp.variable("thread_rebuild_root", 0, r))
            keep = c if r == 19 else keep  # earlier chains die and are rebuilt by the next rounds
        return keep

    chains = _build_in_threads(4, rebuild)
    distinct = [i for i in range(501) if len({id(c[i]) for c in chains}) != 1]
    assert not distinct, f"{len(distinct)} nodes exist more than once"


def test_new_dtypes_from_many_threads_keep_distinct_nodes():
    """A dtype takes its cache token when it is made: threads making the same new dtypes at once get one
    token per dtype (equal dtypes share it, different ones never do), so their nodes are one per dtype."""

    def consts() -> list[UOp]:
        # pointer dtypes of sizes never used elsewhere: each thread makes its own equal objects, new to the table
        made = [dtypes.float32.ptr(7_000_000 + k) for k in range(200)]
        return [UOp(Ops.DEFINE_GLOBAL, dt, (), 0) for dt in made]

    results = _build_in_threads(4, consts)
    for nodes in results:
        assert [u.dtype.size for u in nodes] == [7_000_000 + k for k in range(200)]
        assert len({u.dtype._tok for u in nodes}) == 200
    for k in range(200):
        assert len({id(r[k]) for r in results}) == 1
