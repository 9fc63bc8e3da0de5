-- posteriordb gp_pois_regr-gp_pois_regr: latent Gaussian process with Poisson counts.
-- Stan: rho > 0 ~ gamma(25, 4) (shape, rate); alpha > 0 ~ normal(0, 2) (half-normal);
-- f_tilde ~ normal(0, 1);
-- f = cholesky(gp_exp_quad_cov(x, alpha, rho) + 1e-10 I) * f_tilde (non-centred);
-- k ~ poisson_log(f). f is reported (the reference draws hold f).
module Model (model) where

import Control.Monad (replicateM)
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge
import LazyPPL.Linear (cholesky, denseMatrix, mulVec)

model :: Data -> Meas Draw
model d = do
  rho <- sample (gamma 25 0.25)          -- upstream gamma is (shape, scale); rate 4
  alpha <- sample (halfNormal 2)
  fTilde <- replicateM n (sample (normal 0 1))
  let cov = denseMatrix
        [ [ alpha * alpha * exp (-0.5 * (xi - xj) ^ (2 :: Int) / (rho * rho))
            + (if i == j then 1e-10 else 0)
          | (j, xj) <- zip [0 :: Int ..] xs ]
        | (i, xi) <- zip [0 :: Int ..] xs ]
      -- not positive definite: NaN, so weight zero
      f = maybe (replicate n (0 / 0)) (`mulVec` fTilde) (cholesky cov)
  scoreLog (Exp (sum [poissonLogPmf (exp fi) (toInteger ki) | (fi, ki) <- zip f ks]))
  return (draw [scalar "rho" rho, scalar "alpha" alpha, vector "f" f])
  where
    xs = reals "x" d
    ks = ints "k" d
    n = length xs
