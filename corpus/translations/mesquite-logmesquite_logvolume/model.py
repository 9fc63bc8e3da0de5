"""posteriordb mesquite-logmesquite_logvolume (Stan: logmesquite_logvolume).

log(weight) ~ normal(beta[1] + beta[2] * log(diam1 * diam2 * canopy_height), sigma);
beta flat and sigma flat on (0, inf): Stan gives no priors.
"""
import numpy as np
import pymc as pm


def model(data):
    def col(name):
        return np.asarray(data[name], dtype=float)

    log_weight = np.log(col("weight"))
    log_canopy_volume = np.log(col("diam1") * col("diam2") * col("canopy_height"))
    with pm.Model() as m:
        # No prior statements in Stan: improper flat priors (sigma keeps lower=0).
        beta = pm.Flat("beta", shape=2)
        sigma = pm.HalfFlat("sigma")
        pm.Normal("log_weight", beta[0] + beta[1] * log_canopy_volume, sigma,
                  observed=log_weight)
    return m
