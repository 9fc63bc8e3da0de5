"""The run-time layers behind the PyMC verifier, each tested with the verifier out of the
way: the child's checks on the built model (forgeries F2, F3, Potential), its module
views (the member allow-list at run time), and the parent's last check on scalar names.
"""
from __future__ import annotations

import numpy as np
import pytest

from workers.errors import ProgramRefused
from workers.pymc_runner.child import ProgramFailure, _restricted_builtins, check_model
from workers.pymc_runner.runner import make_fit

pytestmark = pytest.mark.integration
pm = pytest.importorskip("pymc")


def _refusal(model) -> str:
    with pytest.raises(ProgramFailure) as info:
        check_model(model)
    assert info.value.stage == "refused"
    return info.value.message


def test_a_computed_scalar_like_name_is_refused_in_the_built_model():
    with pm.Model() as m:
        theta = pm.Normal("theta", 0.0, 1.0, shape=2)
        pm.Deterministic("theta" + "[1]", 100 + 0 * theta[0])
    assert "theta[1]" in _refusal(m)


def test_total_size_is_refused_in_the_built_model():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=np.ones(3), total_size=300)
    assert "total_size" in _refusal(m)


def test_a_potential_is_refused_in_the_built_model():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Potential("p", -mu ** 2)
    assert "Potential" in _refusal(m)


def test_an_honest_model_passes():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Deterministic("twice", 2 * mu)
        pm.Normal("y", mu, 1.0, observed=np.ones(3))
    check_model(m)


def test_module_views_hold_only_allow_listed_members():
    """A program that got past the verifier still finds no config, eval route or ArviZ."""
    namespace = {"__builtins__": _restricted_builtins()}
    exec("import pymc as pm\nimport pytensor.tensor as pt\nimport numpy as np", namespace)
    for path in ("pm.summary", "pm.sample", "pm.compile", "pm.draw", "pt.math.config",
                 "pt.function", "pt.config", "np.load", "np.lib", "pm.modelcontext"):
        with pytest.raises(AttributeError):
            eval(path, namespace)  # noqa: S307 - the test's own literal expressions
    assert eval("pm.Normal", namespace) is pm.Normal  # noqa: S307


def test_the_parent_refuses_two_variables_reporting_the_same_scalar():
    arrays = {"theta": np.zeros((1, 2, 2)), "theta[1]": np.ones((1, 2))}
    summary = {"reportable": ["theta", "theta[1]"], "stats": {"divergences": 0},
               "shapes": {}, "timings": {}, "versions": {}, "target_accept": 0.8}
    job = {"backend": "nutpie", "chains": 1, "tune": 1, "draws": 2, "seed": 1, "cores": 1,
           "mass_matrix": "diag"}
    with pytest.raises(ProgramRefused) as info:
        make_fit(summary, arrays, job, [], {"wall_seconds": 1.0})
    assert "theta[1]" in info.value.message
