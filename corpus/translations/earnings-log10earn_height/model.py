"""posteriordb earnings-log10earn_height (ARM ch. 4): log10 earnings on height, flat priors.

Stan: log10_earn = log10(earn) (transformed data); beta and sigma > 0 are flat;
log10_earn ~ normal(beta[1] + beta[2] * height, sigma).
"""
import numpy as np
import pymc as pm


def model(data):
    log10_earn = np.log10(np.asarray(data["earn"], dtype=float))
    height = np.asarray(data["height"], dtype=float)
    with pm.Model() as m:
        beta = pm.Flat("beta", shape=2)
        sigma = pm.HalfFlat("sigma")
        pm.Normal("log10_earn", mu=beta[0] + beta[1] * height, sigma=sigma,
                  observed=log10_earn)
    return m
