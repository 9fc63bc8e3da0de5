module Model (model) where

-- posteriordb mesquite-mesquite (Stan: mesquite).
-- weight ~ normal(beta[1] + beta[2] * diam1 + beta[3] * diam2 + beta[4] * canopy_height
--                 + beta[5] * total_height + beta[6] * density + beta[7] * group, sigma)
-- on the raw scale. No priors in Stan: flat beta, flat sigma > 0.

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
  coefs <- mapM flat (replicate 7 1000)
  sigma <- flatPositive 300
  scoreLog (Exp (sum [normalLogPdf (dot coefs x) sigma y | (x, y) <- rows]))
  return (draw [vector "beta" coefs, scalar "sigma" sigma])
  where
    -- Per-row predictor vectors (leading 1 for the intercept) and outcome,
    -- built once from this scope's data, outside the sampled part.
    cols = [reals c d | c <- ["diam1", "diam2", "canopy_height", "total_height", "density", "group"]]
    rows = zip (map (1 :) (transpose cols)) (reals "weight" d)
