"""Conjugate normal model for the calibration study's effect pairs (baseline side).

mu ~ N(M0, S0), y_i ~ N(mu, SIGMA) with SIGMA known; nu ~ N(0, 5), z_j ~ N(nu, 1).
Both posteriors are normal and known in closed form (benchmarks/calibration.py,
``conjugate_posterior``). M0 = 1, S0 = 3, SIGMA = 2.
"""
import numpy as np
import pymc as pm


def model(data):
    y = np.asarray(data["y"], dtype=float)
    z = np.asarray(data["z"], dtype=float)
    with pm.Model() as m:
        mu = pm.Normal("mu", 1.0, 3.0)
        pm.Normal("y", mu, 2.0, observed=y)
        nu = pm.Normal("nu", 0.0, 5.0)
        pm.Normal("z", nu, 1.0, observed=z)
    return m
