"""safetensors save and load: an 8-byte little-endian header length, a JSON header naming each
tensor's dtype, shape and byte range (plus ``__metadata__``), then the raw little-endian bytes.

Why the real format: weights saved here load in the ``safetensors`` package and torch, and theirs
load here.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import numpy as np

from uops.dtypes import dtypes
from uops.errors import UopsError
from uops.frontend.tensor import Tensor

_TO_ST = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint64": "U64",
    "uint32": "U32",
    "uint16": "U16",
    "uint8": "U8",
    "bool": "BOOL",
}
_FROM_ST = {v: np.dtype(k) for k, v in _TO_ST.items()}


class SafetensorsError(UopsError, ValueError):
    """A file that is not valid safetensors, or a tensor whose dtype it cannot hold."""


def safe_save(tensors: dict[str, Tensor], path: str | os.PathLike[str], metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` (name -> Tensor) to ``path`` in the safetensors format."""
    header: dict[str, Any] = {"__metadata__": dict(metadata or {})}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype == dtypes.bfloat16:
            arr = t.cast(dtypes.float32).numpy()
            raw = (arr.view(np.uint32) >> 16).astype("<u2").tobytes()
            st = "BF16"
        else:
            arr = t.numpy()
            if arr.dtype.name not in _TO_ST:
                raise SafetensorsError(f"safe_save: {name} has dtype {arr.dtype}, which safetensors cannot hold")
            st = _TO_ST[arr.dtype.name]
            raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": st, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the reference writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def safe_load_metadata(path: str | os.PathLike[str]) -> tuple[dict[str, Any], int]:
    """The parsed JSON header of a safetensors file and the byte offset where its data starts."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise SafetensorsError(f"{path}: too short to be a safetensors file")
        (n,) = struct.unpack("<Q", head)
        size = os.path.getsize(path)
        if n > size - 8:
            raise SafetensorsError(f"{path}: header length {n} runs past the end of the file ({size} bytes)")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SafetensorsError(f"{path}: the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: the header is not a JSON object")
    return header, 8 + n


def safe_load(path: str | os.PathLike[str], device: str | None = None) -> dict[str, Tensor]:
    """Read a safetensors file into Tensors on ``device`` (name -> Tensor)."""
    header, start = safe_load_metadata(path)
    data = np.fromfile(path, dtype=np.uint8, offset=start)
    out: dict[str, Tensor] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        st, shape, (b, e) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
        if not 0 <= b <= e <= data.size:
            raise SafetensorsError(f"{path}: {name}'s data_offsets {[b, e]} lie outside the {data.size} data bytes")
        raw = data[b:e]
        if st == "BF16":
            arr = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
            out[name] = Tensor(arr, device=device).cast(dtypes.bfloat16)
            continue
        if st not in _FROM_ST:
            raise SafetensorsError(f"{path}: {name} has dtype {st}, which uops cannot load")
        dt = _FROM_ST[st].newbyteorder("<")
        if raw.size != int(np.prod(shape)) * dt.itemsize:
            raise SafetensorsError(f"{path}: {name} has {raw.size} bytes, its shape {shape} of {st} needs more")
        out[name] = Tensor(raw.view(dt).reshape(shape).astype(dt.newbyteorder("=")), device=device)
    return out
