{-# LANGUAGE Trustworthy #-}
{-# LANGUAGE BangPatterns #-}
-- | Slice updates of the tree in Gaussian coordinates along one-parameter
-- groups: univariate slice sampling (Neal 2003, "Slice sampling", §4:
-- stepping out and shrinkage) of the group parameter δ, which moves one site
-- and rescales others (see 'sliceStep'); with no group coefficients it is
-- plain univariate slice sampling of one site.
--
-- Target.  As in "LazyPPL.Internal.Kernels": N(0, I)(dz) · W(z) on the whole
-- tree.  One update picks a site a uniformly from the frozen list of adapted
-- sites, draws one fresh seed, and then holds every coordinate outside the
-- group fixed: stored sites at their values, unstored ones at the values that
-- seed gives them (drawing the seed is the usual Gibbs refresh of the unread
-- sites).  The update does not depend on which sites the current state reads
-- (an unread a or scaled site takes its value from the seed), so the same
-- group kernel acts at every point of an orbit, as the generalised Gibbs
-- argument needs; sites that are not read after the move are dropped, i.e.
-- refreshed at the next step.  Exact for any fixed width and step limit.
--
-- Why it helps.  Shrinkage halves the bracket geometrically, so a
-- conditional far narrower than the width (a funnel's neck) costs only
-- log₂(width / local scale) extra evaluations, and stepping out handles one
-- wider than it; the group carries the sites a scale parameter controls
-- along with it (see 'scaleCoefficients').
module LazyPPL.Internal.Slice
  ( sliceStep
  , sliceOffset
  , sliceMaxSteps
  , ScaleStats
  , windowStats
  , addStats
  , scaleCoefficients
  ) where

import qualified Data.IntMap.Strict as IM
import qualified Data.Vector.Unboxed as U
import Data.Word (Word64)

import LazyPPL.Internal.Core
import LazyPPL.Internal.Kernels (ChainState (..))
import LazyPPL.Internal.Linear (Matrix (..), entry)
import LazyPPL.Internal.Random

-- | Largest number of stepping-out steps (m in Neal's notation) per update.
sliceMaxSteps :: Int
sliceMaxSteps = 12

-- | Most shrinkage evaluations before giving up and keeping the current
-- value.  Shrinkage always terminates in exact arithmetic because the current
-- point lies in the slice; this bound only guards against a bracket that
-- floating point can no longer split (then staying put is still exact: the
-- bracket has collapsed onto the current point).
maxShrinks :: Int
maxShrinks = 200

-- | One update of a randomly chosen site a among @addrs@ (the frozen
-- adapted sites, in order), with width @widths@ ! a (z units), along the
-- one-parameter group T_δ of the tree coordinates:
--
-- > z_a ↦ z_a + δ,   z_i ↦ m_i + e^{c_ai δ} (z_i − m_i)   (i ≠ a adapted),
--
-- every other coordinate fixed.  @coefs@ holds c (row a; 'Nothing' = all
-- zero, the plain univariate slice update) and @centres@ the m_i.  By Liu
-- and Sabatti's generalised Gibbs theorem (2000, Thm 2), moving z to T_δ z
-- with δ drawn by a kernel that leaves g(δ) ∝ π(T_δ z)·|det ∂T_δ| invariant,
-- started at δ = 0, leaves π invariant, provided the kernel is equivariant
-- under the group (δ ↦ δ + δ₀): slice sampling with a uniformly placed
-- bracket of fixed width is.  Here |det ∂T_δ| = exp(δ Σ_i c_ai).  The
-- group follows a funnel: where the other coordinates' spread shrinks as z_a
-- falls, the move shrinks them with it instead of having to find the neck
-- one coordinate at a time.  Returns the new state, the number of model
-- evaluations, how many of them had invalid weight, and the generator.
sliceStep
  :: (Word64 -> Sites -> Evaluation a)
  -> U.Vector Int -> U.Vector Double -> Maybe Matrix -> U.Vector Double
  -> Gen -> ChainState a
  -> (ChainState a, Int, Int, Gen)
sliceStep eval addrs widths coefs centres g0 st
  | U.null addrs = (st, 0, 0, g0)
  | otherwise =
      let (w64, g1) = nextWord64 g0
          i = fromIntegral (w64 `mod` fromIntegral (U.length addrs))
          a = addrs U.! i
          w = widths U.! i
      in if not (w > 0) || isInfinite w
           then (st, 0, 0, g1)
           else
                 let (seed, g2) = nextWord64 g1
                     sites0 = csSites st
                     current b = IM.findWithDefault (freshNormal seed b) b sites0
                     row = case coefs of
                       Just c | matDim c == U.length addrs -> U.generate (matDim c) (entry c i)
                       _ -> U.empty
                     moving =
                       [ (addrs U.! j, c, centres U.! j, current (addrs U.! j))
                       | j <- [0 .. U.length row - 1], j /= i, let c = row U.! j, c /= 0 ]
                     jacobian = sum [c | (_, c, _, _) <- moving]
                     za = current a
                     -- the point T_δ z (only changed coordinates listed)
                     -- and the log density of δ (prior of changed ones)
                     pointAt d =
                       (a, za + d) : [ (b, m + exp (c * d) * (z - m)) | (b, c, m, z) <- moving ]
                     logPriorAt pts = -0.5 * sum [z * z | (_, z) <- pts]
                     at d =
                       let pts = pointAt d
                       in if any (\(_, z) -> isNaN z || isInfinite z) pts
                            then (-1 / 0, Nothing)
                            else
                              let ev = eval seed (foldr (\(b, z) m -> IM.insert b z m) sites0 pts)
                                  lw = evLogWeight ev
                              in if validLogWeight lw
                                   then (lw + logPriorAt pts + jacobian * d, Just ev)
                                   else (-1 / 0, Nothing)
                     f0 = csLogWeight st + logPriorAt (pointAt 0)
                     (found, n, bad, g6) = sliceOffset w at f0 g2
                     st' = maybe st (\ev -> ChainState (evSites ev) (evLogWeight ev) (evValue ev)) found
                 in (st', n, bad, g6)

-- | Univariate slice sampling (Neal 2003, §4: stepping out with at most
-- 'sliceMaxSteps' widths, then shrinkage) of an offset δ from the current
-- point δ = 0, with the given width, log density @at@ (−∞ where invalid;
-- its second component is what an accepted offset returns) and the log
-- density @f0@ at δ = 0.  Translation-equivariant: nothing depends on the
-- current point except through offsets from it.  Returns the accepted
-- offset's payload ('Nothing': stay), the evaluations, the invalid ones and
-- the generator.
sliceOffset :: Double -> (Double -> (Double, Maybe e)) -> Double -> Gen -> (Maybe e, Int, Int, Gen)
sliceOffset w at f0 g2 =
                 let (e, g3) = nextExponential g2
                     level = f0 - e
                     (u, g4) = nextUniform g3
                     (v, g5) = nextUniform g4
                     left0 = -(w * u)
                     right0 = left0 + w
                     stepsLeft0 = floor (fromIntegral sliceMaxSteps * v) :: Int
                     stepsRight0 = sliceMaxSteps - 1 - stepsLeft0
                     -- stepping out: widen while the end is in the slice
                     out !x !k dir !n !bad
                       | k <= 0 = (x, n, bad)
                       | otherwise =
                           let (fx, _) = at x
                               bad' = bad + invalid fx
                           in if fx > level then out (x + dir * w) (k - 1) dir (n + 1) bad' else (x, n + 1, bad')
                     (left, nl, bl) = out left0 stepsLeft0 (-1) 0 0
                     (right, nr, br) = out right0 stepsRight0 1 0 0
                     -- shrinkage: sample uniformly in the bracket, shrink
                     -- towards δ = 0 on rejection
                     shrink !l !r !g !n !bad !k
                       | k >= maxShrinks = (Nothing, n, bad, g)
                       | otherwise =
                           let (u', g') = nextUniform g
                               d1 = l + u' * (r - l)
                               (f1, mev) = at d1
                               bad' = bad + invalid f1
                           in case mev of
                                Just ev | f1 > level -> (Just ev, n + 1, bad', g')
                                _ | d1 < 0 -> shrink d1 r g' (n + 1) bad' (k + 1)
                                  | otherwise -> shrink l d1 g' (n + 1) bad' (k + 1)
                     (found, ns, bs, g6) = shrink left right g5 0 0 0
                 in (found, nl + nr + ns, bl + br + bs, g6)
  where
    invalid f = if isInfinite f && f < 0 then 1 else 0 :: Int

-- | A standard exponential draw (for the slice level log f(z0) − E).
nextExponential :: Gen -> (Double, Gen)
nextExponential g = let (u, g') = nextUniform g in (negate (log (1 - u)), g')

-- | Running sums for the regressions of log |z_i − m_i| on z_a over all
-- warm-up windows so far (x = z_a, y_i = log |z_i − m_i| with each window's
-- centres), and the windows' summed effective draws.  Pooling the windows
-- matters: a single window of a chain stuck near a funnel's neck hardly
-- varies the scale site, so its slopes are noise.
data ScaleStats = ScaleStats
  { stN :: !Double
  , stNeff :: !Double
  , stSx :: !(U.Vector Double)
  , stSxx :: !(U.Vector Double)
  , stSy :: !(U.Vector Double)
  , stSyy :: !(U.Vector Double)
  , stSxy :: !(U.Vector Double)
    -- ^ index a·d + i
  }
  deriving (Show, Read)

-- | Sums of one window (vectors over the adapted sites) with centres m and
-- the window's effective number of draws.
windowStats :: U.Vector Double -> Double -> [U.Vector Double] -> ScaleStats
windowStats centres neff samples =
  ScaleStats
    { stN = fromIntegral (length samples)
    , stNeff = neff
    , stSx = total xs
    , stSxx = total (map (U.map (\v -> v * v)) xs)
    , stSy = total ys
    , stSyy = total (map (U.map (\v -> v * v)) ys)
    , stSxy = total [U.concatMap (\xa -> U.map (* xa) y) x | (x, y) <- zip xs ys]
    }
  where
    d = U.length centres
    xs = samples
    ys = [U.imap (\i v -> 0.5 * log ((v - centres U.! i) ^ (2 :: Int) + 1e-300)) x | x <- samples]
    total vs = foldl (U.zipWith (+)) (U.replicate (d * (if null vs then 1 else U.length (head vs) `div` d)) 0) vs

-- | Pool two sets of sums over the same sites.
addStats :: ScaleStats -> ScaleStats -> ScaleStats
addStats a b =
  ScaleStats (stN a + stN b) (stNeff a + stNeff b) (plus stSx) (plus stSxx) (plus stSy) (plus stSyy) (plus stSxy)
  where
    plus f = U.zipWith (+) (f a) (f b)

-- | The group coefficients c_ai from pooled window sums: the least-squares
-- slope of log |z_i − m_i| on z_a, kept only where it is clearly not noise
-- (|t| > 2 with the pooled effective number of draws; a noise coefficient
-- costs only efficiency, a missed one the funnel), clipped to [−3, 3].  For
-- a funnel x_i = e^{v/2} n_i with v = 3 z_v this gives c ≈ 1.5.  Row a is
-- used when site a is updated; the diagonal is 0.  'Nothing' if no
-- coefficient survives (then every update is a plain slice update).
scaleCoefficients :: ScaleStats -> Maybe Matrix
scaleCoefficients st
  | k < 20 || d < 2 || U.all (== 0) coefs = Nothing
  | otherwise = Just (Matrix d coefs)
  where
    d = U.length (stSx st)
    k = stN st
    coefs = U.generate (d * d) (\ix -> let (a, i) = ix `divMod` d in if a == i then 0 else slope a i)
    slope a i =
      let sxx = stSxx st U.! a - (stSx st U.! a) ^ (2 :: Int) / k
          syy = stSyy st U.! i - (stSy st U.! i) ^ (2 :: Int) / k
          sxy = stSxy st U.! (a * d + i) - stSx st U.! a * stSy st U.! i / k
          b = sxy / sxx
          resid = max 0 (syy - b * sxy) / (k - 2)
          se = sqrt (resid / sxx * k / max 2 (min k (stNeff st)))
      in if sxx > 0 && se > 0 && abs b > 2 * se && not (isNaN b) then max (-3) (min 3 b) else 0
