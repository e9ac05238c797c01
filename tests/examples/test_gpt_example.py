"""examples/gpt.py: greedy decoding under the JIT gives numpy's tokens and logits, on the CPU and an emulated GPU."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from tests import REPO

EXAMPLE = REPO / "examples" / "gpt.py"


@pytest.fixture(scope="module")
def gpt():
    spec = importlib.util.spec_from_file_location("uops_example_gpt", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


# a one-token prompt on the emulated GPU: its prefill has the decode step's kernels, so half as many compile
@pytest.mark.parametrize("device,prompt", [("CPU", "1,2,3"), ("CUDA_EMU", "7")])
def test_check_against_numpy(gpt, device, prompt, tmp_path, capsys):
    weights = tmp_path / "gpt.safetensors"
    assert gpt.main(["--check", "--device", device, "--prompt", prompt, "--weights", str(weights)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {weights}" in out and "check vs numpy: ok: first 32 tokens equal" in out
    assert "tokens/s" in out


def test_one_capture_serves_every_position(gpt, tmp_path):
    cfg = gpt.Config(layers=1, heads=2, width=16, vocab=32, context=24)
    path = str(tmp_path / "small.safetensors")
    gpt.save_weights(path, gpt.random_weights(cfg, seed=3))
    weights = gpt.load_weights(path)
    assert sorted(weights) == sorted(gpt.random_weights(cfg, seed=3))
    model = gpt.GPT(cfg, weights, "CPU")
    tokens, logits = model.generate([5, 6], 20, log=False)
    want_tokens, want_logits = gpt.numpy_generate(cfg, weights, [5, 6], 20)
    assert tokens == want_tokens
    np.testing.assert_allclose(logits, want_logits, atol=1e-4)
    # a prefill of 2 tokens (run plainly: its own signature, called once), then 19 decode steps: one runs plainly,
    # one is captured, the rest replay
    assert model.step.captures == 1 and model.step.replays == 19 - 2
