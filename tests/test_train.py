"""The digits CNN of examples/train_digits.py trains: a short fixed run on CPU lowers the loss and classifies."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
from conftest import DEVICES

pytest.importorskip("sklearn", reason="the digits come with scikit-learn (pip install 'uops[examples]')")


def _example():
    path = pathlib.Path(__file__).parent.parent / "examples" / "train_digits.py"
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
