"""posteriordb nes1980-nes (Stan: nes; National Election Study 1980).

partyid7 ~ normal(beta[1] + beta[2] * real_ideo + beta[3] * race_adj
+ beta[4..6] * (age_discrete == 2, 3, 4) + beta[7] * educ1 + beta[8] * gender
+ beta[9] * income, sigma); beta flat and sigma flat on (0, inf): Stan gives no priors.
"""
import numpy as np
import pymc as pm


def model(data):
    def col(name):
        return np.asarray(data[name], dtype=float)

    age = np.asarray(data["age_discrete"], dtype=int)
    X = np.column_stack([
        col("real_ideo"),
        col("race_adj"),
        (age == 2).astype(float),  # age 30-44
        (age == 3).astype(float),  # age 45-64
        (age == 4).astype(float),  # age 65 and up
        col("educ1"),
        col("gender"),
        col("income"),
    ])
    with pm.Model() as m:
        # No prior statements in Stan: improper flat priors (sigma keeps lower=0).
        beta = pm.Flat("beta", shape=9)
        sigma = pm.HalfFlat("sigma")
        mu = beta[0] + pm.math.dot(X, beta[1:])
        pm.Normal("partyid7", mu, sigma, observed=col("partyid7"))
    return m
