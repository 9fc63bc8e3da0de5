-- posteriordb gp_pois_regr-gp_pois_regr: latent Gaussian process with Poisson counts.
-- Stan: rho > 0 ~ gamma(25, 4) (shape, rate); alpha > 0 ~ normal(0, 2) (half-normal);
-- f_tilde ~ normal(0, 1);
-- f = cholesky(gp_exp_quad_cov(x, alpha, rho) + 1e-10 I) * f_tilde (non-centred);
-- k ~ poisson_log(f). f is reported (the reference draws hold f).
module Model (model) where

import Control.Monad (replicateM)
import Data.List (foldl')
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  rho <- sample (gamma 25 0.25)          -- upstream gamma is (shape, scale); rate 4
  alpha <- sample (halfNormal 2)
  fTilde <- replicateM n (sample (normal 0 1))
  let cov = [ [ alpha * alpha * exp (-0.5 * (xi - xj) ^ (2 :: Int) / (rho * rho))
                + (if i == j then 1e-10 else 0)
              | (j, xj) <- zip [0 :: Int ..] xs ]
            | (i, xi) <- zip [0 :: Int ..] xs ]
      f = [sum (zipWith (*) row fTilde) | row <- choleskyRows cov]
  scoreLog (Exp (sum [poissonLogPmf (exp fi) (toInteger ki) | (fi, ki) <- zip f ks]))
  return (draw [scalar "rho" rho, scalar "alpha" alpha, vector "f" f])
  where
    xs = reals "x" d
    ks = ints "k" d
    n = length xs

-- | Rows of the lower Cholesky factor L (row i holds L[i][0..i]) of a symmetric
-- positive-definite matrix; a non-positive pivot gives NaN (weight zero).
choleskyRows :: [[Double]] -> [[Double]]
choleskyRows = foldl' addRow []
  where
    addRow done arow = done ++ [offDiag ++ [sqrt (arow !! i - dot offDiag offDiag)]]
      where
        i = length done
        offDiag = foldl' next [] (zip done arow)
        -- L[i][j] = (A[i][j] - sum_{k<j} L[i][k] L[j][k]) / L[j][j]
        next acc (lj, aij) = acc ++ [(aij - dot acc lj) / last lj]
    dot u v = sum (zipWith (*) u v)
