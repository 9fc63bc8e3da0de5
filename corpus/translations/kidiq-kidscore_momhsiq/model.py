"""posteriordb kidiq-kidscore_momhsiq (Stan: kidscore_momhsiq).

kid_score ~ normal(beta[1] + beta[2] * mom_hs + beta[3] * mom_iq, sigma);
beta flat, sigma half-Cauchy(0, 2.5).
"""
import numpy as np
import pymc as pm


def model(data):
    kid_score = np.asarray(data["kid_score"], dtype=float)
    mom_hs = np.asarray(data["mom_hs"], dtype=float)
    mom_iq = np.asarray(data["mom_iq"], dtype=float)
    with pm.Model() as m:
        # Stan declares vector[3] beta with no prior statement: improper flat prior.
        beta = pm.Flat("beta", shape=3)
        # Stan: real<lower=0> sigma ~ cauchy(0, 2.5), i.e. half-Cauchy.
        sigma = pm.HalfCauchy("sigma", 2.5)
        mu = beta[0] + beta[1] * mom_hs + beta[2] * mom_iq
        pm.Normal("kid_score", mu, sigma, observed=kid_score)
    return m
