-- Six groups, varying intercepts, centred as written:
-- theta_j ~ N(mu, tau), y_ij ~ N(theta_j, sigma).  9 tree sites.
module Model (model) where

import Control.Monad (replicateM)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  let ys = reals "y" d
      gs = ints "g" d
  mu <- sample (normal 0 5)
  tau <- sample (halfNormal 2)
  sigma <- sample (halfNormal 2)
  theta <- replicateM (int "J" d) (sample (normal mu tau))
  scoreLog (Exp (sum [normalLogPdf (theta !! (g - 1)) sigma y | (g, y) <- zip gs ys]))
  return (draw [scalar "mu" mu, scalar "tau" tau, scalar "sigma" sigma, vector "theta" theta])
