"""haskell_bridge against real GHC: Safe Haskell compile, cache, sandboxed runs, errors.

The lazyppl library is built once per cache directory (scripts/build-lazyppl.sh; the
first run of this file on a fresh machine spends about a minute on it). Programs that
must be compiled fresh carry a unique comment, so the binary cache cannot answer.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pytest

from haskell_bridge import build_program, compile_program, fit_lazyppl, lazyppl_build
from haskell_bridge.compile import compile_untrusted_module
from haskell_bridge.lint import normalise_source
from sandbox import Limits
from workers.errors import (
    CompileError,
    InvalidRequest,
    ProgramRefused,
    ProgramRuntimeError,
    ResourceLimit,
    SandboxUnavailable,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("ghc") is None, reason="GHC is not installed"),
]

# the SPEC §2.2 example, as the end-to-end tests use it
EIGHT_SCHOOLS = (Path(__file__).resolve().parents[1] / "fixtures" / "eight_schools" / "Model.hs").read_text()
DATA = {"J": 8, "y": [28, 8, -3, 7, -1, 1, 18, 12], "sigma": [15, 10, 16, 11, 9, 11, 10, 18]}
LIMITS = Limits(cpu_seconds=120, memory_mb=1024, wall_seconds=120)
SMALL = dict(chains=2, warmup=100, draws=50, thin=1, kernel="default")

PRELUDE = ("module Model (model) where\n"
           "import LazyPPL\nimport LazyPPL.Distributions\nimport LazyPPL.Bridge\n")
TRIVIAL_MODEL = "\nmodel :: Data -> Meas Draw\nmodel _ = return (draw [])\n"


def fresh(source: str) -> str:
    """The same program with a unique comment: a guaranteed binary-cache miss."""
    return source + f"\n-- fresh {uuid.uuid4().hex}\n"


@pytest.fixture(scope="module")
def build():
    return lazyppl_build()


def test_spec_example_compiles_and_reports_its_names(build):
    fit = fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=11, limits=LIMITS, **SMALL)
    assert list(fit.draws) == ["mu", "tau"] + [f"theta[{i}]" for i in range(1, 9)]
    assert fit.reportable == ["mu", "tau", "theta"]
    for values in fit.draws.values():
        assert values.shape == (2, 50) and values.dtype == np.float64
        assert np.isfinite(values).all()
    assert (fit.draws["tau"] >= 0).all()
    assert fit.language == "lazyppl" and fit.sampler["seed"] == 11
    assert len(fit.stats["chains"]) == 2 and "acceptance" in fit.stats["chains"][0]
    assert fit.versions["ghc"] == build.ghc_version and fit.versions["lazyppl_build"] == build.hash
    assert set(fit.timings) >= {"compile", "sample", "total"}


def test_second_fit_of_the_same_source_does_not_recompile(build):
    source = fresh(EIGHT_SCHOOLS)
    first = build_program(source, limits=LIMITS)
    assert not first.cached and first.seconds > 0
    inode = first.path.stat().st_ino  # a recompile would publish a new file
    again = build_program(source, limits=LIMITS)
    assert again.cached and again.path == first.path and again.seconds == 0
    fit = fit_lazyppl(source, DATA, seed=1, limits=LIMITS, **SMALL)
    assert fit.stats["compile_cached"] is True and fit.timings["compile"] == 0
    assert first.path.stat().st_ino == inode
    # CRLF line endings are the same program
    assert build_program(source.replace("\n", "\r\n"), limits=LIMITS).cached


def test_same_seed_same_draws_and_other_seed_other_draws(build):
    a = fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=5, limits=LIMITS, **SMALL)
    b = fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=5, limits=LIMITS, **SMALL)
    c = fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=6, limits=LIMITS, **SMALL)
    for name in a.draws:
        np.testing.assert_array_equal(a.draws[name], b.draws[name])
    assert not np.array_equal(a.draws["mu"], c.draws["mu"])


def test_a_continued_fit_has_the_draws_and_statistics_of_a_refit(build):
    """A later look continues the chains from their checkpoints (issue 11): the earlier
    draws, then exactly what a fresh fit of more draws samples after them."""
    settings = dict(SMALL, draws=4 * SMALL["draws"])
    first = fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=5, limits=LIMITS, **SMALL)
    assert first.checkpoints and len(first.checkpoints) == SMALL["chains"]
    continued = fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=5, limits=LIMITS, **settings,
                            budget_draws=SMALL["draws"], resume=first)
    refit = fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=5, limits=LIMITS, **settings,
                        budget_draws=SMALL["draws"])
    assert continued.n_draws == refit.n_draws == settings["draws"]
    for name in refit.draws:
        np.testing.assert_array_equal(continued.draws[name], refit.draws[name])
        np.testing.assert_array_equal(continued.draws[name][:, :SMALL["draws"]],
                                      first.draws[name])
    def whole_chain(fit):
        return [{k: v for k, v in c.items() if k != "seconds"} for c in fit.stats["chains"]]
    assert whole_chain(continued) == whole_chain(refit)
    assert continued.sampler["continued_from"] == SMALL["draws"]
    assert "continued_from" not in refit.sampler
    assert continued.checkpoints and continued.checkpoints != first.checkpoints
    assert continued.timings["run_chain"] >= continued.timings["run"]


def test_a_fit_without_checkpoints_is_not_resumable(build):
    """A chain whose checkpoint the harness left out (longer than its limit) makes the
    fit one that a later look refits."""
    from haskell_bridge.run import resumable

    fit = fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=5, limits=LIMITS, **SMALL,
                      options={"checkpoint_limit": 100})
    assert fit.checkpoints is None and fit.stats["checkpoint_bytes"] == 0
    assert not resumable(fit, draws=2 * SMALL["draws"])
    with_them = fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=5, limits=LIMITS, **SMALL)
    assert resumable(with_them, draws=2 * SMALL["draws"])
    for name in fit.draws:
        np.testing.assert_array_equal(fit.draws[name], with_them.draws[name])


def test_chains_are_continued_only_with_their_own_settings_and_program(build):
    first = fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=5, limits=LIMITS, **SMALL)
    more = dict(SMALL, draws=2 * SMALL["draws"])
    for changed in ({"seed": 6}, {"thin": 2}, {"warmup": 101}, {"kernel": "mh"},
                    {"draws": SMALL["draws"]}, {"budget_draws": 99}):
        args = {**more, "seed": 5, "budget_draws": SMALL["draws"], **changed}
        with pytest.raises(ValueError, match="cannot be continued"):
            fit_lazyppl(EIGHT_SCHOOLS, DATA, limits=LIMITS, resume=first, **args)
    with pytest.raises(ValueError, match="its own program"):
        fit_lazyppl(fresh(EIGHT_SCHOOLS), DATA, seed=5, limits=LIMITS, **more,
                    budget_draws=SMALL["draws"], resume=first)
    # checkpoints that are not this chain's are refused by the harness itself
    swapped = dataclasses.replace(first, checkpoints=list(reversed(first.checkpoints)))
    with pytest.raises(InvalidRequest, match="another chain"):
        fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=5, limits=LIMITS, **more,
                    budget_draws=SMALL["draws"], resume=swapped)


# -- refused before GHC runs -------------------------------------------------------
REFUSED = {
    "System.IO.Unsafe": PRELUDE + "import System.IO.Unsafe (unsafePerformIO)\n",
    "TemplateHaskell": "{-# LANGUAGE TemplateHaskell #-}\n" + PRELUDE,
    "foreign": PRELUDE + 'foreign import ccall "exit" cExit :: Int -> IO ()\n',
    "Unsafe": "{-# LANGUAGE Unsafe #-}\n" + PRELUDE,
    "OPTIONS_GHC": "{-# OPTIONS_GHC -F -pgmF /bin/true #-}\n" + PRELUDE,
    "options_ghc": "{-# options_ghc -F -pgmF /bin/true #-}\n" + PRELUDE,
    "CPP": "{-# LANGUAGE CPP #-}\n" + PRELUDE,
    "#include": PRELUDE + '#include "/etc/passwd"\n',
    "System.Process": PRELUDE + "import System.Process (system)\n",
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_refused_with_a_reason(what, tmp_path):
    with pytest.raises(ProgramRefused) as info:
        compile_program(REFUSED[what], limits=LIMITS)
    err = info.value
    assert err.details["language"] == "lazyppl" and err.details["line"] >= 1
    expected = "#" if what == "#include" else what
    assert expected.lower() in err.message.lower()


# -- defence in depth: the Safe Haskell step alone refuses these too ------------------
BYPASS = {
    "unsafePerformIO": (
        PRELUDE + "import System.IO.Unsafe (unsafePerformIO)\n",
        "System.IO.Unsafe"),
    "Template Haskell": (
        "{-# LANGUAGE TemplateHaskell #-}\n" + PRELUDE + "x :: Int\nx = $(undefined)\n",
        "TemplateHaskell"),
    "LANGUAGE Unsafe": ("{-# LANGUAGE Unsafe #-}\n" + PRELUDE, "Unsafe"),
    "RULES": (PRELUDE + "f :: Int\nf = 1\n{-# RULES \"f\" f = 2 #-}\n", "rules"),
    "non-IO foreign import": (
        "{-# LANGUAGE ForeignFunctionInterface #-}\n" + PRELUDE
        + 'foreign import ccall "abs" cAbs :: Int -> Int\n', "IO"),
    # Flag level: FFI is off unless a pragma turns it back on; foreign export stubs need
    # the C compiler, which is a path that does not exist; so does CPP.
    "foreign import without pragma": (
        PRELUDE + 'foreign import ccall "exit" cExit :: Int -> IO ()\n',
        "parse error on input ‘import’"),
    "foreign export with FFI pragma": (
        "{-# LANGUAGE ForeignFunctionInterface #-}\n" + PRELUDE
        + 'foreign export ccall "write" hook :: Int -> Int -> Int -> IO Int\n'
        'hook :: Int -> Int -> Int -> IO Int\nhook _ _ n = return n\n',
        "needs the C compiler (foreign export or C stubs), which is not allowed"),
    "CPP pragma": (
        "{-# LANGUAGE CPP #-}\n" + PRELUDE + "#define X 1\n",
        "needs the C preprocessor (CPP), which is not allowed"),
    "MagicHash": (
        PRELUDE + "x :: Int\nx = I# 1#\n", "parse error"),
    "System.Process": (PRELUDE + "import System.Process (system)\n", "System.Process"),
    "LazyPPL.Harness": (PRELUDE + "import LazyPPL.Harness\n", "LazyPPL.Harness"),
    # the user's "LazyPPL" is LazyPPL.Surface renamed; neither real name is visible
    "LazyPPL.Surface": (PRELUDE + "import LazyPPL.Surface\n", "LazyPPL.Surface"),
    "LazyPPL.Internal.Chain": (PRELUDE + "import LazyPPL.Internal.Chain\n",
                               "LazyPPL.Internal.Chain"),
    "Data.Map.Internal": (PRELUDE + "import Data.Map.Internal\n", "Data.Map.Internal"),
    "GHC.IO": (PRELUDE + "import GHC.IO (unsafePerformIO)\n", "GHC.IO"),
}


def _safe_step(source: str, build, *, thinned: bool) -> str:
    """Run only the Safe Haskell compile step (no lint) and return GHC's refusal."""
    with tempfile.TemporaryDirectory() as tmp:
        with pytest.raises(CompileError) as info:
            compile_untrusted_module(normalise_source(source + TRIVIAL_MODEL), Path(tmp),
                                     build, limits=LIMITS, thinned=thinned)
    assert "Model.hs:" in info.value.message
    return info.value.message


@pytest.mark.parametrize("what", sorted(BYPASS))
def test_compile_flags_refuse_what_the_lint_refuses(what, build):
    source, words = BYPASS[what]
    message = _safe_step(source, build, thinned=True)
    assert words.lower() in message.lower(), message


# With module thinning off as well, Safe Haskell's own checks still refuse these.
SAFE_ALONE = {
    "unsafePerformIO": "System.IO.Unsafe: Can't be safely imported",
    "GHC.IO": "GHC.IO: Can't be safely imported",
    "LazyPPL.Harness": "LazyPPL.Harness: Can't be safely imported",
    "Template Haskell": "TemplateHaskell is not allowed in Safe Haskell",
    "RULES": "User defined rules are disabled under Safe Haskell",
    "LANGUAGE Unsafe": "Incompatible Safe Haskell flags",
    "non-IO foreign import": "all FFI imports must be in the IO monad",
}


@pytest.mark.parametrize("what", sorted(SAFE_ALONE))
def test_safe_haskell_alone_refuses_unsafe_code(what, build):
    message = _safe_step(BYPASS[what][0], build, thinned=False)
    assert SAFE_ALONE[what] in " ".join(message.split()), message


def test_thinning_is_needed_for_trusted_packages(build):
    """containers is trusted (for Data.Map), so only thinning hides its internals."""
    with tempfile.TemporaryDirectory() as tmp:
        compile_untrusted_module(
            normalise_source(BYPASS["Data.Map.Internal"][0] + TRIVIAL_MODEL), Path(tmp),
            build, limits=LIMITS, thinned=False)


def test_the_lint_bypass_compiles_an_acceptable_module(build):
    """Control for the test above: the same direct step accepts an ordinary module."""
    with tempfile.TemporaryDirectory() as tmp:
        compile_untrusted_module(normalise_source(EIGHT_SCHOOLS + "y\t= 1 :: Int\n"),
                                 Path(tmp), build, limits=LIMITS)
        assert (Path(tmp) / "out" / "Model.o").is_file()


def test_only_base_lazyppl_containers_log_domain_are_trusted(build):
    ghc_pkg = ["ghc-pkg", f"--global-package-db={build.package_db}", "--no-user-package-db"]
    names = subprocess.run([*ghc_pkg, "list", "--simple-output", "--names-only"],
                           capture_output=True, text=True, check=True).stdout.split()
    trusted = {n for n in names if subprocess.run(
        [*ghc_pkg, "field", n, "trusted", "--simple-output"],
        capture_output=True, text=True, check=True).stdout.strip() == "True"}
    assert trusted == {"base", "lazyppl", "containers", "log-domain"}
    assert "process" not in names  # not even present: lazyppl does not depend on it


# -- compile errors ---------------------------------------------------------------
def test_type_error_reports_user_lines_without_temp_paths(build):
    source = fresh(EIGHT_SCHOOLS.replace("mu + tau * t", "mu + tau * True"))
    with pytest.raises(CompileError) as info:
        compile_program(source, limits=LIMITS)
    err = info.value
    assert err.details == {"language": "lazyppl"}
    assert "Model.hs:15:" in err.message
    assert "/tmp" not in err.message and "ppl-audit-ghc" not in err.message


def test_model_of_the_wrong_type_is_a_compile_error(build):
    source = fresh(PRELUDE + "model :: Int\nmodel = 3\n")
    with pytest.raises(CompileError) as info:
        compile_program(source, limits=LIMITS)
    assert "model" in info.value.message


DECAY = PRELUDE + """import LazyPPL.ODE (dormandPrince)

model :: Data -> Meas Draw
model d = do
  k <- sample (logNormal 0 1)
  let rhs _ [c] = [-k * c]
      rhs _ _ = [0, 0]
      ts = reals "t" d
      loglik = case dormandPrince 1e-6 1e-8 rhs 0 [2] ts of
        Just cs -> sum [normalLogPdf c 0.05 y | ([c], y) <- zip cs (reals "y" d)]
        Nothing -> -1 / 0
  scoreLog (Exp loglik)
  return (draw [scalar "k" k])
"""


def test_a_user_program_may_solve_an_ode_with_the_library_solver(build):
    """LazyPPL.ODE is on the import allow-list and works in the sandboxed fit: the decay
    rate of 2 exp(-0.7 t) observed with noise 0.05 is recovered."""
    ts = [0.5, 1.0, 1.5, 2.0, 3.0, 4.0]
    rng = np.random.default_rng(3)
    ys = [2 * np.exp(-0.7 * t) + 0.05 * rng.standard_normal() for t in ts]
    fit = fit_lazyppl(DECAY, {"t": ts, "y": ys}, seed=5, limits=LIMITS,
                      **{**SMALL, "warmup": 500, "draws": 200})
    assert abs(float(fit.draws["k"].mean()) - 0.7) < 0.05


def test_an_ode_right_hand_side_of_the_wrong_size_is_a_runtime_error(build):
    wrong = DECAY.replace("rhs _ [c] = [-k * c]", "rhs _ [c] = [-k * c, 1]")
    with pytest.raises(ProgramRuntimeError) as info:
        fit_lazyppl(wrong, {"t": [1.0], "y": [1.0]}, seed=1, limits=LIMITS, **SMALL)
    assert "right-hand side returned" in info.value.message

# -- runtime failures ---------------------------------------------------------------
def test_missing_data_field_is_named(build):
    data = {k: v for k, v in DATA.items() if k != "sigma"}
    with pytest.raises(ProgramRuntimeError) as info:
        fit_lazyppl(EIGHT_SCHOOLS, data, seed=1, limits=LIMITS, **SMALL)
    assert '"sigma"' in info.value.message and "missing" in info.value.message
    assert info.value.details["language"] == "lazyppl"


LOOP = PRELUDE + """
model :: Data -> Meas Draw
model _ = do
  mu <- sample (normal 0 1)
  let spin :: Int -> Int
      spin n = if n < 0 then n else spin (n + 1)
  score (fromIntegral (spin 0))
  return (draw [scalar "mu" mu])
"""

BOMB = PRELUDE + """
model :: Data -> Meas Draw
model _ = do
  mu <- sample (normal 0 1)
  let xs = [1 .. 400000000] :: [Int]
  -- xs is used twice, so the whole list is kept alive between the two passes
  score (fromIntegral (sum xs + length xs))
  return (draw [scalar "mu" mu])
"""


def test_infinite_loop_stops_at_the_wall_clock_limit(build):
    compile_program(LOOP, limits=LIMITS)  # compile outside the short limit
    with pytest.raises(ResourceLimit) as info:
        fit_lazyppl(LOOP, {}, seed=1, limits=Limits(cpu_seconds=60, memory_mb=512,
                                                    wall_seconds=4), **SMALL)
    assert info.value.details["limit"] == "timeout"


def test_infinite_loop_stops_at_the_cpu_limit(build):
    compile_program(LOOP, limits=LIMITS)
    with pytest.raises(ResourceLimit) as info:
        fit_lazyppl(LOOP, {}, seed=1, limits=Limits(cpu_seconds=3, memory_mb=512,
                                                    wall_seconds=60), **SMALL)
    assert info.value.details["limit"] == "cpu"


def test_memory_bomb_stops_at_the_heap_cap(build):
    compile_program(BOMB, limits=LIMITS)
    with pytest.raises(ResourceLimit) as info:
        fit_lazyppl(BOMB, {}, seed=1, limits=Limits(cpu_seconds=60, memory_mb=200,
                                                    wall_seconds=60), **SMALL)
    err = info.value
    assert err.details["limit"] == "memory" and "200 MB" in err.message
    assert err.details["max_rss_mb"] < 600


def test_unknown_kernel_is_an_invalid_request(build):
    with pytest.raises(InvalidRequest) as info:
        fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=1, limits=LIMITS,
                    **{**SMALL, "kernel": "no-such-kernel"})
    assert "no-such-kernel" in info.value.message


# -- issue 9 attacks 5 and 6: a string escape the old lint mis-lexed -------------------
# GHC reads \^\ as ONE control character (FS), so the string closes at the next quote;
# the old lint skipped "backslash + one char" twice and thought the string went on, so
# a foreign declaration on the same line was never seen (and FFI was on at compile time).
FS_ESCAPE_ATTACKS = {
    "foreign import": 's :: String\ns = "\\^\\"; foreign import ccall "exit" '
                      'cExit :: Int -> IO () -- "\n',
    "foreign export write": 's :: String\ns = "\\^\\"; foreign export ccall "write" '
                            'hook :: Int -> Int -> Int -> IO Int -- "\n'
                            'hook :: Int -> Int -> Int -> IO Int\nhook _ _ n = return n\n',
}


@pytest.mark.parametrize("what", sorted(FS_ESCAPE_ATTACKS))
def test_foreign_declaration_after_a_control_escape_is_refused(what, build):
    source = fresh(PRELUDE + FS_ESCAPE_ATTACKS[what] + TRIVIAL_MODEL)
    with pytest.raises(ProgramRefused) as info:
        fit_lazyppl(source, {}, seed=1, limits=LIMITS, **SMALL)
    assert "foreign" in info.value.message.lower()
    assert info.value.details["line"] == 6


@pytest.mark.parametrize("what", sorted(FS_ESCAPE_ATTACKS))
def test_compile_flags_alone_refuse_the_foreign_declaration(what, build):
    """FFI is off at the flag level: with the lint bypassed GHC cannot parse it."""
    message = _safe_step(PRELUDE + FS_ESCAPE_ATTACKS[what], build, thinned=True)
    assert ("6:20: error: parse error on input ‘import’" in message
            or "Perhaps you meant to use ForeignFunctionInterface?" in message), message


def test_language_is_haskell2010_with_every_other_extension_off():
    from haskell_bridge.compile import DEFAULT_EXTENSIONS, language_flags
    from haskell_bridge.lint import ALLOWED_EXTENSIONS

    flags = language_flags()
    assert flags[0] == "-XHaskell2010"
    off = {f[len("-XNo"):] for f in flags[1:]}
    for ext in ("ForeignFunctionInterface", "CPP", "TemplateHaskell", "TemplateHaskellQuotes",
                "QuasiQuotes", "MagicHash", "UnboxedTuples", "GHCForeignImportPrim",
                "CApiFFI", "InterruptibleFFI", "UnliftedFFITypes", "PackageImports",
                "GeneralizedNewtypeDeriving", "StaticPointers", "RebindableSyntax",
                "ImplicitParams", "NondecreasingIndentation", "DataKinds"):
        assert ext in off, ext
    assert not off & DEFAULT_EXTENSIONS
    # what the lint lets a pragma switch on is off until the pragma says so
    assert {e for e in ALLOWED_EXTENSIONS if not e.startswith("No") and e != "Safe"} <= (
        off | DEFAULT_EXTENSIONS)


ALLOWED_PRAGMAS = """{-# LANGUAGE BangPatterns, LambdaCase, TupleSections, ScopedTypeVariables #-}
{-# LANGUAGE MultiWayIf, RecordWildCards, GADTs, RankNTypes, NumericUnderscores #-}
""" + PRELUDE + """
sq :: forall a. Num a => a -> a
sq !x = x * x
pick :: Int -> Double
pick = \\case { 0 -> 1_000; _ -> if | otherwise -> 2 }
"""


def test_allowed_extensions_switch_back_on_by_pragma(build):
    with tempfile.TemporaryDirectory() as tmp:
        compile_untrusted_module(normalise_source(ALLOWED_PRAGMAS + TRIVIAL_MODEL), Path(tmp),
                                 build, limits=LIMITS)
        assert (Path(tmp) / "out" / "Model.o").is_file()


def test_two_threads_publishing_the_same_program_both_succeed(monkeypatch, tmp_path, build):
    """The two scopes of one audit (threads of one process) may compile the same program
    at once. Both used to stage the binary under one name (model.<pid>.tmp): the first
    rename took it and the second raised FileNotFoundError (a CI failure of
    test_full_cauchy_on_tau_disagrees_and_names_tau). Both threads are held until both have
    staged their copy, then both publish, the second after the first's binary is out: it
    must not replace that binary, which may be starting in a sandbox by then."""
    import threading

    from haskell_bridge import compile as bridge_compile

    fake = tmp_path / "linked"
    fake.write_bytes(b"#!/bin/sh\n")
    both_linked, both_staged = threading.Barrier(2, timeout=30), threading.Barrier(2, timeout=30)

    def link(work, build, limits):
        both_linked.wait()
        return fake

    real_chmod = os.chmod
    order, lock, first_published = [], threading.Lock(), threading.Event()
    inode_after_first = []

    def chmod(path, mode, **kwargs):
        real_chmod(path, mode, **kwargs)
        if str(path).endswith(".tmp"):  # the staged copy: hold until both have one
            both_staged.wait()
            with lock:
                order.append(threading.get_ident())
                second = len(order) == 2
            if second:  # publish only after the first thread's binary is out (and may run)
                first_published.wait(30)

    monkeypatch.setattr(bridge_compile, "compile_untrusted_module", lambda *a, **k: None)
    monkeypatch.setattr(bridge_compile, "link_with_harness", link)
    monkeypatch.setattr(bridge_compile.os, "chmod", chmod)
    source = fresh(PRELUDE + TRIVIAL_MODEL)
    results, errors = [], []

    def run():
        try:
            result = build_program(source, limits=LIMITS)
            if not first_published.is_set():
                inode_after_first.append(result.path.stat().st_ino)
                first_published.set()
            results.append(result)
        except Exception as err:  # noqa: BLE001 - the test reports it
            errors.append(err)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(results) == 2 and results[0].path == results[1].path
    assert results[0].path.read_bytes() == b"#!/bin/sh\n"
    assert not list(results[0].path.parent.glob("*.tmp"))  # nothing staged is left behind
    # the second publisher did not replace the first's binary, which may be running by
    # then: a sandbox that staged the replaced file could not bind it (a corpus-batch
    # error of arma11: "bwrap: Can't bind mount ... No such file or directory")
    assert results[0].path.stat().st_ino == inode_after_first[0]
    shutil.rmtree(results[0].path.parent)  # not a real binary: keep it out of the cache


def test_a_sandbox_that_cannot_be_built_is_not_a_crash_of_the_program(build, broken_bwrap):
    """Was: "the LazyPPL program crashed (exit status 1): bwrap: Can't find source path"."""
    with pytest.raises(SandboxUnavailable, match="could not be set up"):
        fit_lazyppl(EIGHT_SCHOOLS, DATA, seed=5, limits=LIMITS, **SMALL)
