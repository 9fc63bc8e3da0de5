-- posteriordb sblrc-blr: Bayesian linear regression without intercept.
-- Stan: beta[1..D] ~ normal(0, 10); sigma > 0 ~ normal(0, 10) (a half-normal);
-- y ~ normal(X * beta, sigma).
module Model (model) where

import Control.Monad (replicateM)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  beta <- replicateM (int "D" d) (sample (normal 0 10))
  sigma <- sample (halfNormal 10)
  let loglik = sum [normalLogPdf (sum (zipWith (*) xs beta)) sigma y | (xs, y) <- rows]
  scoreLog (Exp loglik)
  return (draw [vector "beta" beta, scalar "sigma" sigma])
  where
    rows = zip (realMatrix "X" d) (reals "y" d)
