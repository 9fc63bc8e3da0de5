"""posteriordb kidiq-kidscore_interaction (Stan: kidscore_interaction).

kid_score ~ normal(beta[1] + beta[2] * mom_hs + beta[3] * mom_iq + beta[4] * mom_hs * mom_iq,
sigma); beta flat, sigma half-Cauchy(0, 2.5).
"""
import numpy as np
import pymc as pm


def model(data):
    kid_score = np.asarray(data["kid_score"], dtype=float)
    mom_hs = np.asarray(data["mom_hs"], dtype=float)
    mom_iq = np.asarray(data["mom_iq"], dtype=float)
    inter = mom_hs * mom_iq  # Stan transformed data: inter = mom_hs .* mom_iq
    with pm.Model() as m:
        # Stan declares vector[4] beta with no prior statement: improper flat prior.
        beta = pm.Flat("beta", shape=4)
        # Stan: real<lower=0> sigma ~ cauchy(0, 2.5), i.e. half-Cauchy.
        sigma = pm.HalfCauchy("sigma", 2.5)
        mu = beta[0] + beta[1] * mom_hs + beta[2] * mom_iq + beta[3] * inter
        pm.Normal("kid_score", mu, sigma, observed=kid_score)
    return m
