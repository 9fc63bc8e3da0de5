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
-- The move.  For a hyper site a with the other adapted sites R (the other
-- hyper sites included when there are at most 'maxMatrixSites' of them;
-- above that R excludes them, S is diagonal and the other hyper sites'
-- current values shift m and log s additively, see 'combined'), let m(x) (a vector over R) and S(x) (an r × r
-- lower-triangular matrix with positive diagonal s(x)) be deterministic
-- functions of the hyper coordinate x alone, and write the state as
-- (z_a, w) with
--
-- > w = S(z_a)⁻¹ (z_R − m(z_a)).
--
-- The target in (z_a, w) is π(z_a, m(z_a) + S(z_a) w) · det S(z_a), and
-- det S = ∏_i s_i.  One update draws z_a' from its conditional given w by
-- univariate slice sampling ("LazyPPL.Internal.Slice".'sliceOffset') and
-- maps back: z_R' = m(z_a') + S(z_a') w; then, with z_a' fixed, it moves all
-- of w at once by elliptical slice sampling ('ellipticalStep').
--
-- Why it is exact.  (z_a, z_R) ↦ (z_a, w) is a fixed bijection (for each x,
-- an affine map of z_R with Jacobian 1 / det S(x)), so the target in the
-- new coordinates is the density above, and slice sampling leaves the
-- conditional of z_a given w invariant: the update is a Gibbs step in fixed
-- coordinates.  m and S are frozen at the end of warm-up and depend on
-- nothing the update moves except through z_a, so this holds for any choice
-- of them; the choice only decides efficiency.  Sites outside a and R keep
-- their values (unstored ones take them from the update's fresh seed, the
-- usual Gibbs refresh of unread sites).
--
-- The choice.  m(x) is the conditional mode of z_R given z_a = x and S(x)
-- the lower Cholesky factor of the conditional covariance there, found at
-- the end of warm-up on a grid of x values: Gauss–Seidel Newton sweeps (one
-- coordinate at a time, finite differences) started at the frozen warm-up
-- mean and continued from node to node, then (up to 'maxMatrixSites'
-- transported sites) the full finite-difference Hessian, its off-diagonal
-- part shrunk towards the diagonal until positive definite, a few Newton
-- steps with its inverse, and S = chol(H⁻¹); per-site SDs
-- 1/√(−∂²log π/∂z_i²) (S diagonal) where no Hessian is positive definite or
-- R is larger.  Between nodes m, log s and S's strictly lower part are
-- interpolated linearly (S stays lower triangular with det ∏ s_i), beyond
-- the grid they are constant.  For θ_j = μ + τ z_j with normal data this
-- finds m_j(τ) ≈ (y_j − μ)/τ and s_j(τ) ∝ 1/τ, i.e. the move holds the
-- centred θ_j (nearly) fixed while τ moves: the centred Gibbs update inside
-- a non-centred chain; the full matrix also follows the other hyper sites
-- and correlated latent sites (a GP's whitened values given its length
-- scale: gp_pois_regr's rho went from bulk ESS 6–14 to 61–102 per 4 × 1,000
-- draws, docs/experiments/README.md).
module LazyPPL.Internal.Transport
  ( Transport (..)
  , buildTransport
  , buildJoint
  , JointGrid
  , fineGrid
  , trialGrid
  , wideGrid
  , scaleScores
  , transportStep
  , hyperCandidates
  , matrixNodes
  , movesOtherHypers
  , maxMatrixSites
  ) where

import Data.List (sortBy)
import Data.Maybe (isJust)
import Data.Ord (comparing, Down (..))
import qualified Data.IntMap.Strict as IM
import qualified Data.Vector.Unboxed as U
import Data.Word (Word64)

import LazyPPL.Internal.Core
import LazyPPL.Internal.Kernels (ChainState (..), normals)
import LazyPPL.Internal.Linear
  (Matrix (..), cholesky, diagonal, entry, fromFunction, invertSpd, lowerTimes, matVec, solveLower)
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
  , trLower :: !(U.Vector Double)
    -- ^ the strictly lower part of S at the nodes, r × r row-major per node
    -- (zeros on and above the diagonal), or empty: S is diagonal
  , trCentre :: !Int
    -- ^ index of the centre node (nodes per side)
  , trWidth :: !Double
    -- ^ slice width for z_a
  , trSite2 :: !Int
    -- ^ a joint transport's second hyper site b (unused when 'trNodes2' is
    -- empty: addresses are hashes, any Int may be one)
  , trNodes2 :: !(U.Vector Double)
    -- ^ a joint transport's grid of z_b values (rows above: node (i, j) is
    -- row i × length trNodes2 + j), or empty
  , trWidth2 :: !Double
    -- ^ slice width for z_b
  }
  deriving (Show, Read)

-- | Up to this many transported sites, S(x) is the full lower Cholesky
-- factor of the conditional covariance (the inverse of the finite-difference
-- Hessian, about 2r² evaluations per node); above it, per-site SDs only.
maxMatrixSites :: Int
maxMatrixSites = 24

-- | Newton steps towards the conditional mode at each node (one Hessian,
-- a fresh gradient per step).
newtonSteps :: Int
newtonSteps = 6

-- | Grid nodes on each side of the centre for @r@ transported sites (the
-- grid has 2k + 1 nodes): more
-- where S is a full matrix (a wider grid: a slowly mixing warm-up
-- underestimates the hyper's SD), fewer where it is diagonal (the grid as
-- it was before the full matrix; hier100's ESS halved with 8 there).
nodesPerSide :: Int -> Int
nodesPerSide r = if r <= maxMatrixSites then 8 else 4

-- | Whether the transport of one of @d@ adapted sites moves every other site,
-- the other hyper sites included (then S is a full matrix), or holds the
-- other hyper sites fixed (more than 'maxMatrixSites' others: S is
-- diagonal, and the other hyper sites enter 'combined' additively).
movesOtherHypers :: Int -> Bool
movesOtherHypers d = d - 1 <= maxMatrixSites

-- | Hyper-site candidates from a covariance estimate over the adapted
-- sites: the sites whose conditionals most other sites depend on, scored by
-- the fan-out Σ_i ρ_ai² of their partial correlations ρ_ai (from Σ⁻¹).  In
-- θ_j = μ + τ z_j with informative data the z_j are conditionally
-- independent given (μ, τ), so μ and τ score about 1 and each z_j about
-- 2/J.  At most @k@ sites, each scoring at least 0.5, highest first
-- (indices into the adapted sites).  (Marginal-over-conditional variance
-- would be the natural alternative, but a stuck warm-up chain underestimates
-- exactly the hyper sites' marginal variance.)
hyperCandidates :: Int -> Matrix -> [Int]
hyperCandidates k cov = case invertSpd cov of
  Nothing -> []
  Just p ->
    let d = matDim cov
        rho2 i j = let q = entry p i j in q * q / (entry p i i * entry p j j)
        fanOut i = sum [rho2 i j | j <- [0 .. d - 1], j /= i]
        ranked = sortBy (comparing (Down . snd)) [(i, fanOut i) | i <- [0 .. d - 1]]
    in if d < 3 then [] else take k [i | (i, sc) <- ranked, sc >= 0.5, not (isNaN sc)]

-- | Build the transport of site index @ia@ of @addrs@ (all other sites of
-- @addrs@ are transported) around the frozen mean @mean@ with the sites'
-- SDs @sds@: @logPost@ is the log posterior density of a full vector over
-- @addrs@ (other sites fixed by a seed).
-- Returns the transport and the model evaluations used.
--
-- The grid is centred between the warm-up mean and the hyper site's value
-- @now@ in the chain's state at the end of warm-up, and spans both: a slowly
-- mixing warm-up chain's window mean can be far from where the chain is
-- (hier100: z_τ's window mean −0.2, the chain near −0.75), and beyond the
-- grid the transport is constant, i.e. no help.
buildTransport
  :: (U.Vector Double -> Double) -> U.Vector Int -> U.Vector Double -> U.Vector Double -> [Int] -> Double -> Int
  -> (Transport, Int)
buildTransport logPost addrs mean sds fixed now ia =
  let d = U.length addrs
      others = U.fromList [j | j <- [0 .. d - 1], j /= ia, j `notElem` fixed]
      r = U.length others
      transportNodes = nodesPerSide r
      (centre, h) = gridSpacing 1.5 mean sds now ia transportNodes
      xs = U.generate (2 * transportNodes + 1) (\k -> centre + h * fromIntegral (k - transportNodes))
      sweep x = fst (nodeSolver logPost d mean sds others newtonSteps [(ia, x)])
      node x = snd (nodeSolver logPost d mean sds others newtonSteps [(ia, x)])
      start = U.map (mean U.!) others
      (zc1, _, n1) = sweep (xs U.! transportNodes) start
      (zc, lc, lowc, n2) = node (xs U.! transportNodes) zc1
      walk = walkNodes (\k -> node (xs U.! k))
      (upper, nu) = walk [transportNodes + 1 .. 2 * transportNodes] zc
      (lower, nl) = walk [transportNodes - 1, transportNodes - 2 .. 0] zc
      table = IM.fromList ((transportNodes, (zc, lc, lowc)) : upper ++ lower)
      tr = gridTransport (addrs U.! ia) (U.map (addrs U.!) others) (xs, transportNodes, 2 * h) (0, U.empty, 0)
             [table IM.! k | k <- [0 .. 2 * transportNodes]]
  in (tr, n1 + n2 + nu + nl)

-- | A transport from its grid: hyper site, transported sites, the first
-- axis (nodes, centre index, slice width), the second (site, nodes, slice
-- width; no nodes for a one-site transport) and each node's (m, log
-- diagonal of S, S's strictly lower part) in row order.
gridTransport
  :: Int -> U.Vector Int -> (U.Vector Double, Int, Double) -> (Int, U.Vector Double, Double)
  -> [(U.Vector Double, U.Vector Double, U.Vector Double)] -> Transport
gridTransport site others (xs, centre, width) (site2, ys, width2) cells =
  Transport
    { trSite = site
    , trOthers = others
    , trNodes = xs
    , trModes = U.concat [m | (m, _, _) <- cells]
    , trLogScales = U.concat [l | (_, l, _) <- cells]
    , trLower = U.concat [low | (_, _, low) <- cells]
    , trCentre = centre
    , trWidth = width
    , trSite2 = site2
    , trNodes2 = ys
    , trWidth2 = width2
    }

-- | Newton steps per node of a joint transport's grid (at most: they stop
-- once the density no longer rises).  More than a one-site grid's: with 6,
-- gp_pois_regr's joint (rho, alpha) transport moved alpha about half as well.
jointNewtonSteps :: Int
jointNewtonSteps = 25

-- | A joint transport's grid: nodes on each side of the centre of each
-- hyper site's axis (a (2k + 1)² grid) and their spacing in SDs.  Measured
-- on gp_pois_regr (transport-only mixture, 4 x 1,000 draws): 9 x 9 nodes 1.5
-- SDs apart gave rho / alpha bulk ESS 692-986 / 197-312; 13 x 13 nodes 0.6
-- SDs apart 3,376-3,456 / 3,214-3,322 (the conditional mode and scale of the
-- latent sites change fast with a scale parameter, and between nodes they
-- are interpolated linearly).
data JointGrid = JointGrid !Int !Double

-- | The grid of the transport kept, the coarse grid of the trials that
-- choose its partner site, and the grid of a joint transport whose S is
-- diagonal (more than 'maxMatrixSites' transported sites: each node is one
-- Gauss–Seidel sweep, about 3r evaluations, so 9 x 9 nodes 1.5 SDs apart,
-- as the one-site diagonal grid's spacing).
fineGrid, trialGrid, wideGrid :: JointGrid
fineGrid = JointGrid 6 0.6
trialGrid = JointGrid 1 1
wideGrid = JointGrid 4 1.5

-- | A joint transport of two hyper sites @ia@ and @ib@ (indices into
-- @addrs@; every other site is transported): m and S are functions of both
-- hyper coordinates, found at the nodes of a square grid as in
-- 'buildTransport' (each node continued from its neighbour) and
-- interpolated bilinearly.  One update slices one of the two hyper
-- coordinates with the other and w fixed, then moves w by elliptical slice
-- sampling: Gibbs steps in the fixed coordinates (z_a, z_b, w), exact for
-- the same reason as the one-site move.
--
-- Why.  When one hyper site is a scale and another a length scale (a GP's
-- alpha and rho), the conditional of the latent sites given either one
-- alone is a curved ridge along the other, which no Gaussian m, S of that
-- one coordinate straightens: on gp_pois_regr the one-site transports
-- moved rho and alpha about once per 100-1,000 updates.  Given both it is
-- close to Gaussian.
buildJoint
  :: (U.Vector Double -> Double) -> U.Vector Int -> U.Vector Double -> U.Vector Double
  -> JointGrid -> (Double, Double) -> (Int, Int) -> (Transport, Int)
buildJoint logPost addrs mean sds (JointGrid k spacing) (nowA, nowB) (ia, ib) =
  let d = U.length addrs
      others = U.fromList [j | j <- [0 .. d - 1], j /= ia, j /= ib]
      n2 = 2 * k + 1
      (ca, ha) = gridSpacing spacing mean sds nowA ia k
      (cb, hb) = gridSpacing spacing mean sds nowB ib k
      xs = U.generate n2 (\q -> ca + ha * fromIntegral (q - k))
      ys = U.generate n2 (\q -> cb + hb * fromIntegral (q - k))
      solver i j = nodeSolver logPost d mean sds others jointNewtonSteps [(ia, xs U.! i), (ib, ys U.! j)]
      node i j = snd (solver i j)
      (zc1, _, n0) = fst (solver k k) (U.map (mean U.!) others)
      -- row i: its centre node from z0, then outwards along b from there
      row i z0 =
        let (zi, lc, lowc, nc) = node i k z0
            walk js = let (cells, n) = walkNodes (node i) js zi
                      in ([(i * n2 + j, cell) | (j, cell) <- cells], n)
            (up, nu) = walk [k + 1 .. 2 * k]
            (down, nd) = walk [k - 1, k - 2 .. 0]
        in ((i * n2 + k, (zi, lc, lowc)) : up ++ down, nc + nu + nd, zi)
      rows is z0 = go is z0 [] 0
        where
          go [] _ acc n = (acc, n)
          go (i : rest) z acc n = let (cells, m, zi) = row i z in go rest zi (cells ++ acc) (n + m)
      (centreCells, nCentre, zc) = row k zc1
      (upper, nUp) = rows [k + 1 .. 2 * k] zc
      (lower, nDown) = rows [k - 1, k - 2 .. 0] zc
      table = IM.fromList (centreCells ++ upper ++ lower)
      tr = gridTransport (addrs U.! ia) (U.map (addrs U.!) others) (xs, k, 2 * ha) (addrs U.! ib, ys, 2 * hb)
             [table IM.! q | q <- [0 .. n2 * n2 - 1]]
  in (tr, n0 + nCentre + nUp + nDown)

-- | How much each adapted site acts as a scale of the others: moving site i
-- by its SD @sds@ ! i either way from the warm-up mean, the sum over the
-- other sites j of |Δ log c_j|, c_j the curvature −∂²log π/∂z_j² (finite
-- differences; pairs where either curvature is not positive are skipped).
-- A location parameter scores about 0, the scale of many sites about twice
-- the log of its own range per site.  Returns the scores and evaluations.
scaleScores :: (U.Vector Double -> Double) -> U.Vector Double -> U.Vector Double -> (U.Vector Double, Int)
scaleScores logPost mean sds =
  let d = U.length mean
      eps j = max 1e-5 (min 1e-2 (1e-3 * sds U.! j))
      curvatures p =
        let f0 = logPost p
            c j = let e = eps j
                      fp = logPost (p U.// [(j, p U.! j + e)])
                      fm = logPost (p U.// [(j, p U.! j - e)])
                  in -(fp - 2 * f0 + fm) / (e * e)
        in U.generate d c
      scoreOf i =
        let shifted sg = curvatures (mean U.// [(i, mean U.! i + sg * sds U.! i)])
            cp = shifted 1
            cm = shifted (-1)
            terms = [abs (log (cp U.! j) - log (cm U.! j)) | j <- [0 .. d - 1], j /= i
                    , cp U.! j > 0, cm U.! j > 0, not (isInfinite (cp U.! j)), not (isInfinite (cm U.! j))]
        in sum [t | t <- terms, not (isNaN t)]
  in (U.generate d scoreOf, d * 2 * (1 + 2 * d))

-- | The grid's centre and spacing for hyper index @ia@ with @k@ nodes per
-- side: centred between the warm-up mean and the chain's value @now@,
-- spacing @spacing@ SDs (1.5 for a one-site transport, the 'JointGrid''s
-- for a joint one) or enough to reach @now@ (within [0.05, 2]).
gridSpacing :: Double -> U.Vector Double -> U.Vector Double -> Double -> Int -> Int -> (Double, Double)
gridSpacing spacing mean sds now ia k =
  let centre = if isNaN now || isInfinite now then mean U.! ia else 0.5 * (mean U.! ia + now)
      h = max 0.05 (min 2 (max (spacing * sds U.! ia) (abs (now - mean U.! ia) / fromIntegral k)))
  in (centre, h)

-- | Grid nodes solved one after another along @ks@, each ('node' k z) started
-- from the previous node's mode (the first from @z0@): (k, (mode, log
-- diagonal of S, S's strictly lower part)) for each k, and the evaluations.
walkNodes
  :: (Int -> U.Vector Double -> (U.Vector Double, U.Vector Double, U.Vector Double, Int))
  -> [Int] -> U.Vector Double -> ([(Int, (U.Vector Double, U.Vector Double, U.Vector Double))], Int)
walkNodes node ks z0 = go ks z0 [] 0
  where
    go [] _ acc n = (acc, n)
    go (k : rest) z acc n =
      let (z', l', low', m) = node k z
      in go rest z' ((k, (z', l', low')) : acc) (n + m)

-- | The conditional mode and scale of the sites @others@ (indices into the
-- adapted sites) with the hyper sites @hv@ (index, value) held fixed, from a
-- starting z_R: the Gauss–Seidel sweep alone (mode, log SDs, evaluations)
-- and the full node (sweep, Hessian, Newton steps: mode, log diagonal of S,
-- S's strictly lower part, evaluations).  See 'buildTransport'.
nodeSolver
  :: (U.Vector Double -> Double) -> Int -> U.Vector Double -> U.Vector Double -> U.Vector Int -> Int
  -> [(Int, Double)]
  -> ( U.Vector Double -> (U.Vector Double, U.Vector Double, Int)
     , U.Vector Double -> (U.Vector Double, U.Vector Double, U.Vector Double, Int) )
nodeSolver logPost d mean sds others steps hv =
  let r = U.length others
      slot = IM.fromList (zip (U.toList others) [0 ..])
      full zr = U.generate d (\j -> case lookup j hv of
                                        Just v -> v
                                        Nothing -> maybe (mean U.! j) (zr U.!) (IM.lookup j slot))
      eps j = max 1e-5 (min 1e-2 (1e-3 * sds U.! j))
      -- one Gauss–Seidel Newton sweep over R at the hyper values: returns the
      -- new z_R, the conditional SDs and the evaluations used
      sweep zr0 =
        let f0 = logPost (full zr0)
            go !k !zr !f !acc !n
              | k >= r = (zr, U.fromList (reverse acc), n)
              | otherwise =
                  let j = others U.! k
                      e = eps j
                      z = zr U.! k
                      fp = logPost (full (zr U.// [(k, z + e)]))
                      fm = logPost (full (zr U.// [(k, z - e)]))
                      curv = -(fp - 2 * f + fm) / (e * e)
                      grad = (fp - fm) / (2 * e)
                      ok = curv > 0 && not (isInfinite curv) && not (isNaN grad) && not (isInfinite f)
                      sdj = if ok then 1 / sqrt curv else sds U.! j
                      stepv = if ok then max (-3 * sdj) (min (3 * sdj) (grad / curv)) else 0
                      zr' = zr U.// [(k, z + stepv)]
                      f' = if stepv == 0 then f else logPost (full zr')
                      better = f' >= f && not (isNaN f')
                      n' = n + 2 + (if stepv == 0 then 0 else 1)
                  in if better
                       then go (k + 1) zr' f' (log sdj : acc) n'
                       else go (k + 1) zr f (log sdj : acc) n'
        in let (zr, ls, n) = go 0 zr0 f0 [] 1 in (zr, ls, n)
      -- the full conditional curvature of z_R at the hyper values: Newton steps
      -- from the sweep's point (each kept if it raises the density) and S =
      -- the lower Cholesky factor of the inverse finite-difference Hessian;
      -- the sweep's diagonal where the Hessian is not positive definite
      refine zr ls
        | r > maxMatrixSites = (zr, ls, U.empty, 0)
        | otherwise =
            let (hess0, grad, f0, nh) = curvature zr
                diagonalOnly = (zr, ls, U.replicate (r * r) 0, nh)
                -- off-diagonal curvature shrunk towards the diagonal until
                -- positive definite (away from the centre the conditional
                -- is less Gaussian and the raw Hessian often is not)
                shrunk c (Matrix n e) = Matrix n (U.imap (\q v -> let (i, j) = q `divMod` n in if i == j then v else c * v) e)
                candidates = [shrunk c hess0 | c <- [1, 0.9, 0.7, 0.5]]
                hess = case [h' | h' <- candidates, isJust (cholesky h')] of
                  (h' : _) -> h'
                  [] -> hess0
            in case invertSpd hess of
                 Nothing -> diagonalOnly
                 Just c -> case cholesky c of
                   Nothing -> diagonalOnly
                   Just l ->
                     let (zn, nn) = newton c steps zr f0 grad 0
                     in (zn, U.map log (diagonal l), strictLower l, nh + nn)
      -- Newton steps with the node's fixed inverse Hessian c, the gradient
      -- re-estimated at each new point, while the density rises (halving once)
      newton c k z f g n
        | k <= (0 :: Int) = (z, n)
        | fFull > f = continueAt (at 1) fFull (n + 1)
        | fHalf > f = continueAt (at 0.5) fHalf (n + 2)
        | otherwise = (z, n + 2)
        where
          stepv = matVec c g
          at t = U.zipWith (\zi v -> zi + t * v) z stepv
          fFull = logPost (full (at 1))
          fHalf = logPost (full (at 0.5))
          continueAt z' f' n' = newton c (k - 1) z' f' (gradientAt z') (n' + 2 * r)
      gradientAt z =
        let e k = eps (others U.! k)
            bumped k sg = logPost (full (z U.// [(k, z U.! k + sg * e k)]))
        in U.generate r (\k -> (bumped k 1 - bumped k (-1)) / (2 * e k))
      curvature zr =
        let fAt z = logPost (full z)
            e k = eps (others U.! k)
            bump ps = zr U.// [(k, zr U.! k + sg * e k) | (k, sg) <- ps]
            f0 = fAt zr
            fp = U.generate r (\k -> fAt (bump [(k, 1)]))
            fm = U.generate r (\k -> fAt (bump [(k, -1)]))
            grad = U.generate r (\k -> (fp U.! k - fm U.! k) / (2 * e k))
            diagH k = -(fp U.! k - 2 * f0 + fm U.! k) / (e k * e k)
            mixed i j =
              let q a b = fAt (bump [(i, a), (j, b)])
              in -(q 1 1 - q 1 (-1) - q (-1) 1 + q (-1) (-1)) / (4 * e i * e j)
            lowerH = U.generate (r * r) (\q -> let (i, j) = q `divMod` r in if j < i then mixed i j else 0)
            hess = fromFunction r (\i j -> if i == j then diagH i
                                           else lowerH U.! (max i j * r + min i j))
        in (hess, grad, f0, 1 + 2 * r + 2 * r * (r - 1))
      node z0 =
        let (z1, l1, ns) = sweep z0
            (z2, l2, low, nr) = refine z1 l1
        in (z2, l2, low, ns + nr)
  in (sweep, node)

-- | Grid nodes whose S has a non-zero off-diagonal part (the full-matrix
-- transport; the others fell back to per-site SDs), for the tuning record.
matrixNodes :: Transport -> Int
matrixNodes tr
  | U.null (trLower tr) || r == 0 = 0
  | otherwise = length [k | k <- [0 .. U.length (trLogScales tr) `div` r - 1], U.any (/= 0) (U.slice (k * r * r) (r * r) (trLower tr))]
  where
    r = U.length (trOthers tr)

-- | The strictly lower part of a lower-triangular matrix, row-major.
strictLower :: Matrix -> U.Vector Double
strictLower (Matrix d e) = U.imap (\q v -> let (i, j) = q `divMod` d in if j < i then v else 0) e

-- | m(x), log s(x) (the diagonal of S) and S's strictly lower part:
-- linear interpolation between grid nodes, constant beyond the ends.
-- S(x) stays lower triangular with a positive diagonal, so invertible with
-- determinant ∏ s_i(x) whatever x.
interpolate :: Transport -> Double -> (U.Vector Double, U.Vector Double, U.Vector Double)
interpolate tr x =
  let xs = trNodes tr
      k = U.length xs
      r = U.length (trOthers tr)
      row n v i = U.slice (i * n) n v
      blend n i t v = U.zipWith (\p q -> p + t * (q - p)) (row n v i) (row n v (i + 1))
      lowerAt f = if U.null (trLower tr) then U.empty else f (r * r) (trLower tr)
      pick i = (row r (trModes tr) i, row r (trLogScales tr) i, lowerAt (\n v -> row n v i))
  in if x <= xs U.! 0
       then pick 0
       else if x >= xs U.! (k - 1)
         then pick (k - 1)
         else
           let (i, t) = bracket xs x
           in (blend r i t (trModes tr), blend r i t (trLogScales tr), lowerAt (\n v -> blend n i t v))

-- | A joint transport's m(x, y), log s(x, y) and S's strictly lower part:
-- bilinear between grid nodes, constant beyond the grid's edges.
interpolate2 :: Transport -> Double -> Double -> (U.Vector Double, U.Vector Double, U.Vector Double)
interpolate2 tr x y =
  let (i, t) = bracket (trNodes tr) x
      (j, u) = bracket (trNodes2 tr) y
      n2 = U.length (trNodes2 tr)
      r = U.length (trOthers tr)
      row n v q = U.slice (q * n) n v
      mix n v = U.zipWith4 (\p00 p10 p01 p11 -> (1 - t) * (1 - u) * p00 + t * (1 - u) * p10 + (1 - t) * u * p01 + t * u * p11)
                  (row n v (i * n2 + j)) (row n v ((i + 1) * n2 + j)) (row n v (i * n2 + j + 1)) (row n v ((i + 1) * n2 + j + 1))
  in (mix r (trModes tr), mix r (trLogScales tr), if U.null (trLower tr) then U.empty else mix (r * r) (trLower tr))

-- | The cell of an increasing grid holding x and the fraction across it,
-- clamped to the first or last cell beyond the ends.
bracket :: U.Vector Double -> Double -> (Int, Double)
bracket xs x
  | x <= xs U.! 0 = (0, 0)
  | x >= xs U.! (k - 1) = (k - 2, 1)
  | otherwise =
      let i = min (k - 2) (length (takeWhile (<= x) (U.toList xs)) - 1)
      in (i, (x - xs U.! i) / (xs U.! (i + 1) - xs U.! i))
  where
    k = U.length xs

-- | m, log s and S's strictly lower part for hyper site @tr@ at value x,
-- with the other hyper sites at their current values: tr's own grid plus,
-- for every other hyper site b whose transport moves the same sites R (the
-- diagonal case, where R excludes every hyper site), the change of b's grid
-- from its centre to b's current value (a first-order, additive
-- combination).  A deterministic function of the hyper coordinates, and of
-- the others only while they are held fixed.  S's strictly lower part is
-- tr's own.
combined :: [Transport] -> Transport -> (Int -> Double) -> Double -> (U.Vector Double, U.Vector Double, U.Vector Double)
combined trs tr current x =
  let (m, l, low) = interpolate tr x
      shifts =
        [ (U.zipWith (-) mb mc, U.zipWith (-) lb lc)
        | tb <- trs, not (isJoint tb), trSite tb /= trSite tr, trOthers tb == trOthers tr
        , let (mb, lb, _) = interpolate tb (current (trSite tb))
        , let (mc, lc) = centreOf tb ]
      add (p, q) (dp, dq) = (U.zipWith (+) p dp, U.zipWith (+) q dq)
      (m', l') = foldl add (m, l) shifts
  in (m', l', low)

-- | The grid row at the centre node.
centreOf :: Transport -> (U.Vector Double, U.Vector Double)
centreOf tr =
  let r = U.length (trOthers tr)
      c = trCentre tr
  in (U.slice (c * r) r (trModes tr), U.slice (c * r) r (trLogScales tr))

-- | One transported update of a hyper site chosen uniformly from the list.
-- Returns the new state, evaluations, invalid ones and the generator.
--
-- @jacobian@ is 'True' except in a test that must see the deliberately
-- wrong variant (the factor ∏ s_i(z_a) dropped) fail.
transportStep
  :: (Word64 -> Sites -> Evaluation a) -> Bool -> [Transport] -> Gen -> ChainState a
  -> (ChainState a, Int, Int, Gen)
transportStep _ _ [] g st = (st, 0, 0, g)
transportStep eval jacobian trs g0 st =
  let (w64, g1) = nextWord64 g0
      tr = trs !! fromIntegral (w64 `mod` fromIntegral (length trs))
      (seed, g2') = nextWord64 g1
      -- a joint transport slices one of its two hyper coordinates
      joint = isJoint tr
      (second, g2) = if joint then let (c, g) = nextWord64 g2' in (odd c, g) else (False, g2')
      sites0 = csSites st
      current b = IM.findWithDefault (freshNormal seed b) b sites0
      a = if second then trSite2 tr else trSite tr
      za = current a
      others = trOthers tr
      zr = U.map current others
      -- the hyper sites' values with a's set to x
      hypersAt x
        | not joint = [(a, x)]
        | second = [(trSite tr, current (trSite tr)), (a, x)]
        | otherwise = [(a, x), (trSite2 tr, current (trSite2 tr))]
      at x = mapAt trs tr current (hypersAt x)
      (m0, l0, low0) = at za
      w = standardise m0 l0 low0 zr
      pointAt x =
        let (m, l, low) = at x
        in (unstandardise m l low w, if jacobian then U.sum l else 0)
      logDensity x =
        let (zr', jac) = pointAt x
            nonFinite = U.any (\v -> isNaN v || isInfinite v) zr' || isNaN x || isInfinite x
        in if nonFinite
             then (-1 / 0, Nothing)
             else
               let ev = eval seed (placed (hypersAt x) others zr' sites0)
                   lw = evLogWeight ev
                   prior = -0.5 * (x * x + sumSquares zr')
               in if validLogWeight lw then (lw + prior + jac, Just ev) else (-1 / 0, Nothing)
      f0 = csLogWeight st - 0.5 * (za * za + sumSquares zr) + (if jacobian then U.sum l0 else 0)
      width = if second then trWidth2 tr else trWidth tr
      (found, n, bad, g3) = sliceOffset width (\dx -> logDensity (za + dx)) f0 g2
      st1 = maybe st (\ev -> ChainState (evSites ev) (evLogWeight ev) (evValue ev)) found
      (st2, nb, bb, g4) = ellipticalStep eval trs tr g3 st1
  in (st2, n + nb, bad + bb, g4)

-- | Whether @tr@ is a joint transport of two hyper sites ('buildJoint').
isJoint :: Transport -> Bool
isJoint tr = not (U.null (trNodes2 tr))

-- | m, log s and S's strictly lower part of transport @tr@ with its hyper
-- sites at the given values (the first is its own site for a one-site
-- transport, which also follows the other one-site transports' hyper
-- sites, see 'combined').
mapAt :: [Transport] -> Transport -> (Int -> Double) -> [(Int, Double)] -> (U.Vector Double, U.Vector Double, U.Vector Double)
mapAt trs tr current hv = case hv of
  [(_, x), (_, y)] | isJoint tr -> interpolate2 tr x y
  ((_, x) : _) -> combined trs tr current x
  [] -> combined trs tr current (current (trSite tr))

-- | The hyper sites of @tr@ at their current values.
hypersNow :: Transport -> (Int -> Double) -> [(Int, Double)]
hypersNow tr current =
  (trSite tr, current (trSite tr)) : [(trSite2 tr, current (trSite2 tr)) | isJoint tr]

-- | Elliptical slice sampling (Murray, Adams and MacKay 2010) of all the
-- transported sites at once, in w = S(z_a)⁻¹ (z_R − m(z_a)) with the hyper
-- site fixed.  Given z_a the target in w is N(w; 0, I) · L(w) with
-- L = target(z) / N(w; 0, I) (det S(z_a) is constant and drops out).  The
-- update draws ν ~ N(0, I) and a level log L(w) + log u, then searches the
-- ellipse w cos θ + ν sin θ, θ uniform in a bracket of width 2π around 0
-- that shrinks towards θ = 0 (the current point) on each rejection.  It
-- leaves N(0, I) · L invariant for any fixed m and S, so (as for the hyper
-- site's slice step) it is a Gibbs step in fixed coordinates; unread sites
-- take their values from the update's one fresh seed.
--
-- Why elliptical slice rather than one MH move w' = ρ w + β ξ with β from
-- a fixed list (session 12's move): the angle adapts to the conditional's
-- width at every update and the move never stays put, so the many sites a
-- hyper site controls move together at the scale they allow.  Measured
-- (4 × 1,000 draws, seeds 20240601 and 7): hier100's min bulk ESS over the
-- θ's 213 → 904 with μ 286 → 404, the 6-group model's 1001/1193 → 1668/1610,
-- gp_pois_regr's min over α and ρ 16/10 → 29/35 (R-hat 1.18/1.34 → 1.11/1.12) at
-- 0–35 % more CPU; posteriors without a transport are unchanged.
ellipticalStep
  :: (Word64 -> Sites -> Evaluation a) -> [Transport] -> Transport -> Gen -> ChainState a
  -> (ChainState a, Int, Int, Gen)
ellipticalStep eval trs tr g0 st =
  let (seed, g1) = nextWord64 g0
      sites0 = csSites st
      current b = IM.findWithDefault (freshNormal seed b) b sites0
      hv = hypersNow tr current
      others = trOthers tr
      zr = U.map current others
      (m, l, low) = mapAt trs tr current hv
      w = standardise m l low zr
      (nu, g2) = normals (U.length others) g1
      (u, g3) = nextUniform g2
      level = csLogWeight st - 0.5 * sumSquares zr + 0.5 * sumSquares w + log u
      (v, g4) = nextUniform g3
      theta0 = 2 * pi * v
      -- log L on the ellipse at angle θ, and the evaluation there
      at theta =
        let w' = U.zipWith (\wi ni -> wi * cos theta + ni * sin theta) w nu
            zr' = unstandardise m l low w'
        in if U.any (\x -> isNaN x || isInfinite x) zr'
             then (-1 / 0, Nothing)
             else
               let ev = eval seed (placed hv others zr' sites0)
                   lw = evLogWeight ev
               in if validLogWeight lw
                    then (lw - 0.5 * sumSquares zr' + 0.5 * sumSquares w', Just ev)
                    else (-1 / 0, Nothing)
      shrink !lo !hi !theta !g !n !bad
        | n >= maxEllipseShrinks = (st, n, bad, g)
        | otherwise =
            let (f, found) = at theta
                bad' = if isJust found then bad else bad + 1
            in case found of
                 Just ev | f > level -> (ChainState (evSites ev) (evLogWeight ev) (evValue ev), n + 1, bad', g)
                 _ ->
                   let (lo', hi') = if theta < 0 then (theta, hi) else (lo, theta)
                       (q, g') = nextUniform g
                   in shrink lo' hi' (lo' + q * (hi' - lo')) g' (n + 1) bad'
  in shrink (theta0 - 2 * pi) theta0 theta0 g4 0 0

-- | Most evaluations of one elliptical slice update before it keeps the
-- current point.  In exact arithmetic the shrinking bracket always ends in
-- the slice (θ = 0 is in it); the bound guards against a bracket floating
-- point can no longer split, where staying put is the collapsed bracket's
-- own answer.
maxEllipseShrinks :: Int
maxEllipseShrinks = 100

-- | w = S⁻¹ (z_R − m) and its inverse z_R = m + S w, with S lower
-- triangular: diagonal exp l, strictly lower part @low@ (r × r row-major;
-- empty: S is diagonal).
standardise, unstandardise :: U.Vector Double -> U.Vector Double -> U.Vector Double -> U.Vector Double -> U.Vector Double
standardise m l low z
  | U.null low = U.zipWith3 (\zi mi li -> (zi - mi) * exp (negate li)) z m l
  | otherwise = solveLower (lowerFactor l low) (U.zipWith (-) z m)
unstandardise m l low w
  | U.null low = U.zipWith3 (\mi li wi -> mi + exp li * wi) m l w
  | otherwise = U.zipWith (+) m (lowerTimes (lowerFactor l low) w)

-- | S from its log diagonal @l@ and strictly lower part @low@ (r × r row-major).
lowerFactor :: U.Vector Double -> U.Vector Double -> Matrix
lowerFactor l low = Matrix r (U.imap withDiagonal low)
  where
    r = U.length l
    withDiagonal q v = let (i, j) = q `divMod` r in if i == j then exp (l U.! i) else v

-- | The sites with the hyper sites at the given values and the transported
-- sites at @zr@.
placed :: [(Int, Double)] -> U.Vector Int -> U.Vector Double -> Sites -> Sites
placed hv others zr sites0 =
  U.ifoldl' (\acc i b -> IM.insert b (zr U.! i) acc) (foldl (\acc (a, v) -> IM.insert a v acc) sites0 hv) others

sumSquares :: U.Vector Double -> Double
sumSquares = U.sum . U.map (\v -> v * v)
