-- Six groups, varying intercepts, genuinely centred in the tree's Gaussian
-- coordinates: the group effects are drawn from a fixed wide base N(0, 10)
-- and re-weighted to N(mu, tau) by score (as examples/funnel does), so a
-- group effect's coordinate is theta_j / 10 whatever mu and tau are (with
-- `normal mu tau` it would be (theta_j - mu) / tau, the non-centred form).
-- Same posterior as hier6c / hier6n; theta_j ~ N(mu, tau), y_ij ~ N(theta_j, sigma).
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
  theta <- replicateM (int "J" d) (sample (normal 0 10))
  scoreLog (Exp (sum [normalLogPdf mu tau th - normalLogPdf 0 10 th | th <- theta]))
  scoreLog (Exp (sum [normalLogPdf (theta !! (g - 1)) sigma y | (g, y) <- zip gs ys]))
  return (draw [scalar "mu" mu, scalar "tau" tau, scalar "sigma" sigma, vector "theta" theta])
