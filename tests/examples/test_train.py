"""The digits CNN of examples/train_digits.py trains: a short fixed run on CPU lowers the loss and classifies,
and its jitted step lowers the loss on an emulated GPU."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tests import REPO
from uops import Tensor, nn
from uops.nn.optim import Adam
from uops.testing import devices_from_env

DEVICES = devices_from_env()

pytest.importorskip("sklearn", reason="the digits come with scikit-learn (pip install 'uops[examples]')")


def _example():
    path = REPO / "examples" / "train_digits.py"
    spec = importlib.util.spec_from_file_location("train_digits", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif("CPU" not in DEVICES, reason="needs the CPU backend")
def test_digits_cnn_trains_on_cpu():
    out = _example().train("CPU", epochs=2, seed=0, log=False)
    assert out["loss"][1] < out["loss"][0] < 2.4
    assert out["test_acc"] > 0.6


@pytest.mark.skipif("CUDA_EMU" not in DEVICES, reason="needs the CUDA emulator")
def test_digits_cnn_step_lowers_the_loss_on_an_emulated_gpu():
    """The jitted step (captured, then replayed) on an emulated GPU: 24 steps on one batch (uploaded
    anew each step, as a data loader does) fit it."""
    mod = _example()
    Tensor.manual_seed(0)
    x, y, _, _ = mod.load(0)
    model = mod.make_model("CUDA_EMU")
    step = mod.make_step(model, Adam(nn.get_parameters(model), lr=1e-2))
    losses = [step(Tensor(x[:32], device="CUDA_EMU"), Tensor(y[:32], device="CUDA_EMU")) for _ in range(24)]
    values = np.array([t.item() for t in losses])
    assert step.replays == 22
    assert np.isfinite(values).all()
    assert values[-4:].mean() < 0.5 * values[:4].mean()
