"""The NUTS backend choice (workers.pymc_runner.choice): the measured rule and model sizes."""
import numpy as np
import pytest

from workers.pymc_runner.choice import LARGE_WORK, choose, is_large

# model_size of corpus posteriors measured by benchmarks/backend_choice.py
EIGHT_SCHOOLS = {"free_scalars": 10, "observed_scalars": 8, "logp_nodes": 95}
KIDIQ_MOMIQ = {"free_scalars": 3, "observed_scalars": 434, "logp_nodes": 65}
LOW_DIM_GAUSS_MIX = {"free_scalars": 5, "observed_scalars": 1000, "logp_nodes": 182}
DIAMONDS = {"free_scalars": 26, "observed_scalars": 5000, "logp_nodes": 121}
ACCEL_GP = {"free_scalars": 66, "observed_scalars": 133, "logp_nodes": 306}


@pytest.mark.parametrize("size", [EIGHT_SCHOOLS, KIDIQ_MOMIQ, LOW_DIM_GAUSS_MIX, ACCEL_GP])
def test_small_models_go_to_numpyro_with_a_dense_mass_matrix(size):
    choice = choose(size, "auto")
    assert (choice["backend"], choice["mass_matrix"]) == ("numpyro", "dense")
    assert "small model" in choice["reason"]


@pytest.mark.parametrize("size", [DIAMONDS])
def test_large_models_go_to_nutpie_with_its_low_rank_mass_matrix(size):
    choice = choose(size, "auto")
    assert (choice["backend"], choice["mass_matrix"]) == ("nutpie", "low_rank")
    assert "large model" in choice["reason"]


def test_the_threshold_is_on_observed_times_free_scalars_and_inclusive():
    free = 10
    below = {"free_scalars": free, "observed_scalars": LARGE_WORK // free - 1}
    at = {"free_scalars": free, "observed_scalars": LARGE_WORK // free}
    assert not is_large(below) and is_large(at)
    # many parameters alone do not make a model large (accel_gp: 66 free scalars)
    assert not is_large({"free_scalars": 1000, "observed_scalars": 49})


@pytest.mark.parametrize("unknown", [{"free_scalars": None, "observed_scalars": 8},
                                     {"free_scalars": 3, "observed_scalars": None}, {}])
def test_a_model_of_unknown_size_is_treated_as_small(unknown):
    assert choose(unknown, "auto")["backend"] == "numpyro"


@pytest.mark.parametrize("requested, mass", [("pymc", "dense"), ("nutpie", "low_rank"),
                                             ("numpyro", "dense"), ("blackjax", "dense")])
def test_a_requested_backend_is_honoured_whatever_the_size(requested, mass):
    for size in (EIGHT_SCHOOLS, DIAMONDS):
        choice = choose(size, requested)
        assert (choice["backend"], choice["mass_matrix"]) == (requested, mass)
        assert requested in choice["reason"]


def test_a_program_in_the_shared_compile_cache_goes_to_nutpie_whatever_its_size():
    for size in (EIGHT_SCHOOLS, DIAMONDS, {}):
        choice = choose(size, "auto", cached=True)
        assert (choice["backend"], choice["mass_matrix"]) == ("nutpie", "low_rank")
    assert choose(EIGHT_SCHOOLS, "pymc", cached=True)["backend"] == "pymc"


def test_a_requested_mass_matrix_is_honoured():
    assert choose(DIAMONDS, "auto", "diag")["mass_matrix"] == "diag"
    assert choose(EIGHT_SCHOOLS, "nutpie", "diag") == {
        "backend": "nutpie", "mass_matrix": "diag", "reason": "backend 'nutpie' requested"}


def test_model_size_counts_unconstrained_and_observed_scalars_of_a_built_model():
    pm = pytest.importorskip("pymc")
    from workers.pymc_runner.choice import model_size

    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    with pm.Model(coords={"school": range(8)}) as m:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)  # one unconstrained scalar (log tau)
        z = pm.Normal("z", 0.0, 1.0, dims="school")  # shape from coords
        beta = pm.Normal("beta", 0.0, 1.0, shape=(2, 3))
        sigma = pm.Data("sigma", np.full(8, 10.0))
        pm.Normal("y", mu + tau * z + beta.sum(), sigma, observed=y)
        pm.Normal("w", mu, 1.0, observed=pm.Data("w_obs", np.zeros((3, 4))))
    size = model_size(m)
    assert size["free_scalars"] == 1 + 1 + 8 + 6
    assert size["observed_scalars"] == 8 + 12
    assert size["logp_nodes"] > 10


def test_collapsed_chains_are_those_that_diverged_every_draw_or_lost_their_step_size():
    from workers.pymc_runner.choice import collapsed_chains

    # hmm_drive_1 at target_accept 0.99 with NumPyro (corpus run 2026-12-02): 3 of 4 chains
    stats = {"divergences_per_chain": [1000, 1000, 3, 1000],
             "step_size": [0.0, 0.0, 0.21, 0.0]}
    assert collapsed_chains(stats, 1000) == [0, 1, 3]
    # divergent everywhere with a nonzero step, or a vanished step without divergences
    assert collapsed_chains({"divergences_per_chain": [200, 0],
                             "step_size": [0.3, 1e-12]}, 200) == [0, 1]
    # many divergences are a geometry problem, not a collapse: retries handle them
    assert collapsed_chains({"divergences_per_chain": [999, 12],
                             "step_size": [0.01, 0.2]}, 1000) == []
    assert collapsed_chains({"divergences_per_chain": [0, 0]}, 1000) == []


def test_after_an_attempt_retry_fall_back_to_a_diagonal_mass_matrix_then_nutpie_or_stop():
    from workers.pymc_runner.choice import after_attempt

    dense = {"backend": "numpyro", "mass_matrix": "dense"}
    diag = {"backend": "numpyro", "mass_matrix": "diag"}
    clean = {"divergences": 0, "divergences_per_chain": [0, 0], "step_size": [0.2, 0.3]}
    some = {"divergences": 3, "divergences_per_chain": [1, 2], "step_size": [0.2, 0.3]}
    dead = {"divergences": 103, "divergences_per_chain": [100, 3], "step_size": [0.0, 0.2]}
    assert after_attempt(clean, 100, 0, 3, dense) == (None, None)
    assert after_attempt(some, 100, 0, 3, dense) == (1, None)
    # a collapsed chain: the same target_accept again, with nutpie (from either matrix)
    for choice in (dense, diag):
        position, fallback = after_attempt(dead, 100, 1, 3, choice)
        assert position == 1 and fallback["from"] == "numpyro" and fallback["to"] == "nutpie"
        assert fallback["collapsed_chains"] == [0]
        assert fallback["from_mass_matrix"] == choice["mass_matrix"]
    # still divergent at the last target_accept: a dense matrix gives way to a diagonal
    # one on the same backend, a diagonal one to nutpie; both from the first target_accept
    position, fallback = after_attempt(some, 100, 2, 3, dense)
    assert position == 0 and "3 divergent transitions after every" in fallback["reason"]
    assert (fallback["to"], fallback["mass_matrix"]) == ("numpyro", "diag")
    position, fallback = after_attempt(some, 100, 2, 3, diag)
    assert position == 0 and (fallback["to"], fallback["mass_matrix"]) == ("nutpie", "low_rank")
    # a divergence retry of a dense fit with a stalled chain uses a diagonal matrix
    stalled = dict(some, step_size=[0.004, 0.3])
    position, fallback = after_attempt(stalled, 100, 0, 3, dense)
    assert position == 1 and (fallback["to"], fallback["mass_matrix"]) == ("numpyro", "diag")
    assert fallback["stalled_chains"] == [0] and fallback["later_fits_only"] is False
    assert after_attempt(stalled, 100, 0, 3, diag) == (1, None)
    # a requested backend, or nutpie after a fallback, is never replaced: only its mass
    # matrix, at the last target_accept (diagonal_retry); with a diagonal one it stops
    low_rank = {"backend": "nutpie", "mass_matrix": "low_rank"}
    for choice, requested in ((None, None), (None, {"backend": "nutpie", "mass_matrix": "diag"}),
                              ({"backend": "nutpie", "mass_matrix": "diag"}, None)):
        assert after_attempt(some, 100, 2, 3, choice, requested) == (None, None)
    for choice, requested in ((None, low_rank), (None, {"backend": "pymc", "mass_matrix": "dense"}),
                              (low_rank, None)):
        sampler = choice or requested
        position, fallback = after_attempt(some, 100, 2, 3, choice, requested)
        assert position == 2
        assert (fallback["from"], fallback["to"]) == (sampler["backend"], sampler["backend"])
        assert (fallback["from_mass_matrix"], fallback["mass_matrix"]) == (sampler["mass_matrix"], "diag")
        assert "3 divergent transitions after every target_accept" in fallback["reason"]
        assert after_attempt(clean, 100, 2, 3, choice, requested) == (None, None)
        assert after_attempt(dead, 100, 0, 3, choice, requested) == (1, None)
        assert after_attempt(stalled, 100, 0, 3, choice, requested) == (1, None)


def test_the_longest_fallback_sequence_fits_the_attempt_bound():
    """Walk after_attempt as the child does, every attempt diverging (and, in a second
    walk, the diagonal fit's chain collapsing at each position): the parent reads at most
    ``most_attempts`` attempt files, so no walk may exceed it."""
    from workers.pymc_runner.choice import after_attempt, most_attempts

    some = {"divergences": 3, "divergences_per_chain": [1, 2], "step_size": [0.2, 0.3]}
    dead = {"divergences": 103, "divergences_per_chain": [100, 3], "step_size": [0.0, 0.2]}
    stalled = dict(some, step_size=[0.004, 0.3])
    for accepts in (1, 3):
        for collapse_at in (None, *range(accepts)):
            choice, position, attempts = {"backend": "numpyro", "mass_matrix": "dense"}, 0, 0
            while position is not None:
                attempts += 1
                diag = choice["mass_matrix"] == "diag"
                stats = (dead if diag and position == collapse_at else
                         stalled if not diag and position == collapse_at else some)
                position, fallback = after_attempt(stats, 100, position, accepts, choice)
                if fallback:
                    choice = {"backend": fallback["to"], "mass_matrix": fallback["mass_matrix"]}
            assert attempts <= most_attempts(accepts), (accepts, collapse_at, attempts)
            if collapse_at is None:  # numpyro dense, diagonal, nutpie, nutpie's diagonal retry
                assert attempts == 3 * accepts + 1
    # a requested backend: every target_accept, then the last again with a diagonal matrix
    for accepts in (1, 3):
        requested, position, attempts = {"backend": "nutpie", "mass_matrix": "low_rank"}, 0, 0
        while position is not None:
            attempts += 1
            position, fallback = after_attempt(some, 100, position, accepts, None, requested)
            if fallback:
                requested = {"backend": fallback["to"], "mass_matrix": fallback["mass_matrix"]}
        assert attempts == accepts + 1 <= most_attempts(accepts)


def test_a_stopped_childs_running_attempt_is_named_by_the_childs_own_order():
    from workers.pymc_runner.session import _next_accept

    job = {"target_accepts": [0.8, 0.95, 0.99], "draws": 100}
    ok = {"divergences": 0, "divergences_per_chain": [0, 0], "step_size": [0.2, 0.2]}
    some = {"divergences": 2, "divergences_per_chain": [1, 1], "step_size": [0.2, 0.2]}
    dead = {"divergences": 100, "divergences_per_chain": [100, 0], "step_size": [0.0, 0.2]}
    numpyro = {"backend": "numpyro"}
    assert _next_accept(job, {}) == 0.8

    def attempt(position, stats, choice):
        return {"target_accept": job["target_accepts"][position], "position": position,
                "stats": stats, "backend_choice": choice}
    assert _next_accept(job, {0: attempt(0, some, numpyro)}) == 0.95
    assert _next_accept(job, {0: attempt(0, dead, numpyro)}) == 0.8
    assert _next_accept(job, {2: attempt(2, some, numpyro)}) == 0.8
    assert _next_accept(job, {0: attempt(0, dead, None)}) == 0.95
    assert _next_accept(job, {2: attempt(2, ok, None)}) is None
    # a requested low-rank fit diverging at the last target_accept: the diagonal retry
    # of that target_accept is next; after it, nothing
    low_rank = dict(job, backend="nutpie", mass_matrix="low_rank")
    assert _next_accept(low_rank, {2: dict(attempt(2, some, None), mass_matrix="low_rank")}) == 0.99
    assert _next_accept(low_rank, {3: dict(attempt(2, some, None), mass_matrix="diag")}) is None
    # a list that repeats a value: the position, not the value, says where the child was
    twice = {"target_accepts": [0.9, 0.9, 0.99], "draws": 100}
    assert _next_accept(twice, {1: {"target_accept": 0.9, "position": 1, "stats": some,
                                    "backend_choice": None}}) == 0.99
    # a position the child's output cannot be trusted with: no guess
    for forged in (None, 3, -1, "1", True):
        assert _next_accept(job, {0: {"target_accept": 0.8, "position": forged,
                                      "stats": some, "backend_choice": None}}) is None


def test_every_backend_setting_says_what_its_standby_warms():
    from typing import get_args

    from workers.pymc_runner.runner import PREWARM
    from workers.settings import PyMCSettings

    backends = set(get_args(PyMCSettings.model_fields["backend"].annotation))
    assert set(PREWARM) == backends
    assert PREWARM["auto"][0] == "jax"  # small models, the common case, go to NumPyro


def test_a_chain_far_below_the_others_step_size_has_stalled():
    from workers.pymc_runner.choice import STALLED_STEP_RATIO, stalled_chains

    # hmm_drive_1 visible, NumPyro dense (measured): chain 0 at 0.0043, the others 0.21-0.35
    assert stalled_chains({"step_size": [0.0043, 0.21, 0.35, 0.3]}) == [0]
    assert stalled_chains({"step_size": [0.1, 0.21, 0.35, 0.3]}) == []
    edge = 0.3 / STALLED_STEP_RATIO
    assert stalled_chains({"step_size": [edge * 0.99, 0.3, 0.3]}) == [0]
    assert stalled_chains({"step_size": [edge * 1.01, 0.3, 0.3]}) == []
    assert stalled_chains({"step_size": [0.3]}) == [] and stalled_chains({}) == []


def test_a_stalled_dense_jax_chain_moves_later_fits_to_a_diagonal_mass_matrix():
    from workers.pymc_runner.choice import for_later_fits

    stalled = {"divergences": 0, "divergences_per_chain": [0] * 4,
               "step_size": [0.0043, 0.21, 0.35, 0.3]}
    later = for_later_fits(stalled, {"backend": "numpyro", "mass_matrix": "dense"})
    assert (later["to"], later["mass_matrix"], later["stalled_chains"]) == ("numpyro", "diag", [0])
    assert later["later_fits_only"] and "chains 0 (step 0.0043)" in later["reason"]
    # a diagonal matrix already, nutpie, a requested backend, or no chain stalled: nothing
    for choice in ({"backend": "numpyro", "mass_matrix": "diag"},
                   {"backend": "nutpie", "mass_matrix": "low_rank"}, None):
        assert for_later_fits(stalled, choice) is None
    moving = dict(stalled, step_size=[0.2, 0.21, 0.35, 0.3])
    assert for_later_fits(moving, {"backend": "numpyro", "mass_matrix": "dense"}) is None


def test_a_childs_mass_matrix_and_fallback_records_are_checked_before_they_reach_the_evidence():
    """Both come from the child's output (the user's program ran in that process)."""
    from workers.pymc_runner.session import _fallbacks, _mass_matrix

    job = {"mass_matrix": "low_rank"}
    assert _mass_matrix({"mass_matrix": "diag"}, job) == "diag"
    for forged in ("rm -rf", None, ["diag"], 3):
        assert _mass_matrix({"mass_matrix": forged}, job) == "low_rank"
    good = {"from": "nutpie", "from_mass_matrix": "low_rank", "to": "nutpie",
            "mass_matrix": "diag", "collapsed_chains": [], "reason": "1 divergent transitions"}
    assert _fallbacks([good], 3) == [good]
    for forged in (None, "x", {"from": "nutpie"}, 7):
        assert _fallbacks(forged, 3) == []
    many = _fallbacks([good] * 10_000, 3)
    assert len(many) == 11  # most_attempts(3)
    odd = _fallbacks([{"reason": "r" * 10_000, "extra": "x", "from": {"nested": 1},
                       "collapsed_chains": list(range(1000))}, "not a dict"], 3)
    assert odd == [{"reason": "r" * 500}]
