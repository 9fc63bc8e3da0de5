"""posteriordb gp_pois_regr-gp_regr: Gaussian-process regression, marginalised.

Stan: rho > 0 ~ gamma(25, 4) (shape, rate); alpha > 0 ~ normal(0, 2) and sigma > 0 ~
normal(0, 1) (half-normals); cov = gp_exp_quad_cov(x, alpha, rho) + diag(sigma), i.e.
alpha^2 * exp(-(x_i - x_j)^2 / (2 rho^2)) with sigma (not sigma^2) added on the diagonal;
y ~ multi_normal(0, cov).
"""
import numpy as np
import pymc as pm
import pytensor.tensor as pt


def model(data):
    x = np.asarray(data["x"], dtype=float)
    y = np.asarray(data["y"], dtype=float)
    n = len(x)
    sq_dist = (x[:, None] - x[None, :]) ** 2
    with pm.Model() as m:
        rho = pm.Gamma("rho", alpha=25.0, beta=4.0)
        alpha = pm.HalfNormal("alpha", sigma=2.0)
        sigma = pm.HalfNormal("sigma", sigma=1.0)
        cov = alpha ** 2 * pt.exp(-0.5 * sq_dist / rho ** 2) + sigma * np.eye(n)
        pm.MvNormal("y", mu=np.zeros(n), cov=cov, observed=y)
    return m
