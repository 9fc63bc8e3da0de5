"""posteriordb kidiq_with_mom_work-kidscore_interaction_c (Stan: kidscore_interaction_c).

Predictors centred on their sample means (computed from this scope's data), with their
product as interaction; beta flat and sigma flat on (0, inf): Stan gives no priors.
"""
import numpy as np
import pymc as pm


def model(data):
    kid_score = np.asarray(data["kid_score"], dtype=float)
    mom_hs = np.asarray(data["mom_hs"], dtype=float)
    mom_iq = np.asarray(data["mom_iq"], dtype=float)
    c_mom_hs = mom_hs - np.mean(mom_hs)
    c_mom_iq = mom_iq - np.mean(mom_iq)
    inter = c_mom_hs * c_mom_iq
    with pm.Model() as m:
        # No prior statements in Stan: improper flat priors (sigma keeps lower=0).
        beta = pm.Flat("beta", shape=4)
        sigma = pm.HalfFlat("sigma")
        mu = beta[0] + beta[1] * c_mom_hs + beta[2] * c_mom_iq + beta[3] * inter
        pm.Normal("kid_score", mu, sigma, observed=kid_score)
    return m
