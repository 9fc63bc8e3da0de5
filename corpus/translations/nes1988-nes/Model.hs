module Model (model) where

-- posteriordb nes1988-nes (Stan: nes; National Election Study 1988).
-- partyid7 ~ normal(beta[1] + beta[2] * real_ideo + beta[3] * race_adj
--   + beta[4..6] * (age_discrete == 2, 3, 4) + beta[7] * educ1 + beta[8] * gender
--   + beta[9] * income, sigma). No priors in Stan: flat beta, flat sigma > 0.

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
  coefs <- mapM flat (replicate 9 1)
  sigma <- flatPositive 2
  -- sum_i normalLogPdf (x_i . b) sigma y_i, written through the sufficient
  -- statistics: the residual sum of squares is y'y - 2 b'X'y + b'X'X b.
  -- Same value, O(9^2) instead of O(N * 9) work per evaluation.
  let rss = yy - 2 * dot coefs xty + dot coefs [dot row coefs | row <- xtx]
  scoreLog (Exp (negate n * (log sigma + halfLog2Pi) - rss / (2 * sigma * sigma)))
  return (draw [vector "beta" coefs, scalar "sigma" sigma])
  where
    -- Design-matrix columns (intercept first) and outcome, from this scope's data,
    -- reduced once to sufficient statistics outside the sampled part.
    age = ints "age_discrete" d
    ys = reals "partyid7" d
    columns = map (const 1) ys
              : [reals "real_ideo" d, reals "race_adj" d,
                 map (ind 2) age, map (ind 3) age, map (ind 4) age,
                 reals "educ1" d, reals "gender" d, reals "income" d]
    n = fromIntegral (length ys)
    yy = dot ys ys
    xty = [dot c ys | c <- columns]
    xtx = [[dot a b | b <- columns] | a <- columns]
    halfLog2Pi = 0.5 * log (2 * pi)
    ind :: Int -> Int -> Double
    ind level a = if a == level then 1 else 0
