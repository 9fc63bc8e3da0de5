"""The PyMC runner on real processes: sandbox limits, error mapping, a seeded fit.

Each test starts a sandboxed child that imports PyMC (several seconds); fits use small
draw counts except the eight-schools acceptance fit.
"""
from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

import sandbox
from workers.errors import (CompileError, InvalidRequest, ProgramRefused, ProgramRuntimeError,
                            ResourceLimit)
from workers.pymc_runner import fit_pymc
from workers.pymc_runner.runner import (venv_python, child_environment, child_view,
                                        warm_shared_cache)

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eight_schools"
EIGHT_SCHOOLS = (FIXTURES / "model.py").read_text()
FULL = json.loads((FIXTURES / "full.json").read_text())
HEADER = "import numpy as np\nimport pymc as pm\n\n\ndef model(data):\n"  # body from line 6
QUICK = dict(chains=2, tune=100, draws=100, seed=5)


def test_endless_loop_stops_at_the_cpu_limit_and_the_parent_survives():
    source = HEADER + "    while True:\n        pass\n"
    with pytest.raises(ResourceLimit) as err:
        fit_pymc(source, {}, limits=sandbox.Limits(cpu_seconds=12, wall_seconds=120), **QUICK)
    assert err.value.details["limit"] == "cpu"


def test_endless_loop_stops_at_the_wall_clock_limit():
    source = HEADER + "    while True:\n        pass\n"
    with pytest.raises(ResourceLimit) as err:
        fit_pymc(source, {}, limits=sandbox.Limits(cpu_seconds=600, wall_seconds=6), **QUICK)
    assert err.value.details["limit"] == "timeout"


def test_a_30_gb_allocation_is_stopped_and_reported_as_memory():
    source = HEADER + "    x = np.ones(4_000_000_000)\n    return x\n"
    with pytest.raises(ResourceLimit) as err:
        fit_pymc(source, {}, limits=sandbox.Limits(memory_mb=4096), **QUICK)
    assert err.value.details["limit"] == "memory"
    assert "memory" in str(err.value)


@pytest.mark.parametrize("body,line", [
    ("    import socket\n    socket.create_connection(('127.0.0.1', 6379))\n", 6),
    ("    f = open('/tmp/ppl-audit-outside.txt', 'w')\n", 6),
    ("    np.savetxt('/tmp/ppl-audit-outside.txt', np.zeros(2))\n", 6),
])
def test_network_and_writes_outside_the_workdir_are_refused_before_running(body, line):
    with pytest.raises(ProgramRefused) as err:
        fit_pymc(HEADER + body, {}, **QUICK)
    assert err.value.details["line"] == line
    assert not Path("/tmp/ppl-audit-outside.txt").exists()


@pytest.mark.skipif(not sandbox.network_isolation_available(),
                    reason="kernel refuses network namespaces")
def test_network_namespace_blocks_a_connect_even_without_the_verifier(tmp_path):
    """Defence in depth: a process in the runner's sandbox has no route out, even to a
    port that is listening on this host."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
        done = sandbox.run([venv_python(), "-c", code], limits=sandbox.Limits(),
                           view=child_view(tmp_path), env=child_environment(tmp_path))
        assert done.returncode != 0
        assert b"unreachable" in done.stderr or b"refused" in done.stderr
        # the same connect outside the sandbox succeeds: the namespace made the difference
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
    finally:
        server.close()


@pytest.mark.parametrize("settings", [{"backend": "stan"}, {"mass_matrix": "full"},
                                      {"target_accept": 1.0}, {"chains": 0}, {"draws": 0}])
def test_invalid_settings_are_refused_before_any_process(settings):
    with pytest.raises(InvalidRequest):
        fit_pymc(EIGHT_SCHOOLS, FULL, **{**QUICK, **settings})


def test_restricted_runtime_namespace_backs_up_the_verifier():
    """The child executes programs with an allow-listed __import__ and no open/eval."""
    from workers.pymc_runner.child import _restricted_builtins

    namespace = {"__builtins__": _restricted_builtins()}
    for code, error in [("import os", ImportError), ("import subprocess", ImportError),
                        ("from scipy import io", ImportError),
                        ("import pytensor.tensor as pt", None), ("open('x')", NameError),
                        ("eval('1')", NameError), ("type(1)", NameError),
                        # C code called from the program imports through its builtins
                        ("import numpy as np\nnp.ones((2, 2)).mean(axis=0)", None),
                        # imports give views holding only allow-listed members
                        ("import pymc as pm\npm.summary", AttributeError),
                        ("import pymc as pm\npm.Normal.dist(0.0, 1.0)", None),
                        ("from pymc import summary", ImportError),
                        ("from pymc import Normal, math", None),
                        ("import pytensor.tensor as pt\npt.math.config", AttributeError),
                        ("import pytensor.tensor as pt\npt.exp(pt.linalg.cholesky"
                         "(pt.eye(2)))", None),
                        ("from pytensor import tensor as t\nt.function", AttributeError),
                        ("import numpy.lib as lib", (ImportError, AttributeError)),
                        ("import numpy._core as c", (ImportError, AttributeError)),
                        ("from pymc.distributions.transforms import log, ordered", None),
                        ("getattr(1, 'real')", NameError), ("hasattr(1, 'real')", NameError)]:
        if error is None:
            exec(code, namespace)
        else:
            with pytest.raises(error):
                exec(code, namespace)


def test_an_exception_in_model_is_a_compile_error_naming_the_line():
    source = HEADER + "    y = data['y']\n    missing = data['nope']\n"
    with pytest.raises(CompileError) as err:
        fit_pymc(source, {"y": [1.0]}, **QUICK)
    assert err.value.details["line"] == 7
    assert "KeyError" in str(err.value) and "nope" in str(err.value)


def test_a_failure_while_sampling_is_a_runtime_error():
    source = HEADER + ("    with pm.Model() as m:\n"
                       "        mu = pm.Normal('mu', 0.0, 1.0)\n"
                       "        pm.Normal('y', mu, -1.0, observed=data['y'])\n"
                       "    return m\n")
    with pytest.raises(ProgramRuntimeError) as err:
        fit_pymc(source, {"y": [1.0, 2.0]}, **QUICK)
    assert "sampling failed" in str(err.value)


@pytest.mark.slow
def test_eight_schools_fit_is_named_shaped_and_reproducible():
    first = fit_pymc(EIGHT_SCHOOLS, FULL, chains=4, tune=1000, draws=1000, seed=11)
    expected = {"mu", "tau", *(f"theta[{i}]" for i in range(1, 9)),
                *(f"theta_trans[{i}]" for i in range(1, 9))}
    assert set(first.draws) == expected
    assert all(v.shape == (4, 1000) and v.dtype == np.float64 for v in first.draws.values())
    assert first.reportable == ["mu", "tau", "theta_trans", "theta"]
    assert first.sampler["seed"] == 11 and first.sampler["chains"] == 4
    assert first.stats["attempts"] and first.timings["sample"] > 0
    assert (first.draws["tau"] > 0).all()
    # posteriordb reference for this posterior: mu ≈ 4.4, tau ≈ 3.6
    assert 3.0 < first.draws["mu"].mean() < 6.0 and 2.0 < first.draws["tau"].mean() < 5.5
    second = fit_pymc(EIGHT_SCHOOLS, FULL, chains=4, tune=1000, draws=1000, seed=11)
    for name, values in first.draws.items():
        np.testing.assert_array_equal(values, second.draws[name], err_msg=name)


CENTERED = HEADER + """\
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta = pm.Normal("theta", mu, tau, shape=int(data["J"]))
        pm.Normal("y", theta, np.asarray(data["sigma"], dtype=float),
                  observed=np.asarray(data["y"], dtype=float))
    return m
"""


def test_divergences_trigger_retries_at_higher_target_accept():
    fit = fit_pymc(CENTERED, FULL, chains=2, tune=200, draws=200, seed=2,
                   retry_target_accepts=(0.95, 0.99), mass_matrix="diag")
    attempts = fit.stats["attempts"]
    assert attempts[0]["target_accept"] == 0.8 and attempts[0]["divergences"] > 0
    assert [a["target_accept"] for a in attempts[1:]] == [0.95, 0.99][:len(attempts) - 1]
    assert fit.divergences == min(a["divergences"] for a in attempts)
    assert fit.sampler["target_accept"] in (0.95, 0.99)
    # one child process makes every attempt: nutpie compiles the model once
    assert attempts[0]["timings"]["compile"] > 0
    assert all(a["timings"]["compile"] == 0 for a in attempts[1:])
    assert fit.stats["process"]["wall_seconds"] >= sum(a["timings"]["sample"] for a in attempts)


def test_a_low_rank_fit_still_diverging_at_the_last_target_accept_retries_it_with_a_diagonal_matrix():
    """The default mass matrix (nutpie's low-rank one) on the centred eight schools,
    which diverges whatever the matrix: after the last target_accept (here the only one)
    the same compiled sampler tries it again with a diagonal matrix; both attempts, the
    fallback and the chosen attempt's matrix are recorded (choice.diagonal_retry)."""
    fit = fit_pymc(CENTERED, FULL, chains=2, tune=200, draws=200, seed=2, target_accept=0.8,
                   retry_target_accepts=())
    attempts = fit.stats["attempts"]
    assert [(a["target_accept"], a["mass_matrix"]) for a in attempts] == [(0.8, "low_rank"), (0.8, "diag")]
    assert attempts[0]["divergences"] > 0
    assert attempts[1]["timings"]["compile"] == 0  # a sampling option: nothing recompiled
    (retry,) = fit.sampler["fallbacks"]
    assert (retry["from"], retry["from_mass_matrix"]) == ("nutpie", "low_rank")
    assert (retry["to"], retry["mass_matrix"]) == ("nutpie", "diag")
    assert f"{attempts[0]['divergences']} divergent transitions after every target_accept" in retry["reason"]
    chosen = min(reversed(attempts), key=lambda a: a["divergences"])  # fewest, later on ties
    assert fit.divergences == chosen["divergences"]
    assert fit.sampler["mass_matrix"] == chosen["mass_matrix"]
    # a diagonal fit has nothing left to try
    diag = fit_pymc(CENTERED, FULL, chains=2, tune=200, draws=200, seed=2, target_accept=0.8,
                    retry_target_accepts=(), mass_matrix="diag")
    assert len(diag.stats["attempts"]) == 1 and "fallbacks" not in diag.sampler
    assert diag.divergences > 0 and diag.sampler["mass_matrix"] == "diag"


def test_a_retry_stopped_by_the_wall_clock_keeps_the_finished_attempt():
    """The first attempt diverges; the budget then runs out inside the retry: the fit is
    the first attempt's, and the stop is recorded, not raised."""
    # a diagonal matrix: no diagonal retry after the last target_accept
    settings = dict(chains=2, tune=1000, draws=50_000, seed=2, target_accept=0.8,
                    mass_matrix="diag")
    first = fit_pymc(CENTERED, FULL, retry_target_accepts=(), **settings)
    assert first.divergences > 0
    spent = first.stats["process"]["wall_seconds"]
    # The 0.9999 retry samples for about 20 s (measured: 40 s at 100,000 draws), far
    # longer than any budget below leaves after attempt 0; a budget too small for attempt 0
    # itself (a slower start on a loaded machine) raises, and the next one is tried.
    for share in (1.3, 1.6, 2.0):
        try:
            fit = fit_pymc(CENTERED, FULL, retry_target_accepts=(0.9999,), **settings,
                           limits=sandbox.Limits(wall_seconds=share * spent + 2,
                                                 cpu_seconds=600, memory_mb=4096))
        except ResourceLimit:
            continue
        attempts = fit.stats["attempts"]
        assert attempts[0]["divergences"] == first.divergences
        assert "error" in attempts[-1] or "skipped" in attempts[-1], attempts
        for name, values in first.draws.items():
            np.testing.assert_array_equal(values, fit.draws[name], err_msg=name)
        return
    pytest.fail("no budget let attempt 0 finish")


KIDIQ_MOMIQ = HEADER + """\
    mom_iq = np.asarray(data["mom_iq"], dtype=float)
    with pm.Model() as m:
        beta = pm.Flat("beta", shape=2)
        sigma = pm.HalfCauchy("sigma", 2.5)
        pm.Normal("kid_score", beta[0] + beta[1] * mom_iq, sigma,
                  observed=np.asarray(data["kid_score"], dtype=float))
    return m
"""


@pytest.mark.slow
def test_nutpie_draws_do_not_depend_on_the_cache_state(tmp_path, monkeypatch):
    """Same seed, cold then warm compile cache: identical draws (with numba fastmath on,
    kidiq's differed). Warmed, the program's nutpie callbacks are loaded from the cache
    (nutpie_wrappers), only where the compiled code is the same: other observed data
    compile their own log-density callback, and a sandboxed fit saves none to the shared
    cache."""
    import zipfile

    archive = Path(__file__).resolve().parents[2] / "corpus" / "posterior_database" / "data" / "data" / "kidiq.json.zip"
    with zipfile.ZipFile(archive) as z:
        data = json.loads(z.read(z.namelist()[0]))
    monkeypatch.setenv("PPL_AUDIT_CACHE", str(tmp_path / "cache"))
    settings = dict(chains=2, tune=300, draws=300, seed=4, backend="nutpie",
                    mass_matrix="diag", retry_target_accepts=())
    cold = fit_pymc(KIDIQ_MOMIQ, data, **settings)
    assert not list((tmp_path / "cache").rglob("*.nbi"))  # a run never warms the shared cache
    warm_shared_cache({"kidiq": (KIDIQ_MOMIQ, [data], "strict")}, backends=("nutpie",))  # ours
    callbacks = list((tmp_path / "cache").rglob("*logp_numba*.nbi"))
    assert len(callbacks) == 1  # the trusted warm-up saved its log-density callback
    warm = fit_pymc(KIDIQ_MOMIQ, data, **settings)
    assert warm.timings["compile"] < cold.timings["compile"]
    assert (cold.stats["session"]["callbacks_cached"], warm.stats["session"]["callbacks_cached"]) == (0, 2)
    for name in cold.draws:
        np.testing.assert_array_equal(cold.draws[name], warm.draws[name], err_msg=name)
    other = dict(data, kid_score=[v + 1.0 for v in data["kid_score"]])
    shifted = fit_pymc(KIDIQ_MOMIQ, other, **settings)
    # the expand callback (constrained values: no data in it) is the same code and is
    # loaded; the log-density's holds the data and is compiled anew
    assert shifted.stats["session"]["callbacks_cached"] == 1
    assert not np.array_equal(shifted.draws["beta[1]"], warm.draws["beta[1]"])
    assert list((tmp_path / "cache").rglob("*logp_numba*.nbi")) == callbacks


@pytest.mark.slow
def test_numba_optimisation_level_changes_compile_time_not_draws(tmp_path, monkeypatch):
    """The child compiles at LLVM level 1 (runner.NUMBA_OPT) to save compile time; with
    fastmath off LLVM may not reorder floating-point arithmetic at any level, so the
    draws equal those of numba's default level 3 (and would not with fastmath on)."""
    from workers.pymc_runner import runner

    assert child_environment(tmp_path)["NUMBA_OPT"] == runner.NUMBA_OPT == "1"
    monkeypatch.setenv("PPL_AUDIT_CACHE", str(tmp_path / "cache"))  # both compile cold
    settings = dict(chains=2, tune=300, draws=300, seed=4, backend="nutpie",
                    mass_matrix="diag", retry_target_accepts=())
    data = {"N": 5, "y": [0.3, -1.2, 2.5, 0.8, 1.1]}
    source = HEADER + """\
    y = np.asarray(data["y"], dtype=float)
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 5.0)
        sigma = pm.HalfCauchy("sigma", 2.5)
        pm.StudentT("y", nu=4, mu=mu, sigma=sigma, observed=y)
    return m
"""
    level_one = fit_pymc(source, data, **settings)
    monkeypatch.setattr(runner, "NUMBA_OPT", "3")
    level_three = fit_pymc(source, data, **settings)
    for name in level_one.draws:
        np.testing.assert_array_equal(level_one.draws[name], level_three.draws[name],
                                      err_msg=name)


def _ours_and_nutpies(source: str, data: dict, seed: int, monkeypatch):
    """The same nutpie fit with our callbacks (the child's default), then nutpie's own."""
    from workers.pymc_runner import runner

    settings = dict(chains=2, tune=200, draws=200, seed=seed, backend="nutpie",
                    mass_matrix="diag", retry_target_accepts=())
    ours = fit_pymc(source, data, **settings)
    monkeypatch.setattr(runner, "NUTPIE_WRAPPERS", "nutpie")
    return ours, fit_pymc(source, data, **settings)


def test_our_nutpie_callbacks_give_nutpies_draws(tmp_path, monkeypatch):
    """The child replaces nutpie's two numba C callbacks by ours (nutpie_wrappers: no
    formatted shape-mismatch error to compile, ~1.2 s less on a process's first
    compile); they write the same values, so a seed's draws and sampler statistics are
    nutpie's own. Eight schools' Deterministic theta goes through the expand callback."""
    assert child_environment(tmp_path)["PPL_AUDIT_NUTPIE_WRAPPERS"] == "ppl-audit"
    ours, theirs = _ours_and_nutpies(EIGHT_SCHOOLS, FULL, 11, monkeypatch)
    assert ours.versions["nutpie_wrappers"] == "ppl-audit"  # the installed nutpie fits
    assert theirs.versions["nutpie_wrappers"] == "nutpie"
    assert set(ours.draws) == set(theirs.draws) >= {"mu", "tau", "theta[1]", "theta[8]"}
    for name in ours.draws:
        np.testing.assert_array_equal(ours.draws[name], theirs.draws[name], err_msg=name)
    for stat in ("divergences_per_chain", "step_size", "n_steps", "acceptance", "e_bfmi"):
        assert ours.stats[stat] == theirs.stats[stat], stat


def test_our_nutpie_callbacks_read_shared_data_as_nutpie_does(tmp_path, monkeypatch):
    """A program with ``pm.Data`` has shared variables, which nutpie's callbacks read
    through its ``user_data`` record; ours then call nutpie's extraction function (and
    are compiled, not cached): the same draws as nutpie's own."""
    source = HEADER + """\
    with pm.Model() as m:
        y = pm.Data("y", np.asarray(data["y"], dtype=float))
        sigma = pm.Data("sigma", np.asarray(data["sigma"], dtype=float))
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        z = pm.Normal("z", 0.0, 1.0, shape=int(data["J"]))
        pm.Deterministic("theta", mu + tau * z)
        pm.Normal("obs", mu=mu + tau * z, sigma=sigma, observed=y)
    return m
"""
    ours, theirs = _ours_and_nutpies(source, FULL, 12, monkeypatch)
    assert ours.versions["nutpie_wrappers"] == "ppl-audit"
    # the log-density's callback reads the data and is never cached
    assert ours.stats["session"]["callbacks_cached"] <= 1
    assert set(ours.draws) == set(theirs.draws) >= {"mu", "tau", "theta[8]"}
    for name in ours.draws:
        np.testing.assert_array_equal(ours.draws[name], theirs.draws[name], err_msg=name)
