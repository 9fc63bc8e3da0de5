module Model (model) where

-- Fallback benchmark model for posteriordb eight_schools-eight_schools_noncentered;
-- the benchmark uses corpus/translations/<posterior>/Model.hs when that exists.
-- Stan: theta = mu + tau * theta_trans; theta_trans ~ normal(0, 1); mu ~ normal(0, 5);
-- tau ~ cauchy(0, 5) on tau > 0 (half-Cauchy); y ~ normal(theta, sigma).

import Control.Monad (replicateM)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  let ys = reals "y" d
      sigmas = reals "sigma" d
  thetaTrans <- replicateM (int "J" d) (sample (normal 0 1))
  mu <- sample (normal 0 5)
  tau <- sample (halfCauchy 5)
  let theta = [mu + tau * t | t <- thetaTrans]
  scoreLog (Exp (sum [normalLogPdf th s y | (th, s, y) <- zip3 theta sigmas ys]))
  return (draw [scalar "mu" mu, scalar "tau" tau, vector "theta" theta])
