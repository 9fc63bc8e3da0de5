"""posteriordb earnings-logearn_interaction (ARM ch. 4): height x sex interaction.

Stan: log_earn = log(earn), inter = height .* male (transformed data); beta (vector[4])
and sigma > 0 are flat;
log_earn ~ normal(beta[1] + beta[2] * height + beta[3] * male + beta[4] * inter, sigma).
"""
import numpy as np
import pymc as pm


def model(data):
    log_earn = np.log(np.asarray(data["earn"], dtype=float))
    height = np.asarray(data["height"], dtype=float)
    male = np.asarray(data["male"], dtype=float)
    inter = height * male
    with pm.Model() as m:
        beta = pm.Flat("beta", shape=4)
        sigma = pm.HalfFlat("sigma")
        mu = beta[0] + beta[1] * height + beta[2] * male + beta[3] * inter
        pm.Normal("log_earn", mu=mu, sigma=sigma, observed=log_earn)
    return m
