-- A 102-site hierarchical normal model (centred in the program; the tree's
-- Gaussian coordinates make it non-centred for the sampler).  Beyond the
-- Laplace limit (64 sites), so it exercises the window-only warm-up.
module Model (model) where

import Control.Monad (replicateM)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  let ys = reals "y" d
      sigmas = reals "sigma" d
  mu <- sample (normal 0 5)
  tau <- sample (halfCauchy 5)
  theta <- replicateM (int "J" d) (sample (normal mu tau))
  scoreLog (Exp (sum (zipWith3 normalLogPdf theta sigmas ys)))
  return (draw [scalar "mu" mu, scalar "tau" tau, vector "theta" theta])
