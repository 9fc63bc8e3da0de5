-- The Main the bridge generates (docs/ARCHITECTURE.md).
module Main (main) where
import Model (model)
import LazyPPL.Harness (runHarness)
main :: IO ()
main = runHarness model
