{-# LANGUAGE Unsafe #-}
{-# LANGUAGE OverloadedStrings #-}
-- | The trusted driver linked with a user's model (docs/ARCHITECTURE.md,
-- "Harness protocol").  It reads the data and sampler settings as JSON on
-- stdin, runs the chains in parallel, and writes the draws as JSON on stdout.
--
-- This module is marked @Unsafe@ on purpose: it performs IO, and Safe Haskell
-- then refuses to let an untrusted (-XSafe) model import it even if an import
-- allow-list were wrong.
--
-- Exit codes: 0 success; 3 a user error (a data field missing or ill-typed,
-- an 'error' or arithmetic/pattern failure in the model, no valid start
-- state, a draw whose layout changes), with one stderr line
-- @ppl-audit: MESSAGE@; 2 malformed harness input (a caller bug), same format;
-- anything else is a crash.
module LazyPPL.Harness
  ( runHarness
  , runHarnessOn
  , HarnessFailure (..)
  ) where

import Control.Exception
import qualified Data.Aeson as A
import qualified Data.Aeson.Encoding as E
import qualified Data.Aeson.Key as K
import qualified Data.Aeson.KeyMap as KM
import qualified Data.ByteString.Lazy as BL
import qualified Data.Scientific as S
import qualified Data.Text as T
import Data.Maybe (fromMaybe)
import Data.Word (Word64)
import GHC.Clock (getMonotonicTime)
import System.Exit (ExitCode (..), exitWith)
import System.IO (hPutStrLn, hSetBinaryMode, stderr, stdin, stdout)
import Text.Read (readMaybe)

import LazyPPL
import LazyPPL.Bridge

-- | Why a harness run did not produce draws.
data HarnessFailure
  = -- | the model or its data is at fault (exit code 3)
    UserFailure String
  | -- | the harness input is malformed (exit code 2)
    InputFailure String
  deriving (Eq, Show)

-- | Read the protocol input from stdin, sample, write the output to stdout,
-- and exit with the protocol's exit code.
runHarness :: (Data -> Meas Draw) -> IO ()
runHarness model = do
  hSetBinaryMode stdin True
  hSetBinaryMode stdout True
  input <- BL.getContents
  result <- runHarnessOn model input
  case result of
    Right out -> BL.putStr out
    Left (UserFailure msg) -> failWith 3 msg
    Left (InputFailure msg) -> failWith 2 ("invalid harness input: " ++ msg)
  where
    failWith code msg = do
      hPutStrLn stderr ("ppl-audit: " ++ oneLine msg)
      exitWith (ExitFailure code)
    oneLine = unwords . lines

-- | The harness as a function from the input JSON to the output JSON.
runHarnessOn :: (Data -> Meas Draw) -> BL.ByteString -> IO (Either HarnessFailure BL.ByteString)
runHarnessOn model input = case parseInput input of
  Left msg -> return (Left (InputFailure msg))
  Right (d, settings, kernelLabel, resumes, withCheckpoints) -> do
    t0 <- getMonotonicTime
    result <- try (sampleChainsFrom settings resumes (model d))
    t1 <- getMonotonicTime
    case result of
      Left e
        | Just (BadCheckpoint msg) <- fromException e -> return (Left (InputFailure msg))
        | isUserError e -> return (Left (UserFailure (userMessage e)))
        | otherwise -> throwIO e
      Right ran -> let chains = map fst ran in return $ case checkLayouts chains of
        Left msg -> Left (UserFailure msg)
        Right (names, layout) ->
          -- a checkpoint longer than the limit is left out: that chain (so the
          -- fit) cannot be continued, and a later look refits it
          let checkpointText cp lim = let txt = show cp in if length txt > lim then Nothing else Just txt
              checkpoints = [withCheckpoints >>= checkpointText cp | (_, cp) <- ran]
          in Right (encodeOutput settings kernelLabel (t1 - t0) names layout chains checkpoints)

-- | Exceptions that mean the user's program (or its data) is at fault.
isUserError :: SomeException -> Bool
isUserError e =
  any ($ e)
    [ is (undefined :: ErrorCall)
    , is (undefined :: ArithException)
    , is (undefined :: PatternMatchFail)
    , is (undefined :: ArrayException)
    , is (undefined :: NoValidStart)
    ]
  where
    is :: Exception x => x -> SomeException -> Bool
    is proxy ex = case fromException ex of
      Just x -> const True (x `asTypeOf` proxy)
      Nothing -> False

userMessage :: SomeException -> String
userMessage e
  | Just (ErrorCall msg) <- fromException e = msg
  | Just (NoValidStart n) <- fromException e =
      "no valid starting state: " ++ show n
        ++ " draws from the prior all gave a weight that is zero, NaN or infinite"
  | Just (PatternMatchFail msg) <- fromException e = "pattern match failure in the model: " ++ msg
  | otherwise = "the model failed: " ++ displayException e

-- | Base names and shapes of a draw's fields, in order.
type Layout = [(String, [Int])]

-- | The scalar names and layout shared by every draw, or a message if a
-- later draw's layout differs from the first one.
checkLayouts :: [ChainResult Draw] -> Either String ([String], Layout)
checkLayouts chains = case concatMap crDraws chains of
  [] -> Right ([], [])
  (first : rest) ->
    let layout = layoutOf first
    in case filter ((/= layout) . layoutOf) rest of
         [] -> Right (concatMap scalarNames (drawFields first), layout)
         (other : _) ->
           Left ("the draw's fields changed between states: first " ++ describe layout
                 ++ ", later " ++ describe (layoutOf other))
  where
    layoutOf dr = [(fieldName f, fieldShape f) | f <- drawFields dr]
    describe l = unwords [n ++ show sh | (n, sh) <- l]

-- | The data, the sampler settings, the kernel's label, a checkpoint per
-- chain to continue from (@"resume"@: the strings of an earlier run's
-- @"checkpoint"@s; else none) and, if the chains' checkpoints are to be
-- written, the most characters one may have (@"checkpoint_limit"@, default
-- 8 MB: gp_pois_regr's are 0.7 MB).
parseInput :: BL.ByteString -> Either String (Data, SamplerSettings, String, [Maybe Checkpoint], Maybe Int)
parseInput bytes = do
  v <- either (Left . ("not JSON: " ++)) Right (A.eitherDecode bytes)
  o <- case v of
    A.Object o -> Right o
    _ -> Left "the input must be a JSON object"
  d <- maybe (Left "missing \"data\"") dataFromValue (KM.lookup "data" o)
  seed <- wordField o "seed"
  chains <- intField o "chains" 1 1 256
  warmup <- intField o "warmup" 0 0 maxBound
  draws <- intField o "draws" 1 1 maxBound
  budgetDraws <- intField o "budget_draws" draws 1 maxBound
  thin <- intField o "thin" 1 1 maxBound
  tries <- intField o "max_init_tries" 1000 1 maxBound
  kernelLabel <- case KM.lookup "kernel" o of
    Nothing -> Right "default"
    Just (A.String k) -> Right (T.unpack k)
    Just _ -> Left "\"kernel\" must be a string"
  p <- probField o "mh_p" 0.1
  q <- probField o "mh_q" 0.1
  kernel <- case kernelLabel of
    "default" -> Right AdaptiveKernel
    "mh" -> Right (UpstreamMH p)
    "mhirreducible" -> Right (UpstreamIrreducible p q)
    "pcn" -> Right PCNKernel
    other -> Left ("unknown kernel " ++ show other ++ " (default, mh, mhirreducible, pcn)")
  limit <- intField o "checkpoint_limit" (8 * 1024 * 1024) 0 maxBound
  withCheckpoints <- case KM.lookup "checkpoint" o of
    Nothing -> Right Nothing
    Just (A.Bool b) -> Right (if b then Just limit else Nothing)
    Just _ -> Left "\"checkpoint\" must be true or false"
  resumes <- case KM.lookup "resume" o of
    Nothing -> Right (replicate chains Nothing)
    Just (A.Array arr)
      | length arr /= chains -> Left "\"resume\" must hold one checkpoint per chain"
      | otherwise -> mapM checkpointOf (zip [1 :: Int ..] (foldr (:) [] arr))
    Just _ -> Left "\"resume\" must be a list of checkpoints"
  return ( d, SamplerSettings kernel chains warmup draws thin seed tries (Just budgetDraws)
         , kernelLabel, resumes, withCheckpoints )
  where
    -- read lazily, in the chain's own thread (the chains' checkpoints are read in
    -- parallel: gp_pois_regr's are ~0.7 MB each, mostly transports); unreadable
    -- text is a 'BadCheckpoint', reported as malformed input like the others
    checkpointOf (k, A.String t) =
      Right (Just (fromMaybe (throw (BadCheckpoint ("chain " ++ show k ++ "'s checkpoint is not readable")))
                             (readMaybe (T.unpack t))))
    checkpointOf (k, _) = Left ("chain " ++ show k ++ "'s checkpoint must be a string")
    number o key = case KM.lookup (K.fromString key) o of
      Nothing -> Right Nothing
      Just (A.Number n) -> Right (Just n)
      Just _ -> Left (show key ++ " must be a number")
    intField o key def lo hi = do
      mn <- number o key
      case mn of
        Nothing -> Right def
        Just n -> case S.toBoundedInteger n of
          Just i | i >= lo && i <= hi -> Right i
          _ -> Left (show key ++ " must be an integer in [" ++ show lo ++ ", " ++ show hi ++ "]")
    wordField o key = do
      mn <- number o key
      case mn of
        Nothing -> Right 0
        Just n
          | S.isInteger n, Right i <- (S.floatingOrInteger n :: Either Double Integer) ->
              Right (fromInteger (i `mod` 18446744073709551616) :: Word64)
          | otherwise -> Left (show key ++ " must be an integer")
    probField o key def = do
      mn <- number o key
      case mn of
        Nothing -> Right def
        Just n
          | let x = S.toRealFloat n, x > 0, x <= 1 -> Right x
          | otherwise -> Left (show key ++ " must be in (0, 1]")

encodeOutput :: SamplerSettings -> String -> Double -> [String] -> Layout -> [ChainResult Draw] -> [Maybe String] -> BL.ByteString
encodeOutput s kernelLabel seconds names layout chains checkpoints =
  E.encodingToLazyByteString $ A.pairs $
    "names" A..= names
      <> E.pair "shapes" (E.pairs (mconcat [K.fromString n A..= shape | (n, shape) <- layout]))
      <> E.pair "chains" (E.list chainEncoding (zip chains checkpoints))
      <> "kernel" A..= kernelLabel
      <> "warmup" A..= ssWarmup s
      <> "draws" A..= ssDraws s
      <> "budget_draws" A..= fromMaybe (ssDraws s) (ssBudgetDraws s)
      <> "thin" A..= ssThin s
      <> "seed" A..= ssSeed s
      <> "seconds" A..= seconds
  where
    chainEncoding (c, cp) =
      A.pairs $
        E.pair "draws" (E.list (A.toEncoding . concatMap fieldValues . drawFields) (crDraws c))
          <> maybe mempty ("checkpoint" A..=) cp
          <> "acceptance" A..= crAcceptance c
          <> "evaluations" A..= crEvaluations c
          <> "invalid_weights" A..= crInvalidWeights c
          <> "init_tries" A..= crInitTries c
          <> "seconds" A..= crSeconds c
          <> E.pair "tuning" (E.pairs (mconcat [K.fromString k A..= v | (k, v) <- crTuning c]))
