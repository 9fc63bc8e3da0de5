{-# LANGUAGE OverloadedStrings #-}
-- | The seeded samplers recover known posteriors.
--
-- Tolerances.  Each check compares a pooled posterior mean (or SD) with the
-- truth within 4 Monte Carlo standard errors, the MCSE being estimated by
-- batch means (20 batches per chain, chains pooled).  To keep the check from
-- passing merely because a badly mixing chain has a huge MCSE, it also
-- requires MCSE < 0.1 posterior SD, i.e. an effective sample size of at least
-- ~100.  Seeds are fixed, so the suite is deterministic; with a correct
-- sampler a 4-MCSE deviation has probability ~1e-4 per check.  The eight
-- schools check against posteriordb's reference states its ESS minimum and
-- is shown to catch an SD 10% too wide (see 'referenceFailures').
module SamplerSpec (spec) where

import Control.Exception (evaluate)
import Control.Monad (forM_, replicateM)
import Data.List (isPrefixOf)
import Data.Maybe (isJust)
import qualified Data.Aeson as A
import qualified Data.ByteString.Lazy as BL
import qualified Data.Map.Strict as Map
import Data.Word (Word64)
import Test.Hspec

import LazyPPL
import LazyPPL.Bridge
import LazyPPL.Distributions
import Stats

settings :: Word64 -> SamplerSettings
settings seed = defaultSettings {ssSeed = seed, ssWarmup = 2000, ssDraws = 1000, ssThin = 5}

fitChains :: SamplerSettings -> Meas Double -> IO [[Double]]
fitChains s m = map crDraws <$> sampleChains s m

-- | Posterior mean and SD agree with the truth (see the module comment).
agrees :: (Double, Double) -> [[Double]] -> Expectation
agrees truth chains = do
  let (mcse, meanError, logSdError, relSdMcse) = agreement truth chains
  mcse `shouldSatisfy` (< 0.1 * snd truth)
  meanError `shouldSatisfy` (< 4 * mcse)
  logSdError `shouldSatisfy` (< 4 * relSdMcse)

-- | What 'agrees' checks, as numbers: the pooled MCSE of the mean, |mean −
-- true mean|, |log(sd / true sd)| and the relative MCSE of the SD.
agreement :: (Double, Double) -> [[Double]] -> (Double, Double, Double, Double)
agreement (trueMean, trueSd) chains =
  let m = mean (concat chains)
      mcse = pooledMcse 20 chains
      sq = map (map (\x -> (x - m) ^ (2 :: Int))) chains
      v = mean (concat sq)
      relSdMcse = pooledMcse 20 sq / (2 * v)
  in (mcse, abs (m - trueMean), abs (log (sqrt v / trueSd)), relSdMcse)

-- | A posterior probability agrees within 4 batch-means MCSEs.
probabilityAgrees :: Double -> [[Double]] -> Expectation
probabilityAgrees p chains = do
  let mcse = pooledMcse 20 chains
  mcse `shouldSatisfy` (< 0.03)
  abs (mean (concat chains) - p) `shouldSatisfy` (< 4 * mcse)

normalNormal :: Meas Double
normalNormal = do
  mu <- sample (normal 1 2)
  mapM_ (\y -> score (normalPdf mu 1.5 y)) [2.1, 3.4, 1.7, 2.9, 4.0]
  return mu

betaBernoulli :: Meas Double
betaBernoulli = do
  p <- sample (beta 2 3)
  mapM_ (scoreLog . Exp . bernoulliLogPmf p) (replicate 7 True ++ replicate 3 False)
  return p

gammaPoisson :: Meas Double
gammaPoisson = do
  lam <- sample (gamma 2 1)
  mapM_ (score . poissonPdf lam) [3, 5, 2, 4, 6]
  return lam

-- | Discrete latent choice: z ~ Bernoulli 0.3, x ~ N(±2, 1), y = 0.5 ~ N(x, 1).
mixture :: Meas Double
mixture = do
  z <- sample (bernoulli 0.3)
  x <- sample (normal (if z then 2 else -2) 1)
  score (normalPdf x 1 0.5)
  return (if z then 1 else 0)

-- | Changing dimension: k ∈ {0,1,2} uniform, k+1 standard normals whose sum
-- is observed with noise 1 at y = 1.
dimension :: Int -> Meas Double
dimension target = do
  k <- sample (uniformdiscrete 3)
  xs <- replicateM (k + 1) (sample (normal 0 1))
  score (normalPdf (sum xs) 1 1)
  return (if k == target then 1 else 0)

-- | Neal's funnel with @k@ latent x's: v ~ N(0, 3), x_i | v ~ N(0, e^{v/2}).
-- The x's are drawn from N(0, 1) and re-weighted, so the sampler sees the
-- funnel in its Gaussian coordinates; the marginal of v is N(0, 3) exactly.
funnel :: Int -> Meas Double
funnel k = do
  v <- sample (normal 0 3)
  xs <- replicateM k (sample (normal 0 1))
  scoreLog (Exp (sum [normalLogPdf 0 (exp (v / 2)) x - normalLogPdf 0 1 x | x <- xs]))
  return v

-- | The default mixture with the slice updates at a fixed half share, so the
-- slice updates (and their scale groups) are exercised on every model.
sliceSettings :: Word64 -> SamplerSettings
sliceSettings seed = (settings seed) {ssKernel = SliceMixture 0.5}

-- | A hierarchical normal model with informative groups (non-centred in
-- the tree's coordinates, so μ, τ and the θ's move only jointly):
-- μ ~ N(0, 5), τ ~ half-N(2), θ_j ~ N(μ, τ), y_j ~ N(θ_j, 0.5).  Returns
-- (μ, τ).
hierTau :: [Double] -> Meas (Double, Double)
hierTau ys = do
  mu <- sample (normal 0 5)
  tau <- sample (halfNormal 2)
  thetas <- replicateM (length ys) (sample (normal mu tau))
  scoreLog (Exp (sum [normalLogPdf th hierSigma y | (th, y) <- zip thetas ys]))
  return (mu, tau)

hierYs :: [Double]
hierYs = [2.8, -1.3, 0.4, 3.9, 1.1, -0.6, 2.2, 5.0]

-- | 30 groups: 31 transported sites, more than 'maxMatrixSites', so S is
-- diagonal and the joint transport of μ and τ is the wide one.
hierYs30 :: [Double]
hierYs30 = [1.5 + 2.5 * sin (1.7 * fromIntegral j) | j <- [1 .. 30 :: Int]]

hierSigma :: Double
hierSigma = 0.5

-- | Posterior mean and SD of μ and τ of 'hierTau' by quadrature of the
-- θ-marginalised density N(μ; 0, 5)·half-N(τ; 2)·∏ N(y_j; μ, √(σ² + τ²))
-- on a fine grid (midpoint rule; the density is smooth and negligible
-- outside the box).
hierReference :: [Double] -> ((Double, Double), (Double, Double))
hierReference ys =
  let mus = [-8 + 16 * (fromIntegral i + 0.5) / 800 | i <- [0 .. 799 :: Int]]
      taus = [12 * (fromIntegral i + 0.5) / 1200 | i <- [0 .. 1199 :: Int]]
      logp mu tau =
        normalLogPdf 0 5 mu + normalLogPdf 0 2 tau
          + sum [normalLogPdf mu (sqrt (hierSigma * hierSigma + tau * tau)) y | y <- ys]
      pts = [(mu, tau, logp mu tau) | mu <- mus, tau <- taus]
      top = maximum [l | (_, _, l) <- pts]
      ws = [(mu, tau, exp (l - top)) | (mu, tau, l) <- pts]
      z = sum [w | (_, _, w) <- ws]
      moment f = sum [w * f mu tau | (mu, tau, w) <- ws] / z
      mMu = moment (\mu _ -> mu)
      mTau = moment (\_ tau -> tau)
  in ( (mMu, sqrt (moment (\mu _ -> (mu - mMu) ^ (2 :: Int)))),
       (mTau, sqrt (moment (\_ tau -> (tau - mTau) ^ (2 :: Int)))) )

-- | 'agrees' as a verdict, for the deliberately wrong sampler.
agreesWith :: (Double, Double) -> [[Double]] -> Bool
agreesWith truth chains =
  let (mcse, meanError, logSdError, relSdMcse) = agreement truth chains
  in mcse < 0.1 * snd truth && meanError < 4 * mcse && logSdError < 4 * relSdMcse

-- | Transported hyper moves at a fixed share (slice share 0.2, transport
-- 0.4), so they are built and used whatever the Gaussian approximation's
-- spread.
transportSettings :: Word64 -> SamplerSettings
transportSettings seed = (settings seed) {ssKernel = TransportMixture 0.2 0.4}

eightSchools :: Data -> Meas Draw
eightSchools d = do
  let ys = reals "y" d
      sigmas = reals "sigma" d
  mu <- sample (normal 0 5)
  tau <- sample (abs <$> cauchy 0 5)
  thetaTrans <- replicateM (int "J" d) (sample (normal 0 1))
  let theta = [mu + tau * t | t <- thetaTrans]
  sequence_ [score (normalPdf th s y) | (th, s, y) <- zip3 theta sigmas ys]
  return (draw [scalar "mu" mu, scalar "tau" tau, vector "theta" theta])

eightSchoolsData :: Data
eightSchoolsData = either error id $ dataFromValue $ A.object
  [ (A..=) "J" (8 :: Int)
  , (A..=) "y" [28, 8, -3, 7, -1, 1, 18, 12 :: Double]
  , (A..=) "sigma" [15, 10, 16, 11, 9, 11, 10, 18 :: Double] ]

spec :: Spec
spec = do
  describe "default kernel recovers conjugate posteriors" $ do
    it "normal-normal" $ do
      let prec = 1 / 4 + 5 / 2.25
          m = (1 / 4 + sum [2.1, 3.4, 1.7, 2.9, 4.0] / 2.25) / prec
      fitChains (settings 11) normalNormal >>= agrees (m, sqrt (1 / prec))
    it "beta-Bernoulli" $ fitChains (settings 12) betaBernoulli >>= agrees (9 / 15, sqrt (9 * 6 / (225 * 16)))
    it "gamma-Poisson" $ fitChains (settings 13) gammaPoisson >>= agrees (22 / 6, sqrt 22 / 6)
    it "a discrete latent choice (Gaussian mixture)" $ do
      let like mu = normalPdf mu (sqrt 2) 0.5
          p = 0.3 * like 2 / (0.3 * like 2 + 0.7 * like (-2))
      fitChains (settings 14) mixture >>= probabilityAgrees p
    it "a changing number of sites" $ do
      let w k = normalPdf 0 (sqrt (fromIntegral k + 2)) 1
          p k = w k / sum (map w [0 .. 2 :: Int])
      forM_ [0, 2] $ \k -> fitChains (settings 15) (dimension k) >>= probabilityAgrees (p k)

  describe "default kernel on a posterior correlated at -0.999" $ do
    -- y_i ~ N(a + b x_i, 1), x_i = 100 … 109, a, b ~ N(0, 10²) independently:
    -- the posterior is Gaussian with precision P = I/100 + XᵀX, mean P⁻¹Xᵀy.
    let xs = [100 .. 109] :: [Double]
        ys = [2 + 0.5 * x + e | (x, e) <- zip xs [0.3, -1.1, 0.4, 0.9, -0.2, 0.0, 1.3, -0.7, 0.5, -0.4]]
        sxx = sum (map (^ (2 :: Int)) xs) + 0.01
        sx = sum xs
        s1 = fromIntegral (length xs) + 0.01
        det = s1 * sxx - sx * sx
        -- covariance = P⁻¹
        (vaa, vbb, vab) = (sxx / det, s1 / det, -sx / det)
        (ty, txy) = (sum ys, sum (zipWith (*) xs ys))
        (ma, mb) = (vaa * ty + vab * txy, vab * ty + vbb * txy)
        regression which = do
          a <- sample (normal 0 10)
          b <- sample (normal 0 10)
          mapM_ (\(x, y) -> score (normalPdf (a + b * x) 1 y)) (zip xs ys)
          return (if which then a else b)
    it "has the correlation this test claims" $
      vab / sqrt (vaa * vbb) `shouldSatisfy` (< -0.999)
    it "intercept" $ fitChains (settings 31) (regression True) >>= agrees (ma, sqrt vaa)
    it "slope" $ fitChains (settings 31) (regression False) >>= agrees (mb, sqrt vbb)

  describe "upstream-semantics mh kernel" $
    it "normal-normal" $ do
      let prec = 1 / 4 + 5 / 2.25
          m = (1 / 4 + sum [2.1, 3.4, 1.7, 2.9, 4.0] / 2.25) / prec
      fitChains ((settings 16) {ssKernel = UpstreamMH 0.5}) normalNormal >>= agrees (m, sqrt (1 / prec))

  describe "slice updates (share fixed at 0.5) recover known posteriors" $ do
    it "normal-normal" $ do
      let prec = 1 / 4 + 5 / 2.25
          m = (1 / 4 + sum [2.1, 3.4, 1.7, 2.9, 4.0] / 2.25) / prec
      fitChains (sliceSettings 41) normalNormal >>= agrees (m, sqrt (1 / prec))
    it "gamma-Poisson" $ fitChains (sliceSettings 42) gammaPoisson >>= agrees (22 / 6, sqrt 22 / 6)
    it "a discrete latent choice (Gaussian mixture)" $ do
      let like mu = normalPdf mu (sqrt 2) 0.5
          p = 0.3 * like 2 / (0.3 * like 2 + 0.7 * like (-2))
      fitChains (sliceSettings 43) mixture >>= probabilityAgrees p
    it "a changing number of sites" $ do
      let w k = normalPdf 0 (sqrt (fromIntegral k + 2)) 1
          p k = w k / sum (map w [0 .. 2 :: Int])
      forM_ [0, 2] $ \k -> fitChains (sliceSettings 44) (dimension k) >>= probabilityAgrees (p k)
    it "Neal's funnel with 2 latent x's: v ~ N(0, 3)" $
      fitChains (sliceSettings 45) (funnel 2) >>= agrees (0, 3)

  describe "default kernel on Neal's funnel (d = 10)" $ do
    rs <- runIO (sampleChains ((settings 46) {ssWarmup = 4000, ssThin = 100}) (funnel 9))
    it "turns the slice updates on (the Gaussian approximation is poor there)" $
      all (\r -> maybe False (> 0.2) (lookup "weight_slice" (crTuning r))) rs `shouldBe` True
    it "recovers the log-scale's marginal N(0, 3)" $ agrees (0, 3) (map crDraws rs)

  describe "transported hyper moves (share fixed at 0.4)" $ do
    let ((muMean, muSd), (tauMean, tauSd)) = hierReference hierYs
    rs <- runIO (sampleChains (transportSettings 47) (hierTau hierYs))
    broken <- runIO (sampleChains ((transportSettings 47) {ssKernel = BrokenTransportMixture 0.2 0.4}) (hierTau hierYs))
    it "are built on two hyper sites (the model has μ and τ)" $
      all (\r -> lookup "transport_hypers" (crTuning r) == Just 2) rs `shouldBe` True
    it "transport the other sites with a full-matrix S at most grid nodes" $
      all (\r -> maybe False (>= 17) (lookup "transport_matrix_nodes" (crTuning r))) rs `shouldBe` True
    it "recover τ's posterior (quadrature reference)" $
      agrees (tauMean, tauSd) (map (map snd . crDraws) rs)
    it "recover μ's posterior (quadrature reference)" $
      agrees (muMean, muSd) (map (map fst . crDraws) rs)
    it "the same check fails with the move's Jacobian dropped" $
      agreesWith (tauMean, tauSd) (map (map snd . crDraws) broken) `shouldBe` False
    it "add a joint transport of the scale site τ and a partner (half the transported updates)" $
      all (\r -> all (isJust . (`lookup` crTuning r)) ["transport_joint_scale_site", "transport_joint_partner"]
                 && maybe False (>= 10) (lookup "transport_joint_scale_score" (crTuning r))) rs `shouldBe` True
    it "on Neal's funnel (2 x's), v ~ N(0, 3)" $
      fitChains (transportSettings 48) (funnel 2) >>= agrees (0, 3)

  describe "transported hyper moves with 30 groups (S diagonal: the wide joint transport)" $ do
    let ((muMean, muSd), (tauMean, tauSd)) = hierReference hierYs30
    rs <- runIO (sampleChains (transportSettings 49) (hierTau hierYs30))
    it "add a joint transport of μ and τ, the two hyper candidates" $
      all (\r -> lookup "transport_joint_wide" (crTuning r) == Just 1
                 && lookup "transport_hypers" (crTuning r) == Just 2) rs `shouldBe` True
    it "recover τ's posterior (quadrature reference)" $
      agrees (tauMean, tauSd) (map (map snd . crDraws) rs)
    it "recover μ's posterior (quadrature reference)" $
      agrees (muMean, muSd) (map (map fst . crDraws) rs)

  describe "eight schools (non-centred) against posteriordb's reference" $ do
    ref <- runIO loadReference
    chains <- runIO (sampleChains (defaultSettings {ssSeed = 8}) (eightSchools eightSchoolsData))
    let byName = Map.fromListWith (flip (++))
          [ (n, [vs]) | c <- chains
          , (n, vs) <- zip names (transposeDraws (crDraws c)) ]
        names = concatMap scalarNames (drawFields (head (crDraws (head chains))))
        -- the same draws with every deviation from the pooled mean widened
        -- by 10%: a deliberately biased sampler (SD 10% too wide)
        widened = Map.map (\cs -> let m = mean (concat cs) in map (map (\x -> m + 1.1 * (x - m))) cs) byName
    forM_ (Map.toList ref) $ \(name, r) ->
      it name $ do
        let cs = Map.findWithDefault [] name byName
        length cs `shouldBe` 4
        referenceFailures r cs `shouldBe` []
    it "a sampler whose SD is 10% too wide fails the same check" $ do
      let failing = [ n | (n, r) <- Map.toList ref
                        , any ("sd" `isPrefixOf`) (referenceFailures r (Map.findWithDefault [] n widened)) ]
      failing `shouldSatisfy` (\ns -> length ns >= 5)

  describe "runs" $ do
    it "are reproducible for a seed and differ between seeds" $ do
      a <- fitChains (settings 21) normalNormal
      b <- fitChains (settings 21) normalNormal
      c <- fitChains (settings 22) normalNormal
      a `shouldBe` b
      a `shouldNotBe` c
    it "fail with NoValidStart when every prior draw has weight zero" $
      (sampleChains (settings 1) (sample (normal 0 1) >>= \x -> score 0 >> return x) >>= evaluate . length)
        `shouldThrow` (\(NoValidStart n) -> n == ssMaxInitTries (settings 1))
    it "count evaluations with invalid weights" $ do
      let halfSpace = do
            x <- sample (normal 0 1)
            score (if x > 0 then 1 else 0 / 0)
            return x
      rs <- sampleChains (settings 23) halfSpace
      all (\r -> crInvalidWeights r > 0 && crInvalidWeights r < crEvaluations r) rs `shouldBe` True
      agrees (sqrt (2 / pi), sqrt (1 - 2 / pi)) (map crDraws rs)

  describe "a chain continued from its checkpoint (shown and read back)" $ do
    let s0 = (transportSettings 47) {ssDraws = 40, ssBudgetDraws = Just 40}
        s1 = s0 {ssDraws = 100}
    firsts <- runIO (sampleChainsFrom s0 (repeat Nothing) (hierTau hierYs))
    let cps = map (Just . read . show . snd) firsts
    continued <- runIO (sampleChainsFrom s1 cps (hierTau hierYs))
    fresh <- runIO (sampleChains s1 (hierTau hierYs))
    it "has transported hyper moves to carry over" $
      all (\(r, _) -> lookup "transport_hypers" (crTuning r) == Just 2) firsts `shouldBe` True
    it "gives the fresh run's later draws" $
      map (crDraws . fst) continued `shouldBe` map (drop 40 . crDraws) fresh
    it "ends with the fresh run's statistics" $
      map (\(r, _) -> (crAcceptance r, crEvaluations r, crTuning r)) continued
        `shouldBe` map (\r -> (crAcceptance r, crEvaluations r, crTuning r)) fresh
  where
    transposeDraws ds = foldr (zipWith (:)) (repeat []) (map (concatMap fieldValues . drawFields) ds)


-- | Smallest bulk effective sample size (mean and SD) a fit must reach for
-- the reference check to be able to see a 10% error in an SD: the check's
-- tolerance is 4 combined relative MCSEs, √(1/(2·ESS)) each for a
-- near-normal marginal, which is below 10% once ESS ≳ 900 (with the
-- reference's 10,000 independent draws).
minimumEss :: Double
minimumEss = 1000

-- | Why the draws of one scalar (chains) disagree with posteriordb's
-- reference moments ([] = they agree).  Tolerances are 4 Monte Carlo
-- standard errors, combined over the fit and the reference, no fixed
-- percentage:
--
-- * mean: batch-means MCSE of the fit; the reference's n independent draws
--   give sd/√n;
-- * SD: the relative MCSE of s is MCSE(mean of (x − m)²) / (2 s²), batch
--   means on the squared deviations (so heavy tails widen it honestly); the
--   reference's, for n independent draws with the same kurtosis, is the
--   fit's per-draw figure scaled to n draws;
-- * both ESS (variance / MCSE²) must reach 'minimumEss', so a poorly mixing
--   fit cannot pass on a huge MCSE.
referenceFailures :: Ref -> [[Double]] -> [String]
referenceFailures (Ref rMean rSd rN) cs =
  [ "ess(mean) " ++ show essMean | essMean < minimumEss ]
    ++ [ "ess(sd) " ++ show essSd | essSd < minimumEss ]
    ++ [ "mean " ++ show m | abs (m - rMean) > 4 * sqrt (mcse * mcse + rSd * rSd / rN) ]
    ++ [ "sd " ++ show s | abs (log (s / rSd)) > 4 * sqrt (relSd * relSd + relSdRef * relSdRef) ]
  where
    xs = concat cs
    m = mean xs
    s = sampleSd xs
    mcse = pooledMcse 20 cs
    sq = map (map (\x -> (x - m) ^ (2 :: Int))) cs
    sqMcse = pooledMcse 20 sq
    relSd = sqMcse / (2 * s * s)
    -- per-draw variance of (x − m)², i.e. (μ₄ − σ⁴), scaled to the reference
    relSdRef = sqrt (variance (concat sq) / rN) / (2 * s * s)
    essMean = s * s / (mcse * mcse)
    essSd = variance (concat sq) / (sqMcse * sqMcse)

loadReference :: IO (Map.Map String Ref)
loadReference = do
  bytes <- BL.readFile "test/fixtures/eight_schools.json"
  either fail return (A.eitherDecode bytes)

-- | Reference moments of one scalar: mean, SD and number of independent draws.
data Ref = Ref Double Double Double

instance A.FromJSON Ref where
  parseJSON = A.withObject "reference" $ \o -> Ref <$> o A..: "mean" <*> o A..: "sd" <*> o A..: "n"

