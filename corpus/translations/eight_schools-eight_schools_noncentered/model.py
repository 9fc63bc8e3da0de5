"""posteriordb eight_schools-eight_schools_noncentered (Stan: eight_schools_noncentered)."""
import numpy as np
import pymc as pm


def model(data):
    y = np.asarray(data["y"], dtype=float)
    sigma = np.asarray(data["sigma"], dtype=float)
    J = int(data["J"])
    with pm.Model() as m:
        theta_trans = pm.Normal("theta_trans", 0.0, 1.0, shape=J)
        mu = pm.Normal("mu", 0.0, 5.0)
        # Stan: real<lower=0> tau ~ cauchy(0, 5), i.e. half-Cauchy.
        tau = pm.HalfCauchy("tau", 5.0)
        theta = pm.Deterministic("theta", theta_trans * tau + mu)
        pm.Normal("y", theta, sigma, observed=y)
    return m
