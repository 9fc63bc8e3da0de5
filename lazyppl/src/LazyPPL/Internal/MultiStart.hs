{-# LANGUAGE Trustworthy #-}
-- | Multi-start initialisation of one chain's warm-up: a chain whose own
-- start lies in the basin of a minor mode would otherwise keep that mode for
-- the whole run (its Laplace search ends there and the adaptive kernels,
-- tuned to it, rarely cross a deep valley).
--
-- After the chain's own Laplace approximation, a few extra searches start
-- from fresh prior draws of the same sites (drawn from a generator derived
-- from the chain's own Laplace seed, so chains stay distinct and the chain's
-- main generator is untouched).  Each search first probes one Newton-like
-- step in the own mode's covariance (on a near-Gaussian posterior it lands
-- next to the own mode), then descends as the own search did (BFGS from
-- the identity: a search preconditioned by a broad minor mode's covariance
-- was seen to be drawn back to it), and it stops as soon as a point enters the own
-- mode's region (Mahalanobis distance under the own Laplace covariance
-- below 'joinRadius2', objective within half of that above the own mode's):
-- on unimodal posteriors the extra searches cost a
-- few gradients.  A search that converges elsewhere is scored by the
-- Laplace estimate of its mode's log mass,
--
-- >  log mass ≈ log W(μ) − |μ|²/2 + ½ log det Σ   (+ a constant common to all modes)
--
-- in the tree's Gaussian coordinates, and warm-up starts from the best mode
-- only if it beats the own one by more than 'moveThreshold' nats: the mode
-- left behind then holds a fraction below e^−10 of the posterior mass, so
-- leaving it is not hiding a real mode, while modes of comparable mass keep
-- their chains (real multimodality stays visible to R-hat).
--
-- Only the warm-up's starting point changes; every kernel after warm-up is
-- the same exact MCMC kernel, so the chain still targets the posterior.
module LazyPPL.Internal.MultiStart
  ( MultiStart (..)
  , multiStart
  , extraStarts
  , moveThreshold
  , logMass
  ) where

import qualified Data.IntMap.Strict as IM
import qualified Data.Vector.Unboxed as U
import Data.Word (Word64)

import LazyPPL.Internal.Core
import LazyPPL.Internal.Laplace
import LazyPPL.Internal.Linear
import LazyPPL.Internal.Random

-- | What the extra searches found.
data MultiStart = MultiStart
  { msMove :: Maybe Approximation
    -- ^ the better mode to start from, if one beat the own by
    -- 'moveThreshold'
  , msEvaluations :: !Int
  , msInvalid :: !Int
  , msTuning :: [(String, Double)]
    -- ^ for the chain's tuning record: @multistart_*@ entries
  }

-- | Extra searches per chain.
extraStarts :: Int
extraStarts = 4

-- | Nats by which another mode's log mass must beat the own mode's for the
-- chain to move there.
moveThreshold :: Double
moveThreshold = 10

-- | Nats by which a point may lie below the own mode's objective and still
-- count as that mode (the own search's last steps leave a little slack).
joinSlack :: Double
joinSlack = 1

-- | The searches stop once this many joined the own mode.
joinsToStop :: Int
joinsToStop = 2

-- | Prior draws tried per extra start to find one of finite weight.
startTries :: Int
startTries = 20

-- | Squared Mahalanobis radius of a mode's region for @d@ sites: about the
-- 0.999 quantile of χ²_d (d + 5√(2d) + 2), so a search inside it has
-- reached the typical set of that mode's Gaussian approximation.
joinRadius2 :: Int -> Double
joinRadius2 d = let k = fromIntegral d in k + 5 * sqrt (2 * k) + 2

-- | Laplace estimate of a mode's log posterior mass (up to a constant shared
-- by all modes of the same sites): log W(μ) − |μ|²/2 + ½ log det Σ, from the
-- log weight at the mode and the covariance's Cholesky factor.
logMass :: Double -> Approximation -> Maybe Double
logMass logWeight ap = do
  l <- cholesky (apCov ap)
  let halfLogDet = U.sum (U.map log (diagonal l))
      mu = apMean ap
  return (logWeight - 0.5 * U.sum (U.map (\v -> v * v) mu) + halfLogDet)

-- | Run the extra searches around an own approximation whose mode has the
-- given log weight.  @eval@ and @seed@ are those of the own search (the
-- same objective); @perStart@ bounds each search's evaluations.
--
-- Cost bound: the searches share a budget of @budget@ evaluations (the
-- chain passes a tenth of its iterations).  A search is expected to cost
-- about what the own search did (@ownEvals@), so only as many start as that
-- budget pays for (none where one Laplace search is dear compared with the
-- chain, e.g. a 26-site ridge), no new one starts once it is spent, and
-- none after two searches joined the own mode.
--
-- Rescue: when the own search failed (no approximation, e.g. it ended on a
-- constraint's edge) the same searches run from the own start's sites with
-- no own mode to join or beat, and warm-up starts from the best mode found
-- (among modes of comparable mass the best is decided by estimation noise,
-- so chains still spread over them).
multiStart
  :: (Word64 -> Sites -> Evaluation a) -> Word64 -> Int -> Int -> Int -> U.Vector Int
  -> Maybe (Approximation, Double) -> MultiStart
multiStart eval seed perStart budget ownEvals addrs ownMode = case ownMode of
  Nothing ->
    let planned = min extraStarts (budget `div` max 1 ownEvals)
        runs = sequential Nothing (\_ _ _ -> False) planned
        (found, evals, bad, _) = summary runs
        move = fmap snd (bestOf found)
    in MultiStart move evals bad
         [ ("multistart_starts", fromIntegral (length runs))
         , ("multistart_planned", fromIntegral planned)
         , ("multistart_rescue", 1)
         , ("multistart_modes", fromIntegral (length found))
         , ("multistart_evaluations", fromIntegral evals)
         , ("multistart_moved", maybe 0 (const 1) move) ]
  Just (own, ownLogWeight) -> case (logMass ownLogWeight own, cholesky (apCov own)) of
    (Just ownMass, Just ownFactor) | apSites own == addrs ->
      let ownObjective = 0.5 * U.sum (U.map (\v -> v * v) (apMean own)) - ownLogWeight
          -- in the own Gaussian's typical set: near the own mode in its
          -- metric, no higher in the objective than that Gaussian is at
          -- the region's edge (a prior draw in the span of a broad mode,
          -- far up the walls of the likelihood, has not joined it) and not
          -- lower than the own mode (a better point is another mode, even
          -- inside a broad mode's span)
          -- and (near-)stationary there: the gradient's size in the own
          -- metric, gᵀΣg, is what the Gaussian has inside the region (on a
          -- path through a broad mode towards a better one it is large)
          inside x f g =
            let r = solveLower ownFactor (U.zipWith (-) x (apMean own))
                gr = lowerTransposeTimes ownFactor g
                r2 = joinRadius2 d
                rise = f - ownObjective
            in U.sum (U.map (\v -> v * v) r) < r2 && rise < 0.5 * r2 && rise > negate joinSlack
                 && U.sum (U.map (\v -> v * v) gr) < r2
          planned = min extraStarts (budget `div` max 1 ownEvals)
          runs = sequential (Just (apCov own)) inside planned
          (found, evals, bad, joined) = summary runs
          best = bestOf found
          gain = fmap (\(m, _) -> m - ownMass) best
          move = case best of
            Just (m, ap) | m - ownMass > moveThreshold -> Just ap
            _ -> Nothing
      in MultiStart move evals bad $
           [ ("multistart_starts", fromIntegral (length runs))
           , ("multistart_planned", fromIntegral planned)
           , ("multistart_joined", fromIntegral joined)
           , ("multistart_modes", fromIntegral (length found))
           , ("multistart_evaluations", fromIntegral evals)
           , ("multistart_moved", maybe 0 (const 1) move)
           ] ++ [("multistart_gain", g) | Just g <- [gain]]
    _ -> MultiStart Nothing 0 0 [("multistart_starts", 0), ("multistart_planned", 0)]
  where
    d = U.length addrs
    summary runs =
      ( [(m, ap) | (Just (m, ap), _, _, _) <- runs]
      , sum [n | (_, n, _, _) <- runs]
      , sum [b | (_, _, b, _) <- runs]
      , length [() | (_, _, _, True) <- runs] )
    bestOf = foldr (\c@(m, _) acc -> case acc of
                      Just (m', _) | m' >= m -> acc
                      _ -> Just c) Nothing
    -- generator of the extra starts: derived from the own search's seed
    gen0 = mkGen (combine seed 0x6d756c7469737461)
    toSites x = IM.fromList (zip (U.toList addrs) (U.toList x))
    -- the planned searches in order while the budget lasts
    -- (stopping early once 'joinsToStop' of them joined the own mode:
    -- evidence enough that prior draws lead there)
    sequential probeMetric inside planned = go 1 0 (0 :: Int)
      where
        go k spent joins
          | k > planned || spent >= budget || joins >= joinsToStop = []
          | otherwise =
              let r@(_, n, _, j) = search probeMetric inside k
              in r : go (k + 1) (spent + n) (if j then joins + 1 else joins)
    -- one extra search: a prior draw of finite weight, then the descent;
    -- (mode's log mass and approximation), evaluations,
    -- invalid ones, whether it joined the own mode
    search probeMetric inside k =
      let g = mkGen (combine (fst (nextWord64 gen0)) (fromIntegral k))
      in case firstValid g startTries 0 of
           (Nothing, tries) -> (Nothing, tries, tries, False)
           (Just x0, tries) ->
             let (descent, n, b) = laplaceFrom eval seed (toSites x0) perStart probeMetric inside
             in case descent of
                  Converged ap ->
                    let lw = evLogWeight (eval seed (toSites (apMean ap)))
                        scored = if validLogWeight lw then logMass lw ap else Nothing
                    in ( fmap (\m -> (m, ap)) scored
                       , tries + n + 1, tries - 1 + b + (if validLogWeight lw then 0 else 1), False )
                  Joined -> (Nothing, tries + n, tries - 1 + b, True)
                  Failed -> (Nothing, tries + n, tries - 1 + b, False)
    firstValid g left used
      | left <= 0 = (Nothing, used)
      | otherwise =
          let (zs, g') = normalsN d g
              lw = evLogWeight (eval seed (toSites zs))
          in if validLogWeight lw then (Just zs, used + 1) else firstValid g' (left - 1) (used + 1)
    -- Lᵀg, whose squared norm is gᵀΣg for Σ = L Lᵀ
    lowerTransposeTimes l g = U.generate d (\j -> sum [entry l i j * g U.! i | i <- [j .. d - 1]])
    normalsN n g0 = go n g0 []
      where
        go 0 g acc = (U.fromList (reverse acc), g)
        go i g acc = let (z, g') = nextNormal g in go (i - 1 :: Int) g' (z : acc)
