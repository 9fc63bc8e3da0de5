"""posteriordb low_dim_gauss_mix-low_dim_gauss_mix: two-component normal mixture.

Stan: mu (ordered[2]) ~ normal(0, 2); sigma[1..2] > 0 ~ normal(0, 2) (half-normal);
theta in (0, 1) ~ beta(5, 5); each y[n] has density
theta * normal(y | mu[1], sigma[1]) + (1 - theta) * normal(y | mu[2], sigma[2]).
"""
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.transforms import ordered


def model(data):
    y = np.asarray(data["y"], dtype=float)
    with pm.Model() as m:
        mu = pm.Normal("mu", mu=0.0, sigma=2.0, shape=2, transform=ordered,
                       initval=np.array([-1.0, 1.0]))
        sigma = pm.HalfNormal("sigma", sigma=2.0, shape=2)
        theta = pm.Beta("theta", alpha=5.0, beta=5.0)
        pm.NormalMixture("y", w=pt.stack([theta, 1.0 - theta]), mu=mu, sigma=sigma, observed=y)
    return m
