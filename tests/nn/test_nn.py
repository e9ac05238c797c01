"""uops.nn: layers against numpy, state dicts, safetensors (the real format), optimizers against numpy updates."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from uops import Tensor, nn
from uops.nn.optim import SGD, Adam, AdamW, OptimizerError
from uops.nn.state import safe_load, safe_save
from uops.testing import devices_from_env

DEVICES = devices_from_env()

DEV = "CPU" if "CPU" in DEVICES else "PYTHON"
RNG = np.random.default_rng(5)


def test_linear_layernorm_and_state_dict_roundtrip():
    Tensor.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3, device=DEV), nn.LayerNorm(3, device=DEV))
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    w, b = model[0].weight.numpy(), model[0].bias.numpy()
    h = x @ w.T + b
    want = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(model(Tensor(x, device=DEV)).numpy(), want, rtol=1e-4, atol=1e-5)
    sd = model.state_dict()
    assert sorted(sd) == ["0.bias", "0.weight", "1.bias", "1.weight"]
    assert len(nn.get_parameters(model)) == 4
    other = nn.Sequential(nn.Linear(4, 3, device=DEV), nn.LayerNorm(3, device=DEV))
    other.load_state_dict({k: v.numpy() for k, v in sd.items()})
    np.testing.assert_array_equal(other[0].weight.numpy(), w)
    with pytest.raises(nn.StateDictError, match=r"missing \['1.weight'\]"):
        other.load_state_dict({k: v for k, v in sd.items() if k != "1.weight"})


def test_batchnorm2d_updates_running_stats_and_evaluates_with_them():
    bn = nn.BatchNorm2d(3, device=DEV)
    x = RNG.standard_normal((4, 3, 2, 2)).astype(np.float32) * 3 + 2
    bn(Tensor(x, device=DEV)).realize()
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * x.mean((0, 2, 3)), rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * x.var((0, 2, 3), ddof=1), rtol=1e-5)
    assert len(nn.get_parameters(bn)) == 2 and len(nn.get_state_dict(bn)) == 4
    nn.set_training(bn, False)
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    want = (x - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5)
    np.testing.assert_allclose(bn(Tensor(x, device=DEV)).numpy(), want, rtol=1e-5, atol=1e-5)


def test_safetensors_is_the_real_format(tmp_path):
    tensors = {
        "w": Tensor(RNG.standard_normal((3, 4)).astype(np.float32), device=DEV),
        "idx": Tensor(np.arange(5, dtype=np.int64), device=DEV),
        "flag": Tensor(np.array([True, False]), device=DEV),
    }
    path = tmp_path / "m.safetensors"
    safe_save(tensors, path, metadata={"format": "np"})
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    assert header["__metadata__"] == {"format": "np"}
    assert header["w"]["dtype"] == "F32" and header["w"]["shape"] == [3, 4]
    b, e = header["w"]["data_offsets"]
    np.testing.assert_array_equal(np.frombuffer(raw[8 + n + b : 8 + n + e], "<f4").reshape(3, 4), tensors["w"].numpy())
    back = safe_load(path, device=DEV)
    for k, t in tensors.items():
        np.testing.assert_array_equal(back[k].numpy(), t.numpy())
    st = pytest.importorskip("safetensors.numpy")
    theirs = st.load_file(str(path))
    for k, t in tensors.items():
        np.testing.assert_array_equal(theirs[k], t.numpy())
    st.save_file({"a": np.arange(6, dtype=np.float64).reshape(2, 3)}, str(tmp_path / "t.safetensors"))
    np.testing.assert_array_equal(safe_load(tmp_path / "t.safetensors", DEV)["a"].numpy(), np.arange(6.0).reshape(2, 3))


def _grads(steps: int, shape: tuple[int, ...]) -> list[np.ndarray]:
    return [RNG.standard_normal(shape).astype(np.float32) for _ in range(steps)]


def _run(opt_cls, kwargs, p0, grads):
    p = Tensor(p0.copy(), device=DEV, requires_grad=True)
    opt = opt_cls([p], **kwargs)
    for g in grads:
        p.grad = Tensor(g, device=DEV)
        opt.step()
    return p.numpy()


@pytest.mark.parametrize(
    "kw",
    [{"lr": 0.1}, {"lr": 0.1, "momentum": 0.9}, {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.1}],
)
def test_sgd_matches_numpy(kw):
    p0, grads = RNG.standard_normal(6).astype(np.float32), _grads(4, (6,))
    p, buf = p0.astype(np.float64), None
    mu, wd = kw.get("momentum", 0.0), kw.get("weight_decay", 0.0)
    for g in grads:
        g = g + wd * p
        if mu:
            buf = g if buf is None else mu * buf + g
            g = g + mu * buf if kw.get("nesterov") else buf
        p = p - kw["lr"] * g
    np.testing.assert_allclose(_run(SGD, kw, p0, grads), p, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,wd", [(Adam, 0.0), (Adam, 0.1), (AdamW, 0.1)])
def test_adam_and_adamw_match_numpy(cls, wd):
    p0, grads = RNG.standard_normal((2, 3)).astype(np.float32), _grads(5, (2, 3))
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    p, m, v = p0.astype(np.float64), 0.0, 0.0
    for t, g in enumerate(grads, 1):
        if cls is Adam:
            g = g + wd * p
        else:
            p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    np.testing.assert_allclose(_run(cls, {"lr": lr, "weight_decay": wd}, p0, grads), p, rtol=1e-5, atol=1e-6)


def test_step_trains_through_backward_and_errors():
    Tensor.manual_seed(1)
    lin = nn.Linear(3, 1, device=DEV)
    x = Tensor(RNG.standard_normal((16, 3)).astype(np.float32), device=DEV)
    y = x.sum(1, keepdim=True)
    opt = SGD(nn.get_parameters(lin), lr=0.1)
    first = None
    for _ in range(20):
        opt.zero_grad()
        loss = ((lin(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.1 * first
    with pytest.raises(OptimizerError, match="empty parameter list"):
        SGD([])
    with pytest.raises(OptimizerError, match="nesterov"):
        SGD(nn.get_parameters(lin), nesterov=True)
