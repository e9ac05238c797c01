"""Rendered-source corpus: proves a codegen or renderer refactor leaves every source byte-identical.

Two steps. ``capture`` runs test files with this module as a pytest plugin: every kernel AST that reaches the
lowering (with the opts it was lowered with) is written to a JSON corpus. ``render`` lowers and renders each
captured kernel for every renderer (CPU, CUDA, AMD on two architectures, Metal on two versions, the _EMU
devices, PYTHON), with the default heuristics, with no opts and with the captured opts, and writes the sha256
of each source (or of the error a kernel raises for a target) to a JSON file; ``compare`` diffs two of those.

    .venv/bin/python -m pytest -q -n 0 -p tests.render_corpus tests/codegen/test_codegen.py   # appends
    .venv/bin/python tests/render_corpus.py render /tmp/corpus.json /tmp/hashes_before.json
    .venv/bin/python tests/render_corpus.py compare /tmp/hashes_before.json /tmp/hashes_after.json

The corpus path is ``UOPS_RENDER_CORPUS`` (default /tmp/uops_render_corpus.json). Not a test itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

CORPUS = Path(os.environ.get("UOPS_RENDER_CORPUS", "/tmp/uops_render_corpus.json"))
# (device, arch): the targets every kernel is rendered for; None: the device's default architecture
TARGETS = [
    ("CPU", None),
    ("PYTHON", None),
    ("CUDA", None),
    ("CUDA", "sm_75"),
    ("CUDA_EMU", None),
    ("AMD", None),
    ("AMD", "gfx1100"),
    ("AMD_EMU", None),
    ("METAL", None),
    ("METAL", "metal2.4"),
    ("METAL_EMU", None),
]

_seen: dict[str, None] = {}


def _key(ast: Any, opts: Any, device: str) -> str:
    from uops.ir.serialize import uops_to_data

    return json.dumps([uops_to_data([ast]), None if opts is None else [o.to_data() for o in opts], device])


def pytest_configure(config: Any) -> None:
    """Wrap the lowering's first pass so every kernel it sees is recorded, with its target and opts."""
    from uops.codegen import lowerer, program

    real = lowerer.check_ast

    def recording(ast: Any, ctx: Any) -> Any:
        try:
            _seen.setdefault(_key(ast, ctx.opts, ctx.ren.device), None)
        except Exception as e:  # a kernel whose args do not serialise is left out, and said so
            print(f"render_corpus: not recorded: {e}", file=sys.stderr)
        return real(ast, ctx)

    for passes in (lowerer.LOWERING, program.PASSES):
        passes[[name for name, _ in passes].index("check_ast")] = ("check_ast", recording)


def pytest_unconfigure(config: Any) -> None:
    old = json.loads(CORPUS.read_text()) if CORPUS.exists() else []
    merged = dict.fromkeys(old)
    merged.update(_seen)
    CORPUS.write_text(json.dumps(list(merged)))
    print(f"\nrender_corpus: {len(_seen)} kernels recorded, {len(merged)} in {CORPUS}", file=sys.stderr)


class _NoCompiler:
    """Rendering only: the binary of every program is empty."""

    def compile_cached(self, src: str) -> bytes:
        return b""


def _render_all(corpus: list[str]) -> dict[str, str]:
    os.environ["UOPS_THREADS"] = "4"  # the CPU heuristics read it
    from uops.codegen.opt import Opt
    from uops.codegen.program import get_program
    from uops.ir.serialize import uops_from_data
    from uops.plugins import Device

    renderers = {f"{d}:{a}": Device[d].target(a).renderer for d, a in TARGETS}
    out: dict[str, str] = {}
    for n, item in enumerate(corpus):
        graph, opts_data, device = json.loads(item)
        ast = uops_from_data(graph)[0]
        variants: dict[str, Any] = {"heuristic": None, "none": []}
        if opts_data:
            variants["captured"] = [Opt.from_data(o) for o in opts_data]
        for tname, ren in renderers.items():
            for vname, opts in variants.items():
                if vname == "captured" and not tname.startswith(device.split("_")[0]):
                    continue
                try:
                    text = get_program(ast, ren, _NoCompiler(), opts).src  # type: ignore[arg-type]
                    kind = "src"
                except Exception as e:  # a kernel a target refuses: its error must stay the same too
                    text, kind = f"ERROR {type(e).__name__}: {e}", "err"
                out[f"{n}/{tname}/{vname}"] = f"{kind}:{hashlib.sha256(text.encode()).hexdigest()}"
    return out


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "render":
        corpus = json.loads(Path(argv[1]).read_text())
        hashes = _render_all(corpus)
        Path(argv[2]).write_text(json.dumps(hashes, indent=0, sort_keys=True))
        sources = [h for h in hashes.values() if h.startswith("src:")]
        print(
            f"{len(corpus)} kernels, {len(hashes)} renderings: {len(sources)} sources ({len(set(sources))} distinct), "
            f"{len(hashes) - len(sources)} errors -> {argv[2]}"
        )
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        # the hashes alone (files written before the src:/err: prefix compare too)
        a, b = ({k: v.split(":")[-1] for k, v in json.loads(Path(p).read_text()).items()} for p in argv[1:])
        diff = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        for k in diff[:20]:
            print("differs:", k)
        print(f"{len(a)} vs {len(b)} renderings, {len(diff)} differ")
        return 1 if diff else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
