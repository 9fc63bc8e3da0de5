{-# LANGUAGE BangPatterns #-}
{-# LANGUAGE Trustworthy #-}
-- | Ordinary differential equations for models such as pharmacokinetics and
-- predator–prey dynamics, where the likelihood needs the solution of
-- y' = f(t, y) at the observation times for every sampled parameter vector.
-- The sampler evaluates a model tens of thousands of times per chain, so the
-- solver dominates such a model's run time: 'dormandPrince' keeps its state
-- unboxed and strict (the Lotka–Volterra solve 3× faster than the same method
-- written with lazy lists; @benchmarks/ode_accuracy.py --lazyppl@).
--
-- > let rhs _ [u, v] = [(alpha - beta * v) * u, (-gamma + delta * u) * v]
-- >     rhs _ _ = error "two components"
-- > case dormandPrince 1e-6 1e-6 rhs 0 [u0, v0] ts of
-- >   Just zs -> ... zs !! k is the state at ts !! k ...
-- >   Nothing -> ... the solver gave up: score weight zero ...
module LazyPPL.ODE
  ( dormandPrince
  , maxSteps
  ) where

import qualified Data.Vector.Unboxed as U

type Vec = U.Vector Double

-- | The most steps (accepted or rejected) one 'dormandPrince' call takes
-- before it gives up with 'Nothing'.
maxSteps :: Int
maxSteps = 100000

-- | @dormandPrince rtol atol f t0 y0 ts@: the solution of y' = f t y with
-- y(t0) = y0, at each of the times @ts@ (non-decreasing, none before @t0@),
-- by the adaptive Dormand–Prince 5(4) method (the method of Stan's
-- @ode_rk45@ and SciPy's @RK45@), steps shortened to land on each time.
--
-- A step is accepted when max_i |err_i| / (atol + rtol · max(|y_i|, |y5_i|)) ≤ 1
-- (err = fifth- minus fourth-order solution); the next step is scaled by
-- 0.9 · norm^(−1/5), clamped to [0.2, 5].  The first step is
-- 1e-3 · max(1, |last time|).  'Nothing' when more than 'maxSteps' steps would
-- be needed (e.g. a non-finite right-hand side keeps every step rejected), so
-- a model can give that parameter vector weight zero, as Stan rejects a
-- draw whose solver fails.  @f@ must return as many components as it is given;
-- anything else is an error, as are decreasing times or a time before @t0@.
dormandPrince :: Double -> Double -> (Double -> [Double] -> [Double]) -> Double -> [Double]
              -> [Double] -> Maybe [[Double]]
dormandPrince rtol atol f t0 y0 ts0
  | not (nonDecreasing (t0 : ts0)) =
      error "dormandPrince: the times must be non-decreasing and none before the start time"
  | null y0 = Just (map (const []) ts0)
  | otherwise = map U.toList <$> go maxSteps t0 (U.fromList y0) h0 ts0
  where
    n = length y0
    h0 = 1e-3 * max 1 (abs (last (t0 : ts0)))
    rhs t y =
      let out = U.fromListN (n + 1) (f t (U.toList y))
      in if U.length out == n
           then out
           else error ("dormandPrince: the right-hand side returned " ++ show (U.length out)
                       ++ " components for a state of " ++ show n
                       ++ (if U.length out > n then " (or more)" else ""))
    go :: Int -> Double -> Vec -> Double -> [Double] -> Maybe [Vec]
    go _ _ _ _ [] = Just []
    go !budget !t !y !h targets@(target : rest)
      | budget <= 0 = Nothing
      | errNorm <= 1 =
          if landing
            then (y5 :) <$> go (budget - 1) target y5 (max h (h' * factor)) rest
            else go (budget - 1) (t + h') y5 (h' * factor) targets
      | otherwise = go (budget - 1) t y (h' * (if isNaN factor then 0.2 else factor)) targets
      where
        landing = t + h >= target
        h' = if landing then target - t else h
        (y5, err) = step rhs t y h'
        errNorm = U.maximum (U.zipWith3 scaled err y y5)
        scaled e a b = abs e / (atol + rtol * max (abs a) (abs b))
        factor = min 5 (max 0.2 (0.9 * errNorm ** (-0.2)))

nonDecreasing :: [Double] -> Bool
nonDecreasing xs = and (zipWith (<=) xs (drop 1 xs))

-- | One Dormand–Prince step of size h from (t, y): the fifth-order solution
-- and the error estimate h · Σ e_i k_i.
step :: (Double -> Vec -> Vec) -> Double -> Vec -> Double -> (Vec, Vec)
step f !t !y !h = (y5, err)
  where
    -- acc + c · k, elementwise
    ax :: Double -> Vec -> Vec -> Vec
    ax !c k acc = U.zipWith (\a b -> a + c * b) acc k
    k1 = f t y
    k2 = f (t + h / 5) (ax (h / 5) k1 y)
    k3 = f (t + 3 * h / 10) (ax (h * 9 / 40) k2 (ax (h * 3 / 40) k1 y))
    k4 = f (t + 4 * h / 5) (ax (h * 32 / 9) k3 (ax (h * (-56 / 15)) k2 (ax (h * 44 / 45) k1 y)))
    k5 = f (t + 8 * h / 9)
           (ax (h * (-212 / 729)) k4 (ax (h * 64448 / 6561) k3
             (ax (h * (-25360 / 2187)) k2 (ax (h * 19372 / 6561) k1 y))))
    k6 = f (t + h)
           (ax (h * (-5103 / 18656)) k5 (ax (h * 49 / 176) k4 (ax (h * 46732 / 5247) k3
             (ax (h * (-355 / 33)) k2 (ax (h * 9017 / 3168) k1 y)))))
    y5 = ax (h * 11 / 84) k6 (ax (h * (-2187 / 6784)) k5 (ax (h * 125 / 192) k4
           (ax (h * 500 / 1113) k3 (ax (h * 35 / 384) k1 y))))
    k7 = f (t + h) y5
    err = ax (h * (-1 / 40)) k7 (ax (h * 22 / 525) k6 (ax (h * (-17253 / 339200)) k5
            (ax (h * 71 / 1920) k4 (ax (h * (-71 / 16695)) k3 (U.map (* (h * 71 / 57600)) k1)))))
