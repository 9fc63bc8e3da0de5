"""Logistic regression for the calibration study (benchmarks/calibration.py).

alpha ~ N(0, 2.5), beta[1..2] ~ N(0, 2.5), y_i ~ Bernoulli(logit^-1(alpha + X_i . beta)).
Data: logistic_data.json (N = 150, two standardised predictors, made by
benchmarks/calibration.py --make-logistic-data with a fixed seed).
"""
import numpy as np
import pymc as pm


def model(data):
    X = np.asarray(data["X"], dtype=float)
    y = np.asarray(data["y"], dtype=int)
    with pm.Model() as m:
        alpha = pm.Normal("alpha", 0.0, 2.5)
        beta = pm.Normal("beta", 0.0, 2.5, shape=X.shape[1])
        pm.Bernoulli("y", logit_p=alpha + pm.math.dot(X, beta), observed=y)
    return m
