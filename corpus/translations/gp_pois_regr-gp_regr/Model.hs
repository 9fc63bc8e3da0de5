-- posteriordb gp_pois_regr-gp_regr: Gaussian-process regression, marginalised.
-- Stan: rho > 0 ~ gamma(25, 4) (shape, rate); alpha > 0 ~ normal(0, 2) and
-- sigma > 0 ~ normal(0, 1) (half-normals); cov = gp_exp_quad_cov(x, alpha, rho)
-- + diag(sigma) (sigma, not sigma^2, on the diagonal); y ~ multi_normal(0, cov).
module Model (model) where

import Data.List (foldl')
import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  rho <- sample (gamma 25 0.25)          -- upstream gamma is (shape, scale); rate 4
  alpha <- sample (halfNormal 2)
  sigma <- sample (halfNormal 1)
  let cov = [ [ alpha * alpha * exp (-0.5 * (xi - xj) ^ (2 :: Int) / (rho * rho))
                + (if i == j then sigma else 0)
              | (j, xj) <- zip [0 :: Int ..] xs ]
            | (i, xi) <- zip [0 :: Int ..] xs ]
  scoreLog (Exp (mvNormalZeroLogPdf (choleskyRows cov) ys))
  return (draw [scalar "rho" rho, scalar "alpha" alpha, scalar "sigma" sigma])
  where
    xs = reals "x" d
    ys = reals "y" d

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

-- | log N(y | 0, L L^T) from the Cholesky rows: forward substitution L z = y.
mvNormalZeroLogPdf :: [[Double]] -> [Double] -> Double
mvNormalZeroLogPdf lrows y =
  -0.5 * sum (map (^ (2 :: Int)) z) - sum (map (log . last) lrows)
    - 0.5 * fromIntegral (length y) * log (2 * pi)
  where
    z = foldl' solveRow [] (zip lrows y)
    solveRow acc (row, yi) = acc ++ [(yi - sum (zipWith (*) row acc)) / last row]
