"""Source lint for untrusted LazyPPL programs, run before GHC sees them.

Safe Haskell does not stop everything that can happen at *compile* time: an
``{-# OPTIONS_GHC -F -pgmF prog #-}`` pragma runs a host program, ``LANGUAGE CPP`` with
``#include`` reads host files into error messages, ``-ddump-to-file`` writes anywhere
(see PITFALLS.md). So before compiling we refuse, with the offending line:

* every ``{-# ... #-}`` pragma except ``LANGUAGE`` with allow-listed extensions (pragma
  names compared case-insensitively, as GHC does: ``options_ghc`` is OPTIONS_GHC);
  pragma-like text (``{-#``) inside a comment is refused too, so that a difference
  between this lexer and GHC's about where a comment ends can never hide a live pragma;
* any line whose first non-blank character is ``#`` (CPP directives, line markers,
  shebangs);
* the ``foreign`` keyword (FFI imports and exports);
* a module header other than ``module Model (model) where``;
* imports outside :data:`ALLOWED_IMPORTS`, and package-qualified imports.

The lexer (lexer.py) follows the Haskell 2010 report's lexical syntax as GHC reads it:
nested block comments, line comments only when the dash run is a whole lexeme (``-->``
and ``|--`` are operators), every string and character escape (``\\^\\`` is one
character), string gaps. Where the rules get subtle (a stray ``'``, a line break inside
a string) it refuses rather than guesses. The compile flags enforce the import
allow-list a second time (module thinning) and switch off every extension not allowed
here, FFI included (compile.py).
"""
from __future__ import annotations

import re
import unicodedata

from haskell_bridge.lexer import LexError, Lexer, Token
from workers.errors import ProgramRefused

#: Modules a user program may import. Must match the module thinning in compile.py.
ALLOWED_IMPORTS = frozenset(
    {
        "Prelude",
        "LazyPPL",
        "LazyPPL.Distributions",
        "LazyPPL.Bridge",
        "LazyPPL.Linear",
        "LazyPPL.ODE",
        "Numeric.Log",
        "Data.List",
        "Data.Maybe",
        "Data.Ord",
        "Data.Function",
        "Data.Foldable",
        "Data.Traversable",
        "Data.Tuple",
        "Data.Either",
        "Data.Functor",
        "Data.Bits",
        "Data.Char",
        "Data.Monoid",
        "Control.Monad",
        "Control.Applicative",
        "Data.Map",
        "Data.Map.Strict",
    }
)

#: Language extensions a user program may switch on (none of them changes what code
#: can run at compile time or adds unsafe primitives; GeneralizedNewtypeDeriving is
#: left out because Safe Haskell rejects it anyway).
ALLOWED_EXTENSIONS = (
    "BangPatterns",
    "BlockArguments",
    "ConstraintKinds",
    "DeriveFoldable",
    "DeriveFunctor",
    "DeriveTraversable",
    "EmptyCase",
    "ExistentialQuantification",
    "ExtendedDefaultRules",
    "FlexibleContexts",
    "FlexibleInstances",
    "GADTs",
    "InstanceSigs",
    "KindSignatures",
    "LambdaCase",
    "MonadComprehensions",
    "MultiParamTypeClasses",
    "MultiWayIf",
    "NamedFieldPuns",
    "NoImplicitPrelude",
    "NoMonomorphismRestriction",
    "NumericUnderscores",
    "ParallelListComp",
    "PatternGuards",
    "RankNTypes",
    "RecordWildCards",
    "Safe",
    "ScopedTypeVariables",
    "StandaloneDeriving",
    "TupleSections",
    "TypeApplications",
    "ViewPatterns",
)
_EXTENSIONS_BY_LOWER = {e.lower(): e for e in ALLOWED_EXTENSIONS}

#: Largest accepted source, in characters (a model is a page or two of Haskell).
MAX_SOURCE_CHARS = 256 * 1024

_EXTENSION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_HEADER = ["module", "Model", "(", "model", ")", "where"]


def normalise_source(source: str) -> str:
    """The text GHC is given: BOM dropped, CRLF and lone CR turned into LF."""
    if source.startswith("\ufeff"):
        source = source[1:]
    return source.replace("\r\n", "\n").replace("\r", "\n")


def lint(source: str) -> None:
    """Refuse a LazyPPL program that is not allowed to reach GHC.

    Raises :class:`workers.errors.ProgramRefused` with ``language="lazyppl"`` and the
    1-based ``line`` of the first offending construct; returns None if acceptable.
    """
    text = normalise_source(source)
    if len(text) > MAX_SOURCE_CHARS:
        _refuse(f"the program is longer than {MAX_SOURCE_CHARS} characters", 1)
    _check_characters(text)
    lexer = Lexer(text)
    try:
        lexemes = lexer.tokens()
    except LexError as err:
        _check_pragmas(lexer.out)  # the first offending construct is the one reported
        _refuse(err.reason, err.line)
    _check_pragmas(lexemes)
    tokens = [t for t in lexemes if t.kind not in ("comment", "pragma")]
    _check_header(tokens)
    _check_tokens(tokens)


def _refuse(reason: str, line: int) -> None:
    raise ProgramRefused(reason, language="lazyppl", line=line)


def _check_characters(text: str) -> None:
    """Refuse control, format (e.g. bidi overrides), private-use and unassigned characters.

    They have no business in a model, can make a reviewer misread the source, and are
    where this lexer and GHC's (older Unicode tables) could disagree.
    """
    for m in re.finditer(r"[^\x20-\x7e\n\t]", text):
        ch = m.group()
        if unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"):
            line = text.count("\n", 0, m.start()) + 1
            _refuse(f"character U+{ord(ch):04X} is not allowed in a program", line)


def _check_pragmas(lexemes: list[Token]) -> None:
    for tok in lexemes:
        if tok.kind == "pragma":
            _check_pragma(tok)
        elif tok.kind == "comment" and "{-#" in tok.text:
            # never guess where a comment ends: pragma-like text in one is refused
            _refuse("pragma-like text '{-#' inside a comment is not allowed", tok.line)


def _check_pragma(tok: Token) -> None:
    body = tok.value
    m = re.match(r"\s*([A-Za-z_]+)", body)
    name = m.group(1) if m else ""
    if name.upper() != "LANGUAGE":
        shown = name or body.strip()[:20]
        _refuse(f"pragma {{-# {shown} #-}} is not allowed: only LANGUAGE pragmas with "
                f"allowed extensions may appear", tok.line)
    for raw in body[m.end():].split(","):
        ext = raw.strip()
        if not _EXTENSION_NAME.match(ext):
            _refuse(f"malformed LANGUAGE pragma near {ext[:30]!r}", tok.line)
        if ext.lower() not in _EXTENSIONS_BY_LOWER:
            _refuse(f"language extension {ext} is not allowed; allowed: "
                    f"{', '.join(ALLOWED_EXTENSIONS)}", tok.line)


def _check_header(tokens: list[Token]) -> None:
    got = [t.text for t in tokens[: len(_HEADER)]]
    if got != _HEADER:
        line = tokens[0].line if tokens else 1
        _refuse("the program must begin with the header 'module Model (model) where' "
                "(only comments and LANGUAGE pragmas may come before it)", line)


def _check_tokens(tokens: list[Token]) -> None:
    for k, tok in enumerate(tokens):
        if tok.kind != "name":
            continue
        if tok.text == "foreign":
            _refuse("foreign declarations (FFI imports and exports) are not allowed", tok.line)
        if tok.text == "import":
            _check_import(tokens, k)


def _check_import(tokens: list[Token], k: int) -> None:
    line = tokens[k].line
    j = k + 1
    while j < len(tokens) and tokens[j].kind == "name" and tokens[j].text in ("safe", "qualified"):
        j += 1
    if j >= len(tokens):
        _refuse("incomplete import", line)
    target = tokens[j]
    if target.kind == "string":
        _refuse("package-qualified imports are not allowed", line)
    if target.kind != "name" or target.text not in ALLOWED_IMPORTS:
        allowed = ", ".join(sorted(ALLOWED_IMPORTS))
        _refuse(f"import of {target.text} is not allowed; allowed modules: {allowed}", line)
