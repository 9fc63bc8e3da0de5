"""posteriordb kidiq_with_mom_work-kidscore_mom_work (Stan: kidscore_mom_work).

mom_work (1..4) as a factor: indicators for levels 2, 3 and 4; beta flat and sigma
flat on (0, inf): Stan gives no priors.
"""
import numpy as np
import pymc as pm


def model(data):
    kid_score = np.asarray(data["kid_score"], dtype=float)
    mom_work = np.asarray(data["mom_work"], dtype=int)
    work2 = (mom_work == 2).astype(float)
    work3 = (mom_work == 3).astype(float)
    work4 = (mom_work == 4).astype(float)
    with pm.Model() as m:
        # No prior statements in Stan: improper flat priors (sigma keeps lower=0).
        beta = pm.Flat("beta", shape=4)
        sigma = pm.HalfFlat("sigma")
        mu = beta[0] + beta[1] * work2 + beta[2] * work3 + beta[3] * work4
        pm.Normal("kid_score", mu, sigma, observed=kid_score)
    return m
