"""The standard's inspection API: ``__array_namespace_info__()`` (devices, dtypes, capabilities)."""

from __future__ import annotations

from typing import Any

from uops.dtypes import DType, dtypes

_BY_KIND: dict[str, tuple[DType, ...]] = {
    "bool": (dtypes.bool,),
    "signed integer": (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64),
    "unsigned integer": (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64),
    "real floating": (dtypes.float32, dtypes.float64),
}
_NAMES = {
    dtypes.bool: "bool", dtypes.int8: "int8", dtypes.int16: "int16", dtypes.int32: "int32", dtypes.int64: "int64",
    dtypes.uint8: "uint8", dtypes.uint16: "uint16", dtypes.uint32: "uint32", dtypes.uint64: "uint64",
    dtypes.float32: "float32", dtypes.float64: "float64",
}  # fmt: skip


class Info:
    """What this namespace offers, asked at run time (the standard's inspection object)."""

    def capabilities(self) -> dict[str, Any]:
        return {"boolean indexing": False, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self) -> str:
        from uops.plugins import Device

        return Device.DEFAULT

    def devices(self) -> list[str]:
        from uops.plugins import Device

        return [Device.DEFAULT]

    def default_dtypes(self, *, device: Any = None) -> dict[str, DType]:
        return {
            "real floating": dtypes.default_float,
            "integral": dtypes.int64,
            "indexing": dtypes.int64,
        }

    def dtypes(self, *, device: Any = None, kind: str | tuple[str, ...] | None = None) -> dict[str, DType]:
        kinds = (kind,) if isinstance(kind, str) else kind
        if kinds is None:
            out = [d for ds in _BY_KIND.values() for d in ds]
        else:
            out = []
            for k in kinds:
                if k == "integral":
                    out += [*_BY_KIND["signed integer"], *_BY_KIND["unsigned integer"]]
                elif k == "numeric":
                    out += [d for n, ds in _BY_KIND.items() if n != "bool" for d in ds]
                elif k == "complex floating":
                    continue
                elif k in _BY_KIND:
                    out += list(_BY_KIND[k])
                else:
                    raise ValueError(f"unknown dtype kind {k!r}")
        return {_NAMES[d]: d for d in out}


def __array_namespace_info__() -> Info:
    return Info()
