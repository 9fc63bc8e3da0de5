"""posteriordb arK-arK: autoregressive model of order K.

Stan: alpha ~ normal(0, 10); beta[1..K] ~ normal(0, 10); sigma > 0 ~ cauchy(0, 2.5)
(a half-Cauchy); for t = K+1..T: y[t] ~ normal(alpha + sum_k beta[k] * y[t-k], sigma).
The first K observations only enter as lags.
"""
import numpy as np
import pymc as pm


def model(data):
    K = int(data["K"])
    y = np.asarray(data["y"], dtype=float)
    T = len(y)
    # lags[i, k] = y[t - (k + 1)] for the i-th modelled time t = K + i (0-based)
    lags = np.column_stack([y[K - k - 1:T - k - 1] for k in range(K)])
    with pm.Model() as m:
        alpha = pm.Normal("alpha", mu=0.0, sigma=10.0)
        beta = pm.Normal("beta", mu=0.0, sigma=10.0, shape=K)
        sigma = pm.HalfCauchy("sigma", beta=2.5)
        pm.Normal("y", mu=alpha + pm.math.dot(lags, beta), sigma=sigma, observed=y[K:])
    return m
