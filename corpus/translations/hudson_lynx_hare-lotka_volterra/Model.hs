-- posteriordb hudson_lynx_hare-lotka_volterra: Lotka-Volterra ODE for hare/lynx pelts.
-- Stan: theta = (alpha, beta, gamma, delta) > 0 with theta[1], theta[3] ~ normal(1, 0.5)
-- and theta[2], theta[4] ~ normal(0.05, 0.05) (on theta > 0); z_init > 0 ~
-- lognormal(log(10), 1); sigma > 0 ~ lognormal(-1, 1); z = solution at ts of
-- du/dt = (alpha - beta v) u, dv/dt = (-gamma + delta u) v from z(0) = z_init;
-- y_init[k] ~ lognormal(log(z_init[k]), sigma[k]); y[:, k] ~ lognormal(log(z[:, k]), sigma[k]).
-- theta > 0: the normal draws are restricted to positive values (weight zero
-- otherwise), Stan's density on that region up to a constant.
-- The ODE: Stan uses an adaptive Dormand-Prince 5(4) solver (integrate_ode_rk45, rel.
-- tol 1e-5, abs. tol 1e-3); here the same method runs with tolerances 1e-8, i.e. closer
-- to the exact solution than the reference's solver (a solver failure, as in Stan,
-- gives weight zero).
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  alpha <- sample (normal 1 0.5)
  beta' <- sample (normal 0.05 0.05)
  gamma' <- sample (normal 1 0.5)
  delta <- sample (normal 0.05 0.05)
  u0 <- sample (logNormal (log 10) 1)
  v0 <- sample (logNormal (log 10) 1)
  s1 <- sample (logNormal (-1) 1)
  s2 <- sample (logNormal (-1) 1)
  let rhs _ [u, v] = [(alpha - beta' * v) * u, (-gamma' + delta * u) * v]
      rhs _ _ = error "the Lotka-Volterra state has two components"
      positive = all (> 0) [alpha, beta', gamma', delta]
      loglik = case (positive, solveDP45 1e-8 1e-8 rhs 0 [u0, v0] ts) of
        (True, Just zs) ->
          logNormalLogPdf (log u0) s1 yInitU + logNormalLogPdf (log v0) s2 yInitV
            + sum [ logNormalLogPdf (log u) s1 yu + logNormalLogPdf (log v) s2 yv
                  | ([u, v], [yu, yv]) <- zip zs ys ]
        _ -> -1 / 0
  scoreLog (Exp loglik)
  return (draw [ vector "theta" [alpha, beta', gamma', delta], vector "z_init" [u0, v0]
               , vector "sigma" [s1, s2] ])
  where
    ts = reals "ts" d
    ys = realMatrix "y" d
    [yInitU, yInitV] = reals "y_init" d

-- | Adaptive Dormand-Prince 5(4) solution of y' = f t y from y(t0) = y0, reported at
-- each of the increasing times ts (steps are shortened to land on them exactly).
-- The error test is max_i |err_i| / (atol + rtol * max(|y_i|, |y5_i|)) <= 1.
-- Nothing when more than 100000 steps would be needed.
solveDP45 :: Double -> Double -> (Double -> [Double] -> [Double]) -> Double -> [Double]
          -> [Double] -> Maybe [[Double]]
solveDP45 rtol atol f t0 y0 ts0 = go (100000 :: Int) t0 y0 (1e-3 * max 1 (abs (last (t0 : ts0)))) ts0
  where
    go _ _ _ _ [] = Just []
    go budget t y h (target : rest)
      | budget <= 0 = Nothing
      | otherwise =
          let landing = t + h >= target
              h' = if landing then target - t else h
              (y5, err) = dp45Step f t y h'
              errNorm = maximum [ abs e / (atol + rtol * max (abs a) (abs b))
                                | (e, a, b) <- zip3 err y y5 ]
              factor = min 5 (max 0.2 (0.9 * errNorm ** (-0.2)))
          in if errNorm <= 1
               then if landing
                      then (y5 :) <$> go (budget - 1) target y5 (max h (h' * factor)) rest
                      else go (budget - 1) (t + h') y5 (h' * factor) (target : rest)
               else go (budget - 1) t y (h' * (if isNaN factor then 0.2 else factor)) (target : rest)

-- | One Dormand-Prince step of size h: the fifth-order solution and the error estimate
-- (difference between the fifth- and fourth-order solutions).
dp45Step :: (Double -> [Double] -> [Double]) -> Double -> [Double] -> Double
         -> ([Double], [Double])
dp45Step f t y h = (y5, map (* h) (combine eCoef [k1, k2, k3, k4, k5, k6, k7]))
  where
    combine cs ks = foldr1 (zipWith (+)) (zipWith (\c k -> map (* c) k) cs ks)
    stage cs ks = zipWith (+) y (map (* h) (combine cs ks))
    k1 = f t y
    k2 = f (t + h / 5) (stage [1 / 5] [k1])
    k3 = f (t + 3 * h / 10) (stage [3 / 40, 9 / 40] [k1, k2])
    k4 = f (t + 4 * h / 5) (stage [44 / 45, -56 / 15, 32 / 9] [k1, k2, k3])
    k5 = f (t + 8 * h / 9)
           (stage [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729] [k1, k2, k3, k4])
    k6 = f (t + h)
           (stage [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656]
                  [k1, k2, k3, k4, k5])
    y5 = stage [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]
               [k1, k2, k3, k4, k5, k6]
    k7 = f (t + h) y5
    eCoef = [71 / 57600, 0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40]
