"""posteriordb mesquite-mesquite (Stan: mesquite).

weight ~ normal(beta[1] + beta[2] * diam1 + ... + beta[7] * group, sigma) on the raw
scale; beta flat and sigma flat on (0, inf): Stan gives no priors.
"""
import numpy as np
import pymc as pm

PREDICTORS = ["diam1", "diam2", "canopy_height", "total_height", "density", "group"]


def model(data):
    weight = np.asarray(data["weight"], dtype=float)
    X = np.column_stack([np.asarray(data[p], dtype=float) for p in PREDICTORS])
    with pm.Model() as m:
        # No prior statements in Stan: improper flat priors (sigma keeps lower=0).
        beta = pm.Flat("beta", shape=7)
        sigma = pm.HalfFlat("sigma")
        mu = beta[0] + pm.math.dot(X, beta[1:])
        pm.Normal("weight", mu, sigma, observed=weight)
    return m
