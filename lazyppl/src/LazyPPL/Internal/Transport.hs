{-# LANGUAGE Trustworthy #-}
{-# LANGUAGE BangPatterns #-}
-- | Transported hyper-parameter moves: Gibbs updates of one "hyper" site in
-- a fixed reparameterisation of the others (issue 14).
--
-- The geometry.  In the tree's Gaussian coordinates a hierarchical model is
-- non-centred: θ_j = μ + τ z_j.  With informative data each z_j is pinned
-- near (y_j − μ)/τ, so a move of τ (or μ) that holds the z's fixed moves
-- every θ_j off its data and is rejected; (μ, τ, z) move only jointly.
--
-- The move.  For a hyper site a with the other adapted sites R, let m(x)
-- and s(x) > 0 (vectors over R) be deterministic functions of the hyper
-- coordinate x alone, and write the state as (z_a, w) with
--
-- > w = (z_R − m(z_a)) / s(z_a)                  (elementwise).
--
-- The target in (z_a, w) is π(z_a, m(z_a) + s(z_a) w) · ∏_i s_i(z_a).  One
-- update draws z_a' from its conditional given w by univariate slice
-- sampling ("LazyPPL.Internal.Slice".'sliceOffset') and maps back:
-- z_R' = m(z_a') + s(z_a') w.
--
-- Why it is exact.  (z_a, z_R) ↦ (z_a, w) is a fixed bijection (for each x,
-- an affine map of z_R with Jacobian ∏ 1/s_i(x)), so the target in the new
-- coordinates is the density above, and slice sampling leaves the
-- conditional of z_a given w invariant: the update is a Gibbs step in fixed
-- coordinates.  m and s are frozen at the end of warm-up and depend on
-- nothing the update moves except through z_a, so this holds for any choice
-- of them; the choice only decides efficiency.  Sites outside a and R keep
-- their values (unstored ones take them from the update's fresh seed, the
-- usual Gibbs refresh of unread sites).
--
-- The choice.  m(x) is the conditional mode of z_R given z_a = x and s(x)
-- the conditional SDs 1/√(−∂²log π/∂z_i²), found at the end of warm-up on a
-- grid of x values by Gauss–Seidel Newton sweeps (one coordinate at a time,
-- finite differences, 3 model evaluations per coordinate), started at the
-- frozen warm-up mean and continued from node to node; between nodes m and
-- log s are interpolated linearly, beyond the grid they are constant.  For
-- θ_j = μ + τ z_j with normal data this finds m_j(τ) ≈ (y_j − μ)/τ and
-- s_j(τ) ∝ 1/τ, i.e. the move holds the centred θ_j (nearly) fixed while τ
-- moves: the centred Gibbs update inside a non-centred chain.
module LazyPPL.Internal.Transport
  ( Transport (..)
  , buildTransport
  , transportStep
  , hyperCandidates
  , transportNodes
  ) where

import Data.List (sortBy)
import Data.Ord (comparing, Down (..))
import qualified Data.IntMap.Strict as IM
import qualified Data.Vector.Unboxed as U
import Data.Word (Word64)

import LazyPPL.Internal.Core
import LazyPPL.Internal.Kernels (ChainState (..))
import LazyPPL.Internal.Linear (Matrix (..), entry, invertSpd)
import LazyPPL.Internal.Random
import LazyPPL.Internal.Slice (sliceOffset)

-- | A frozen transport for one hyper site.
data Transport = Transport
  { trSite :: !Int
    -- ^ address of the hyper site a
  , trOthers :: !(U.Vector Int)
    -- ^ addresses of the transported sites R
  , trNodes :: !(U.Vector Double)
    -- ^ grid of z_a values, increasing
  , trModes :: !(U.Vector Double)
    -- ^ m at the nodes, row-major (node, site of R)
  , trLogScales :: !(U.Vector Double)
    -- ^ log s at the nodes, same layout
  , trWidth :: !Double
    -- ^ slice width for z_a
  }

-- | Grid nodes on each side of the centre (the grid has 2k + 1 nodes).
transportNodes :: Int
transportNodes = 4

-- | Hyper-site candidates from a covariance estimate over the adapted sites:
-- the sites whose marginal variance most exceeds their conditional variance
-- given all the others (κ_a = Σ_aa · (Σ⁻¹)_aa), i.e. those a single-site
-- move cannot move because the other sites pin them; at most @k@ of them,
-- each with κ ≥ 4 (marginal SD at least twice the conditional one).
-- Returns indices into the adapted sites, most pinned first.
hyperCandidates :: Int -> Matrix -> [Int]
hyperCandidates k cov = case invertSpd cov of
  Nothing -> []
  Just p ->
    let d = matDim cov
        kappa i = entry cov i i * entry p i i
        ranked = sortBy (comparing (Down . snd)) [(i, kappa i) | i <- [0 .. d - 1]]
    in if d < 2 then [] else take k [i | (i, kp) <- ranked, kp >= 4, not (isNaN kp)]

-- | Build the transport of site index @ia@ of @addrs@ around the frozen
-- mean @mean@ with the hyper site's SD @sd@: @logPost@ is the log posterior
-- density of a full vector over @addrs@ (other sites fixed by a seed).
-- Returns the transport and the model evaluations used.
buildTransport
  :: (U.Vector Double -> Double) -> U.Vector Int -> U.Vector Double -> U.Vector Double -> Int
  -> (Transport, Int)
buildTransport logPost addrs mean sds ia =
  let d = U.length addrs
      others = U.fromList [j | j <- [0 .. d - 1], j /= ia]
      r = U.length others
      h = max 0.05 (min 2 (sds U.! ia))
      xs = U.generate (2 * transportNodes + 1) (\k -> mean U.! ia + h * fromIntegral (k - transportNodes))
      eps j = max 1e-5 (min 1e-2 (1e-3 * sds U.! j))
      full x zr = U.generate d (\j -> if j == ia then x else zr U.! (if j < ia then j else j - 1))
      -- one Gauss–Seidel Newton sweep over R at hyper value x: returns the
      -- new z_R, the conditional SDs and the evaluations used
      sweep x zr0 =
        let f0 = logPost (full x zr0)
            go !k !zr !f !acc !n
              | k >= r = (zr, U.fromList (reverse acc), n)
              | otherwise =
                  let j = others U.! k
                      e = eps j
                      z = zr U.! k
                      fp = logPost (full x (zr U.// [(k, z + e)]))
                      fm = logPost (full x (zr U.// [(k, z - e)]))
                      curv = -(fp - 2 * f + fm) / (e * e)
                      grad = (fp - fm) / (2 * e)
                      ok = curv > 0 && not (isInfinite curv) && not (isNaN grad) && not (isInfinite f)
                      sdj = if ok then 1 / sqrt curv else sds U.! j
                      stepv = if ok then max (-3 * sdj) (min (3 * sdj) (grad / curv)) else 0
                      zr' = zr U.// [(k, z + stepv)]
                      f' = if stepv == 0 then f else logPost (full x zr')
                      better = f' >= f && not (isNaN f')
                      n' = n + 2 + (if stepv == 0 then 0 else 1)
                  in if better
                       then go (k + 1) zr' f' (log sdj : acc) n'
                       else go (k + 1) zr f (log sdj : acc) n'
        in let (zr, ls, n) = go 0 zr0 f0 [] 1 in (zr, ls, n)
      start = U.map (mean U.!) others
      (zc1, _, n1) = sweep (xs U.! transportNodes) start
      (zc, lc, n2) = sweep (xs U.! transportNodes) zc1
      walk ks z0 = goW ks z0 [] 0
        where
          goW [] _ acc n = (acc, n)
          goW (k : rest) z acc n =
            let (z', l', m) = sweep (xs U.! k) z
            in goW rest z' ((k, (z', l')) : acc) (n + m)
      (upper, nu) = walk [transportNodes + 1 .. 2 * transportNodes] zc
      (lower, nl) = walk [transportNodes - 1, transportNodes - 2 .. 0] zc
      table = IM.fromList ((transportNodes, (zc, lc)) : upper ++ lower)
      rowsOf f = U.concat [f (table IM.! k) | k <- [0 .. 2 * transportNodes]]
      tr =
        Transport
          { trSite = addrs U.! ia
          , trOthers = U.map (addrs U.!) others
          , trNodes = xs
          , trModes = rowsOf fst
          , trLogScales = rowsOf snd
          , trWidth = 2 * h
          }
  in (tr, n1 + n2 + nu + nl)

-- | m(x) and log s(x): linear interpolation between grid nodes, constant
-- beyond the ends.
interpolate :: Transport -> Double -> (U.Vector Double, U.Vector Double)
interpolate tr x =
  let xs = trNodes tr
      k = U.length xs
      r = U.length (trOthers tr)
      row v i = U.slice (i * r) r v
      blend i t v = U.zipWith (\p q -> p + t * (q - p)) (row v i) (row v (i + 1))
  in if x <= xs U.! 0
       then (row (trModes tr) 0, row (trLogScales tr) 0)
       else if x >= xs U.! (k - 1)
         then (row (trModes tr) (k - 1), row (trLogScales tr) (k - 1))
         else
           let i = min (k - 2) (length (takeWhile (<= x) (U.toList xs)) - 1)
               t = (x - xs U.! i) / (xs U.! (i + 1) - xs U.! i)
           in (blend i t (trModes tr), blend i t (trLogScales tr))

-- | One transported update of a hyper site chosen uniformly from the list.
-- Returns the new state, evaluations, invalid ones and the generator.
transportStep
  :: (Word64 -> Sites -> Evaluation a) -> [Transport] -> Gen -> ChainState a
  -> (ChainState a, Int, Int, Gen)
transportStep _ [] g st = (st, 0, 0, g)
transportStep eval trs g0 st =
  let (w64, g1) = nextWord64 g0
      tr = trs !! fromIntegral (w64 `mod` fromIntegral (length trs))
      (seed, g2) = nextWord64 g1
      sites0 = csSites st
      current b = IM.findWithDefault (freshNormal seed b) b sites0
      a = trSite tr
      za = current a
      others = trOthers tr
      zr = U.map current others
      (m0, l0) = interpolate tr za
      w = U.zipWith3 (\z m l -> (z - m) * exp (negate l)) zr m0 l0
      pointAt x =
        let (m, l) = interpolate tr x
        in (U.zipWith3 (\mi li wi -> mi + exp li * wi) m l w, U.sum l)
      logDensity x =
        let (zr', jac) = pointAt x
            nonFinite = U.any (\v -> isNaN v || isInfinite v) zr' || isNaN x || isInfinite x
        in if nonFinite
             then (-1 / 0, Nothing)
             else
               let sites' = U.ifoldl' (\acc i b -> IM.insert b (zr' U.! i) acc) (IM.insert a x sites0) others
                   ev = eval seed sites'
                   lw = evLogWeight ev
                   prior = -0.5 * (x * x + U.sum (U.map (\v -> v * v) zr'))
               in if validLogWeight lw then (lw + prior + jac, Just ev) else (-1 / 0, Nothing)
      f0 = csLogWeight st - 0.5 * (za * za + U.sum (U.map (\v -> v * v) zr)) + U.sum l0
      (found, n, bad, g3) = sliceOffset (trWidth tr) (\dx -> logDensity (za + dx)) f0 g2
      st' = maybe st (\ev -> ChainState (evSites ev) (evLogWeight ev) (evValue ev)) found
  in (st', n, bad, g3)
