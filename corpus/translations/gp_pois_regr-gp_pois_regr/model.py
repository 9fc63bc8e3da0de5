"""posteriordb gp_pois_regr-gp_pois_regr: latent Gaussian process with Poisson counts.

Stan: rho > 0 ~ gamma(25, 4) (shape, rate); alpha > 0 ~ normal(0, 2) (half-normal);
f_tilde ~ normal(0, 1); f = cholesky(gp_exp_quad_cov(x, alpha, rho) + 1e-10 I) * f_tilde
(non-centred); k ~ poisson_log(f). f is reported (it is what the reference draws hold).
"""
import numpy as np
import pymc as pm
import pytensor.tensor as pt


def model(data):
    x = np.asarray(data["x"], dtype=float)
    k = np.asarray(data["k"], dtype=int)
    n = len(x)
    sq_dist = (x[:, None] - x[None, :]) ** 2
    with pm.Model() as m:
        rho = pm.Gamma("rho", alpha=25.0, beta=4.0)
        alpha = pm.HalfNormal("alpha", sigma=2.0)
        f_tilde = pm.Normal("f_tilde", mu=0.0, sigma=1.0, shape=n)
        cov = alpha ** 2 * pt.exp(-0.5 * sq_dist / rho ** 2) + 1e-10 * np.eye(n)
        chol = pt.linalg.cholesky(cov, lower=True, check_finite=False, on_error="nan")
        f = pm.Deterministic("f", pt.dot(chol, f_tilde))
        pm.Poisson("k", mu=pt.exp(f), observed=k)
    return m
