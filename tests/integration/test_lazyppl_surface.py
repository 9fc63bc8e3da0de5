"""What a user's LazyPPL program may import (issue 9, forgery F4) and that every shipped
LazyPPL program still compiles under the untrusted-module flags.

F4: a model that runs a sampler itself (``runChain``, ``mh*``/``wis*``, the ``Meas``
constructor) can resample an inner chain's draws and hand the harness a measure with
no ``score`` in it: the audit compares draws the program chose. The user module sees
``LazyPPL`` as the SPEC §2.2 surface only (``LazyPPL.Surface`` renamed by module
thinning); the trusted harness keeps the full module.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from haskell_bridge import fit_lazyppl, lazyppl_build
from haskell_bridge.compile import compile_untrusted_module
from haskell_bridge.lint import lint, normalise_source
from sandbox import Limits
from workers.errors import CompileError, ProgramRefused, ProgramRuntimeError

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("ghc") is None, reason="GHC is not installed"),
]

REPO = Path(__file__).resolve().parents[2]
LIMITS = Limits(cpu_seconds=120, memory_mb=1024, wall_seconds=120)
SMALL = dict(chains=2, warmup=50, draws=20, thin=1, kernel="default")
PRELUDE = ("module Model (model) where\n"
           "import LazyPPL\nimport LazyPPL.Distributions\nimport LazyPPL.Bridge\n")
INNER = """
inner :: Meas Double
inner = do
  x <- sample (normal 0 1)
  score (normalPdf x 1 3)
  return x
"""

#: Each runs inference inside the model; the construct GHC must name when refusing.
SELF_SAMPLING = {
    "runChain": (PRELUDE + INNER + """
model :: Data -> Meas Draw
model _ = do
  let xs = crDraws (runChain defaultSettings { ssDraws = 20 } inner 0)
  i <- sample (uniformdiscrete 20)
  return (draw [scalar "mu" (100 + xs !! i)])
""", "runChain"),
    "Meas constructor": (PRELUDE + INNER + """
model :: Data -> Meas Draw
model _ = case inner of
  Meas w -> return (draw [scalar "mu" 100])
""", "Meas"),
    "Prob constructor": (PRELUDE + """
model :: Data -> Meas Draw
model _ = sample (Prob (\\_ -> draw [scalar "mu" 100]))
""", "Prob"),
    "mhWith": (PRELUDE + INNER + """
model :: Data -> Meas Draw
model _ = return (draw [scalar "mu" (fst (head (mhWith undefined 0.5 inner)))])
""", "mhWith"),
    "wis": (PRELUDE + INNER + "\nmodel :: Data -> Meas Draw\nmodel _ = return (draw [])\n"
            "w :: IO [Double]\nw = wis 10 inner\n", "wis"),
    "runProb": (PRELUDE + "\nmodel :: Data -> Meas Draw\nmodel _ = return (draw [])\n"
                "r :: Tree -> Double\nr = runProb uniform\n", "runProb"),
    "explicit import list": (PRELUDE.replace("import LazyPPL\n",
                                             "import LazyPPL (Meas (..), runChain)\n")
                             + "\nmodel :: Data -> Meas Draw\nmodel _ = return (draw [])\n",
                             "runChain"),
}


@pytest.mark.parametrize("what", sorted(SELF_SAMPLING))
def test_a_model_that_runs_inference_itself_is_refused(what):
    source, construct = SELF_SAMPLING[what]
    with pytest.raises((CompileError, ProgramRefused)) as info:
        fit_lazyppl(source, {}, seed=3, limits=LIMITS, **SMALL)
    assert construct in info.value.message, info.value.message


def test_the_surface_still_offers_the_spec_interface():
    """Control: SPEC §2.2 names (types, sample/score/scoreLog, Log's Exp) still work."""
    source = PRELUDE + """import Numeric.Log (Log (..))

model :: Data -> Meas Draw
model _ = do
  u <- sample uniform
  x <- sample (normal 0 1)
  score (normalPdf x 1 0.5)
  scoreLog (Exp (normalLogPdf 0 1 u))
  let p = fmap (* 2) uniform :: Prob Double
  v <- sample p
  return (draw [scalar "x" x, vector "uv" (every 1 [u, v])])
"""
    fit = fit_lazyppl(source, {}, seed=3, limits=LIMITS, **SMALL)
    assert list(fit.draws) == ["x", "uv[1]", "uv[2]"]


#: Shipped example that was never a valid user program: imports Numeric (log1p).
NOT_A_USER_PROGRAM = {"lazyppl/examples/gauss_mix/Model.hs"}


def _shipped_programs() -> list:
    found = [*REPO.glob("corpus/translations/*/Model.hs"),
             *REPO.glob("lazyppl/examples/*/Model.hs"),
             *REPO.glob("tests/fixtures/**/*.hs"),
             *REPO.glob("benchmarks/lazyppl_models/*.hs")]
    programs = sorted(p for p in found if "module Model (model) where" in p.read_text())
    return [pytest.param(p, id=str(p.relative_to(REPO)), marks=[pytest.mark.xfail(
                raises=ProgramRefused, strict=True, reason="imports a module outside the "
                "allow-list")] if str(p.relative_to(REPO)) in NOT_A_USER_PROGRAM else [])
            for p in programs]


@pytest.mark.slow  # one Safe Haskell compile per program: about 1 s each, 60 s in all
@pytest.mark.parametrize("path", _shipped_programs())
def test_every_shipped_program_compiles_as_an_untrusted_module(path):
    source = path.read_text()
    lint(source)
    with tempfile.TemporaryDirectory() as tmp:
        compile_untrusted_module(normalise_source(source), Path(tmp), lazyppl_build(),
                                 limits=LIMITS)
        assert (Path(tmp) / "out" / "Model.o").is_file()


# -- issue 9 robustness: reported names are SPEC §2.3 names or a typed error ----------
BAD_NAMES = {
    "x]": 'scalar "x]" x',
    "alpha[200000]": 'scalar "alpha[200000]" x',
    "theta[1]": 'scalar "theta[1]" x, vector "theta" [x, x]',
    "a b": 'scalar "a b" x',
    "2000": 'vector "big" (replicate 2001 x)',
}


@pytest.mark.parametrize("bad", sorted(BAD_NAMES))
def test_a_bad_scalar_name_is_a_runtime_error_naming_it(bad):
    source = PRELUDE + f"""
model :: Data -> Meas Draw
model _ = do
  x <- sample (normal 0 1)
  return (draw [{BAD_NAMES[bad]}])
"""
    with pytest.raises(ProgramRuntimeError) as info:
        fit_lazyppl(source, {}, seed=3, limits=LIMITS, **SMALL)
    assert bad in info.value.message, info.value.message
    assert info.value.details["language"] == "lazyppl"
