"""posteriordb sblri-blr: Bayesian linear regression without intercept.

Stan: beta ~ normal(0, 10) (D coefficients); sigma > 0 with normal(0, 10), i.e. a
half-normal; y ~ normal(X * beta, sigma).
"""
import numpy as np
import pymc as pm


def model(data):
    X = np.asarray(data["X"], dtype=float).reshape(-1, int(data["D"]))
    y = np.asarray(data["y"], dtype=float)
    with pm.Model() as m:
        beta = pm.Normal("beta", mu=0.0, sigma=10.0, shape=int(data["D"]))
        sigma = pm.HalfNormal("sigma", sigma=10.0)
        pm.Normal("y", mu=pm.math.dot(X, beta), sigma=sigma, observed=y)
    return m
