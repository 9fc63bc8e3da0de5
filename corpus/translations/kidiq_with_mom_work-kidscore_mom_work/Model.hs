module Model (model) where

-- posteriordb kidiq_with_mom_work-kidscore_mom_work (Stan: kidscore_mom_work).
-- mom_work (1..4) as a factor: indicators of levels 2, 3 and 4.
-- No priors in Stan: flat beta, flat sigma > 0.

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
    rows = zip [[1, ind 2 w, ind 3 w, ind 4 w] | w <- ints "mom_work" d] (reals "kid_score" d)
    ind :: Int -> Int -> Double
    ind level w = if w == level then 1 else 0
