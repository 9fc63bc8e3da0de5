-- Six groups, varying intercepts, non-centred as written:
-- eta_j ~ N(0, 1), theta_j = mu + tau eta_j, y_ij ~ N(theta_j, sigma).
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
  eta <- replicateM (int "J" d) (sample (normal 0 1))
  let theta = [mu + tau * e | e <- eta]
  scoreLog (Exp (sum [normalLogPdf (theta !! (g - 1)) sigma y | (g, y) <- zip gs ys]))
  return (draw [scalar "mu" mu, scalar "tau" tau, scalar "sigma" sigma, vector "theta" theta])
