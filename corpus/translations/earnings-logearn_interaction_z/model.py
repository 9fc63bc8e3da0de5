"""posteriordb earnings-logearn_interaction_z (ARM ch. 4): standardised height x sex.

Stan: log_earn = log(earn); z_height = (height - mean(height)) / sd(height), where
Stan's sd is the sample SD (divisor N - 1), computed from this scope's data;
inter = z_height .* male; beta (vector[4]) and sigma > 0 are flat;
log_earn ~ normal(beta[1] + beta[2] * z_height + beta[3] * male + beta[4] * inter, sigma).
"""
import numpy as np
import pymc as pm


def model(data):
    log_earn = np.log(np.asarray(data["earn"], dtype=float))
    height = np.asarray(data["height"], dtype=float)
    male = np.asarray(data["male"], dtype=float)
    n = len(height)
    centred = height - np.sum(height) / n
    z_height = centred / np.sqrt(np.sum(centred ** 2) / (n - 1))
    inter = z_height * male
    with pm.Model() as m:
        beta = pm.Flat("beta", shape=4)
        sigma = pm.HalfFlat("sigma")
        mu = beta[0] + beta[1] * z_height + beta[2] * male + beta[3] * inter
        pm.Normal("log_earn", mu=mu, sigma=sigma, observed=log_earn)
    return m
