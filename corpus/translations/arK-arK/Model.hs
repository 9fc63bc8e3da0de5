-- posteriordb arK-arK: autoregressive model of order K.
-- Stan: alpha ~ normal(0, 10); beta[1..K] ~ normal(0, 10); sigma > 0 ~ cauchy(0, 2.5)
-- (half-Cauchy); for t = K+1..T: y[t] ~ normal(alpha + sum_k beta[k] * y[t-k], sigma).
module Model (model) where

import Control.Monad (replicateM)
import Data.List (tails)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  alpha <- sample (normal 0 10)
  beta <- replicateM k (sample (normal 0 10))
  sigma <- sample (halfCauchy 2.5)
  let loglik = sum [ normalLogPdf (alpha + sum (zipWith (*) beta lags)) sigma yt
                   | (yt, lags) <- rows ]
  scoreLog (Exp loglik)
  return (draw [scalar "alpha" alpha, vector "beta" beta, scalar "sigma" sigma])
  where
    k = int "K" d
    ys = reals "y" d
    -- (y[t], [y[t-1], ..., y[t-K]]) for t = K+1..T, from windows of the reversed series
    rows = [ (yt, take k older) | (yt : older) <- tails (reverse ys), length older >= k ]
