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
