"""nutpie's two C callbacks, built by us: no formatted error paths, cached with the
program's code (child only; issue 11).

nutpie hands its Rust sampler two numba ``cfunc`` callbacks around PyTensor's compiled
functions: the log-density with its gradient, and the "expand" function (constrained
values and Deterministics of a draw). nutpie's own (``nutpie.compile_pymc``, 0.16)
make every compile dearer in three ways:

* they copy their result with ``out[...] = arr``; a slice assignment from an array makes
  numba compile its shape-mismatch error, which formats both shapes as text in nopython
  mode: ~1.2 s, paid by the first model a process compiles. Ours copy element by element
  after comparing the length (nutpie's would raise on a wrong length and return the
  same code).
* one ``try`` wraps the whole body; numba's IR analysis of it (liveness over the
  exception edges of every statement) cost ~0.6 s per callback. Ours wrap only the call
  to PyTensor's function, the one statement that can raise.
* they are closures, which numba cannot cache (its cache key pickles the closure, which
  differs by process), so every compile types and lowers them again and re-links the
  program's whole-graph function into them, even when PyTensor's cache holds that
  function (our warmed corpus translations): ~1.7 s of a 3.3 s cached compile (arK).
  Ours are generated source whose only free names are PyTensor's function and the sizes,
  registered with PyTensor's numba cache under a key made of PyTensor's own key for that
  function (which covers the graph and its constants, i.e. the data), the sizes and our
  source. A program whose functions PyTensor can cache then loads its callbacks too.
  Where PyTensor gives no key, or the model has shared variables (read through nutpie's
  ``user_data``, with nutpie's extraction function), they are compiled, not cached.

Measured (one core, fresh process, a copy of the shared cache without the program):
the standby's pre-warm 3.2-3.3 s -> 1.4 s; then eight schools' first compile 3.1-3.3 ->
2.4-2.5 s, the second scope's 1.8 -> 1.3-1.6 s; a program whose callbacks the cache holds
0.35-0.6 s.

The values written are the same bits, so the draws for a seed are nutpie's (tested:
``tests/integration/test_pymc_runner.py``). Caching follows PyTensor's cache rules: a
sandboxed child works on a private copy of the shared cache that is thrown away, and only
``warm-cache``'s trusted children (our own programs) save callbacks
(``PPL_AUDIT_CALLBACK_CACHE=save``) into what is copied back; the others only load
(saving emits the whole program's object code again, ~1 s, for nothing).

:func:`install` replaces ``nutpie.compile_pymc._compile_pymc_model_numba`` (the numba
branch of ``compile_pymc_model``) for nutpie 0.16 releases whose private helpers have
the signatures used here (checked, not assumed); any other nutpie keeps its own (slower,
same draws). The fit records which (``versions.nutpie_wrappers``) and how many of the
model's two callbacks came from the cache (``stats.session.callbacks_cached``).
"""
from __future__ import annotations

import hashlib
import inspect
import os

#: Bumped whenever the generated source or the key changes meaning.
VERSION = 1

#: nutpie's private helpers used here, with the parameters of the 0.16 releases.
_HELPERS = {
    "_compile_pymc_model_numba": ["model", "pymc_initial_point_fn", "var_names", "kwargs"],
    "_make_functions": ["model", "mode", "compute_grad", "join_expanded",
                        "pymc_initial_point_fn", "var_names"],
    "make_user_data": ["shared_vars", "shared_data"],
    "make_extraction_fn": ["inner", "shared_data", "shared_vars", "record_dtype"],
    "_prepare_dims_and_coords": ["model", "shape_info"],
}

# nutpie's return codes. logp: -1 wrong dimension, 1 an error, 3 gradient not finite,
# 4 log-density not finite, 0 success. expand: -1 wrong dimensions, -2 an error.
_LOGP_SOURCE = """
def logp_numba(dim, x_, out_, logp_, user_data_):
    if dim != n_dim:
        return -1
    x = numba.carray(x_, (n_dim,))
    out = numba.carray(out_, (n_dim,))
    logp = numba.carray(logp_, ())
    try:
        logp_val, grad = {call}
    except Exception:
        return 1
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
    return 0
"""

_EXPAND_SOURCE = """
def expand_numba(dim, expanded, x_, out_, user_data_):
    if dim != n_dim:
        return -1
    if expanded != n_expanded:
        return -1
    x = numba.carray(x_, (n_dim,))
    out = numba.carray(out_, (n_expanded,))
    try:
        (values,) = {call}
    except Exception:
        return -2
    if values.shape[0] != n_expanded:
        return -2
    for i in range(n_expanded):
        out[i] = values[i]
    return 0
"""

_installed: str | None = None


def install() -> str:
    """Build nutpie's callbacks with this module in every later
    ``nutpie.compile_pymc_model(..., backend="numba")`` of this process, if the installed
    nutpie has the helpers used here and the child's environment asks for it
    (``PPL_AUDIT_NUTPIE_WRAPPERS``, from ``runner.NUTPIE_WRAPPERS``; a test sets
    ``nutpie`` to compare draws). Returns ``"ppl-audit"`` if ours are used, ``"nutpie"``
    if nutpie's own are. Idempotent."""
    global _installed
    if _installed is not None:
        return _installed
    if os.environ.get("PPL_AUDIT_NUTPIE_WRAPPERS", "ppl-audit") != "ppl-audit":
        _installed = "nutpie"
        return _installed
    import nutpie
    from nutpie import compile_pymc

    def parameters(name: str) -> list[str] | None:
        helper = getattr(compile_pymc, name, None)
        return list(inspect.signature(helper).parameters) if callable(helper) else None

    fits = (str(getattr(nutpie, "__version__", "")).startswith("0.16.")
            and all(parameters(name) == expected for name, expected in _HELPERS.items())
            and hasattr(compile_pymc, "CompiledPyMCModel"))
    if fits:
        compile_pymc._compile_pymc_model_numba = _compile_numba
    _installed = "ppl-audit" if fits else "nutpie"
    return _installed


def installed() -> str | None:
    """What :func:`install` chose in this process (None before it ran)."""
    return _installed


def callbacks_cached(compiled) -> int:
    """How many of a compiled model's two callbacks were loaded from the cache (0-2;
    a callback compiled here, ours or nutpie's, counts no hit)."""
    return sum(int(func.cache_hits > 0)
               for func in (compiled.compiled_logp_func, compiled.compiled_expand_func))


def _compile_numba(model, pymc_initial_point_fn, var_names=None, callbacks_cache=True,
                   **kwargs):
    """nutpie's numba branch of ``compile_pymc_model`` with our callbacks (same
    arguments, same ``CompiledPyMCModel``; ``kwargs`` go to ``numba.cfunc`` as in
    nutpie). ``callbacks_cache=False`` compiles the callbacks even where they could be
    loaded: the standby's pre-warm, whose point is to exercise numba's compiler."""
    import numpy as np
    from nutpie import compile_pymc as cp

    n_dim, n_expanded, logp_pt, expand_pt, initial_point_fn, shape_info = cp._make_functions(
        model, mode="NUMBA", compute_grad=True, join_expanded=True,
        pymc_initial_point_fn=pymc_initial_point_fn, var_names=var_names)
    shared_data, shared_vars = {}, {}
    for var in [*logp_pt.get_shared(), *expand_pt.get_shared()]:
        if var.name in shared_vars and shared_vars[var.name] is not var:
            raise ValueError(f"Shared variables must have unique names: {var.name}")
        if var.name not in shared_vars:
            value = np.array(var.get_value(), order="C", copy=True)
            value.flags.writeable = False
            shared_data[var.name], shared_vars[var.name] = value, var
    user_data = cp.make_user_data(shared_vars, shared_data)
    logp_func = _callback(
        _LOGP_SOURCE, "logp_numba", logp_pt.vm.jit_fn, [v.name for v in logp_pt.get_shared()],
        shared_data, user_data, {"n_dim": n_dim}, callbacks_cache, kwargs)
    expand_func = _callback(
        _EXPAND_SOURCE, "expand_numba", expand_pt.vm.jit_fn,
        [v.name for v in expand_pt.get_shared()], shared_data, user_data,
        {"n_dim": n_dim, "n_expanded": n_expanded}, callbacks_cache, kwargs)
    dims, coords = cp._prepare_dims_and_coords(model, shape_info)
    return cp.CompiledPyMCModel(
        _n_dim=n_dim, dims=dims, _coords=coords,
        _shapes={name: tuple(shape) for name, _, shape in zip(*shape_info)},
        compiled_logp_func=logp_func, compiled_expand_func=expand_func,
        initial_point_func=initial_point_fn, shared_data=shared_data, user_data=user_data,
        n_expanded=n_expanded, shape_info=shape_info, logp_func=logp_pt,
        expand_func=expand_pt)


def _callback(template: str, name: str, inner, shared_names: list[str], shared_data: dict,
              user_data, sizes: dict, use_cache: bool, options: dict):
    """The compiled cfunc (loaded from the cache where it can be) for ``template``
    calling ``inner``, PyTensor's compiled function."""
    import numba
    import numpy as np
    from nutpie.compile_pymc import make_extraction_fn
    from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS, compile_numba_function_src

    signature = _SIGNATURES[name](numba.types)
    py_func = getattr(inner, "py_func", None)
    inner_key = CACHED_SRC_FUNCTIONS.get(py_func) if py_func is not None else None
    # __name__: a cached cfunc rebuilds its numba environment by importing its module
    env = {"__name__": __name__, "numba": numba, "np": np, **sizes}
    if shared_names or inner_key is None or not use_cache:
        # shared variables are read through user_data; no key: compiled, not cached
        env["extract"] = make_extraction_fn(inner, shared_data, shared_names, user_data.dtype)
        source = template.format(call="extract(x, user_data_)")
        function = compile_numba_function_src(source, name, env)
        return numba.cfunc(signature, **options)(function)
    env["inner"] = inner
    source = template.format(call="inner(x)")
    key = hashlib.sha256(
        f"ppl-audit nutpie callback {VERSION}\n{inner_key}\n{sorted(sizes.items())}\n{source}"
        .encode()).hexdigest()
    function = compile_numba_function_src(source, name, env, cache_key=key)
    if os.environ.get("PPL_AUDIT_CALLBACK_CACHE", "load") == "save":
        return numba.cfunc(signature, **{**options, "cache": True})(function)
    return _load_only_cfunc(function, signature, options)


def _load_only_cfunc(function, signature, options: dict):
    """``numba.cfunc(signature, cache=True)(function)`` that loads from the cache but
    does not save what it had to compile: saving emits the whole program's object code
    again (~1 s on eight schools), and an untrusted child's private cache copy is thrown
    away with it."""
    from numba.core import sigutils
    from numba.core.caching import FunctionCache
    from numba.core.ccallback import CFunc

    class LoadOnly(FunctionCache):
        def save_overload(self, sig, data):
            pass

    compiled = CFunc(function, sigutils.normalize_signature(signature), locals={},
                     options=options)
    compiled._cache = LoadOnly(function)
    compiled.compile()
    return compiled


_SIGNATURES = {
    "logp_numba": lambda t: t.int64(t.uint64, t.CPointer(t.double), t.CPointer(t.double),
                                    t.CPointer(t.double), t.voidptr),
    "expand_numba": lambda t: t.int64(t.uint64, t.uint64, t.CPointer(t.double),
                                      t.CPointer(t.double), t.voidptr),
}
