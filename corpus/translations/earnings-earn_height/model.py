"""posteriordb earnings-earn_height (ARM ch. 4): earnings on height, flat priors.

Stan: beta (vector[2]) and sigma > 0 have no prior statements, i.e. improper flat
priors; earn ~ normal(beta[1] + beta[2] * height, sigma).
"""
import numpy as np
import pymc as pm


def model(data):
    earn = np.asarray(data["earn"], dtype=float)
    height = np.asarray(data["height"], dtype=float)
    with pm.Model() as m:
        beta = pm.Flat("beta", shape=2)
        sigma = pm.HalfFlat("sigma")
        pm.Normal("earn", mu=beta[0] + beta[1] * height, sigma=sigma, observed=earn)
    return m
