{-# LANGUAGE Trustworthy #-}
{-# LANGUAGE BangPatterns #-}
-- | Metropolis–Hastings kernels on the tree of uniforms, in Gaussian
-- coordinates z = Φ⁻¹(u).
--
-- Target.  Under the prior every site is an independent N(0, 1) in z; the
-- program multiplies in a weight W that depends only on the sites it reads.
-- The target is N(0, I)(dz) · W(z) / Z on the whole (infinite) tree.
--
-- Why every kernel here is exact.  A sampler state stores only the sites the
-- program read.  All other sites are, conditionally on those, independent
-- N(0, 1) and do not affect W, so drawing them afresh at every step (which
-- the evaluator does from a per-step seed) is a Gibbs update.  Each kernel
-- below is then an MH kernel on the whole tree: it changes finitely many
-- coordinates with a symmetric random walk (acceptance includes the N(0, 1)
-- prior ratio of the changed coordinates), with a move reversible for a
-- Gaussian N(μ, Σ) on those coordinates (acceptance includes the ratio of
-- prior to N(μ, Σ) densities), or with a move reversible for the prior
-- itself (pCN, prior redraws; acceptance is the weight ratio).  A proposal
-- with a non-finite coordinate is rejected without running the program.
-- Kernel parameters depend only on warm-up, never on the current state, so
-- after warm-up each kernel (and any fixed mixture of them) leaves the target
-- invariant.
module LazyPPL.Internal.Kernels
  ( ChainState (..)
  , Factor (..)
  , factorSolve
  , Kernel (..)
  , Outcome (..)
  , kernelName
  , mhStep
  , normals
  , startState
  ) where

import Control.DeepSeq (NFData)
import qualified Data.IntMap.Strict as IM
import qualified Data.Vector.Unboxed as U
import Data.Word (Word64)

import LazyPPL.Internal.Core
import LazyPPL.Internal.Linear (Matrix, lowerTimes, solveLower)
import LazyPPL.Internal.Random

-- | The state of one chain: the sites read (Gaussian coordinates), the log
-- weight there (always finite) and the program's result.
data ChainState a = ChainState
  { csSites :: !Sites
  , csLogWeight :: !Double
  , csValue :: !a
  }

-- | How a covariance walk correlates its step: a Cholesky factor of the
-- adapted covariance, or per-site standard deviations.
data Factor = FullFactor !Matrix | DiagFactor !(U.Vector Double)
  deriving (Show, Read)

-- | One Metropolis–Hastings proposal mechanism.
data Kernel
  = -- | Gaussian random walk on the listed sites: z' = z + λ L ξ.
    CovarianceWalk !(U.Vector Int) !Factor !Double
  | -- | Autoregressive move towards a Gaussian approximation N(μ, Σ) of the
    -- posterior over the listed sites: z' = μ + ρ (z − μ) + s F ξ with
    -- ρ = √(1 − s²) and F Fᵀ = Σ.  It is reversible for N(μ, Σ), so the
    -- acceptance ratio carries the ratio of target to N(μ, Σ) densities; with
    -- a good approximation and s near 1 it is a near-independent sampler.
    GaussianAR !(U.Vector Int) !(U.Vector Double) !Factor !Double
  | -- | Random walk on one of the listed sites chosen uniformly, with that
    -- site's scale times a common factor.
    SingleSite !(U.Vector Int) !(U.Vector Double) !Double
  | -- | Preconditioned Crank–Nicolson on every site:
    -- z' = √(1 − β²) z + β ξ; reversible for the N(0, I) prior.
    Crank !Double
  | -- | Upstream LazyPPL's move: each read site independently redrawn from
    -- the prior with probability p (reversible for the prior).
    PriorRedraw !Double
  | -- | With probability q redraw every site, otherwise 'PriorRedraw' p
    -- (upstream 'mhirreducible').
    Restart !Double !Double
  | -- | Univariate slice sampling of one of the listed sites (chosen
    -- uniformly) with the given per-site widths; not an MH proposal: the
    -- chain runs it with "LazyPPL.Internal.Slice", and 'mhStep' treats it as
    -- a move that changes nothing.
    -- The matrix and vector are the group coefficients and centres of
    -- 'LazyPPL.Internal.Slice.sliceStep'.
    SliceSite !(U.Vector Int) !(U.Vector Double) !(Maybe Matrix) !(U.Vector Double)
  | -- | A transported hyper-site update ("LazyPPL.Internal.Transport"), run
    -- by the chain with the tuning's frozen transports; like 'SliceSite' not
    -- an MH proposal ('mhStep' treats it as a move that changes nothing).
    TransportHyper

-- | Short name of a kernel, used in tuning reports.
kernelName :: Kernel -> String
kernelName k = case k of
  CovarianceWalk {} -> "walk"
  GaussianAR {} -> "gaussian"
  SingleSite {} -> "single"
  Crank {} -> "pcn"
  PriorRedraw {} -> "redraw"
  Restart {} -> "restart"
  SliceSite {} -> "slice"
  TransportHyper -> "transport"

-- | What happened to a proposal.
data Outcome
  = Accepted
  | Rejected
  | -- | rejected because the proposal's weight was zero, NaN or infinite
    Invalid
  | -- | the proposal changed no read site, so the program was not run
    Unchanged
  deriving (Eq, Show)

-- | Evaluate the program on fresh trees until one has a finite positive
-- weight.  Returns the state and the number of tries, or 'Left' the number of
-- tries if none succeeded.
startState :: NFData a => Meas a -> Int -> Gen -> Either Int (ChainState a, Int, Gen)
startState m maxTries = go 1
  where
    go !k g
      | k > maxTries = Left maxTries
      | otherwise =
          let (seed, g') = nextWord64 g
              ev = evaluateAt m seed IM.empty
          in if validLogWeight (evLogWeight ev)
               then Right (ChainState (evSites ev) (evLogWeight ev) (evValue ev), k, g')
               else go (k + 1) g'

-- | One MH step: propose with the kernel, evaluate the program, accept or
-- reject.  The evaluator is a parameter so that result types without
-- 'NFData' can use 'evaluateLazyAt'.
mhStep
  :: (Word64 -> Sites -> Evaluation a)
  -> Kernel -> Gen -> ChainState a -> (ChainState a, Outcome, Gen)
mhStep eval kernel g0 st =
  let (freshSeed, g1) = nextWord64 g0
      (proposal, correction, unchanged, g2) = propose kernel freshSeed g1 (csSites st)
  in if unchanged
       then (st, Unchanged, g2)
       else if IM.foldl' (\bad z -> bad || isNaN z || isInfinite z) False proposal
       then (st, Invalid, g2)
       else
         let ev = eval freshSeed proposal
             lw' = evLogWeight ev
             (u, g3) = nextUniform g2
         in if not (validLogWeight lw')
              then (st, Invalid, g3)
              else
                if log u < lw' - csLogWeight st + correction
                  then (ChainState (evSites ev) lw' (evValue ev), Accepted, g3)
                  else (st, Rejected, g3)

-- | A proposal: explicit site values, the log correction added to the weight
-- ratio (prior ratio of walked coordinates), whether nothing changed, and the
-- generator afterwards.
propose :: Kernel -> Word64 -> Gen -> Sites -> (Sites, Double, Bool, Gen)
propose kernel freshSeed g sites = case kernel of
  CovarianceWalk addrs factor scale ->
    let d = U.length addrs
        (xi, g') = normals d g
        step = factorTimes factor xi
        old = U.map current addrs
        new = U.zipWith (\z s -> z + scale * s) old step
        sites' = U.ifoldl' (\acc i a -> IM.insert a (new U.! i) acc) sites addrs
    in (sites', priorRatio old new, d == 0, g')
  GaussianAR addrs mu factor s ->
    let d = U.length addrs
        (xi, g') = normals d g
        rho = sqrt (max 0 (1 - s * s))
        old = U.map current addrs
        new = U.zipWith3 (\m z e -> m + rho * (z - m) + s * e) mu old (factorTimes factor xi)
        sites' = U.ifoldl' (\acc i a -> IM.insert a (new U.! i) acc) sites addrs
        refLog z = -0.5 * U.sum (U.map sq (factorSolve factor (U.zipWith (-) z mu)))
    in (sites', priorRatio old new + refLog old - refLog new, d == 0, g')
  SingleSite addrs scales scale
    | U.null addrs -> (sites, 0, True, g)
    | otherwise ->
        let (w, g1) = nextWord64 g
            i = fromIntegral (w `mod` fromIntegral (U.length addrs))
            a = addrs U.! i
            (xi, g2) = nextNormal g1
            z = current a
            z' = z + scale * (scales U.! i) * xi
        in (IM.insert a z' sites, 0.5 * (z * z - z' * z'), False, g2)
  Crank beta ->
    let (noiseSeed, g') = nextWord64 g
        c = sqrt (max 0 (1 - beta * beta))
        sites' = IM.mapWithKey (\a z -> c * z + beta * freshNormal noiseSeed a) sites
    in (sites', 0, IM.null sites, g')
  PriorRedraw p -> redraw p g
  Restart q p ->
    let (u, g') = nextUniform g
    in if u < q then (IM.empty, 0, False, g') else redraw p g'
  SliceSite {} -> (sites, 0, True, g)
  TransportHyper -> (sites, 0, True, g)
  where
    current a = IM.findWithDefault (freshNormal freshSeed a) a sites
    priorRatio old new = 0.5 * (U.sum (U.map sq old) - U.sum (U.map sq new))
    sq x = x * x
    -- each site kept with probability 1 - p; a dropped site reads a fresh
    -- prior value in the evaluation
    redraw p g0 =
      let (removed, kept, g') =
            IM.foldlWithKey'
              ( \(!n, acc, gen) a z ->
                  let (u, gen') = nextUniform gen
                  in if u < p then (n + 1 :: Int, acc, gen') else (n, IM.insert a z acc, gen')
              )
              (0, IM.empty, g0)
              sites
      in (kept, 0, removed == 0, g')

-- | F ξ for the factor F (F Fᵀ = Σ).
factorTimes :: Factor -> U.Vector Double -> U.Vector Double
factorTimes (FullFactor l) xi = lowerTimes l xi
factorTimes (DiagFactor sds) xi = U.zipWith (*) sds xi

-- | F⁻¹ v, so that |F⁻¹ (z − μ)|² is the Mahalanobis distance under Σ.
factorSolve :: Factor -> U.Vector Double -> U.Vector Double
factorSolve (FullFactor l) v = solveLower l v
factorSolve (DiagFactor sds) v = U.zipWith (/) v sds

normals :: Int -> Gen -> (U.Vector Double, Gen)
normals d g0 = go d g0 []
  where
    go 0 g acc = (U.fromListN d (reverse acc), g)
    go k g acc = let (x, g') = nextNormal g in go (k - 1) g' (x : acc)
