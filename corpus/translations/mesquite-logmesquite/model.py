"""posteriordb mesquite-logmesquite (Stan: logmesquite).

log(weight) ~ normal(beta[1] + beta[2] * log(diam1) + beta[3] * log(diam2)
+ beta[4] * log(canopy_height) + beta[5] * log(total_height) + beta[6] * log(density)
+ beta[7] * group, sigma); beta flat and sigma flat on (0, inf): Stan gives no priors.
"""
import numpy as np
import pymc as pm


def model(data):
    def col(name):
        return np.asarray(data[name], dtype=float)

    log_weight = np.log(col("weight"))
    X = np.column_stack([
        np.log(col("diam1")),
        np.log(col("diam2")),
        np.log(col("canopy_height")),
        np.log(col("total_height")),
        np.log(col("density")),
        col("group"),
    ])
    with pm.Model() as m:
        # No prior statements in Stan: improper flat priors (sigma keeps lower=0).
        beta = pm.Flat("beta", shape=7)
        sigma = pm.HalfFlat("sigma")
        mu = beta[0] + pm.math.dot(X, beta[1:])
        pm.Normal("log_weight", mu, sigma, observed=log_weight)
    return m
