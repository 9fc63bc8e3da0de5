"""Draws at rest: compressed NumPy archives in the database, NetCDF on download.

Stored form: ``np.savez_compressed`` of {scalar name: float64 (chains, draws)}; SPEC
§2.3 names such as ``theta[1]`` are kept verbatim as archive keys. Download form: an
ArviZ ``InferenceData`` (group ``posterior``) written as NetCDF, with vector and matrix
parameters folded back into arrays (``theta`` with a ``theta_dim_0`` dimension).
"""
from __future__ import annotations

import io
import os
import tempfile
from collections import defaultdict

import numpy as np

from workers.fit import _SCALAR


def encode_draws(draws: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    # savez keys must be valid file names inside the zip; '[' and ',' are fine there
    np.savez_compressed(buf, **{k: np.asarray(v, dtype=np.float64) for k, v in draws.items()})
    return buf.getvalue()


def decode_draws(blob: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
        return {k: archive[k] for k in archive.files}


def fold_scalars(draws: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """{``theta[1]``: (c, n), …} -> {``theta``: (c, n, 8)}; scalars stay (c, n)."""
    groups: dict[str, list[tuple[tuple[int, ...], np.ndarray]]] = defaultdict(list)
    out: dict[str, np.ndarray] = {}
    for name, values in draws.items():
        m = _SCALAR.match(name)
        if not m or not m.group("idx"):
            out[name] = np.asarray(values)
            continue
        idx = tuple(int(i) - 1 for i in m.group("idx").split(","))
        groups[m.group("base")].append((idx, np.asarray(values)))
    for base, items in groups.items():
        shape = tuple(max(idx[d] for idx, _ in items) + 1 for d in range(len(items[0][0])))
        first = items[0][1]
        arr = np.full(first.shape + shape, np.nan)
        for idx, values in items:
            arr[(Ellipsis, *idx)] = values
        out[base] = arr
    return out


def to_netcdf(draws: dict[str, np.ndarray], attrs: dict | None = None) -> bytes:
    """NetCDF bytes of an ArviZ InferenceData holding ``draws`` as its posterior."""
    import arviz as az  # heavy import, only when someone downloads

    idata = az.from_dict(posterior=fold_scalars(draws), attrs=attrs or {})
    fd, path = tempfile.mkstemp(suffix=".nc")
    os.close(fd)
    try:
        idata.to_netcdf(path)
        with open(path, "rb") as fh:
            return fh.read()
    finally:
        os.unlink(path)
