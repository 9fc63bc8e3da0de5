"""The LazyPPL source lint (no GHC needed): what it refuses, where, and what it lets by."""
from __future__ import annotations

from pathlib import Path

import pytest

from haskell_bridge.lint import lint, normalise_source
from workers.errors import ProgramRefused

# the SPEC §2.2 example, as the end-to-end tests use it
EIGHT_SCHOOLS = (Path(__file__).resolve().parents[1] / "fixtures" / "eight_schools" / "Model.hs").read_text()

HEADER = "module Model (model) where\n"


def refused(source: str) -> ProgramRefused:
    with pytest.raises(ProgramRefused) as info:
        lint(source)
    err = info.value
    assert err.details["language"] == "lazyppl"
    return err


def test_spec_example_passes():
    lint(EIGHT_SCHOOLS)


@pytest.mark.parametrize(
    "source",
    [
        "{-# LANGUAGE ScopedTypeVariables, BangPatterns #-}\n" + HEADER,
        "{-# language lambdacase #-}\n" + HEADER,
        "{-# LANGUAGE TupleSections\n           , ExtendedDefaultRules\n  #-}\n" + HEADER,
        "-- a comment\n{- block {- nested -} still comment -}\n" + HEADER,
        HEADER + 'x :: String\nx = "{-# OPTIONS_GHC -F -pgmF /bin/sh #-}"\n',
        HEADER + "c :: Char\nc = '\"'\ns :: String\ns = \"{-# OPTIONS_GHC #-}\"\n",
        HEADER + "s :: String\ns = \"a\\\"{-# RULES #-}\\\\\"\n",
        HEADER + 's :: String\ns = "gap \\\n   \\continues {-# OPTIONS #-}"\n',
        HEADER + "import qualified Data.Map.Strict as M\nimport Numeric.Log (Log(..))\n",
        HEADER + "import safe Data.List (sortBy)\n",
        HEADER + "f' :: Int -> Int\nf' x' = x' + 1\n"
        "q = ['a', '\\n', '\\'', '\\\\', '\\SOH', '\\^A', '\\123']\n",
        HEADER + "(-->) :: Bool -> Bool -> Bool\na --> b = not a || b\n",
        HEADER + "x = 1\t+ 2\n",
        HEADER.replace("\n", "\r\n") + "x = 1\r\n",
        HEADER + "μ :: Double\nμ = 1 -- µ and σ in a comment\n",
        "\ufeff" + HEADER,
        HEADER + "x = [1..10]\ny = 1.5e-3\nz = 0x1F\n",
    ],
)
def test_accepted(source):
    lint(source)


@pytest.mark.parametrize(
    ("source", "line", "words"),
    [
        ("{-# OPTIONS_GHC -F -pgmF /tmp/x #-}\n" + HEADER, 1, "OPTIONS_GHC"),
        ("{-# options_ghc -F -pgmF /tmp/x #-}\n" + HEADER, 1, "options_ghc"),
        ("{-# Options_Ghc -ddump-to-file #-}\n" + HEADER, 1, "Options_Ghc"),
        ("{-#OPTIONS -cpp#-}\n" + HEADER, 1, "OPTIONS"),
        ("{-# INCLUDE <stdio.h> #-}\n" + HEADER, 1, "INCLUDE"),
        (HEADER + "f :: Int\nf = 1\n{-# RULES \"f\" f = 2 #-}\n", 4, "RULES"),
        (HEADER + "{-# SPECIALISE f :: Int #-}\n", 2, "SPECIALISE"),
        (HEADER + "{-# NOINLINE f #-}\n", 2, "NOINLINE"),
        (HEADER + "{-# ANN module \"x\" #-}\n", 2, "ANN"),
        ("{-# LANGUAGE CPP #-}\n" + HEADER, 1, "CPP"),
        ("{-# language cpp #-}\n" + HEADER, 1, "cpp"),
        ("{-# LANGUAGE BangPatterns, TemplateHaskell #-}\n" + HEADER, 1, "TemplateHaskell"),
        ("{-# LANGUAGE QuasiQuotes #-}\n" + HEADER, 1, "QuasiQuotes"),
        ("{-# LANGUAGE Unsafe #-}\n" + HEADER, 1, "Unsafe"),
        ("{-# LANGUAGE Trustworthy #-}\n" + HEADER, 1, "Trustworthy"),
        ("{-# LANGUAGE ForeignFunctionInterface #-}\n" + HEADER, 1, "ForeignFunctionInterface"),
        ("{-# LANGUAGE MagicHash #-}\n" + HEADER, 1, "MagicHash"),
        ("{-# LANGUAGE UnboxedTuples #-}\n" + HEADER, 1, "UnboxedTuples"),
        ("{-# LANGUAGE GHCForeignImportPrim #-}\n" + HEADER, 1, "GHCForeignImportPrim"),
        ("{-# LANGUAGE PackageImports #-}\n" + HEADER, 1, "PackageImports"),
        ("{-# LANGUAGE GeneralizedNewtypeDeriving #-}\n" + HEADER, 1, "GeneralizedNewtypeDeriving"),
        ("{-# LANGUAGE BangPatterns -- x\n #-}\n" + HEADER, 1, "malformed"),
        ("{-# LANGUAGE #-}\n" + HEADER, 1, "malformed"),
        ("#include \"/etc/passwd\"\n" + HEADER, 1, "#"),
        (HEADER + "  #define X 1\n", 2, "#"),
        ("#!/usr/bin/env runghc\n" + HEADER, 1, "#"),
        (HEADER + "# 1 \"other.hs\"\n", 2, "#"),
        (HEADER + "{-\n#include \"/etc/shadow\"\n-}\n", 3, "#"),
        (HEADER + "foreign import ccall \"exit\" c_exit :: Int -> IO ()\n", 2, "foreign"),
        (HEADER + "foreign export ccall f :: Int -> Int\n", 2, "foreign"),
        (HEADER + "import System.IO.Unsafe (unsafePerformIO)\n", 2, "System.IO.Unsafe"),
        (HEADER + "import System.Process\n", 2, "System.Process"),
        (HEADER + "import qualified System.IO as IO\n", 2, "System.IO"),
        (HEADER + "import Debug.Trace\n", 2, "Debug.Trace"),
        (HEADER + "import Data.IORef\n", 2, "Data.IORef"),
        (HEADER + "import Control.Exception\n", 2, "Control.Exception"),
        (HEADER + "import Control.Concurrent\n", 2, "Control.Concurrent"),
        (HEADER + "import GHC.Exts\n", 2, "GHC.Exts"),
        (HEADER + "import Foreign.Ptr\n", 2, "Foreign.Ptr"),
        (HEADER + "import Unsafe.Coerce\n", 2, "Unsafe.Coerce"),
        (HEADER + "import LazyPPL.Harness\n", 2, "LazyPPL.Harness"),
        (HEADER + "import Language.Haskell.TH\n", 2, "Language.Haskell.TH"),
        (HEADER + "import \"base\" Data.List\n", 2, "package-qualified"),
        (HEADER + "import\n  qualified\n  System.IO.Unsafe as U\n", 2, "System.IO.Unsafe"),
        ("module Main where\n", 1, "header"),
        ("module Model where\n", 1, "header"),
        ("module Model (model, main) where\n", 1, "header"),
        ("import Prelude\n" + HEADER, 1, "header"),
        ("x = 1\n", 1, "header"),
        ("", 1, "header"),
        # A pragma hidden behind what only looks like a line comment: |-- is an operator.
        (HEADER + "x |-- {-# OPTIONS_GHC -F #-}\n", 2, "OPTIONS_GHC"),
        (HEADER + "x = y -->{-# SCC \"x\" #-} z\n", 2, "SCC"),
        # Pragma-looking text in comments is refused too (never guess about comments).
        (HEADER + "-- {-# OPTIONS_GHC -F #-}\n", 2, "comment"),
        (HEADER + "{- outer {- inner -} {-# OPTIONS_GHC #-} -}\n", 2, "comment"),
        # After a nested comment closes, code resumes: the pragma is live.
        (HEADER + "{- {- -} -} {-# OPTIONS_GHC -pgmF x #-}\n", 2, "OPTIONS_GHC"),
        # A string that ends early (escaped backslash) leaves the pragma outside it.
        (HEADER + 's = "\\\\" {-# OPTIONS_GHC #-} "x"\n', 2, "OPTIONS_GHC"),
        (HEADER + "{-# LANGUAGE TemplateHaskell #-}\nx = 'f\n", 2, "TemplateHaskell"),
        (HEADER + "x = 'f\n", 2, "quote"),
        (HEADER + 's = "abc\ndef"\n', 2, "line break"),
        (HEADER + 's = "abc\n', 2, "line break"),
        (HEADER + "{- never closed\n", 2, "unterminated"),
        (HEADER + "{-# LANGUAGE BangPatterns\n", 2, "unterminated"),
        (HEADER + "x = 1 -- \u202e reversed\n", 2, "U+202E"),
        (HEADER + "x = 1\x00\n", 2, "U+0000"),
        ("{-# OPTIONS_GHC -F #-}\r\n" + HEADER, 1, "OPTIONS_GHC"),
        (HEADER.replace("\n", "\r\n") + "\r\nimport System.IO\r\n", 3, "System.IO"),
        ("\t{-#\tOPTIONS_GHC\t-F #-}\n" + HEADER, 1, "OPTIONS_GHC"),
    ],
)
def test_refused(source, line, words):
    err = refused(source)
    assert err.details["line"] == line, err.message
    assert words.lower() in err.message.lower(), err.message


def test_refusal_message_names_line_and_language():
    err = refused(HEADER + "\n\nimport System.IO.Unsafe\n")
    assert err.to_dict() == {
        "code": "refused",
        "message": err.message,
        "details": {"language": "lazyppl", "line": 4},
    }
    assert "(lazyppl program, line 4)" in str(err)


def test_oversized_source_refused():
    err = refused(HEADER + "-- " + "x" * 300_000 + "\n")
    assert "longer than" in err.message


def test_normalise_source_line_endings():
    assert normalise_source("\ufeffa\r\nb\rc\n") == "a\nb\nc\n"


def test_compile_exposes_exactly_the_modules_the_lint_allows():
    from haskell_bridge.compile import EXPOSED_MODULES
    from haskell_bridge.lint import ALLOWED_IMPORTS

    exposed = [m for modules in EXPOSED_MODULES.values() for m in modules]
    assert sorted(exposed) == sorted(ALLOWED_IMPORTS)


def test_eviction_keeps_the_most_recently_used(tmp_path):
    import os

    from haskell_bridge.compile import evict_old_programs

    for i in range(5):
        binary = tmp_path / f"k{i}" / "model"
        binary.parent.mkdir()
        binary.write_bytes(b"x")
        os.utime(binary, (1000 + i, 1000 + i))
    evict_old_programs(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k3", "k4"]


# -- issue 9: the lexer follows the report's escapes, so nothing hides after them ----
from haskell_bridge.lexer import Lexer  # noqa: E402


def _values(source: str) -> list[tuple[str, str]]:
    return [(t.kind, t.value) for t in Lexer(source).tokens() if t.kind in ("string", "char")]


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ('"\\^\\"', "\x1c"),                 # \^\ is FS, one character
        ('"\\^@\\^[\\^]\\^^\\^_\\^A\\^Z"', "\x00\x1b\x1d\x1e\x1f\x01\x1a"),
        ('"\\SOH"', "\x01"),                 # longest match: SOH, not SO + H
        ('"\\SO\\&H"', "\x0eH"),             # \& separates
        ('"\\SOHH\\SO"', "\x01H\x0e"),
        ('"\\NUL\\DEL\\SP\\ESC\\DC1\\EM"', "\x00\x7f \x1b\x11\x19"),
        ('"\\1234\\&5"', "\u04d25"),
        ('"\\o777\\x10FFFF\\xaB"', "\u01ff\U0010ffff\xab"),
        ('"\\a\\b\\f\\n\\r\\t\\v\\\\\\"\\\'"', "\a\b\f\n\r\t\v\\\"'"),
        ('"a\\   \\b"', "ab"),                # string gap
        ('"a\\\n   \\b"', "ab"),              # gap over a line break
        ('"{- -- -}"', "{- -- -}"),
        ("'\\^\\'", "\x1c"),
        ("'\\SOH'", "\x01"),
        ("'\"'", '"'),
        ("'\\''", "'"),
    ],
)
def test_escapes_decode_as_in_the_report(literal, value):
    kind = "string" if literal.startswith('"') else "char"
    assert _values(literal) == [(kind, value)]


def test_primes_belong_to_identifiers():
    toks = Lexer("f'' x' = x' 'a' y'z'").tokens()
    assert [(t.kind, t.text) for t in toks] == [
        ("name", "f''"), ("name", "x'"), ("symbol", "="), ("name", "x'"),
        ("char", "'a'"), ("name", "y'z'")]


def test_opening_quote_punctuation_is_no_operator_character():
    # GHC classifies U+2018 as other_graphic, U+2192 as a symbol (the old lint took
    # every punctuation character for a symbol)
    from haskell_bridge.lexer import is_symbol

    assert not is_symbol("‘") and not is_symbol("(") and is_symbol("→") and is_symbol("-")
    toks = Lexer("a -- ‘ b\nc -→ d\n").tokens()
    assert [(t.kind, t.text) for t in toks] == [
        ("name", "a"), ("comment", "-- ‘ b"), ("name", "c"), ("symbol", "-→"),
        ("name", "d")]


@pytest.mark.parametrize("text", ["a --‘ b", "c --→ d", "e ---é", "f --\u00a0"])
def test_dashes_then_non_ascii_are_refused(text):
    """Comment or operator hangs on Unicode tables that differ between Python and GHC."""
    err = refused(HEADER + text + "\n")
    assert "'--'" in err.message and err.details["line"] == 2


@pytest.mark.parametrize(
    "source",
    [
        # \^\ closes nothing: the string ends at the next quote and foreign is code
        HEADER + 's = "\\^\\"; foreign import ccall "exit" c :: Int -> IO () -- "\n',
        HEADER + 's = \'\\^\\\'; foreign import ccall "exit" c :: Int -> IO ()\n',
        HEADER + 's = "\\^\\\\^\\"; foreign export ccall "write" h :: Int -> IO Int -- "\n',
        # a string gap in what GHC reads as a comment must not hide the next line
        HEADER + 'x = a $ -- "\\\n  \\_ -> 1; foreign import ccall "exit" c :: IO () -- "\n',
        HEADER + "x = 1foreign\n",
    ],
)
def test_foreign_after_tricky_lexemes_is_seen(source):
    err = refused(source)
    assert "foreign" in err.message.lower()


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (HEADER + 's = "\\^a"\n', "control escape"),
        (HEADER + 's = "\\q"\n', "unknown escape"),
        (HEADER + 's = "\\x"\n', "numeric escape"),
        (HEADER + 's = "\\1114112"\n', "out of range"),
        (HEADER + "c = '\\&'\n", "\\&"),
        (HEADER + 's = "a\tb"\n', "U+0009"),
        (HEADER + 's = "a\\  b"\n', "gap"),
        (HEADER + "x = \u00a0 1\n", "U+00A0"),
        (HEADER + "x = 1 -- \u2028 y\n", "U+2028"),
    ],
)
def test_outside_the_lexical_syntax_is_refused(source, words):
    err = refused(source)
    assert words.lower() in err.message.lower(), err.message
