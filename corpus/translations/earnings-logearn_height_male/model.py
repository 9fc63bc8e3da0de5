"""posteriordb earnings-logearn_height_male (ARM ch. 4): log earnings on height and sex.

Stan: log_earn = log(earn); beta (vector[3]) and sigma > 0 are flat;
log_earn ~ normal(beta[1] + beta[2] * height + beta[3] * male, sigma).
"""
import numpy as np
import pymc as pm


def model(data):
    log_earn = np.log(np.asarray(data["earn"], dtype=float))
    height = np.asarray(data["height"], dtype=float)
    male = np.asarray(data["male"], dtype=float)
    with pm.Model() as m:
        beta = pm.Flat("beta", shape=3)
        sigma = pm.HalfFlat("sigma")
        mu = beta[0] + beta[1] * height + beta[2] * male
        pm.Normal("log_earn", mu=mu, sigma=sigma, observed=log_earn)
    return m
