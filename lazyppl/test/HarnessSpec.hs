{-# LANGUAGE OverloadedStrings #-}
-- | The harness protocol (docs/ARCHITECTURE.md), exercised in process.
module HarnessSpec (spec) where

import Control.Monad (replicateM)
import qualified Data.Aeson as A
import qualified Data.Aeson.KeyMap as KM
import qualified Data.ByteString.Lazy as BL
import Data.List (isPrefixOf)
import qualified Data.Vector as V
import Test.Hspec

import LazyPPL
import LazyPPL.Bridge
import LazyPPL.Distributions
import LazyPPL.Harness

eightSchools :: Data -> Meas Draw
eightSchools d = do
  let ys = reals "y" d
      sigmas = reals "sigma" d
  mu <- sample (normal 0 5)
  tau <- sample (halfCauchy 5)
  thetaTrans <- replicateM (int "J" d) (sample (normal 0 1))
  let theta = [mu + tau * t | t <- thetaTrans]
  sequence_ [score (normalPdf th s y) | (th, s, y) <- zip3 theta sigmas ys]
  return (draw [scalar "mu" mu, scalar "tau" tau, vector "theta" theta])

input :: [(A.Key, A.Value)] -> BL.ByteString
input overrides = A.encode (A.Object (KM.union (KM.fromList overrides) base))
  where
    base = KM.fromList
      [ ("data", A.object ["J" A..= (8 :: Int), "y" A..= [28, 8, -3, 7, -1, 1, 18, 12 :: Int]
                          , "sigma" A..= [15, 10, 16, 11, 9, 11, 10, 18 :: Int]])
      , ("seed", A.toJSON (42 :: Int)), ("chains", A.toJSON (3 :: Int))
      , ("warmup", A.toJSON (500 :: Int)), ("draws", A.toJSON (50 :: Int))
      , ("thin", A.toJSON (2 :: Int)), ("kernel", A.String "default") ]

run :: (Data -> Meas Draw) -> BL.ByteString -> IO (Either HarnessFailure A.Value)
run model bytes = fmap (either (error . show) id . A.eitherDecode) <$> runHarnessOn model bytes

success :: Either HarnessFailure A.Value -> IO A.Object
success (Right (A.Object o)) = return o
success other = expectationFailure ("expected success, got " ++ show other) >> return mempty

-- | The output without its wall-clock timings.
withoutTimings :: A.Value -> A.Value
withoutTimings (A.Object o) = A.Object (KM.map withoutTimings (KM.delete "seconds" o))
withoutTimings (A.Array xs) = A.Array (V.map withoutTimings xs)
withoutTimings v = v

userFailure :: String -> Either HarnessFailure A.Value -> Expectation
userFailure prefix r = case r of
  Left (UserFailure msg) | prefix `isPrefixOf` msg -> return ()
  other -> expectationFailure ("expected a user failure starting " ++ show prefix ++ ", got " ++ show other)

spec :: Spec
spec = do
  it "writes names, shapes, chains and settings" $ do
    o <- run eightSchools (input []) >>= success
    KM.lookup "names" o `shouldBe` Just (A.toJSON ("mu" : "tau" : ["theta[" ++ show i ++ "]" | i <- [1 .. 8 :: Int]]))
    KM.lookup "shapes" o `shouldBe` Just (A.object ["mu" A..= ([] :: [Int]), "tau" A..= ([] :: [Int]), "theta" A..= [8 :: Int]])
    KM.lookup "kernel" o `shouldBe` Just "default"
    KM.lookup "warmup" o `shouldBe` Just (A.toJSON (500 :: Int))
    case KM.lookup "chains" o of
      Just (A.Array cs) -> do
        V.length cs `shouldBe` 3
        V.forM_ cs $ \c -> case c of
          A.Object co -> do
            case KM.lookup "draws" co of
              Just (A.Array rows) -> do
                V.length rows `shouldBe` 50
                V.all (\r -> case r of A.Array xs -> V.length xs == 10; _ -> False) rows `shouldBe` True
              _ -> expectationFailure "no draws"
            mapM_ (\k -> KM.member k co `shouldBe` True)
              ["acceptance", "evaluations", "invalid_weights", "init_tries", "seconds", "tuning"]
          _ -> expectationFailure "chain is not an object"
      _ -> expectationFailure "no chains"
  it "gives identical output for identical input (apart from timings)" $ do
    a <- run eightSchools (input [])
    b <- run eightSchools (input [])
    fmap withoutTimings a `shouldBe` fmap withoutTimings b
  it "gives different draws for another seed" $ do
    a <- run eightSchools (input [])
    b <- run eightSchools (input [("seed", A.toJSON (43 :: Int))])
    fmap withoutTimings a `shouldNotBe` fmap withoutTimings b
  it "runs the upstream mh kernel" $ do
    o <- run eightSchools (input [("kernel", "mh"), ("mh_p", A.toJSON (0.2 :: Double))]) >>= success
    KM.lookup "kernel" o `shouldBe` Just "mh"
  it "reports a missing data field by name" $
    run eightSchools (input [("data", A.object ["J" A..= (8 :: Int), "y" A..= [1 :: Int]])])
      >>= userFailure "data field \"sigma\" is missing"
  it "reports an error raised by the model" $
    run (\_ -> sample (normal 0 1) >>= \x -> if x > -100 then error "boom" else return (draw [])) (input [])
      >>= userFailure "boom"
  it "reports a model with no valid start" $
    run (\_ -> score 0 >> return (draw [scalar "x" 1])) (input [])
      >>= userFailure "no valid starting state"
  it "reports a draw whose layout changes" $ do
    let model _ = do
          k <- sample (uniformdiscrete 2)
          return (draw [vector "v" (replicate (k + 1) 0)])
    run model (input []) >>= userFailure "the draw's fields changed"
  it "rejects malformed input" $ do
    r1 <- runHarnessOn eightSchools "not json"
    either (\e -> case e of InputFailure _ -> True; _ -> False) (const False) r1 `shouldBe` True
    r2 <- runHarnessOn eightSchools (input [("kernel", "nuts")])
    either (\e -> case e of InputFailure m -> "unknown kernel" `isPrefixOf` m; _ -> False) (const False) r2
      `shouldBe` True
    r3 <- runHarnessOn eightSchools (input [("thin", A.toJSON (0 :: Int))])
    either (\e -> case e of InputFailure _ -> True; _ -> False) (const False) r3 `shouldBe` True
  describe "continuing chains from their checkpoints" $ do
    let chainsOf o = case KM.lookup "chains" o of
          Just (A.Array cs) -> V.toList cs
          _ -> []
        field k (A.Object co) = KM.lookup k co
        field _ _ = Nothing
        rowsOf c = case field "draws" c of
          Just (A.Array rs) -> V.toList rs
          _ -> []
        checkpointsOf o = [cp | c <- chainsOf o, Just cp <- [field "checkpoint" c]]
        stats c = [field k c | k <- ["acceptance", "evaluations", "invalid_weights", "init_tries", "tuning"]]
        first overrides = run eightSchools (input (("checkpoint", A.Bool True) : overrides)) >>= success
        more cps overrides = run eightSchools (input ([("draws", A.toJSON (120 :: Int)), ("resume", A.toJSON cps)
                                                       , ("budget_draws", A.toJSON (50 :: Int))] ++ overrides))
        inputFailure prefix r = case r of
          Left (InputFailure msg) | prefix `isPrefixOf` msg -> return ()
          other -> expectationFailure ("expected an input failure starting " ++ show prefix ++ ", got " ++ show other)
    mapM_ (\kernel -> it ("gives a fresh run's later draws and statistics (kernel " ++ show kernel ++ ")") $ do
      a <- first [("kernel", kernel)]
      length (checkpointsOf a) `shouldBe` 3
      b <- more (checkpointsOf a) [("kernel", kernel)] >>= success
      fresh <- run eightSchools (input [ ("kernel", kernel), ("draws", A.toJSON (120 :: Int))
                                       , ("budget_draws", A.toJSON (50 :: Int))]) >>= success
      map (length . rowsOf) (chainsOf b) `shouldBe` [70, 70, 70]
      map rowsOf (chainsOf fresh) `shouldBe` zipWith (++) (map rowsOf (chainsOf a)) (map rowsOf (chainsOf b))
      map stats (chainsOf b) `shouldBe` map stats (chainsOf fresh)
      KM.lookup "budget_draws" b `shouldBe` Just (A.toJSON (50 :: Int)))
      ["default", "mh", "pcn"]
    it "refuses a checkpoint of other settings, another chain or another program" $ do
      a <- first []
      let cps = checkpointsOf a
      more cps [("seed", A.toJSON (43 :: Int))] >>= inputFailure "the checkpoint is of another chain"
      more (reverse cps) [] >>= inputFailure "the checkpoint is of another chain"
      more cps [("thin", A.toJSON (3 :: Int))] >>= inputFailure "the checkpoint is of another chain"
      more cps [("budget_draws", A.toJSON (60 :: Int))] >>= inputFailure "the checkpoint is of another chain"
      more cps [("draws", A.toJSON (50 :: Int))] >>= inputFailure "the checkpoint is not before"
      let other d = do
            mu <- sample (normal 0 6)
            _ <- sample (halfCauchy 5)
            _ <- replicateM (int "J" d) (sample (normal 0 1))
            return (draw [scalar "mu" mu])
      run other (input [ ("draws", A.toJSON (120 :: Int)), ("resume", A.toJSON cps)
                       , ("budget_draws", A.toJSON (50 :: Int))])
        >>= inputFailure "the checkpoint's state does not reproduce"
    it "leaves out a checkpoint longer than the limit (the fit is then refitted, not continued)" $ do
      a <- first [("checkpoint_limit", A.toJSON (100 :: Int))]
      checkpointsOf a `shouldBe` []
      b <- first []
      map (length . rowsOf) (chainsOf a) `shouldBe` map (length . rowsOf) (chainsOf b)
    it "refuses unreadable checkpoints and a wrong number of them" $ do
      a <- first []
      let cps = checkpointsOf a
      more (take 2 cps) [] >>= inputFailure "\"resume\" must hold one checkpoint per chain"
      more (A.String "Checkpoint {}" : drop 1 cps) [] >>= inputFailure "chain 1's checkpoint is not readable"
      more (A.toJSON (1 :: Int) : drop 1 cps) [] >>= inputFailure "chain 1's checkpoint must be a string"
