{-# LANGUAGE Trustworthy #-}
-- | Warm-up adaptation for the default sampler.
--
-- The default kernel is a fixed mixture of a covariance random walk on the
-- adapted sites, single-site walks, pCN and prior redraws (see
-- "LazyPPL.Internal.Kernels").  During warm-up, each kernel's scale is tuned
-- by a Robbins–Monro recursion on its log towards a target acceptance rate,
-- and the walk's covariance is re-estimated at the end of each adaptation
-- window from the states visited in that window (windows double in length, as
-- in Stan's warm-up).  After warm-up everything is frozen, so the chain that
-- produces draws is a time-homogeneous MH chain and exact.
module LazyPPL.Internal.Adapt
  ( Tuning (..)
  , initialTuning
  , mixture
  , chooseKernel
  , adaptAfter
  , resetCounters
  , recordJump
  , reweight
  , kernelCount
  , sliceIndex
  , transportIndex
  , transportShare
  , sliceShare
  , setSliceShare
  , setShares
  , Schedule (..)
  , schedule
  , maxFullCovarianceSites
  ) where

import qualified Data.IntMap.Strict as IM
import qualified Data.Vector.Unboxed as U

import LazyPPL.Internal.Core (Sites)
import LazyPPL.Internal.Kernels
import LazyPPL.Internal.Laplace (Approximation (..))
import LazyPPL.Internal.Linear
import LazyPPL.Internal.Random (Gen, nextUniform)
import LazyPPL.Internal.Slice (ScaleStats)
import LazyPPL.Internal.Transport (Transport)

-- | All tunable parameters of the default mixture.
data Tuning = Tuning
  { tuSites :: !(U.Vector Int)
    -- ^ adapted sites (addresses), in a fixed order
  , tuMean :: !(U.Vector Double)
    -- ^ posterior mean estimate over 'tuSites' (z space)
  , tuCov :: !(Maybe Matrix)
    -- ^ posterior covariance estimate, if one has been made
  , tuFactor :: !Factor
    -- ^ its Cholesky factor (or per-site SDs)
  , tuWalkScale :: !Double
    -- ^ λ, the walk's global scale
  , tuArStep :: !Double
    -- ^ s in (0, 1], the Gaussian autoregressive step
  , tuSingleScales :: !(U.Vector Double)
    -- ^ per-site posterior standard deviations (z space)
  , tuSingleScale :: !Double
    -- ^ common factor for single-site steps
  , tuBeta :: !Double
    -- ^ pCN step β in (0, 1]
  , tuScaleCoefs :: !(Maybe Matrix)
    -- ^ slice-group coefficients ("LazyPPL.Internal.Slice"), if any
  , tuScaleStats :: !(Maybe ScaleStats)
    -- ^ pooled window sums the coefficients come from
  , tuSliceOverride :: !(Maybe Double)
    -- ^ a fixed slice share ('Nothing': 'sliceShare' of the spread)
  , tuTransports :: [Transport]
    -- ^ frozen transported hyper moves ("LazyPPL.Internal.Transport")
  , tuTransportOverride :: !(Maybe Double)
    -- ^ a fixed transport share ('Nothing': 'transportShare' of the spread)
  , tuLaplace :: !(Maybe (U.Vector Int, Matrix))
    -- ^ the Laplace approximation's sites and covariance (exact curvature
    -- at the mode, so a cleaner picture of which sites depend on which than
    -- the windows of a slowly mixing chain)
  , tuHyperSites :: [Int]
    -- ^ addresses of the transported hyper sites
  , tuJointSites :: [Int]
    -- ^ indices (into the adapted sites) of a joint transport's two hyper
    -- sites, or empty
  , tuJointInfo :: [(String, Double)]
    -- ^ what the choice of the joint transport's pair measured
  , tuTransportEvaluations :: !Int
    -- ^ model evaluations spent building transports
  , tuSpread :: !Double
    -- ^ spread of log importance ratios of the current approximation (NaN
    -- before one has been scored)
  , tuCounts :: !(U.Vector Int)
    -- ^ adaptation steps per kernel since the last reset
  , tuWeights :: !(U.Vector Double)
    -- ^ mixture weights (start at 'mixtureWeights', then follow the jumps)
  , tuJumps :: !(U.Vector Double)
    -- ^ summed squared jump distances per kernel since the last reweighting
  , tuTries :: !(U.Vector Int)
    -- ^ proposals per kernel since the last reweighting
  }
  deriving (Show, Read)

-- | Initial mixture weights of the covariance walk, Gaussian autoregressive,
-- single-site, pCN and prior-redraw proposals and the slice update.  The
-- first two do almost all the work on near-Gaussian posteriors; the slice
-- update adapts to a local scale that changes across the space (funnels,
-- scale parameters near zero), see 'sliceShare'; the others make the chain
-- robust for sites outside the adapted set (changing dimension), discrete
-- choices and heavy tails.
mixtureWeights :: [Double]
mixtureWeights = map (* (1 - initialSliceShare)) [0.35, 0.45, 0.05, 0.1, 0.05] ++ [initialSliceShare, 0]

-- | Smallest weight each of the five MH kernels keeps after reweighting, as
-- a share of the non-slice weight (so that no move type, and the
-- irreducibility it brings, is ever switched off).
weightFloors :: [Double]
weightFloors = [0.1, 0.05, 0.05, 0.05, 0.05]

-- | Slice share before the first Gaussian approximation has been scored:
-- none, so that on posteriors whose approximation stays good (spread
-- ≤ 1) the chain is draw for draw the one of the mixture without slice
-- updates (no cost where they are not needed).
initialSliceShare :: Double
initialSliceShare = 0

-- | The slice update's share of the mixture given the spread σ (SD of the
-- log importance ratio target / best Gaussian approximation, see
-- "LazyPPL.Internal.Estimate"): none while the Gaussian moves can do the
-- work (σ ≤ 1: eight schools 0.6–0.8, kidiq 0.1, garch, kilpisjarvi; their
-- chains are then draw for draw those of the mixture without slice
-- updates), growing linearly to 'maxSliceShare' at σ = 1.5 (a posterior
-- whose shape no single Gaussian captures: Neal's funnel, d = 10, scores
-- 1.55–2.6 across chains; the 6-group hierarchical model 1.2–1.6).  On the
-- funnel the share 0.5 turns the log-scale's bulk ESS per 4 × 50,000
-- iterations from 6–20 (R-hat 1.15–1.8) into 16–111 (R-hat 1.02–1.19, 4
-- seeds) at about 4× the CPU;
-- the threshold was 1.5 first, which left some funnel chains at share 0.05
-- and R-hat above 1.01 even on 4 × 800,000 iterations.
sliceShare :: Double -> Double
sliceShare spread
  | isNaN spread = maxSliceShare
  | otherwise = maxSliceShare * max 0 (min 1 ((spread - 1) / 0.5))

-- | Largest slice share.
maxSliceShare :: Double
maxSliceShare = 0.5

-- | Set the slice share, keeping the proportions of the MH kernels and the
-- transport share.
setSliceShare :: Double -> Tuning -> Tuning
setSliceShare share t = setShares share (tuWeights t U.! transportIndex) t

-- | Set the slice and transport shares, keeping the MH kernels' proportions
-- (with a zero transport share the weights are exactly those of the mixture
-- without transported moves).
setShares :: Double -> Double -> Tuning -> Tuning
setShares share tshare t =
  t {tuWeights = U.map (* (1 - share - tshare)) (normalisedMh t) U.++ U.fromList [share, tshare]}

-- | The transported hyper moves' share given the spread σ: none while the
-- Gaussian approximation is good (σ ≤ 1, like 'sliceShare'), growing to
-- 'maxTransportShare' at σ = 1.5; used only when a transport was built.
transportShare :: Double -> Double
transportShare spread
  | isNaN spread = 0
  | otherwise = maxTransportShare * max 0 (min 1 ((spread - 1) / 0.5))

-- | Largest transport share (taken from the MH kernels, not the slice).
maxTransportShare :: Double
maxTransportShare = 0.4

-- | The five MH kernels' weights as fractions of their total.
normalisedMh :: Tuning -> U.Vector Double
normalisedMh t =
  let w = U.take mhCount (tuWeights t)
      total = U.sum w
  in if total > 0 then U.map (/ total) w else U.fromList (take mhCount (repeat (1 / fromIntegral mhCount)))

-- | Number of MH kernels (all but the slice update).
mhCount :: Int
mhCount = 5

-- | Target acceptance rates (Roberts & Rosenthal: ≈0.234 for many-dimensional
-- walks, ≈0.44 for one-dimensional ones).
targets :: [Double]
targets = [0.25, 0.35, 0.44, 0.25, 0, 0, 0]


-- | Number of kernels in the mixture.
kernelCount :: Int
kernelCount = length mixtureWeights

-- | Above this many adapted sites the walk uses per-site scales only.
maxFullCovarianceSites :: Int
maxFullCovarianceSites = 200

-- | Tuning at the start of warm-up: isotropic steps over the initial sites,
-- or the Laplace approximation when there is one.
initialTuning :: Sites -> Maybe Approximation -> Tuning
initialTuning sites approx = case approx of
  Just (Approximation addrs mu cov) | Just l <- cholesky cov ->
    let d = U.length addrs
    in base
         { tuSites = addrs
         , tuMean = mu
         , tuCov = Just cov
         , tuFactor = FullFactor l
         , tuWalkScale = 2.38 / sqrt (fromIntegral (max 1 d))
         , tuArStep = 0.5
         , tuSingleScales = U.map sqrt (diagonal cov)
         , tuSingleScale = 2.38
         , tuLaplace = Just (addrs, cov)
         }
  _ -> base
  where
    addrs0 = U.fromList (IM.keys sites)
    d0 = U.length addrs0
    base =
      Tuning
        { tuSites = addrs0
        , tuMean = U.fromList (IM.elems sites)
        , tuCov = Nothing
        , tuFactor = DiagFactor (U.replicate d0 1)
        , tuWalkScale = 1 / sqrt (fromIntegral (max 1 d0))
        , tuArStep = 0.1
        , tuSingleScales = U.replicate d0 1
        , tuSingleScale = 1
        , tuBeta = 0.2
        , tuScaleCoefs = Nothing
        , tuSpread = 0 / 0
        , tuSliceOverride = Nothing
        , tuTransports = []
        , tuTransportOverride = Nothing
        , tuHyperSites = []
        , tuJointSites = []
        , tuJointInfo = []
        , tuLaplace = Nothing
        , tuTransportEvaluations = 0
        , tuScaleStats = Nothing
        , tuCounts = U.replicate kernelCount 0
        , tuWeights = U.fromList mixtureWeights
        , tuJumps = U.replicate kernelCount 0
        , tuTries = U.replicate kernelCount 0
        }

-- | The kernels of the mixture, in 'mixtureWeights' order.
mixture :: Tuning -> [Kernel]
mixture t =
  [ CovarianceWalk (tuSites t) (tuFactor t) (tuWalkScale t)
  , GaussianAR (tuSites t) (tuMean t) (tuFactor t) (tuArStep t)
  , SingleSite (tuSites t) (tuSingleScales t) (tuSingleScale t)
  , Crank (tuBeta t)
  , PriorRedraw (1 / fromIntegral (max 1 (U.length (tuSites t))))
  , SliceSite (tuSites t) (U.map (* sliceWidth) (tuSingleScales t)) (tuScaleCoefs t) (tuMean t)
  , TransportHyper
  ]

-- | Slice width in units of the site's estimated posterior SD: a bracket
-- about as wide as a typical slice, so stepping out rarely runs and
-- shrinkage needs a few evaluations (Neal 2003 §4 recommends a width near
-- the typical slice size; any fixed width is exact).
sliceWidth :: Double
sliceWidth = 2

-- | Index of the slice update in the mixture.
sliceIndex :: Int
sliceIndex = 5

-- | Index of the transported hyper move in the mixture.
transportIndex :: Int
transportIndex = 6

-- | Draw which kernel to use for the next step: its index and the kernel.
chooseKernel :: Tuning -> Gen -> (Int, Kernel, Gen)
chooseKernel t g =
  let (u, g') = nextUniform g
      cumulative = U.scanl1 (+) (tuWeights t)
      -- a transport of weight 0 is never chosen, even at the rounding edge
      top = if tuWeights t U.! transportIndex > 0 then kernelCount - 1 else sliceIndex
      i = min top (U.length (U.takeWhile (<= u * U.last cumulative) cumulative))
  in (i, mixture t !! i, g')

-- | Record a proposal of kernel @i@ that cost @cost@ model evaluations and
-- its squared jump distance (0 if rejected), measured in the metric of the
-- current covariance estimate.  'reweight' then compares kernels by jump per
-- evaluation, i.e. per unit of CPU.
recordJump :: Int -> Int -> Double -> Tuning -> Tuning
recordJump i cost jump t =
  t { tuJumps = U.accum (+) (tuJumps t) [(i, jump)]
    , tuTries = U.accum (+) (tuTries t) [(i, max 1 cost)] }

-- | Move the five MH kernels' weights towards each one's expected squared
-- jump distance per model evaluation, above 'weightFloors' (fractions of
-- the non-slice weight); the slice share is left as it is ('setSliceShare'
-- decides it).  Kernels tried fewer than 10 times keep their weight share.
-- Used only during warm-up.
reweight :: Tuning -> Tuning
reweight t
  | total <= 0 = cleared
  | otherwise = cleared {tuWeights = U.map (* (1 - slice - tshare)) (U.generate mhCount weight) U.++ U.fromList [slice, tshare]}
  where
    slice = tuWeights t U.! sliceIndex
    tshare = tuWeights t U.! transportIndex
    current = normalisedMh t
    tries = tuTries t
    known i = tries U.! i >= 10
    measured = U.generate mhCount (\i -> if known i then tuJumps t U.! i / fromIntegral (tries U.! i) else 0)
    total = U.sum measured
    floors = U.fromList weightFloors
    -- what is left after the floors of measured kernels and the unchanged
    -- weights of unmeasured ones
    share = 1 - sum [if known i then floors U.! i else current U.! i | i <- [0 .. mhCount - 1]]
    weight i
      | known i = floors U.! i + share * measured U.! i / total
      | otherwise = current U.! i
    cleared = t {tuJumps = U.replicate kernelCount 0, tuTries = U.replicate kernelCount 0}

-- | Robbins–Monro update of kernel @i@'s scale after an outcome:
-- log θ ← log θ + γ (accepted − target), with γ = (n + 1)^(−0.6).
adaptAfter :: Int -> Outcome -> Tuning -> Tuning
adaptAfter _ Unchanged t = t
adaptAfter i outcome t = case i of
  0 -> counted (t {tuWalkScale = clampScale (update (tuWalkScale t))})
  1 -> counted (t {tuArStep = min 1 (clampScale (update (tuArStep t)))})
  2 -> counted (t {tuSingleScale = clampScale (update (tuSingleScale t))})
  3 -> counted (t {tuBeta = min 1 (clampScale (update (tuBeta t)))})
  _ -> t
  where
    n = tuCounts t U.! i
    gamma = fromIntegral (n + 1) ** (-0.6) :: Double
    accepted = if outcome == Accepted then 1 else 0
    update x = x * exp (gamma * (accepted - targets !! i))
    counted t' = t' {tuCounts = tuCounts t U.// [(i, n + 1)]}
    clampScale = max 1e-12 . min 1e6

-- | Restart the Robbins–Monro step sizes (at a window boundary).
resetCounters :: Tuning -> Tuning
resetCounters t = t {tuCounts = U.replicate kernelCount 0}

-- | Warm-up layout: an initial buffer (scales only), covariance windows
-- ending at the given iterations, and a final buffer (scales only).
data Schedule = Schedule
  { scWindowStart :: !Int
    -- ^ first iteration recorded for covariance estimation
  , scWindowEnds :: ![Int]
    -- ^ iterations (exclusive) at which a window ends and Σ is re-estimated
  }

-- | Stan-like windows: 15% initial buffer, 10% final buffer, middle windows
-- doubling from 25 iterations, the last one stretched to the final buffer.
-- Short warm-ups (< 150 iterations) adapt scales only.
schedule :: Int -> Schedule
schedule warmup
  | warmup < 150 = Schedule warmup []
  | otherwise = Schedule start (go start 25)
  where
    start = (warmup * 15) `div` 100
    end = warmup - (warmup * 10) `div` 100
    go s w
      | s + w + 2 * w > end = [end]
      | otherwise = (s + w) : go (s + w) (2 * w)
