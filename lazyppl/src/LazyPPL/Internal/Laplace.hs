{-# LANGUAGE Trustworthy #-}
{-# LANGUAGE BangPatterns #-}
-- | A Laplace approximation of the posterior in Gaussian coordinates, used
-- only to initialise warm-up (never after it, so it cannot bias the draws).
--
-- The objective is the negative log posterior density of the read sites,
-- f(z) = −log W(z) + |z|²/2, with every other site fixed by one fresh seed so
-- f is a deterministic function.  It is minimised by BFGS with central
-- finite-difference gradients and a backtracking line search, then refined by
-- Newton steps with a finite-difference Hessian (on a near-Gaussian posterior
-- one Newton step lands on the mode however far BFGS got); the inverse of
-- the Hessian at the end is the covariance.  On regression-like posteriors (the common case)
-- this gives the warm-up a near-exact covariance before the first MH step,
-- which is what long, highly correlated ridges need.
--
-- Sites whose curvature is zero or not finite (discrete choices, flat
-- directions) keep unit variance and no correlation.  Any failure (no
-- progress, non-finite values, a Hessian that is not positive definite even
-- after that) returns 'Nothing' and warm-up proceeds without it.
module LazyPPL.Internal.Laplace
  ( Approximation (..)
  , laplace
  , Descent (..)
  , laplaceFrom
  ) where

import Control.Monad.Trans.State.Strict (State, get, put, runState)
import qualified Data.IntMap.Strict as IM
import qualified Data.Vector.Unboxed as U
import Data.Word (Word64)

import LazyPPL.Internal.Core
import LazyPPL.Internal.Linear

-- | A Gaussian approximation over a fixed list of sites.
data Approximation = Approximation
  { apSites :: !(U.Vector Int)
  , apMean :: !(U.Vector Double)
  , apCov :: !Matrix
  }

-- | Evaluation budget state: evaluations used, invalid ones.
data Budget = Budget !Int !Int

type Search = State Budget

-- | Approximate the posterior around the sites of a starting state.
-- Returns the approximation (if it succeeded), evaluations used and how many
-- of them had invalid weights.  @maxEvals@ bounds the optimisation.
laplace :: (Word64 -> Sites -> Evaluation a) -> Word64 -> Sites -> Int -> (Maybe Approximation, Int, Int)
laplace eval seed start maxEvals =
  let (result, used, bad) = laplaceFrom eval seed start maxEvals Nothing (\_ _ _ -> False)
      found = case result of
        Converged ap -> Just ap
        _ -> Nothing
  in (found, used, bad)

-- | How a search from a given start ended.
data Descent
  = -- | at a mode, with its approximation
    Converged !Approximation
  | -- | an iterate entered the given region (e.g. a known mode's), so the
    -- search stopped there: no Hessian was taken
    Joined
  | -- | no progress, non-finite values or a curvature that is not positive
    -- definite
    Failed

-- | 'laplace' with a probe metric (e.g. a known mode's covariance: on a
-- near-Gaussian posterior one Newton-like step in it from anywhere lands
-- next to that mode, so a search that would end there is recognised after
-- a couple of gradients) and a region, a predicate on a point, its objective value
-- f(z) = −log W(z) + |z|²/2 and the gradient of f there: the search stops
-- with 'Joined' as soon as an iterate (the start included) is inside it.
laplaceFrom
  :: (Word64 -> Sites -> Evaluation a) -> Word64 -> Sites -> Int -> Maybe Matrix
  -> (U.Vector Double -> Double -> U.Vector Double -> Bool) -> (Descent, Int, Int)
laplaceFrom eval seed start maxEvals precondition inside =
  let (result, Budget used bad) = runState search (Budget 0 0)
  in (result, used, bad)
  where
    addrs = U.fromList (IM.keys start)
    d = U.length addrs
    x0 = U.fromList (IM.elems start)

    objective :: U.Vector Double -> Search Double
    objective x
      | U.any (\v -> isNaN v || isInfinite v) x = return (1 / 0)
      | otherwise = do
          Budget used bad <- get
          let lw = evLogWeight (eval seed (IM.fromList (zip (U.toList addrs) (U.toList x))))
              ok = validLogWeight lw
          put (Budget (used + 1) (if ok then bad else bad + 1))
          return (if ok then 0.5 * U.sum (U.map (\v -> v * v) x) - lw else 1 / 0)

    -- Hessians cost about 2d² evaluations each: fewer for many sites
    hessianCap = if d <= 64 then maxHessians else 2

    -- BFGS stops early enough to leave room for the Newton refinement
    exhausted = do
      Budget used _ <- get
      return (used >= maxEvals - hessianCap * (2 * d * d + 4 * d) - 30 * (2 * d + 5))

    -- Central differences with steps of 1e-3 of each coordinate's estimated
    -- SD, between 1e-8 and 1e-4: large enough to stay clear of the rounding
    -- of u = Φ(z) near 1 (its resolution in z is ~1e-6 at z = 6.5), small
    -- enough for posteriors narrower than the prior by 10⁴.
    gradient variances x = U.fromList <$> mapM partial [0 .. d - 1]
      where
        partial i = do
          let h = max 1e-8 (min 1e-4 (1e-3 * sqrt (variances U.! i)))
          fp <- objective (bump i h x)
          fm <- objective (bump i (-h) x)
          return ((fp - fm) / (2 * h))

    search
      | d == 0 = return Failed
      | otherwise = do
          f0 <- objective x0
          g0 <- gradient (U.replicate d 1) x0
          if inside x0 f0 g0 then return Joined else do
            joinedByProbe <- probe f0 g0
            if joinedByProbe then return Joined else descend f0 g0

    -- one Newton-like step in the given metric, kept only if it lands in
    -- the region (cheap on near-Gaussian posteriors); otherwise the search
    -- proper starts from x0 as if there had been no probe, so the probe
    -- does not pull searches towards the region's mode
    probe f0 g0 = case precondition of
      Just m | matDim m == d -> do
        let p = U.map negate (matVec m g0)
        found <- lineSearch x0 f0 p (U.sum (U.zipWith (*) g0 p)) 1 (50 :: Int)
        case found of
          Just (x', f') -> do
            g' <- gradient (diagonal m) x'
            return (inside x' f' g')
          Nothing -> return False
      _ -> return False

    descend f0 g0 = do
          descent <- bfgs (0 :: Int) x0 f0 g0 (identity d) True
          case descent of
            Nothing -> return Joined
            Just (x1, f1, g1, hinv) | not (isInfinite f1 || isNaN f1) -> curvature x1 f1 g1 hinv
            _ -> return Failed

    curvature x1 f1 g1 hinv = do
              mh <- hessianAt x1 f1 (U.generate d (\i -> entry hinv i i))
              case mh of
                Nothing -> return Failed
                Just hc -> do
                  (x2, f2, cov, hessDecrement, hs) <- newton hc x1 f1 g1 (0 :: Int) (1 / 0) 0 (1 :: Int)
                  -- the covariance is the curvature at the mode: re-take the
                  -- Hessian if the last one was taken elsewhere
                  final <-
                    if hessDecrement > 1e-2 && hs <= hessianCap
                      then maybe cov snd <$> hessianAt x2 f2 (diagonal cov)
                      else return cov
                  return (if inside x2 f2 (U.replicate d 0) then Joined else Converged (Approximation addrs x2 final))

    -- Newton steps with a line search until the Newton decrement gᵀH⁻¹g is
    -- negligible.  The Hessian is re-taken (at most 'hessianCap' times in
    -- all) whenever a step shrank the decrement by less than a factor of 10,
    -- i.e. when the curvature where it was taken no longer describes the
    -- objective; the covariance returned is the last Hessian's inverse.
    newton (h, cov) x f g !k lastDecrement hessDecrement0 !hessians = do
      let p = U.map negate (matVec cov g)
          decrement = negate (U.sum (U.zipWith (*) g p))
          -- the decrement where the current Hessian was taken
          hessDecrement = if isInfinite lastDecrement then decrement else hessDecrement0
      if k >= 30 || not (decrement > 1e-10) || U.any (\v -> isNaN v || isInfinite v) g
        then return (x, f, cov, hessDecrement, hessians)
        else
          if decrement > 0.1 * lastDecrement && hessians < hessianCap
            then do
              fresh <- hessianAt x f (diagonal cov)
              case fresh of
                Just hc' -> newton hc' x f g k (1 / 0) 0 (hessians + 1)
                Nothing -> step p decrement hessDecrement (hessians + hessianCap)
            else step p decrement hessDecrement hessians
      where
        step p decrement hd hs = do
          found <- lineSearch x f p (negate decrement) 1 (0 :: Int)
          case found of
            Nothing -> return (x, f, cov, hd, hs)
            Just (x', f') -> do
              g' <- gradient (diagonal cov) x'
              newton (h, cov) x' f' g' (k + 1) decrement hd hs

    -- BFGS on the inverse Hessian; the first step is scaled to unit length
    -- (when starting from the identity).  'Nothing' when an iterate is
    -- inside the stopping region.
    bfgs !k x f g hinv firstStep = do
      done <- exhausted
      let gnorm = sqrt (U.sum (U.map (^ (2 :: Int)) g))
      if done || k >= 500 || gnorm < 1e-6 || U.any (\v -> isNaN v || isInfinite v) g
        then return (Just (x, f, g, hinv))
        else do
          let dir0 = U.map negate (matVec hinv g)
              dir = if firstStep then U.map (/ gnorm) dir0 else dir0
              slope = U.sum (U.zipWith (*) g dir)
          found <- lineSearch x f dir slope 1 (0 :: Int)
          case found of
            Nothing -> return (Just (x, f, g, hinv))
            Just (x', f') -> do
              g' <- gradient (U.generate d (\i -> entry hinv i i)) x'
              if inside x' f' g' then return Nothing else do
                let s = U.zipWith (-) x' x
                    y = U.zipWith (-) g' g
                    sy = U.sum (U.zipWith (*) s y)
                    hinv'
                      | sy <= 1e-12 = hinv
                      | firstStep = update (scaled (sy / U.sum (U.map (^ (2 :: Int)) y))) s y sy
                      | otherwise = update hinv s y sy
                    converged = abs (f - f') <= 1e-12 * (1 + abs f)
                if converged
                  then return (Just (x', f', g', hinv'))
                  else bfgs (k + 1) x' f' g' hinv' False

    lineSearch x f dir slope t tries
      | tries >= 60 || slope >= 0 = return Nothing
      | otherwise = do
          let x' = U.zipWith (\a b -> a + t * b) x dir
          f' <- objective x'
          if f' <= f + 1e-4 * t * slope
            then return (Just (x', f'))
            else lineSearch x f dir slope (t / 2) (tries + 1)

    scaled c = fromFunction d (\i j -> if i == j then c else 0)

    update hinv s y sy =
      let hy = matVec hinv y
          yhy = U.sum (U.zipWith (*) y hy)
          rho = 1 / sy
      in fromFunction d $ \i j ->
           entry hinv i j
             - rho * (hy U.! i * s U.! j + s U.! i * hy U.! j)
             + (rho * rho * yhy + rho) * s U.! i * s U.! j

    -- Curvatures by central second differences: a first pass with steps of
    -- a tenth of the marginal SD (from BFGS) finds each coordinate's
    -- conditional SD 1/√H_ii; the Hessian is then taken with steps of a tenth
    -- of those, with four-point cross differences so that third-order terms
    -- cancel (this matters on ridges: a marginal-sized step in one coordinate
    -- climbs far up the walls of a narrow valley).
    hessianAt x f variances = do
      let rough = U.map (\v -> 0.1 * sqrt (max 1e-16 (min 1 v))) variances
      diag0 <- secondDiffs rough
      let steps = U.imap (\i h -> let c = diag0 U.! i in if usable c then 0.1 / sqrt c else h) rough
      diag <- secondDiffs steps
      let curved i = usable (diag U.! i)
          at i si j sj = U.imap (\k v -> v + (if k == i then si else 0) + (if k == j then sj else 0)) x
          cross i j = do
            let hi = steps U.! i
                hj = steps U.! j
            fpp <- objective (at i hi j hj)
            fpm <- objective (at i hi j (-hj))
            fmp <- objective (at i (-hi) j hj)
            fmm <- objective (at i (-hi) j (-hj))
            return (i * d + j, (fpp - fpm - fmp + fmm) / (4 * hi * hj))
      offs <- sequence [cross i j | i <- [0 .. d - 1], j <- [0 .. i - 1], curved i, curved j]
      let offMap = IM.fromList offs
          hess = fromFunction d $ \i j ->
            if i == j then (if curved i then diag U.! i else 1)
            else IM.findWithDefault 0 (max i j * d + min i j) offMap
      case invertSpd hess of
        Just cov | U.all (\v -> not (isNaN v || isInfinite v)) (matEntries cov) ->
          return (Just (hess, cov))
        _ -> return Nothing
      where
        secondDiffs hs = U.fromList <$> mapM (\i -> do
          let h = hs U.! i
          fp <- objective (bump i h x)
          fm <- objective (bump i (-h) x)
          return ((fp - 2 * f + fm) / (h * h))) [0 .. d - 1]
        usable c = c > 1e-8 && not (isInfinite c || isNaN c)

-- | Most Hessians one approximation may take with up to 64 sites (each
-- costs about 2d² evaluations; above 64 sites the cap is 2).
maxHessians :: Int
maxHessians = 5

bump :: Int -> Double -> U.Vector Double -> U.Vector Double
bump i h x = x U.// [(i, x U.! i + h)]
