"""Which NUTS backend and mass matrix fit a PyMC model: the rule measured by
``benchmarks/backend_choice.py`` (figures there and in docs/ARCHITECTURE.md, "NUTS
backend choice").

``model_size`` reads a built ``pm.Model`` (it runs in the sandboxed child, after the
program built its model, and compiles nothing); ``choose`` is pure. The child records
``choose(...)``'s result in the evidence (``sampler.backend_choice``).
"""
from __future__ import annotations

import math

#: What ``choose`` may return as the backend when ``requested == "auto"``.
AUTO = "auto"


def _static_size(variable) -> int | None:
    """Number of elements of a tensor variable when its shape is known without running
    anything (static type shape, or a shape graph that folds to constants)."""
    shape = getattr(variable.type, "shape", None)
    if shape is not None and all(s is not None for s in shape):
        return math.prod(shape)
    import pytensor
    from pytensor.compile.mode import Mode

    # The Python linker: no C or numba code is generated for a shape evaluation.
    try:
        fn = pytensor.function([], variable.shape, mode=Mode(linker="py", optimizer="fast_run"),
                               on_unused_input="ignore", accept_inplace=True)
        return math.prod(int(s) for s in fn())
    except Exception:  # noqa: BLE001 - a shape that needs inputs: size unknown
        return None


def _data_size(value) -> int | None:
    data = getattr(value, "data", None)  # TensorConstant
    if data is None and hasattr(value, "get_value"):  # shared variable
        data = value.get_value(borrow=True)
    if data is not None:
        return int(getattr(data, "size", 1))
    return _static_size(value)


def model_size(model) -> dict:
    """Size of a built model, in scalars and graph nodes.

    ``free_scalars``: unconstrained dimensions NUTS moves in (elements of the value
    variables of the free random variables); ``observed_scalars``: elements of the
    observed data; ``logp_nodes``: apply nodes of the model's (unrewritten) joint
    log-density graph, a proxy for the cost of one gradient. A size that cannot be known
    without inputs counts as ``None``.
    """
    from pytensor.graph.traversal import applys_between

    free = [_static_size(model.rvs_to_values[rv]) for rv in model.free_RVs]
    observed = [_data_size(model.rvs_to_values[rv]) for rv in model.observed_RVs]
    logp = model.logp()
    nodes = sum(1 for _ in applys_between(model.value_vars, [logp]))
    return {
        "free_scalars": None if None in free else int(sum(free)),
        "observed_scalars": None if None in observed else int(sum(observed)),
        "logp_nodes": int(nodes),
    }
