-- The SPEC §2.2 example: eight schools, non-centred.
module Model (model) where

import Control.Monad (replicateM)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  let ys     = reals "y" d
      sigmas = reals "sigma" d
  mu         <- sample (normal 0 5)
  tau        <- sample (abs <$> cauchy 0 5)          -- half-Cauchy
  thetaTrans <- replicateM (int "J" d) (sample (normal 0 1))
  let theta = [mu + tau * t | t <- thetaTrans]
  sequence_ [score (normalPdf th s y) | (th, s, y) <- zip3 theta sigmas ys]
  return (draw [scalar "mu" mu, scalar "tau" tau, vector "theta" theta])
