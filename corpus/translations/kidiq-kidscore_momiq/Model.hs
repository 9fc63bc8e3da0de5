module Model (model) where

-- posteriordb kidiq-kidscore_momiq (Stan: kidscore_momiq).
-- kid_score ~ normal(beta[1] + beta[2] * mom_iq, sigma).

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

dot :: [Double] -> [Double] -> Double
dot b x = foldl' (+) 0 (zipWith (*) b x)

model :: Data -> Meas Draw
model d = do
  coefs <- mapM flat [100, 10]
  -- Stan: real<lower=0> sigma ~ cauchy(0, 2.5), i.e. half-Cauchy.
  sigma <- sample (halfCauchy 2.5)
  scoreLog (Exp (sum [normalLogPdf (dot coefs x) sigma y | (x, y) <- rows]))
  return (draw [vector "beta" coefs, scalar "sigma" sigma])
  where
    -- Per-row predictor vectors (leading 1 for the intercept) and outcome,
    -- built once from this scope's data, outside the sampled part.
    rows = zip [[1, iq] | iq <- reals "mom_iq" d] (reals "kid_score" d)
