"""posteriordb arma-arma11: ARMA(1, 1).

Stan: mu ~ normal(0, 10); phi ~ normal(0, 2); theta ~ normal(0, 2); sigma > 0 ~
cauchy(0, 2.5) (half-Cauchy). nu[1] = mu + phi * mu (err[0] = 0),
nu[t] = mu + phi * y[t-1] + theta * err[t-1], err[t] = y[t] - nu[t]; err ~ normal(0, sigma).

Since nu[t] depends only on y[1..t-1], normal(err[t] | 0, sigma) equals
normal(y[t] | nu[t], sigma), so y is the observed variable. The recursion
err[t] = e[t] - theta * err[t-1] with e[t] = y[t] - mu - phi * y[t-1] (e[1] = y[1] - mu - phi * mu)
is solved in closed form: err[t] = sum_{s<=t} (-theta)^(t-s) * e[s], the first T terms of
the convolution of e with the powers (-theta)^0, ..., (-theta)^(T-1).
"""
import numpy as np
import pymc as pm
import pytensor.tensor as pt


def model(data):
    y = np.asarray(data["y"], dtype=float)
    T = len(y)
    exponents = np.arange(T, dtype=float)
    y_prev = y[:-1]
    with pm.Model() as m:
        mu = pm.Normal("mu", mu=0.0, sigma=10.0)
        phi = pm.Normal("phi", mu=0.0, sigma=2.0)
        theta = pm.Normal("theta", mu=0.0, sigma=2.0)
        sigma = pm.HalfCauchy("sigma", beta=2.5)
        e = pt.concatenate([pt.stack([y[0] - mu - phi * mu]), y[1:] - mu - phi * y_prev])
        err = pt.signal.convolve1d(e, pt.power(-theta, exponents), mode="full")[:T]
        nu = y - err
        pm.Normal("y", mu=nu, sigma=sigma, observed=y)
    return m
