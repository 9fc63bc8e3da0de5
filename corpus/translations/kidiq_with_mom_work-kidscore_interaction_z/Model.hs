module Model (model) where

-- posteriordb kidiq_with_mom_work-kidscore_interaction_z (Stan: kidscore_interaction_z).
-- Predictors standardised as (x - mean x) / (2 * sd x) with this scope's mean and
-- sample SD (N - 1 denominator, as Stan's sd); interaction of the standardised
-- predictors. No priors in Stan: flat beta, flat sigma > 0.

import Data.List (foldl')
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
  coefs <- mapM flat [100, 100, 100, 100]
  sigma <- flatPositive 20
  scoreLog (Exp (sum [normalLogPdf (dot coefs x) sigma y | (x, y) <- rows]))
  return (draw [vector "beta" coefs, scalar "sigma" sigma])
  where
    -- Per-row predictor vectors (leading 1 for the intercept) and outcome,
    -- built once from this scope's data, outside the sampled part.
    zHs = standardise (reals "mom_hs" d)
    zIq = standardise (reals "mom_iq" d)
    rows = zip [[1, h, q, h * q] | (h, q) <- zip zHs zIq] (reals "kid_score" d)
    standardise xs =
      let n = fromIntegral (length xs)
          m = sum xs / n
          sd = sqrt (sum [(x - m) ^ (2 :: Int) | x <- xs] / (n - 1))
      in [(x - m) / (2 * sd) | x <- xs]
