"""posteriordb kidiq_with_mom_work-kidscore_interaction_c2 (Stan: kidscore_interaction_c2).

Predictors centred on reference points (mom_hs - 0.5, mom_iq - 100) with their product
as interaction; beta flat and sigma flat on (0, inf): Stan gives no priors.
"""
import numpy as np
import pymc as pm


def model(data):
    kid_score = np.asarray(data["kid_score"], dtype=float)
    c2_mom_hs = np.asarray(data["mom_hs"], dtype=float) - 0.5
    c2_mom_iq = np.asarray(data["mom_iq"], dtype=float) - 100.0
    inter = c2_mom_hs * c2_mom_iq
    with pm.Model() as m:
        # No prior statements in Stan: improper flat priors (sigma keeps lower=0).
        beta = pm.Flat("beta", shape=4)
        sigma = pm.HalfFlat("sigma")
        mu = beta[0] + beta[1] * c2_mom_hs + beta[2] * c2_mom_iq + beta[3] * inter
        pm.Normal("kid_score", mu, sigma, observed=kid_score)
    return m
