module Model (model) where

-- posteriordb mesquite-logmesquite_logvas (Stan: logmesquite_logvas).
-- log weight ~ normal(beta[1] + beta[2] * log canopy volume + beta[3] * log canopy area
--   + beta[4] * log canopy shape (diam1 / diam2) + beta[5] * log total_height
--   + beta[6] * log density + beta[7] * group, sigma).
-- No priors in Stan: flat beta, flat sigma > 0.

import Data.List (foldl', transpose)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

-- | Improper flat prior on the real line (Stan: a parameter with no prior
-- statement): a normal base of scale s whose density is divided out, so the
-- target density is exactly constant; s only sets where chains start.
flat :: Double -> Meas Double
flat s = do
  x <- sample (normal 0 s)
  scoreLog (Exp (negate (normalLogPdf 0 s x)))
  return x

-- | Improper flat prior on (0, inf) (Stan: real<lower=0> with no prior statement):
-- a log-normal base centred near the scale of the outcome whose density is
-- divided out, so the target density of sigma is exactly constant on (0, inf).
flatPositive :: Double -> Meas Double
flatPositive s = do
  x <- sample (logNormal (log s) 2)
  scoreLog (Exp (negate (logNormalLogPdf (log s) 2 x)))
  return x

dot :: [Double] -> [Double] -> Double
dot b x = foldl' (+) 0 (zipWith (*) b x)

model :: Data -> Meas Draw
model d = do
  coefs <- mapM flat (replicate 7 10)
  sigma <- flatPositive 0.5
  scoreLog (Exp (sum [normalLogPdf (dot coefs x) sigma y | (x, y) <- rows]))
  return (draw [vector "beta" coefs, scalar "sigma" sigma])
  where
    -- Per-row predictor vectors (leading 1 for the intercept) and outcome,
    -- built once from this scope's data, outside the sampled part.
    d1 = reals "diam1" d
    d2 = reals "diam2" d
    logVolume = [log (a * b * h) | (a, b, h) <- zip3 d1 d2 (reals "canopy_height" d)]
    logArea = [log (a * b) | (a, b) <- zip d1 d2]
    logShape = [log (a / b) | (a, b) <- zip d1 d2]
    cols = [logVolume, logArea, logShape, map log (reals "total_height" d),
            map log (reals "density" d), reals "group" d]
    rows = zip (map (1 :) (transpose cols)) (map log (reals "weight" d))
