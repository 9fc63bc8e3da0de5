"""posteriordb earnings-logearn_height (ARM ch. 4): log earnings on height, flat priors.

Stan: log_earn = log(earn) (transformed data); beta and sigma > 0 are flat;
log_earn ~ normal(beta[1] + beta[2] * height, sigma).
"""
import numpy as np
import pymc as pm


def model(data):
    log_earn = np.log(np.asarray(data["earn"], dtype=float))
    height = np.asarray(data["height"], dtype=float)
    with pm.Model() as m:
        beta = pm.Flat("beta", shape=2)
        sigma = pm.HalfFlat("sigma")
        pm.Normal("log_earn", mu=beta[0] + beta[1] * height, sigma=sigma, observed=log_earn)
    return m
