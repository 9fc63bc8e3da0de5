"""posteriordb garch-garch11: GARCH(1, 1) with flat priors.

Stan: mu (real), alpha0 > 0, alpha1 in (0, 1), beta1 in (0, 1 - alpha1), all with no
prior statement: the prior is flat on that region. sigma[1] = sigma1 (data),
sigma[t] = sqrt(alpha0 + alpha1 * (y[t-1] - mu)^2 + beta1 * sigma[t-1]^2); y ~ normal(mu, sigma).

Flat on {0 < alpha1 < 1, 0 < beta1 < 1 - alpha1}: alpha1 ~ Beta(1, 2) (density 2(1 - alpha1))
and beta1 | alpha1 ~ Uniform(0, 1 - alpha1) (density 1 / (1 - alpha1)) multiply to the
constant 2. The variance recursion s[t] = alpha0 + alpha1 * r[t-1] + beta1 * s[t-1] is
linear, so s[t] = beta1^(t-1) * s[1] + sum_{j=2..t} beta1^(t-j) * (alpha0 + alpha1 * r[j-1]),
the first T terms of the convolution of the innovations with beta1^0, ..., beta1^(T-1).
"""
import numpy as np
import pymc as pm
import pytensor.tensor as pt


def model(data):
    y = np.asarray(data["y"], dtype=float)
    T = len(y)
    sigma1 = float(data["sigma1"])
    exponents = np.arange(T, dtype=float)
    with pm.Model() as m:
        mu = pm.Flat("mu")
        alpha0 = pm.HalfFlat("alpha0")
        alpha1 = pm.Beta("alpha1", alpha=1.0, beta=2.0)
        beta1 = pm.Uniform("beta1", lower=0.0, upper=1.0 - alpha1)
        # innovation entering s[t]: u[1] = s[1] = sigma1^2, u[t] = alpha0 + alpha1 * (y[t-1] - mu)^2
        u = pt.concatenate([pt.stack([pt.as_tensor_variable(sigma1 ** 2)]),
                            alpha0 + alpha1 * (y[:-1] - mu) ** 2])
        s = pt.signal.convolve1d(u, pt.power(beta1, exponents), mode="full")[:T]
        pm.Normal("y", mu=mu, sigma=pt.sqrt(s), observed=y)
    return m
