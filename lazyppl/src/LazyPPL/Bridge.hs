{-# LANGUAGE Trustworthy #-}
-- | Glue between a model and ppl-audit: reading the scope's JSON data and
-- building the draw a model reports (SPEC §2.2, §2.3).
--
-- Data accessors fail with 'error' and a message starting
-- @data field "NAME" …@, which the harness reports to the user.
module LazyPPL.Bridge
  ( -- * Data
    Data
  , dataFromValue
  , int
  , real
  , ints
  , reals
  , intMatrix
  , realMatrix
    -- * Draws
  , Field
  , Draw
  , scalar
  , vector
  , matrix
  , draw
  , drawFields
  , fieldName
  , fieldShape
  , fieldValues
  , scalarNames
  , validBaseName
  , maxScalars
  ) where

import Control.DeepSeq (NFData (..))
import qualified Data.Aeson as A
import qualified Data.Aeson.Key as K
import qualified Data.Aeson.KeyMap as KM
import Data.Char (isAsciiLower, isAsciiUpper, isDigit)
import Data.List (intercalate)
import qualified Data.Scientific as S
import qualified Data.Vector as V

-- | The data of one scope: a JSON object of numbers, lists and nested lists.
newtype Data = Data (KM.KeyMap A.Value)

-- | Wrap a JSON value as 'Data'; it must be an object.
dataFromValue :: A.Value -> Either String Data
dataFromValue (A.Object o) = Right (Data o)
dataFromValue _ = Left "the data must be a JSON object"

field :: String -> Data -> A.Value
field name (Data o) = case KM.lookup (K.fromString name) o of
  Just v -> v
  Nothing -> failField name "is missing"

failField :: String -> String -> a
failField name what = error ("data field " ++ show name ++ " " ++ what)

asReal :: String -> String -> A.Value -> Double
asReal name what v = case v of
  A.Number n -> S.toRealFloat n
  _ -> failField name ("must be " ++ what)

asInt :: String -> String -> A.Value -> Int
asInt name what v = case v of
  A.Number n | Just i <- S.toBoundedInteger n -> i
  A.Number n
    | S.isInteger n -> failField name ("is out of range: " ++ show n)
    | otherwise -> case S.floatingOrInteger n :: Either Double Integer of
        Right i | i >= toInteger (minBound :: Int) && i <= toInteger (maxBound :: Int) -> fromInteger i
        _ -> failField name ("must be " ++ what)
  _ -> failField name ("must be " ++ what)

asList :: String -> String -> A.Value -> [A.Value]
asList name what v = case v of
  A.Array xs -> V.toList xs
  _ -> failField name ("must be " ++ what)

-- | An integer field (3 and 3.0 are both accepted).
int :: String -> Data -> Int
int name d = asInt name "an integer" (field name d)

-- | A real field (any JSON number).
real :: String -> Data -> Double
real name d = asReal name "a number" (field name d)

-- | A list of integers.
ints :: String -> Data -> [Int]
ints name d = map (asInt name what) (asList name what (field name d))
  where
    what = "a list of integers"

-- | A list of numbers.
reals :: String -> Data -> [Double]
reals name d = map (asReal name what) (asList name what (field name d))
  where
    what = "a list of numbers"

-- | A matrix of integers: a list of equally long rows.
intMatrix :: String -> Data -> [[Int]]
intMatrix name d = rectangular name (map (map (asInt name what) . asList name what) (asList name what (field name d)))
  where
    what = "a list of lists of integers"

-- | A matrix of numbers: a list of equally long rows.
realMatrix :: String -> Data -> [[Double]]
realMatrix name d = rectangular name (map (map (asReal name what) . asList name what) (asList name what (field name d)))
  where
    what = "a list of lists of numbers"

rectangular :: String -> [[a]] -> [[a]]
rectangular name rows = case map length rows of
  (n : ns) | any (/= n) ns -> failField name "must have rows of equal length"
  _ -> rows

-- | One named quantity of a draw: a scalar, vector or matrix, values stored
-- row-major.
data Field = Field
  { fieldName :: String
    -- ^ the base name, e.g. @"theta"@
  , fieldShape :: [Int]
    -- ^ @[]@ for a scalar, @[n]@ for a vector, @[rows, cols]@ for a matrix
  , fieldValues :: [Double]
    -- ^ the values, row-major
  }
  deriving (Eq, Show)

instance NFData Field where
  rnf (Field n s v) = rnf n `seq` rnf s `seq` rnf v

-- | What a model reports from one state: named fields, in order.
newtype Draw = Draw [Field]
  deriving (Eq, Show)

instance NFData Draw where
  rnf (Draw fs) = rnf fs

-- | A scalar field.
scalar :: String -> Double -> Field
scalar name x = Field name [] [x]

-- | A vector field, reported as @name[1]@, @name[2]@, … (1-based).
vector :: String -> [Double] -> Field
vector name xs = Field name [length xs] xs

-- | A matrix field given as rows, reported as @name[1,1]@, @name[1,2]@, …
-- (row-major, 1-based).  Rows must have equal length.
matrix :: String -> [[Double]] -> Field
matrix name rows = case map length rows of
  [] -> Field name [0, 0] []
  (c : cs)
    | any (/= c) cs -> error ("matrix " ++ show name ++ ": rows must have equal length")
    | otherwise -> Field name [length rows, c] (concat rows)

-- | Most scalars a draw may report, all fields together; ppl-audit's
-- @workers.fit.MAX_SCALARS@ is the same number.
maxScalars :: Int
maxScalars = 2000

-- | Collect fields into a draw.  Names must be distinct SPEC §2.3 base names
-- (a letter or underscore, then letters, digits or underscores; at most 100
-- characters), and the draw may hold at most 'maxScalars' scalars.
draw :: [Field] -> Draw
draw fs = case duplicates (map fieldName fs) of
  (n : _) -> error ("draw: the name " ++ show n ++ " is used twice")
  []
    | any (null . fieldName) fs -> error "draw: a field has an empty name"
    | (n : _) <- filter (not . validBaseName) (map fieldName fs) ->
        error ("draw: " ++ show n ++ " is not a parameter name (SPEC 2.3: a letter or "
               ++ "underscore, then letters, digits or underscores, e.g. mu or theta)")
    | total > maxScalars ->
        error ("draw: " ++ show total ++ " scalars, more than the limit of "
               ++ show maxScalars)
    | otherwise -> Draw fs
  where
    total = sum [product (fieldShape f) | f <- fs]
    duplicates [] = []
    duplicates (n : ns) = [n | n `elem` ns] ++ duplicates (filter (/= n) ns)

-- | A SPEC §2.3 base name: @[A-Za-z_][A-Za-z0-9_]*@, at most 100 characters.
validBaseName :: String -> Bool
validBaseName name = case name of
  c : cs -> length name <= 100 && (isAsciiLetter c || c == '_')
              && all (\x -> isAsciiLetter x || isDigit x || x == '_') cs
  [] -> False
  where
    isAsciiLetter x = isAsciiUpper x || isAsciiLower x

-- | The fields of a draw, in order.
drawFields :: Draw -> [Field]
drawFields (Draw fs) = fs

-- | Scalar names of a field, 1-based and row-major: @theta[1]@, @beta[1,2]@.
scalarNames :: Field -> [String]
scalarNames (Field name shape _) = case shape of
  [] -> [name]
  _ -> [name ++ "[" ++ intercalate "," (map show ix) ++ "]" | ix <- mapM (\n -> [1 .. n]) shape]
