"""posteriordb kilpisjarvi_mod-kilpisjarvi: Gaussian linear model with data-given priors.

Stan: alpha ~ normal(pmualpha, psalpha); beta ~ normal(pmubeta, psbeta); sigma > 0 has
no prior statement (improper flat on (0, inf)); y ~ normal(alpha + beta * x, sigma).
x (years) is not centred, so alpha and beta are almost perfectly correlated.
"""
import numpy as np
import pymc as pm


def model(data):
    x = np.asarray(data["x"], dtype=float)
    y = np.asarray(data["y"], dtype=float)
    with pm.Model() as m:
        alpha = pm.Normal("alpha", mu=float(data["pmualpha"]), sigma=float(data["psalpha"]))
        beta = pm.Normal("beta", mu=float(data["pmubeta"]), sigma=float(data["psbeta"]))
        sigma = pm.HalfFlat("sigma")
        pm.Normal("y", mu=alpha + beta * x, sigma=sigma, observed=y)
    return m
