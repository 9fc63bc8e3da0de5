-- posteriordb diamonds-diamonds: brms linear regression with 24 centred predictors.
-- Stan (brms 2.10): Xc = columns 2..K of X centred by their means (transformed data,
-- computed here from this scope's X); b[1..K-1] ~ normal(0, 1);
-- Intercept ~ student_t(3, 8, 10); sigma > 0 ~ student_t(3, 0, 10) truncated at 0
-- (a half-t: |t| of a centred t); prior_only = 0 in the data, so
-- Y ~ normal(Intercept + Xc * b, sigma) (normal_id_glm).
--
-- Speed: the Gaussian log-likelihood depends on the data only through
-- n, mean(Y), Syy = yc'yc, Sxy = Xc'yc and Sxx = Xc'Xc (yc = Y - mean(Y)). Because the
-- columns of Xc and yc sum to zero,
--   sum_i (Y_i - Intercept - Xc_i b)^2 = Syy - 2 b'Sxy + b'Sxx b + n (Intercept - mean(Y))^2
-- exactly, so these are computed once from the scope's data (outside the sampled part)
-- and each evaluation costs O(K^2) instead of O(n K).
module Model (model) where

import Control.Monad (replicateM)
import Data.List (transpose)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  b <- replicateM (k - 1) (sample (normal 0 1))
  intercept <- sample (studentT 3 8 10)
  sigma <- abs <$> sample (studentT 3 0 10)
  let quad = sum (zipWith (*) b (map (sum . zipWith (*) b) sxx))
      rss = syy - 2 * sum (zipWith (*) b sxy) + quad + n * (intercept - yMean) ^ (2 :: Int)
      loglik = -n * log sigma - 0.5 * n * log (2 * pi) - rss / (2 * sigma * sigma)
  if priorOnly then return () else scoreLog (Exp loglik)
  return (draw [vector "b" b, scalar "Intercept" intercept, scalar "sigma" sigma])
  where
    k = int "K" d
    priorOnly = int "prior_only" d /= 0
    ys = reals "Y" d
    n = fromIntegral (length ys)
    yMean = sum ys / n
    yc = map (subtract yMean) ys
    -- centred predictor columns 2..K
    xcCols = [map (subtract (sum col / n)) col | col <- tail (transpose (realMatrix "X" d))]
    syy = sum (map (^ (2 :: Int)) yc)
    sxy = [sum (zipWith (*) col yc) | col <- xcCols]
    sxx = [[sum (zipWith (*) ci cj) | cj <- xcCols] | ci <- xcCols]
