module Model (model) where

-- posteriordb eight_schools-eight_schools_centered (Stan: eight_schools_centered).
-- Centred: theta[j] ~ normal(mu, tau) sampled directly.

import Control.Monad (replicateM)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  let ys = reals "y" d
      sigmas = reals "sigma" d
  -- Stan: real<lower=0> tau ~ cauchy(0, 5), i.e. half-Cauchy.
  tau <- sample (halfCauchy 5)
  mu <- sample (normal 0 5)
  theta <- replicateM (int "J" d) (sample (normal mu tau))
  scoreLog (Exp (sum [normalLogPdf th s y | (th, s, y) <- zip3 theta sigmas ys]))
  return (draw [scalar "mu" mu, scalar "tau" tau, vector "theta" theta])
