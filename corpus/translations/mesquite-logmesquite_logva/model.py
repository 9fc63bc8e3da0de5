"""posteriordb mesquite-logmesquite_logva (Stan: logmesquite_logva).

log(weight) ~ normal(beta[1] + beta[2] * log(diam1 * diam2 * canopy_height)
+ beta[3] * log(diam1 * diam2) + beta[4] * group, sigma); beta flat and sigma flat on
(0, inf): Stan gives no priors.
"""
import numpy as np
import pymc as pm


def model(data):
    def col(name):
        return np.asarray(data[name], dtype=float)

    log_weight = np.log(col("weight"))
    X = np.column_stack([
        np.log(col("diam1") * col("diam2") * col("canopy_height")),  # canopy volume
        np.log(col("diam1") * col("diam2")),  # canopy area
        col("group"),
    ])
    with pm.Model() as m:
        # No prior statements in Stan: improper flat priors (sigma keeps lower=0).
        beta = pm.Flat("beta", shape=4)
        sigma = pm.HalfFlat("sigma")
        mu = beta[0] + pm.math.dot(X, beta[1:])
        pm.Normal("log_weight", mu, sigma, observed=log_weight)
    return m
