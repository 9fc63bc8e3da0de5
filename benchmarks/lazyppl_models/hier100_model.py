"""PyMC program for lazyppl/examples/hier100 (100 groups with known noise, half-Cauchy
scale): the same posterior as its Model.hs, written non-centred for NUTS."""
import numpy as np
import pymc as pm


def model(data):
    y = np.asarray(data["y"], dtype=float)
    sigma = np.asarray(data["sigma"], dtype=float)
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        eta = pm.Normal("eta", 0.0, 1.0, shape=int(data["J"]))
        theta = pm.Deterministic("theta", mu + tau * eta)
        pm.Normal("y", theta, sigma, observed=y)
    return m
