{-# LANGUAGE Trustworthy #-}
{-# LANGUAGE BangPatterns #-}
-- | Seeded chains: warm-up with adaptation, frozen sampling, thinning, and
-- several chains in parallel on GHC threads.
--
-- Iteration counting: @warmup@ is the number of warm-up MH iterations
-- (proposals), then @draws × thin@ iterations follow of which every
-- @thin@-th state is kept.  Chain @c@ of a run with seed @s@ uses the
-- generator seeded by hash(s, c), so results do not depend on scheduling.
module LazyPPL.Internal.Chain
  ( KernelChoice (..)
  , SamplerSettings (..)
  , defaultSettings
  , ChainResult (..)
  , NoValidStart (..)
  , Checkpoint
  , BadCheckpoint (..)
  , runChain
  , continueChain
  , sampleChains
  , sampleChainsFrom
  ) where

import Control.Concurrent (forkIO, killThread)
import Control.Concurrent.MVar (newEmptyMVar, putMVar, takeMVar)
import Control.DeepSeq (NFData (..), force)
import Control.Exception (Exception, SomeException, evaluate, throw, throwIO, try)
import qualified Data.IntMap.Strict as IM
import Data.List (maximumBy, sortBy)
import Data.Maybe (fromMaybe, isJust, isNothing, listToMaybe)
import Data.Ord (Down (..), comparing)
import qualified Data.Vector.Unboxed as U
import Data.Word (Word64)
import GHC.Clock (getMonotonicTime)

import LazyPPL.Internal.Adapt
import LazyPPL.Internal.Core
import LazyPPL.Internal.Estimate (reestimate)
import LazyPPL.Internal.Kernels
import LazyPPL.Internal.Laplace
import LazyPPL.Internal.Linear (Matrix (..), diagonal)
import LazyPPL.Internal.MultiStart
import LazyPPL.Internal.Random
import LazyPPL.Internal.Slice (sliceStep)
import LazyPPL.Internal.Transport

-- | Which MCMC kernel a chain runs.
data KernelChoice
  = -- | The project's adaptive Gaussian-space mixture (the default).
    AdaptiveKernel
  | -- | Upstream LazyPPL 'mh': each read site redrawn from the prior with
    -- the given probability; no adaptation.
    UpstreamMH !Double
  | -- | Upstream 'mhirreducible' p q.
    UpstreamIrreducible !Double !Double
  | -- | pCN alone with β adapted during warm-up.
    PCNKernel
  | -- | The adaptive mixture with the slice updates' share fixed at the
    -- given value instead of chosen by the Gaussian approximation's spread
    -- (for tests of the slice updates and for experiments).
    SliceMixture !Double
  | -- | The adaptive mixture with the slice and transported-hyper shares
    -- fixed at the given values (transports are built whenever the share is
    -- positive; for tests and experiments).
    TransportMixture !Double !Double
  | -- | 'TransportMixture' with the transported move's Jacobian dropped: a
    -- deliberately wrong sampler, only so that tests can show they catch it.
    BrokenTransportMixture !Double !Double
  deriving (Eq, Show)

-- | Settings of a multi-chain run.
data SamplerSettings = SamplerSettings
  { ssKernel :: !KernelChoice
  , ssChains :: !Int
  , ssWarmup :: !Int
    -- ^ warm-up iterations (MH proposals) per chain
  , ssDraws :: !Int
    -- ^ kept draws per chain
  , ssThin :: !Int
    -- ^ iterations per kept draw
  , ssSeed :: !Word64
  , ssMaxInitTries :: !Int
    -- ^ fresh prior trees tried before giving up on a starting state
  , ssBudgetDraws :: !(Maybe Int)
    -- ^ the kept draws the multi-start searches' budget is reckoned from
    -- ('Nothing': 'ssDraws').  A run that a later one continues
    -- ('continueChain') and a fresh run of the later one's draws give the
    -- same chain only if both reckon from the same draws.
  }
  deriving (Eq, Show)

-- | The recommended settings: 4 chains of the adaptive kernel, 4000 warm-up
-- iterations, 1000 draws thinned by 10, seed 0, 1000 start tries.
defaultSettings :: SamplerSettings
defaultSettings = SamplerSettings AdaptiveKernel 4 4000 1000 10 0 1000 Nothing

-- | What one chain produced.
data ChainResult a = ChainResult
  { crDraws :: [a]
    -- ^ kept draws, in order
  , crAcceptance :: !Double
    -- ^ fraction of accepted proposals after warm-up
  , crEvaluations :: !Int
    -- ^ model evaluations, including start-state search
  , crInvalidWeights :: !Int
    -- ^ evaluations whose weight was zero, NaN or infinite
  , crInitTries :: !Int
    -- ^ fresh trees drawn to find the starting state
  , crSeconds :: !Double
    -- ^ wall-clock seconds this chain ran
  , crTuning :: [(String, Double)]
    -- ^ frozen tuning parameters and per-kernel acceptance
  }

instance NFData a => NFData (ChainResult a) where
  rnf r = rnf (crDraws r) `seq` rnf (crTuning r)

-- | No state of finite positive weight was found.
data NoValidStart = NoValidStart !Int
  deriving (Show)

instance Exception NoValidStart

-- | Per-kernel post-warm-up statistics: proposals and acceptances.
data Counters = Counters !(U.Vector Int) !(U.Vector Int)
  deriving (Show, Read)

-- | Where a chain stopped after its kept draws: all a later run needs to go
-- on with the same chain, giving exactly the draws a fresh run of more
-- draws would give after these (same seed, settings and budget draws).
-- Warm-up has ended, so the tuning is frozen; the program's value at the
-- state is not kept but recomputed from the sites, which also checks the
-- checkpoint against the program.  Serialised with 'show' and 'read'
-- (Doubles round-trip exactly).
data Checkpoint = Checkpoint
  { cpChain :: !Int
  , cpSeed :: !Word64
  , cpKernel :: !String
    -- ^ 'show' of the kernel choice
  , cpWarmup :: !Int
  , cpThin :: !Int
  , cpBudgetTotal :: !Int
    -- ^ iterations the multi-start budget was reckoned from
  , cpIteration :: !Int
    -- ^ iterations done, warm-up included
  , cpGen :: !Gen
  , cpSites :: !Sites
  , cpLogWeight :: !Double
  , cpTuning :: !Tuning
  , cpCounters :: !Counters
  , cpEvaluations :: !Int
  , cpInvalid :: !Int
  , cpTries :: !Int
  , cpStartTuning :: [(String, Double)]
  }
  deriving (Show, Read)

-- | A checkpoint that does not belong to this chain, these settings or this
-- program.
newtype BadCheckpoint = BadCheckpoint String
  deriving (Show)

instance Exception BadCheckpoint

-- | Run chain number @c@ (0-based) to completion.  Pure; forcing it may throw
-- the program's own exceptions or 'NoValidStart'.
runChain :: NFData a => SamplerSettings -> Meas a -> Int -> ChainResult a
runChain s m c = fst (continueChain s m c Nothing)

-- | Run chain number @c@ to 'ssDraws' kept draws, from its start or from a
-- checkpoint of an earlier run of it with fewer draws (then the result holds
-- only the draws after the checkpoint's, and its statistics cover the whole
-- chain), with the checkpoint at its end.  Forcing it may also throw
-- 'BadCheckpoint'.
continueChain :: NFData a => SamplerSettings -> Meas a -> Int -> Maybe Checkpoint -> (ChainResult a, Checkpoint)
continueChain s m c resumeFrom = case resumeFrom of
  Just cp -> fromCheckpoint cp
  Nothing -> case startState m (ssMaxInitTries s) g0 of
    Left tries -> throw (NoValidStart tries)
    Right (st0, tries, g1) ->
      let start = Start st0 tries tries (tries - 1) []
      in case ssKernel s of
           AdaptiveKernel -> adaptive Nothing Nothing start g1
           SliceMixture share -> adaptive (Just share) Nothing start g1
           TransportMixture share tshare -> adaptive (Just share) (Just tshare) start g1
           BrokenTransportMixture share tshare -> adaptive (Just share) (Just tshare) start g1
           _ -> kernelLoop 0 zeroCounters (initialTuning (csSites st0) Nothing) start g1
  where
    g0 = mkGen (combine (ssSeed s) (fromIntegral c))
    eval = evaluateAt m
    broken = case ssKernel s of
      BrokenTransportMixture _ _ -> True
      _ -> False
    warmup = max 0 (ssWarmup s)
    total = warmup + max 0 (ssDraws s) * max 1 (ssThin s)
    thin = max 1 (ssThin s)
    -- the multi-start searches' budget: reckoned from 'ssBudgetDraws' so
    -- that a continued chain and a fresh one of more draws search alike
    budgetTotal = warmup + max 0 (fromMaybe (ssDraws s) (ssBudgetDraws s)) * thin

    -- the sampling loop of this kernel, from a start or a checkpoint: the
    -- adaptive mixture, or one fixed kernel (pCN's β adapts during warm-up,
    -- upstream's kernels do not)
    kernelLoop = case ssKernel s of
      PCNKernel -> fixed 3 (\t -> Crank (tuBeta t)) True
      UpstreamMH p -> fixed 4 (const (PriorRedraw p)) False
      UpstreamIrreducible p q -> fixed 4 (const (Restart q p)) False
      _ -> loop chooseKernel True (schedule warmup)
      where
        fixed ki k adaptIt = loop (\t g -> (ki, k t, g)) adaptIt (Schedule warmup [])

    -- go on from a checkpoint of this chain: its state re-evaluated from its
    -- sites (the same program reads the same sites and gives the same
    -- weight), after warm-up, so only the frozen kernels run
    fromCheckpoint cp
      | cpChain cp /= c || cpSeed cp /= ssSeed s || cpKernel cp /= show (ssKernel s)
          || cpWarmup cp /= warmup || cpThin cp /= thin || cpBudgetTotal cp /= budgetTotal =
          throw (BadCheckpoint "the checkpoint is of another chain or other sampler settings")
      | cpIteration cp < warmup || (cpIteration cp - warmup) `mod` thin /= 0 =
          throw (BadCheckpoint "the checkpoint is not at a kept draw after warm-up")
      | cpIteration cp >= total =
          throw (BadCheckpoint "the checkpoint is not before the draws asked for")
      | evSites ev /= cpSites cp || evLogWeight ev /= cpLogWeight cp =
          throw (BadCheckpoint "the checkpoint's state does not reproduce with this program")
      | otherwise =
          let st = ChainState (evSites ev) (evLogWeight ev) (evValue ev)
              start = Start st (cpTries cp) (cpEvaluations cp) (cpInvalid cp) (cpStartTuning cp)
          in kernelLoop (cpIteration cp) (cpCounters cp) (cpTuning cp) start (cpGen cp)
      where
        ev = eval (ssSeed s) (cpSites cp)

    -- Laplace initialisation (smooth, not too many sites, real warm-up),
    -- then the windowed adaptive mixture.
    adaptive sliceOverride transportOverride start g1 =
      let st0 = stState start
          (lapSeed, g2) = nextWord64 g1
          d0 = IM.size (csSites st0)
          useLaplace = warmup >= 150 && d0 >= 1 && d0 <= maxLaplaceSites
          lapBudget = 2 * warmup + 8 * d0 * d0 + 120 * d0
          (approx0, lapEvals, lapBad)
            | useLaplace = laplace eval lapSeed (csSites st0) lapBudget
            | otherwise = (Nothing, 0, 0)
          modeEval0 = fmap (\ap -> eval lapSeed (approximationSites ap)) approx0
          -- extra searches from fresh prior draws (warm-up only; see
          -- "LazyPPL.Internal.MultiStart")
          -- when the own search found a mode, or to rescue a start whose
          -- own search failed
          multiFrom = multiStart eval lapSeed lapBudget (budgetTotal `div` multiStartShare) lapEvals
                        (U.fromList (IM.keys (csSites st0)))
          multi = case (approx0, modeEval0) of
            (Just ap, Just ev) | validLogWeight (evLogWeight ev) -> Just (multiFrom (Just (ap, evLogWeight ev)))
            (Nothing, _) | useLaplace -> Just (multiFrom Nothing)
            _ -> Nothing
          moved = do
            ap <- multi >>= msMove
            let ev = eval lapSeed (approximationSites ap)
            if validLogWeight (evLogWeight ev) then Just (ap, ev) else Nothing
          (approx, modeEval) = case moved of
            Just (ap, ev) -> (Just ap, Just ev)
            Nothing -> (approx0, modeEval0)
          st1 = case modeEval of
            Just ev | validLogWeight (evLogWeight ev) -> ChainState (evSites ev) (evLogWeight ev) (evValue ev)
            _ -> st0
          modeCount = maybe 0 (const 1) modeEval0 + maybe 0 (const 1) (multi >>= msMove)
          modeBad = case modeEval0 of
            Just ev | not (validLogWeight (evLogWeight ev)) -> 1
            _ -> 0
          movedBad = if isJust (multi >>= msMove) && isNothing moved then 1 else 0
          start' = start
            { stState = st1
            , stEvaluations = stEvaluations start + lapEvals + modeCount + maybe 0 msEvaluations multi
            , stInvalid = stInvalid start + lapBad + modeBad + movedBad + maybe 0 msInvalid multi
            , stTuning = [("laplace", maybe 0 (const 1) approx0), ("laplace_evaluations", fromIntegral lapEvals)]
                           ++ maybe [] msTuning multi
            }
          t0 = initialTuning (csSites st1) approx
          t0' = (maybe t0 (\sh -> setSliceShare sh t0 {tuSliceOverride = Just sh}) sliceOverride)
                  {tuTransportOverride = transportOverride}
      in kernelLoop 0 zeroCounters t0' start' g2

    -- iterations from @it0@ (0, or a checkpoint's) to 'total'
    loop pick adapting sched it0 counters0 t0 start g1 =
      go it0 t0 (stState start) g1 [] (windowSitesOf (stState start)) (stEvaluations start) (stInvalid start) counters0 []
      where
        go !it !t !st !g !window !wsites !evals !invalid !counters !kept
          | it >= total =
              ( finish t counters (reverse kept) evals invalid start
              , Checkpoint { cpChain = c, cpSeed = ssSeed s, cpKernel = show (ssKernel s)
                           , cpWarmup = warmup, cpThin = thin, cpBudgetTotal = budgetTotal
                           , cpIteration = it, cpGen = g, cpSites = csSites st
                           , cpLogWeight = csLogWeight st, cpTuning = t, cpCounters = counters
                           , cpEvaluations = evals, cpInvalid = invalid, cpTries = stTries start
                           , cpStartTuning = stTuning start } )
          | otherwise =
              let (ki, kernel, g') = pick t g
                  (st', outcome, stepEvals, stepBad, g'') = step t kernel g' st
                  evals' = evals + stepEvals + scoreEvals
                  invalid' = invalid + stepBad + scoreBad
                  inWarmup = it < warmup
                  t1
                    | inWarmup && adapting =
                        let t' = adaptAfter ki outcome t
                        in case outcome of
                             Accepted -> recordJump ki stepEvals (jumpOf t st st') t'
                             Unchanged -> t'
                             _ -> recordJump ki stepEvals 0 t'
                    | otherwise = t
                  recording = inWarmup && it >= scWindowStart sched && not (null (scWindowEnds sched))
                  window' = if recording then record wsites st' window else window
                  windowEnded = inWarmup && (it + 1) `elem` scWindowEnds sched
                  (t2, scoreEvals, scoreBad)
                    | windowEnded =
                        let (te, ne, be) = reestimate (logTarget st' wsites) (combine (ssSeed s) (fromIntegral it)) wsites window' (reweight t1)
                            (tt, nt) = transports (it + 1) st' te
                        in (tt, ne + nt, be)
                    | it + 1 == warmup && adapting = (reweight t1, 0, 0)
                    | otherwise = (t1, 0, 0)
                  wsites' = if windowEnded || it + 1 == scWindowStart sched then windowSitesOf st' else wsites
                  window'' = if windowEnded then [] else window'
                  counters' = if inWarmup then counters else count ki outcome counters
                  postIt = it - warmup
                  kept' = if not inWarmup && (postIt + 1) `mod` thin == 0 then csValue st' : kept else kept
              in go (it + 1) t2 st' g'' window'' wsites' evals' invalid' counters' kept'

    -- one transition: the slice update, or an MH proposal (one evaluation
    -- unless nothing changed); outcome, evaluations, invalid ones
    step t kernel g st = case kernel of
      TransportHyper ->
        let (st', n, bad, g') = transportStep eval (not broken) (tuTransports t) g st
            moved = csSites st' /= csSites st
        in (st', if n == 0 then Unchanged else if moved then Accepted else Rejected, n, bad, g')
      SliceSite addrs widths coefs centres ->
        let (st', n, bad, g') = sliceStep eval addrs widths coefs centres g st
            moved = csSites st' /= csSites st
        in (st', if n == 0 then Unchanged else if moved then Accepted else Rejected, n, bad, g')
      _ ->
        let (st', outcome, g') = mhStep eval kernel g st
        in (st', outcome, if outcome == Unchanged then 0 else 1, if outcome == Invalid then 1 else 0, g')
    windowSitesOf st = U.fromList (IM.keys (csSites st))
    -- transported hyper moves: (re)built at the last 'transportBuilds'
    -- window ends while their share is positive, frozen with the rest
    transports end st t
      | share <= 0 = (if tuWeights t U.! transportIndex == 0 then t else setShares (tuWeights t U.! sliceIndex) 0 t, 0)
      | end `notElem` buildEnds = (keep, 0)
      | otherwise = case structure of
          Nothing -> (keep, 0)
          Just cov ->
            let hypers = hyperCandidates maxHyperSites cov
                now ia = IM.findWithDefault (0 / 0) (tuSites t U.! ia) (csSites st)
                built = [ buildTransport (logTarget st (tuSites t)) (tuSites t) (tuMean t) (tuSingleScales t) (if movesOtherHypers (U.length (tuSites t)) then [] else filter (/= ia) hypers) (now ia) ia
                        | ia <- hypers ]
                (joint, jointEvals, jointInfo) = jointTransport (logTarget st (tuSites t)) cov hypers st t end
                trs = map fst built ++ maybe [] (\(tr, _) -> replicate (max 1 (length built)) tr) joint
                n = sum (map snd built) + jointEvals
                t' = t { tuTransports = trs
                       , tuHyperSites = hypers
                       , tuJointSites = maybe [] (\(_, (ia, ib)) -> [ia, ib]) joint
                       , tuJointInfo = jointInfo
                       , tuTransportEvaluations = tuTransportEvaluations t + n }
            in (setShares (tuWeights t U.! sliceIndex) (if null trs then 0 else share) t', n)
      where
        share = maybe (transportShare (tuSpread t)) id (tuTransportOverride t)
        -- which sites are hyper sites: from the Laplace curvature when it
        -- covers the same sites, else from the current covariance
        structure = case tuLaplace t of
          Just (lapSites, lapCov) | lapSites == tuSites t -> Just lapCov
          _ -> tuCov t
        keep = setShares (tuWeights t U.! sliceIndex) (if null (tuTransports t) then 0 else share) t
    buildEnds = let ends = scWindowEnds (schedule warmup) in drop (length ends - transportBuilds) ends
    -- a joint transport ('buildJoint'): its scale site is the one that most
    -- acts as a scale of the others ('scaleScores', each site shifted by the
    -- larger of its Laplace and warm-up SDs: a stuck warm-up window's SDs are
    -- too small); its partner is chosen by trial: for every other site, a
    -- coarse joint transport ('trialGrid') runs 'jointTrialSteps' updates
    -- from the current state, and the partner is the site whose trial moved
    -- the least mobile site most (mean |Δz| per update in SDs, minimum over
    -- all sites).  On gp_pois_regr alpha is the scale site and its partner
    -- rho, which no local score singles out: several latent sites outscore
    -- it, and alpha's one-site transport leaves it stuck.  Where S is a
    -- full matrix, only if the scale site scores at least 'jointScaleScore'.
    -- Where it is diagonal (more than 'maxMatrixSites' other sites), the
    -- scores and trials would cost more than the chain (about 4d² and 27d²
    -- evaluations: 3 x 3 nodes of about 3d each per candidate; hier100:
    -- ≈ 320k against 155k for the whole chain), so the pair is simply the two hyper
    -- candidates (@hypers@, from 'hyperCandidates') on the 'wideGrid':
    -- there the one-site transports combine the other hyper site's grid
    -- additively ('combined'), which cannot follow θ_j = μ + τ z_j's
    -- m_j ≈ (y_j − μ)/τ in both at once; hier100 (100 groups), audit
    -- settings: μ's bulk ESS 404 -> 1,262-1,745 per 4 x 1,000 draws for
    -- about 25k more evaluations per chain (+15 %).
    -- Returns the transport, the evaluations, and what was measured.
    jointTransport logPost cov hypers st t end
      | d < 3 = (Nothing, 0, [])
      | d - 2 > maxMatrixSites = case hypers of
          [ia, ib] ->
            let (tr, n) = build wideGrid ia ib
            in (Just (tr, (min ia ib, max ia ib)), n, [("transport_joint_wide", 1)])
          _ -> (Nothing, 0, [])
      | otherwise =
          let (scores, n1) = scaleScores logPost (tuMean t) sdsFor
              ranked = sortBy (comparing (Down . snd)) [(i, sc) | (i, sc) <- zip [0 ..] (U.toList scores), not (isNaN sc)]
              valueOf state j = IM.lookup (tuSites t U.! j) (csSites state)
              seed0 = combine (combine (ssSeed s) (fromIntegral c)) (fromIntegral end)
              -- the least mobile site's mean move per update, in SDs
              mobility tr = go jointTrialSteps (mkGen seed0) st (U.replicate d 0) 0
                where
                  go k g state acc n
                    | k <= 0 = (U.minimum (U.imap (\j v -> v / (fromIntegral jointTrialSteps * sdsFor U.! j)) acc), n)
                    | otherwise =
                        let (state', ne, _, g') = transportStep eval True [tr] g state
                            moved = U.generate d (\j -> case (valueOf state j, valueOf state' j) of
                                                          (Just u, Just v) -> abs (v - u)
                                                          _ -> 0)
                        in go (k - 1) g' state' (U.zipWith (+) acc moved) (n + ne)
          in case ranked of
               ((ia, sa) : _) | sa >= jointScaleScore ->
                 let trials = [ (ib, mob, nb + nm)
                              | ib <- [0 .. d - 1], ib /= ia
                              , let (trial, nb) = build trialGrid ia ib
                                    (mob, nm) = mobility trial ]
                     (best, bestMob, _) = maximumBy (comparing (\(_, mob, _) -> mob)) trials
                     (tr, nf) = build fineGrid ia best
                     n = n1 + nf + sum [e | (_, _, e) <- trials]
                     info = [ ("transport_joint_scale_score", sa), ("transport_joint_scale_site", fromIntegral ia)
                            , ("transport_joint_partner", fromIntegral best), ("transport_joint_mobility", bestMob) ]
                 in (Just (tr, (ia, best)), n, info)
               _ -> (Nothing, n1, [("transport_joint_scale_score", maybe 0 snd (listToMaybe ranked))])
      where
        d = U.length (tuSites t)
        sdsFor = U.zipWith max (U.map sqrt (diagonal cov)) (tuSingleScales t)
        now i = IM.findWithDefault (0 / 0) (tuSites t U.! i) (csSites st)
        build grid ia ib = buildJoint logPost (tuSites t) (tuMean t) sdsFor grid (now (min ia ib), now (max ia ib)) (min ia ib, max ia ib)
    -- squared jump between two states over the adapted sites, in the metric
    -- of the current covariance estimate
    jumpOf t a b =
      let diff = U.map (\x -> case (IM.lookup x (csSites a), IM.lookup x (csSites b)) of
                                 (Just za, Just zb) -> zb - za
                                 _ -> 0) (tuSites t)
      in U.sum (U.map (\v -> v * v) (factorSolve (tuFactor t) diff))
    -- log posterior density (prior of the given sites included) at the given
    -- values of @addrs@, other sites as in @st@ or fresh from a fixed seed
    logTarget st addrs z =
      let sites = U.ifoldl' (\acc i a -> IM.insert a (z U.! i) acc) (csSites st) addrs
      in evLogWeight (eval (ssSeed s) sites) - 0.5 * U.sum (U.map (\v -> v * v) z)
    record wsites st acc =
      case U.mapM (`IM.lookup` csSites st) wsites of
        Just v -> v `seq` (v : acc) -- forced, so the window does not hold states
        Nothing -> acc
    zeroCounters = Counters (U.replicate kernelCount 0) (U.replicate kernelCount 0)
    count _ Unchanged cs = cs
    count ki outcome (Counters props accs) =
      Counters (props U.// [(ki, props U.! ki + 1)])
               (if outcome == Accepted then accs U.// [(ki, accs U.! ki + 1)] else accs)
    finish t (Counters props accs) draws evals invalid start =
      let totalProps = U.sum props
          acceptance = if totalProps == 0 then 0 else fromIntegral (U.sum accs) / fromIntegral totalProps
          names = ["walk", "gaussian", "single", "pcn", "redraw", "slice", "transport"]
          perKernel =
            [ ("acceptance_" ++ nm, fromIntegral a / fromIntegral p)
            | (nm, p, a) <- zip3 names (U.toList props) (U.toList accs), p > 0 ]
          adaptiveTuning =
              [ ("step", tuWalkScale t)
              , ("gaussian_step", tuArStep t)
              , ("single_scale", tuSingleScale t)
              , ("pcn_beta", tuBeta t)
              , ("sites", fromIntegral (U.length (tuSites t)))
              , ("slice_group_coefficients", maybe 0 (fromIntegral . U.length . U.filter (/= 0) . matEntries) (tuScaleCoefs t))
              ] ++ [("spread", tuSpread t) | not (isNaN (tuSpread t))]
                ++ stTuning start
                ++ [("weight_" ++ nm, w) | (nm, w) <- zip names (U.toList (tuWeights t)), nm /= "transport" || hasTransport]
                ++ (if hasTransport
                      then ("transport_hypers", fromIntegral (length (tuHyperSites t)))
                             : ("transport_evaluations", fromIntegral (tuTransportEvaluations t))
                             : ("transport_matrix_nodes", fromIntegral (sum (map matrixNodes (tuTransports t))))
                             : [("transport_joint_" ++ show k, fromIntegral ia) | (k, ia) <- zip [1 :: Int ..] (tuJointSites t)]
                             ++ tuJointInfo t
                             ++ [("transport_hyper_" ++ show k, fromIntegral ia) | (k, ia) <- zip [1 :: Int ..] (tuHyperSites t)]
                      else [])
                ++ perKernel
          hasTransport = not (null (tuTransports t))
          tuning = case ssKernel s of
            AdaptiveKernel -> adaptiveTuning
            SliceMixture _ -> adaptiveTuning
            TransportMixture _ _ -> adaptiveTuning
            BrokenTransportMixture _ _ -> adaptiveTuning
            PCNKernel -> [("pcn_beta", tuBeta t)]
            _ -> []
      in ChainResult draws acceptance evals invalid (stTries start) 0 tuning

-- | Where the sampling loop starts: state, start tries, evaluations and
-- invalid weights so far, tuning facts to report.
data Start a = Start
  { stState :: !(ChainState a)
  , stTries :: !Int
  , stEvaluations :: !Int
  , stInvalid :: !Int
  , stTuning :: [(String, Double)]
  }

-- | How many of the last warm-up windows (re)build the transports.
transportBuilds :: Int
transportBuilds = 1

-- | Most hyper sites given a transported move.
maxHyperSites :: Int
maxHyperSites = 2

-- | Least scale score ('scaleScores') of a joint transport's scale site.
jointScaleScore :: Double
jointScaleScore = 10

-- | Updates of each trial joint transport when choosing the partner site.
jointTrialSteps :: Int
jointTrialSteps = 40

-- | Laplace initialisation is skipped above this many sites (each Hessian
-- costs about 2d² evaluations).
maxLaplaceSites :: Int
maxLaplaceSites = 128

-- | The extra Laplace searches of "LazyPPL.Internal.MultiStart" may spend
-- about one evaluation per this many iterations of the chain.
multiStartShare :: Int
multiStartShare = 10

-- | The sites of an approximation's mean.
approximationSites :: Approximation -> Sites
approximationSites ap = IM.fromList (zip (U.toList (apSites ap)) (U.toList (apMean ap)))

-- | Run all chains in parallel (one GHC thread each) and return them in chain
-- order.  If a chain throws, the others are stopped and the exception of the
-- lowest-numbered failing chain is re-thrown.
sampleChains :: NFData a => SamplerSettings -> Meas a -> IO [ChainResult a]
sampleChains s m = map fst <$> sampleChainsFrom s (repeat Nothing) m

-- | 'sampleChains' going on from a checkpoint per chain ('Nothing': from the
-- start), with each chain's checkpoint at its end ('continueChain').
sampleChainsFrom :: NFData a => SamplerSettings -> [Maybe Checkpoint] -> Meas a -> IO [(ChainResult a, Checkpoint)]
sampleChainsFrom s resumes m = do
  vars <- mapM start (zip [0 .. max 1 (ssChains s) - 1] (resumes ++ repeat Nothing))
  collect vars []
  where
    start (c, resumeFrom) = do
      v <- newEmptyMVar
      tid <- forkIO $ do
        t0 <- getMonotonicTime
        r <- try (do let (res, cp) = continueChain s m c resumeFrom
                     res' <- evaluate (force res)
                     cp' <- evaluate cp
                     return (res', cp'))
        t1 <- getMonotonicTime
        putMVar v (fmap (\(res, cp) -> (res {crSeconds = t1 - t0}, cp)) r)
      return (tid, v)
    collect [] acc = return (reverse acc)
    collect ((_, v) : rest) acc = do
      r <- takeMVar v
      case r of
        Right res -> collect rest (res : acc)
        Left e -> do
          mapM_ (killThread . fst) rest
          throwIO (e :: SomeException)
