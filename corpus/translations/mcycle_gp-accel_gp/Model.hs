-- posteriordb mcycle_gp-accel_gp: brms distributional model with two approximate GPs.
-- Stan (brms 2.10, Hilbert-space approximate GPs, one dimension, one sub-GP each):
-- mu = Intercept + Xgp_1 * (sqrt(spd(slambda_1)) .* zgp_1) and
-- log(sigma) = Intercept_sigma + Xgp_sigma_1 * (sqrt(spd(slambda_sigma_1)) .* zgp_sigma_1),
-- spd(x) = sdgp^2 * sqrt(2 pi) * lscale * exp(-lscale^2 x^2 / 2). Priors:
-- Intercept ~ student_t(3, -13, 36); sdgp_1, sdgp_sigma_1 > 0 ~ student_t(3, 0, 36)
-- truncated at 0 (half-t: |t| of a centred t); zgp_1, zgp_sigma_1 ~ normal(0, 1);
-- lscale_1, lscale_sigma_1 ~ inv_gamma(1.124909, 0.0177); Intercept_sigma ~
-- student_t(3, 0, 10). prior_only = 0 in the data, so Y ~ normal(mu, sigma).
module Model (model) where

import Control.Monad (replicateM)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  intercept <- sample (studentT 3 (-13) 36)
  sdgp <- abs <$> sample (studentT 3 0 36)
  lscale <- sample (invGamma 1.124909 0.0177)
  zgp <- replicateM (length slambda) (sample (normal 0 1))
  interceptSigma <- sample (studentT 3 0 10)
  sdgpSigma <- abs <$> sample (studentT 3 0 36)
  lscaleSigma <- sample (invGamma 1.124909 0.0177)
  zgpSigma <- replicateM (length slambdaSigma) (sample (normal 0 1))
  let coefs = zipWith (*) (map (sqrtSpd sdgp lscale) slambda) zgp
      coefsSigma = zipWith (*) (map (sqrtSpd sdgpSigma lscaleSigma) slambdaSigma) zgpSigma
      loglik = sum [ normalLogPdf (intercept + dot coefs xr)
                                  (exp (interceptSigma + dot coefsSigma xs)) y
                   | (y, xr, xs) <- zip3 ys xgp xgpSigma ]
  if priorOnly then return () else scoreLog (Exp loglik)
  return (draw [ scalar "Intercept" intercept, scalar "sdgp_1" sdgp, scalar "lscale_1" lscale
               , vector "zgp_1" zgp, scalar "Intercept_sigma" interceptSigma
               , scalar "sdgp_sigma_1" sdgpSigma, scalar "lscale_sigma_1" lscaleSigma
               , vector "zgp_sigma_1" zgpSigma ])
  where
    ys = reals "Y" d
    xgp = realMatrix "Xgp_1" d
    xgpSigma = realMatrix "Xgp_sigma_1" d
    slambda = map head (realMatrix "slambda_1" d)
    slambdaSigma = map head (realMatrix "slambda_sigma_1" d)
    priorOnly = int "prior_only" d /= 0
    dot u v = sum (zipWith (*) u v)
    -- sqrt of the squared-exponential spectral density at a sqrt-eigenvalue (D = 1)
    sqrtSpd sd ls x = sqrt (sd * sd * sqrt (2 * pi) * ls * exp (-0.5 * ls * ls * x * x))
