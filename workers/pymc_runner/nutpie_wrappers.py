"""nutpie's two C callbacks, without numba's formatted error paths (child only; issue 11).

nutpie hands its Rust sampler two numba ``cfunc`` wrappers around PyTensor's compiled
functions: the log-density with its gradient, and the "expand" function (constrained
values and Deterministics of a draw). Each copies its result with ``out[...] = arr``.
A slice assignment from an array makes numba compile its shape-mismatch error, which
formats the two shapes as text (``str(int)``, string concatenation, ``repr``) in
nopython mode: ~1.2 s of typing and lowering, paid by the first model a process compiles
(numba keeps it for later ones, so a pre-warmed standby child paid it in its pre-warm).
Measured (eight schools, fresh process, shared cache copy, one core): nutpie's first
compile of a tiny model 3.1 s with nutpie's wrappers, 1.9-2.0 s with these.

These wrappers do what nutpie's do, with the same return codes, but copy element by
element after comparing the length (nutpie's slice assignment would raise on a wrong
length and return the same code), and test finiteness in the same loop. The values
written are the same bits, so the draws for a seed are identical (tested:
``tests/integration/test_pymc_runner.py``).

They replace two private factories of ``nutpie.compile_pymc`` for the versions whose
factories have the signatures below (checked, not assumed); any other nutpie keeps its
own wrappers (slower first compile, same draws). :func:`install` says which are used;
the fit's ``versions`` record it (``nutpie_wrappers``).
"""
from __future__ import annotations

import inspect
import os

#: The factories' parameters in the nutpie releases these replace (0.16.x).
_LOGP_PARAMETERS = ["n_dim", "logp_fn", "user_data", "shared_logp", "shared_data"]
_EXPAND_PARAMETERS = ["n_dim", "n_expanded", "expand_fn", "user_data", "shared_vars",
                      "shared_data"]

_installed: str | None = None


def install() -> str:
    """Use these wrappers for every later ``nutpie.compile_pymc_model`` in this process,
    if the installed nutpie has the factories they replace and the child's environment
    asks for them (``PPL_AUDIT_NUTPIE_WRAPPERS``, from ``runner.NUTPIE_WRAPPERS``; a test
    sets ``nutpie`` to compare draws). Returns ``"ppl-audit"`` if they are used,
    ``"nutpie"`` if nutpie's own are. Idempotent."""
    global _installed
    if _installed is not None:
        return _installed
    if os.environ.get("PPL_AUDIT_NUTPIE_WRAPPERS", "ppl-audit") != "ppl-audit":
        _installed = "nutpie"
        return _installed
    from nutpie import compile_pymc

    def parameters(name: str) -> list[str] | None:
        factory = getattr(compile_pymc, name, None)
        if factory is None:
            return None
        return list(inspect.signature(factory).parameters)

    fits = (parameters("_make_c_logp_func") == _LOGP_PARAMETERS
            and parameters("_make_c_expand_func") == _EXPAND_PARAMETERS
            and callable(getattr(compile_pymc, "make_extraction_fn", None)))
    if fits:
        compile_pymc._make_c_logp_func = _make_c_logp_func
        compile_pymc._make_c_expand_func = _make_c_expand_func
    _installed = "ppl-audit" if fits else "nutpie"
    return _installed


def installed() -> str | None:
    """What :func:`install` chose in this process (None before it ran)."""
    return _installed


def _make_c_logp_func(n_dim, logp_fn, user_data, shared_logp, shared_data):
    import numba
    import numpy as np
    from nutpie.compile_pymc import make_extraction_fn

    extract = make_extraction_fn(logp_fn, shared_data, shared_logp, user_data.dtype)
    c_sig = numba.types.int64(
        numba.types.uint64,
        numba.types.CPointer(numba.types.double),
        numba.types.CPointer(numba.types.double),
        numba.types.CPointer(numba.types.double),
        numba.types.voidptr,
    )

    def logp_numba(dim, x_, out_, logp_, user_data_):
        # nutpie's codes: -1 wrong dimension, 1 an error, 3 gradient not finite,
        # 4 log-density not finite, 0 success
        if dim != n_dim:
            return -1
        try:
            x = numba.carray(x_, (n_dim,))
            out = numba.carray(out_, (n_dim,))
            logp = numba.carray(logp_, ())
            logp_val, grad = extract(x, user_data_)
            logp[()] = logp_val
            if grad.shape[0] != n_dim:
                return 1
            finite = True
            for i in range(n_dim):
                out[i] = grad[i]
                if not np.isfinite(grad[i]):
                    finite = False
            if not finite:
                return 3
            if not np.isfinite(logp_val):
                return 4
        except Exception:  # noqa: BLE001 - nutpie's contract: a code, not an exception
            return 1
        return 0

    return logp_numba, c_sig


def _make_c_expand_func(n_dim, n_expanded, expand_fn, user_data, shared_vars, shared_data):
    import numba
    from nutpie.compile_pymc import make_extraction_fn

    extract = make_extraction_fn(expand_fn, shared_data, shared_vars, user_data.dtype)
    c_sig = numba.types.int64(
        numba.types.uint64,
        numba.types.uint64,
        numba.types.CPointer(numba.types.double),
        numba.types.CPointer(numba.types.double),
        numba.types.voidptr,
    )

    def expand_numba(dim, expanded, x_, out_, user_data_):
        # nutpie's codes: -1 wrong dimensions, -2 an error, 0 success
        if dim != n_dim:
            return -1
        if expanded != n_expanded:
            return -1
        try:
            x = numba.carray(x_, (n_dim,))
            out = numba.carray(out_, (n_expanded,))
            (values,) = extract(x, user_data_)
            if values.shape[0] != n_expanded:
                return -2
            for i in range(n_expanded):
                out[i] = values[i]
        except Exception:  # noqa: BLE001 - nutpie's contract: a code, not an exception
            return -2
        return 0

    return expand_numba, c_sig
