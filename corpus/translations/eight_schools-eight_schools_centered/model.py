"""posteriordb eight_schools-eight_schools_centered (Stan: eight_schools_centered)."""
import numpy as np
import pymc as pm


def model(data):
    y = np.asarray(data["y"], dtype=float)
    sigma = np.asarray(data["sigma"], dtype=float)
    J = int(data["J"])
    with pm.Model() as m:
        # Stan: real<lower=0> tau ~ cauchy(0, 5), i.e. half-Cauchy.
        tau = pm.HalfCauchy("tau", 5.0)
        mu = pm.Normal("mu", 0.0, 5.0)
        theta = pm.Normal("theta", mu, tau, shape=J)
        pm.Normal("y", theta, sigma, observed=y)
    return m
