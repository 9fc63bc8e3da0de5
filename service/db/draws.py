"""Draws at rest: compressed NumPy archives in the database, NetCDF on download.

Stored form: ``np.savez_compressed`` of {scalar name: float64 (chains, draws)}; SPEC
§2.3 names such as ``theta[1]`` are kept verbatim as archive keys. Download form: an
ArviZ ``InferenceData`` (group ``posterior``) written as NetCDF, with vector and matrix
parameters folded back into arrays (``theta`` with a ``theta_dim_0`` dimension).

Stored names came from an untrusted program, so before anything is decoded or
allocated a download checks, from the archive's headers alone, that the draws fit the
operator's caps (scalars, bytes) and that every name is a SPEC §2.3 name whose indices
are dense (1…n in each dimension) and consistent with its base. A folded array is then
exactly as large as the draws it holds.
"""
from __future__ import annotations

import io
import math
import os
import re
import tempfile
import zipfile
from collections import defaultdict

import numpy as np

from workers.errors import InvalidRequest

#: SPEC §2.3: a base name, optionally 1-based indices without leading zeros
SPEC_NAME = re.compile(r"(?P<base>[A-Za-z_][A-Za-z0-9_.]{0,99})"
                       r"(?:\[(?P<idx>[1-9][0-9]{0,8}(?:,[1-9][0-9]{0,8})*)\])?")
_MB = 1024 * 1024


class UnservableDraws(InvalidRequest):
    """Stored draws that the service will not decode or fold (names or size)."""


def encode_draws(draws: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    # savez keys must be valid file names inside the zip; '[' and ',' are fine there
    np.savez_compressed(buf, **{k: np.asarray(v, dtype=np.float64) for k, v in draws.items()})
    return buf.getvalue()


def stored_shapes(blob: bytes, max_members: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """{name: (shape, dtype)} read from each array's ``.npy`` header, nothing else
    decompressed. More than ``max_members`` arrays is refused before any is opened."""
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        members = archive.infolist()
        if len(members) > max_members:
            raise UnservableDraws(f"the fit has {len(members)} scalars, above the operator's "
                                  f"cap of {max_members} (PPL_AUDIT_LIMITS__SCALARS)")
        out = {}
        for info in members:
            with archive.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
                else:
                    shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            out[info.filename.removesuffix(".npy")] = (tuple(shape), np.dtype(dtype))
        return out


def check_stored(blob: bytes, *, max_scalars: int, max_mb: float) -> None:
    """Raise :class:`UnservableDraws` unless the archive holds at most ``max_scalars``
    float64 arrays of one common (chains, draws) shape, at most ``max_mb`` MB in all,
    named as SPEC §2.3 with dense indices (:func:`check_names`)."""
    shapes = stored_shapes(blob, max_scalars)
    kinds = {(shape, dtype.str) for shape, dtype in shapes.values()}
    if len(kinds) > 1 or any(len(s) != 2 or d != np.dtype(np.float64).str for s, d in kinds):
        raise UnservableDraws("the fit's draws are not float64 arrays of one (chains, draws) shape")
    values = sum(math.prod(shape) for shape, _ in shapes.values())
    if values * 8 > max_mb * _MB:
        raise UnservableDraws(f"the fit's draws are {values * 8 / _MB:.1f} MB, above the "
                              f"operator's cap of {max_mb:g} MB (PPL_AUDIT_LIMITS__OUTPUT_MB)")
    check_names(list(shapes), max_scalars=max_scalars)


def check_names(names: list[str], *, max_scalars: int) -> dict[str, tuple[int, ...]]:
    """{base: shape} of SPEC §2.3 scalar names (``()`` for a plain scalar), or
    :class:`UnservableDraws` naming the first bad name. Indices must be dense: a base of
    shape (n1, …, nk) reports exactly its n1 × … × nk scalars, no more, no fewer."""
    if len(names) > max_scalars:
        raise UnservableDraws(f"the fit has {len(names)} scalars, above the operator's cap "
                              f"of {max_scalars} (PPL_AUDIT_LIMITS__SCALARS)")
    indices: dict[str, set[tuple[int, ...]]] = defaultdict(set)
    for name in names:
        m = SPEC_NAME.fullmatch(name)
        if m is None:
            raise UnservableDraws(f"{ascii(name)} is not a SPEC §2.3 parameter name "
                                  "(mu, theta[1], beta[2,3]: 1-based, no leading zeros)")
        base, idx = m.group("base"), m.group("idx")
        index = tuple(int(i) for i in idx.split(",")) if idx else ()
        seen = indices[base]
        rank = len(next(iter(seen))) if seen else len(index)
        if rank != len(index):
            what = ("reported both as a scalar and indexed" if 0 in (rank, len(index))
                    else "indexed with different numbers of dimensions")
            raise UnservableDraws(f"{base!r} is {what} (at {ascii(name)})")
        seen.add(index)
    shapes = {}
    for base, seen in indices.items():
        rank = len(next(iter(seen)))
        shape = tuple(max(ix[d] for ix in seen) for d in range(rank))
        # distinct indices each within 1..n_d: dense iff there are n1 × … × nk of them
        if math.prod(shape) != len(seen):
            worst = max(seen, key=lambda ix: ix)
            raise UnservableDraws(
                f"{base}[{','.join(map(str, worst))}] is not dense: {base} reports "
                f"{len(seen)} scalar(s) but its largest indices span {math.prod(shape)}")
        shapes[base] = shape
    return shapes


def decode_draws(blob: bytes) -> dict[str, np.ndarray]:
    """The stored arrays. Call :func:`check_stored` first on draws from a program."""
    with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
        return {k: archive[k] for k in archive.files}


def fold_scalars(draws: dict[str, np.ndarray], max_scalars: int) -> dict[str, np.ndarray]:
    """{``theta[1]``: (c, n), …} -> {``theta``: (c, n, 8)}; scalars stay (c, n). Names
    are checked first (:func:`check_names`), so no array is larger than its draws."""
    shapes = check_names(list(draws), max_scalars=max_scalars)
    out: dict[str, np.ndarray] = {}
    for base, shape in shapes.items():
        if not shape:
            out[base] = np.asarray(draws[base])
    for name, values in draws.items():
        m = SPEC_NAME.fullmatch(name)
        base, idx = m.group("base"), m.group("idx")
        if not idx:
            continue
        if base not in out:
            out[base] = np.empty(values.shape + shapes[base])
        out[base][(Ellipsis, *(int(i) - 1 for i in idx.split(",")))] = values
    return out


def netcdf_file(draws: dict[str, np.ndarray], attrs: dict | None, *, max_scalars: int) -> str:
    """Path of a temporary NetCDF file of an ArviZ InferenceData holding ``draws`` as
    its posterior; the caller deletes it (the API streams it, then unlinks)."""
    import arviz as az  # heavy import, only when someone downloads

    idata = az.from_dict(posterior=fold_scalars(draws, max_scalars), attrs=attrs or {})
    fd, path = tempfile.mkstemp(suffix=".nc")
    os.close(fd)
    try:
        idata.to_netcdf(path)
    except BaseException:
        os.unlink(path)
        raise
    return path


def to_netcdf(draws: dict[str, np.ndarray], attrs: dict | None = None, *,
              max_scalars: int = 2_000) -> bytes:
    """NetCDF bytes of :func:`netcdf_file` (for callers that want them in memory)."""
    path = netcdf_file(draws, attrs, max_scalars=max_scalars)
    try:
        with open(path, "rb") as fh:
            return fh.read()
    finally:
        os.unlink(path)
