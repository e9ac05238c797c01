"""Random-number state for ``Tensor.rand``/``randn``: one seed and a counter, drawn on the host.

Counter-based (Philox): each draw gets its own stream from (seed, counter), so the numbers are
the same whatever device receives them and whatever else was drawn in between on other devices.
"""

from __future__ import annotations

import numpy as np


class _State:
    seed = 0
    counter = 0


def manual_seed(seed: int = 0) -> None:
    """Restart the streams: the same seed gives the same numbers on every device."""
    _State.seed = int(seed)
    _State.counter = 0


def generator() -> np.random.Generator:
    """A fresh generator for one draw (advances the counter)."""
    seq = np.random.SeedSequence([_State.seed & 0xFFFFFFFF, _State.counter])
    _State.counter += 1
    return np.random.Generator(np.random.Philox(seq))
