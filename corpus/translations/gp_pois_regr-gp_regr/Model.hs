-- posteriordb gp_pois_regr-gp_regr: Gaussian-process regression, marginalised.
-- Stan: rho > 0 ~ gamma(25, 4) (shape, rate); alpha > 0 ~ normal(0, 2) and
-- sigma > 0 ~ normal(0, 1) (half-normals); cov = gp_exp_quad_cov(x, alpha, rho)
-- + diag(sigma) (sigma, not sigma^2, on the diagonal); y ~ multi_normal(0, cov).
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge
import LazyPPL.Linear (cholesky, denseDiagonal, denseMatrix, solveLower)

model :: Data -> Meas Draw
model d = do
  rho <- sample (gamma 25 0.25)          -- upstream gamma is (shape, scale); rate 4
  alpha <- sample (halfNormal 2)
  sigma <- sample (halfNormal 1)
  let cov = denseMatrix
        [ [ alpha * alpha * exp (-0.5 * (xi - xj) ^ (2 :: Int) / (rho * rho))
            + (if i == j then sigma else 0)
          | (j, xj) <- zip [0 :: Int ..] xs ]
        | (i, xi) <- zip [0 :: Int ..] xs ]
  scoreLog (Exp (maybe (0 / 0) (`mvNormalZeroLogPdf` ys) (cholesky cov)))  -- NaN: weight zero
  return (draw [scalar "rho" rho, scalar "alpha" alpha, scalar "sigma" sigma])
  where
    xs = reals "x" d
    ys = reals "y" d
    -- log N(y | 0, L Lᵀ): forward substitution L z = y
    mvNormalZeroLogPdf l y =
      let z = solveLower l y
      in -0.5 * sum (map (^ (2 :: Int)) z) - sum (map log (denseDiagonal l))
           - 0.5 * fromIntegral (length y) * log (2 * pi)
