"""The compile cache: memo, disk entries, corruption handling, concurrency, permissions."""

from __future__ import annotations

import multiprocessing as mp
import os
import stat
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from uops.compiler import CompileError, Compiler, cache_dir, clear_memory_cache, read_entry, write_entry
from uops.testing.kit.helpers import private_compile_cache


class ZlibCompiler(Compiler):
    """A real (if simple) compiler: source -> zlib-compressed bytes. Counts its compiles."""

    def __init__(self, flags: tuple[str, ...] = ("-9",), version: str = "1") -> None:
        self.flags = flags
        self.version = version
        self.calls = 0

    def identity(self) -> str:
        return f"zlib {zlib.ZLIB_VERSION} v{self.version}"

    def compile(self, src: str) -> bytes:
        self.calls += 1
        if "#error" in src:
            raise CompileError("1:1: error: #error directive", src, compiler="zlib")
        return zlib.compress(src.encode(), level=int(self.flags[0][1:]))

    def check_binary(self, lib: bytes) -> None:
        try:
            zlib.decompress(lib)
        except zlib.error as e:
            raise ValueError(f"not a zlib stream: {e}") from None


@pytest.fixture
def cdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with private_compile_cache(tmp_path / "cache", monkeypatch) as d:
        yield d


def entries(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.suffix == ".bin" and not p.name.startswith(".tmp-"))


SRC = "void k(float* a) { a[0] = 1.0f; }\n" * 20


def test_hit_in_memory_and_across_instances(cdir: Path) -> None:
    c = ZlibCompiler()
    a = c.compile_cached(SRC)
    b = c.compile_cached(SRC)
    assert c.calls == 1 and a == b == zlib.compress(SRC.encode(), 9)
    assert len(entries(cdir)) == 1
    clear_memory_cache()
    fresh = ZlibCompiler()
    assert fresh.compile_cached(SRC) == a
    assert fresh.calls == 0, "a fresh instance should load the entry from disk"


def test_memo_does_not_touch_disk(cdir: Path) -> None:
    c = ZlibCompiler()
    lib = c.compile_cached(SRC)
    for p in entries(cdir):
        p.unlink()
    assert c.compile_cached(SRC) == lib and c.calls == 1
    assert entries(cdir) == [], "a memo hit must not read or write the disk"


def test_miss_when_flags_or_identity_change(cdir: Path) -> None:
    ZlibCompiler(flags=("-9",)).compile_cached(SRC)
    c1 = ZlibCompiler(flags=("-1",))
    c1.compile_cached(SRC)
    assert c1.calls == 1
    c2 = ZlibCompiler(flags=("-9",), version="2")
    c2.compile_cached(SRC)
    assert c2.calls == 1
    assert len(entries(cdir)) == 3


def _truncate_payload(b: bytes) -> bytes:
    return b[:-5]


def _truncate_header(b: bytes) -> bytes:
    return b[:20]


def _flip_payload_bit(b: bytes) -> bytes:
    return b[:-3] + bytes([b[-3] ^ 0x10]) + b[-2:]


def _flip_checksum_bit(b: bytes) -> bytes:
    return b[:12] + bytes([b[12] ^ 0x01]) + b[13:]


def _bad_magic(b: bytes) -> bytes:
    return b"XXXX" + b[4:]


def _trailing_garbage(b: bytes) -> bytes:
    return b + b"\x00garbage"


def _empty(b: bytes) -> bytes:
    return b""


@pytest.mark.parametrize(
    "corrupt",
    [_truncate_payload, _truncate_header, _flip_payload_bit, _flip_checksum_bit, _bad_magic, _trailing_garbage, _empty],
)
def test_corrupt_entry_is_recompiled_and_replaced(cdir: Path, corrupt) -> None:
    good = ZlibCompiler().compile_cached(SRC)
    (path,) = entries(cdir)
    path.write_bytes(corrupt(path.read_bytes()))
    clear_memory_cache()
    c = ZlibCompiler()
    with pytest.warns(RuntimeWarning, match="deleted it and recompiling"):
        assert c.compile_cached(SRC) == good
    assert c.calls == 1, "a corrupt entry must be recompiled, never loaded"
    assert read_entry(path) == good, "the corrupt entry must be replaced by a good one"


def test_read_entry_deletes_corrupt_file(tmp_path: Path) -> None:
    p = tmp_path / "x.bin"
    write_entry(p, b"payload")
    assert read_entry(p) == b"payload"
    p.write_bytes(p.read_bytes()[:-1])
    with pytest.warns(RuntimeWarning, match="fails its checksum"):
        assert read_entry(p) is None
    assert not p.exists()
    assert read_entry(tmp_path / "missing.bin") is None


class BarrierCompiler(ZlibCompiler):
    """Waits at a barrier inside compile, so two processes are compiling at the same moment."""

    def __init__(self, barrier) -> None:
        super().__init__()
        self.barrier = barrier

    def compile(self, src: str) -> bytes:
        self.barrier.wait(timeout=20)
        return super().compile(src) * 200  # a few hundred KB: writes are not instantaneous


def _compile_in_child(barrier, queue, src: str) -> None:
    clear_memory_cache()
    c = BarrierCompiler(barrier)
    lib = c.compile_cached(src)
    queue.put((c.calls, zlib.crc32(lib), len(lib)))


def test_two_processes_compile_same_source_at_once(cdir: Path) -> None:
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(2)
    queue = ctx.Queue()
    procs = [ctx.Process(target=_compile_in_child, args=(barrier, queue, SRC)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert [r[0] for r in results] == [1, 1], "both processes compiled (neither saw a partial entry)"
    assert results[0][1:] == results[1][1:]
    (entry,) = entries(cdir)
    assert [p.name for p in cdir.iterdir() if p.name.startswith(".tmp-")] == [], "temp files left behind"
    payload = read_entry(entry)
    assert payload is not None and zlib.crc32(payload) == results[0][1]


def _rewrite_entry(path: str, payload: bytes, rounds: int) -> None:
    for _ in range(rounds):
        write_entry(Path(path), payload)


def test_reader_never_sees_a_partial_entry(tmp_path: Path) -> None:
    path = tmp_path / "k.bin"
    payload = os.urandom(1 << 20)
    write_entry(path, payload)
    writer = mp.get_context("fork").Process(target=_rewrite_entry, args=(str(path), payload, 60))
    writer.start()
    reads = 0
    while writer.is_alive() or reads < 20:
        assert read_entry(path) == payload, "a reader saw a partial or missing entry during a rewrite"
        reads += 1
    writer.join(timeout=30)
    assert writer.exitcode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.bin"]


def test_cache_dir_is_private(cdir: Path) -> None:
    ZlibCompiler().compile_cached(SRC)
    assert stat.S_IMODE(os.stat(cdir).st_mode) == 0o700


def test_loose_cache_dir_mode_is_fixed(cdir: Path) -> None:
    cdir.mkdir()
    os.chmod(cdir, 0o777)
    assert cache_dir() == cdir
    assert stat.S_IMODE(os.stat(cdir).st_mode) == 0o700


def test_default_dir_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UOPS_CACHE_DIR", raising=False)
    monkeypatch.delenv("UOPS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "uops"
    assert stat.S_IMODE(os.stat(tmp_path / "xdg" / "uops").st_mode) == 0o700


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown to another user")
def test_dir_of_another_user_is_refused(cdir: Path) -> None:
    cdir.mkdir(mode=0o700)
    os.chown(cdir, 65534, 65534)
    c = ZlibCompiler()
    with pytest.warns(RuntimeWarning, match="belongs to uid 65534"):
        lib = c.compile_cached(SRC)
    assert lib == zlib.compress(SRC.encode(), 9)
    assert entries(cdir) == [], "nothing may be written to another user's directory"


def test_not_a_directory_disables_disk_cache(cdir: Path) -> None:
    cdir.write_text("not a dir")
    with pytest.warns(RuntimeWarning, match="not a directory"):
        assert cache_dir() is None


def test_uops_cache_0_bypasses_disk(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPS_CACHE", "0")
    c = ZlibCompiler()
    c.compile_cached(SRC)
    assert not cdir.exists(), "UOPS_CACHE=0 must not create the cache dir"
    clear_memory_cache()
    c.compile_cached(SRC)
    assert c.calls == 2


def test_compile_error_propagates_and_is_not_cached(cdir: Path) -> None:
    c = ZlibCompiler()
    with pytest.raises(CompileError, match="#error directive"):
        c.compile_cached("#error nope\n")
    with pytest.raises(CompileError):
        c.compile_cached("#error nope\n")
    assert c.calls == 2 and entries(cdir) == []


class NotBytesCompiler(Compiler):
    def compile(self, src: str) -> bytes:
        return src  # type: ignore[return-value]


def test_compile_must_return_bytes(cdir: Path) -> None:
    with pytest.raises(TypeError, match="returned str, expected bytes"):
        NotBytesCompiler().compile_cached("x")


def test_unwritable_cache_warns_and_still_compiles(cdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can write to a read-only directory")
    cdir.mkdir(mode=0o500)
    with pytest.warns(RuntimeWarning, match="cannot write"):
        assert ZlibCompiler().compile_cached(SRC) == zlib.compress(SRC.encode(), 9)


def test_compile_error_shows_message_and_numbered_source() -> None:
    src = "void k(void) {\n  int x = ;\n}\n"
    err = CompileError("kernel.c:2:11: error: expected expression", src, compiler="clang")
    text = str(err)
    assert "clang failed" in text and "expected expression" in text
    assert "2 |   int x = ;" in text and "1 | void k(void) {" in text


def test_compile_error_survives_pickling() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(CompileError("kernel.c:1:1: error: x", "int x\n", compiler="clang")))
    assert isinstance(err, CompileError) and err.source == "int x\n" and err.compiler == "clang"
    assert "1 | int x" in str(err)


def test_compile_error_truncates_huge_source_around_named_lines() -> None:
    lines = [f"line_{i};" for i in range(1, 5001)]
    err = CompileError("kernel.c:2500:3: error: boom", "\n".join(lines))
    text = str(err)
    assert "2500 | line_2500;" in text and "2497 | line_2497;" in text
    assert "line_4000;" not in text and "lines not shown" in text
    assert len(text) < 3000


def test_compile_error_without_line_refs_keeps_head_and_tail() -> None:
    err = CompileError("it broke", "\n".join(f"l{i}" for i in range(1, 1001)))
    text = str(err)
    assert "| l1\n" in text and "| l1000" in text and "| l500\n" not in text


def test_warnings_are_not_raised_when_cache_is_fine(cdir: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ZlibCompiler().compile_cached(SRC)


# ---------------------------------------------------------------------------------------
# issue 11, finding 9: entries bound to their keys, only regular files, bad payloads replaced

SRC_B = "void k(float* a) { a[0] = 2.0f; }\n" * 20


def test_swapped_entries_are_misses_and_replaced(cdir: Path) -> None:
    c = ZlibCompiler()
    good_a, good_b = c.compile_cached(SRC), c.compile_cached(SRC_B)
    pa, pb = (cdir / f"{c.cache_key(s)}.bin" for s in (SRC, SRC_B))
    blob_a, blob_b = pa.read_bytes(), pb.read_bytes()
    pa.write_bytes(blob_b)
    pb.write_bytes(blob_a)
    clear_memory_cache()
    fresh = ZlibCompiler()
    with pytest.warns(RuntimeWarning, match="holds the entry of another key"):
        assert fresh.compile_cached(SRC) == good_a
    with pytest.warns(RuntimeWarning, match="holds the entry of another key"):
        assert fresh.compile_cached(SRC_B) == good_b
    assert fresh.calls == 2, "a swapped entry must never be run as the other kernel"
    assert read_entry(pa) == good_a and read_entry(pb) == good_b, "both entries are replaced by their own"


def test_valid_checksum_with_a_bad_payload_is_replaced(cdir: Path) -> None:
    c = ZlibCompiler()
    good = c.compile_cached(SRC)
    path = cdir / f"{c.cache_key(SRC)}.bin"
    write_entry(path, b"checksummed, but no zlib stream")
    clear_memory_cache()
    fresh = ZlibCompiler()
    with pytest.warns(RuntimeWarning, match=r"passed its checksum but holds no loadable binary \(not a zlib stream"):
        assert fresh.compile_cached(SRC) == good
    assert fresh.calls == 1 and read_entry(path) == good
    clear_memory_cache()
    again = ZlibCompiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert again.compile_cached(SRC) == good and again.calls == 0, "the replaced entry is a hit"


def test_cpu_entry_with_a_bad_payload_is_recompiled_and_runs(cdir: Path) -> None:
    from uops.plugins import Device

    try:
        dev = Device["CPU"]
    except Exception as e:
        pytest.skip(f"CPU device unavailable: {e}")
    src = "void k(float* restrict out) { out[0] = 42.0f; }\n"
    path = cdir / f"{dev.compiler.cache_key(src)}.bin"
    cdir.mkdir(mode=0o700, exist_ok=True)  # naming the toolchain may have made it
    write_entry(path, b"\x7fELF but not really a shared library")
    clear_memory_cache()
    with pytest.warns(RuntimeWarning, match="holds no loadable binary .*too short"):
        lib = dev.compiler.compile_cached(src)
    out = np.zeros(1, np.float32)
    dev.runtime.load("k", lib)(out)
    assert out[0] == 42.0
    assert read_entry(path) == lib


def _compile_in_child_quietly(src: str, queue) -> None:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        lib = ZlibCompiler().compile_cached(src)
    queue.put((lib, [str(x.message) for x in w]))


def _compile_isolated(src: str) -> tuple[bytes, list[str]]:
    """compile_cached in a forked child: a reader that blocks or eats memory fails the test, not the run."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_compile_in_child_quietly, args=(src, queue))
    p.start()
    try:
        lib, msgs = queue.get(timeout=60)
    finally:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    assert p.exitcode == 0
    return lib, msgs


def test_fifo_entry_does_not_block(cdir: Path) -> None:
    c = ZlibCompiler()
    good = c.compile_cached(SRC)
    path = cdir / f"{c.cache_key(SRC)}.bin"
    path.unlink()
    os.mkfifo(path)
    clear_memory_cache()
    lib, msgs = _compile_isolated(SRC)
    assert lib == good
    assert any("is not a regular file" in m for m in msgs), msgs
    assert stat.S_ISREG(os.lstat(path).st_mode), "the FIFO is replaced by a real entry"


@pytest.mark.parametrize("target", ["/dev/zero", "outside"])
def test_symlinked_entry_is_not_followed(cdir: Path, tmp_path: Path, target: str) -> None:
    c = ZlibCompiler()
    good = c.compile_cached(SRC)
    path = cdir / f"{c.cache_key(SRC)}.bin"
    dest = Path(target) if target.startswith("/") else tmp_path / "outside.bin"
    if target == "outside":  # a valid entry for this very key, but kept outside the cache dir
        dest.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(dest)
    clear_memory_cache()
    lib, msgs = _compile_isolated(SRC)
    assert lib == good
    assert any("is a symbolic link" in m for m in msgs), msgs
    assert not path.is_symlink() and read_entry(path) == good
    if target == "outside":
        assert dest.read_bytes()[-len(good) :] == good, "the link's target is left alone"


def test_oversized_entry_is_not_read(cdir: Path) -> None:
    from uops.compiler.cache import MAX_ENTRY_BYTES

    c = ZlibCompiler()
    good = c.compile_cached(SRC)
    path = cdir / f"{c.cache_key(SRC)}.bin"
    with open(path, "r+b") as f:
        f.truncate(MAX_ENTRY_BYTES + (1 << 20))  # sparse: costs no disk
    clear_memory_cache()
    with pytest.warns(RuntimeWarning, match="more than the limit"):
        assert ZlibCompiler().compile_cached(SRC) == good
    assert path.stat().st_size < 1 << 20


def test_read_regular_file(tmp_path: Path) -> None:
    from uops.compiler.cache import read_regular_file

    f = tmp_path / "f"
    f.write_bytes(b"12345")
    assert read_regular_file(f, 5) == b"12345"
    with pytest.raises(ValueError, match="5 bytes, more than the limit of 4"):
        read_regular_file(f, 4)
    link = tmp_path / "link"
    link.symlink_to(f)
    with pytest.raises(ValueError, match="is a symbolic link"):
        read_regular_file(link, 100)
    assert read_regular_file(link, 100, follow_symlinks=True) == b"12345"
    with pytest.raises(ValueError, match="not a regular file"):
        read_regular_file(tmp_path, 100)
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "missing", 100)
