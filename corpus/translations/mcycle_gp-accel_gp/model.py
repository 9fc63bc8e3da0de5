"""posteriordb mcycle_gp-accel_gp: brms distributional model with two approximate GPs.

Stan (brms 2.10, Hilbert-space approximate GPs, one dimension, one sub-GP each):
mu = Intercept + Xgp_1 * (sqrt(spd(slambda_1)) .* zgp_1) and
log(sigma) = Intercept_sigma + Xgp_sigma_1 * (sqrt(spd(slambda_sigma_1)) .* zgp_sigma_1), where
spd(x) = sdgp^2 * sqrt(2 pi) * lscale * exp(-lscale^2 x^2 / 2) is the squared-exponential
spectral density. Priors: Intercept ~ student_t(3, -13, 36); sdgp_1 > 0 and
sdgp_sigma_1 > 0 ~ student_t(3, 0, 36) truncated at 0 (half-t); zgp_1, zgp_sigma_1 ~ normal(0, 1);
lscale_1, lscale_sigma_1 ~ inv_gamma(1.124909, 0.0177); Intercept_sigma ~ student_t(3, 0, 10).
prior_only = 0 in the data, so Y ~ normal(mu, sigma). The basis matrices and eigenvalues
are data (computed by brms); the visible scope keeps a prefix of the basis rows.
"""
import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt


def sqrt_spd(slambda, sdgp, lscale):
    """sqrt of the squared-exponential spectral density at the sqrt-eigenvalues (D = 1)."""
    return pt.sqrt(sdgp ** 2 * math.sqrt(2 * math.pi) * lscale
                   * pt.exp(-0.5 * lscale ** 2 * slambda ** 2))


def model(data):
    Y = np.asarray(data["Y"], dtype=float)
    n = len(Y)
    nb, nb_sigma = int(data["NBgp_1"]), int(data["NBgp_sigma_1"])
    Xgp = np.asarray(data["Xgp_1"], dtype=float).reshape(n, nb)
    Xgp_sigma = np.asarray(data["Xgp_sigma_1"], dtype=float).reshape(n, nb_sigma)
    slambda = np.asarray(data["slambda_1"], dtype=float).reshape(nb)
    slambda_sigma = np.asarray(data["slambda_sigma_1"], dtype=float).reshape(nb_sigma)
    with pm.Model() as m:
        intercept = pm.StudentT("Intercept", nu=3.0, mu=-13.0, sigma=36.0)
        sdgp = pm.HalfStudentT("sdgp_1", nu=3.0, sigma=36.0)
        lscale = pm.InverseGamma("lscale_1", alpha=1.124909, beta=0.0177)
        zgp = pm.Normal("zgp_1", mu=0.0, sigma=1.0, shape=nb)
        intercept_sigma = pm.StudentT("Intercept_sigma", nu=3.0, mu=0.0, sigma=10.0)
        sdgp_sigma = pm.HalfStudentT("sdgp_sigma_1", nu=3.0, sigma=36.0)
        lscale_sigma = pm.InverseGamma("lscale_sigma_1", alpha=1.124909, beta=0.0177)
        zgp_sigma = pm.Normal("zgp_sigma_1", mu=0.0, sigma=1.0, shape=nb_sigma)
        mu = intercept + pt.dot(Xgp, sqrt_spd(slambda, sdgp, lscale) * zgp)
        log_sigma = intercept_sigma + pt.dot(
            Xgp_sigma, sqrt_spd(slambda_sigma, sdgp_sigma, lscale_sigma) * zgp_sigma)
        if int(data["prior_only"]) == 0:
            pm.Normal("Y", mu=mu, sigma=pt.exp(log_sigma), observed=Y)
    return m
