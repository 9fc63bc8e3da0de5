-- posteriordb one_comp_mm_elim_abs-one_comp_mm_elim_abs: one-compartment
-- pharmacokinetics with first-order absorption and Michaelis-Menten elimination.
-- Stan: k_a, K_m, V_m, sigma > 0, each ~ cauchy(0, 1) (half-Cauchy);
-- dC/dt = dose(t) - (V_m / V) * C / (K_m + C) with dose(t) = exp(-k_a t) * D * k_a / V for
-- t > 0 and 0 at t = 0 (as in the Stan function), C(t0) = 0 (transformed data C0 = {0.0});
-- C_hat[n] ~ lognormal(log(C(times[n])), sigma).
-- The ODE: Stan uses integrate_ode_bdf (rel. and abs. tol 1e-6); here an adaptive
-- Dormand-Prince 5(4) solver with tolerances 1e-8 / 1e-10 (closer to the exact solution;
-- a solver failure gives weight zero).
module Model (model) where

import LazyPPL
import LazyPPL.Distributions
import LazyPPL.Bridge

model :: Data -> Meas Draw
model d = do
  kA <- sample (halfCauchy 1)
  kM <- sample (halfCauchy 1)
  vM <- sample (halfCauchy 1)
  sigma <- sample (halfCauchy 1)
  let rhs t [c] = [dose t - (vM / vol) * c / (kM + c)]
      rhs _ _ = error "the one-compartment state has one component"
      dose t = if t > 0 then exp (-kA * t) * dose0 * kA / vol else 0
      loglik = case solveDP45 1e-8 1e-10 rhs t0 [0] times of
        Just cs -> sum [logNormalLogPdf (log c) sigma obs | ([c], obs) <- zip cs cHat]
        Nothing -> -1 / 0
  scoreLog (Exp loglik)
  return (draw [ scalar "k_a" kA, scalar "K_m" kM, scalar "V_m" vM, scalar "sigma" sigma ])
  where
    t0 = real "t0" d
    dose0 = real "D" d
    vol = real "V" d
    times = reals "times" d
    cHat = reals "C_hat" d

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
