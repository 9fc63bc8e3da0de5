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

The lexer follows the Haskell 2010 lexical rules that matter here: nested block
comments, line comments only when the dash run is a whole lexeme (``-->`` and ``|--``
are operators), string literals with escapes and gaps, character literals. Where the
rules get subtle (a stray ``'``, a line break inside a string) it refuses rather than
guesses. The package flags used at compile time (``-hide-all-packages`` plus
module-thinned ``-package`` flags) enforce the import allow-list a second time.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from workers.errors import ProgramRefused

#: Modules a user program may import. Must match the module thinning in compile.py.
ALLOWED_IMPORTS = frozenset(
    {
        "Prelude",
        "LazyPPL",
        "LazyPPL.Distributions",
        "LazyPPL.Bridge",
        "LazyPPL.Linear",
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

_ASCII_SYMBOLS = set("!#$%&*+./<=>?@\\^|-~:")
_EXTENSION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_HEADER = ["module", "Model", "(", "model", ")", "where"]


@dataclass(frozen=True)
class Token:
    """A code lexeme: kind is one of name, symbol, special, string, char, number."""

    kind: str
    text: str
    line: int


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
    tokens = _Lexer(text).tokens()
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
        if unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs", "Cn"):
            line = text.count("\n", 0, m.start()) + 1
            _refuse(f"character U+{ord(ch):04X} is not allowed in a program", line)


def _is_symbol(ch: str) -> bool:
    if ch in _ASCII_SYMBOLS:
        return True
    if ord(ch) < 128:
        return False
    # Haskell's uniSymbol: any Unicode symbol or punctuation character.
    return unicodedata.category(ch)[0] in "SP"


def _is_ident_start(ch: str) -> bool:
    return ch == "_" or ch.isalpha()


def _is_ident_char(ch: str) -> bool:
    return ch == "_" or ch == "'" or ch.isalnum() or unicodedata.category(ch).startswith("M")


class _Lexer:
    """Splits source into code tokens, refusing pragmas, CPP lines and odd lexemes."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.line = 1
        self.out: list[Token] = []

    def tokens(self) -> list[Token]:
        s = self.s
        self._check_line_start()
        while self.i < len(s):
            ch = s[self.i]
            if ch == "\n":
                self._newline()
            elif ch.isspace():
                self.i += 1
            elif s.startswith("{-#", self.i):
                self._pragma()
            elif s.startswith("{-", self.i):
                self._block_comment()
            elif ch == '"':
                self._string()
            elif ch == "'":
                self._char()
            elif _is_ident_start(ch):
                self._name()
            elif ch.isdigit():
                self._number()
            elif _is_symbol(ch):
                self._symbol()
            else:
                self.out.append(Token("special", ch, self.line))
                self.i += 1
        return self.out

    # -- layout helpers ---------------------------------------------------------
    def _newline(self) -> None:
        self.i += 1
        self.line += 1
        self._check_line_start()

    def _check_line_start(self) -> None:
        """A ``#`` first on a line is a CPP directive or line marker: refuse it."""
        j = self.i
        while j < len(self.s) and self.s[j] in " \t\f\v":
            j += 1
        if j < len(self.s) and self.s[j] == "#":
            _refuse("lines starting with '#' (CPP directives, line markers) are not allowed",
                    self.line)

    # -- comments and pragmas ---------------------------------------------------
    def _pragma(self) -> None:
        start_line = self.line
        end = self.s.find("#-}", self.i + 3)
        if end < 0:
            _refuse("unterminated {-# pragma", start_line)
        body = self.s[self.i + 3 : end]
        self.line += body.count("\n")
        self.i = end + 3
        m = re.match(r"\s*([A-Za-z_]+)", body)
        name = m.group(1) if m else ""
        if name.upper() != "LANGUAGE":
            shown = name or body.strip()[:20]
            _refuse(f"pragma {{-# {shown} #-}} is not allowed: only LANGUAGE pragmas with "
                    f"allowed extensions may appear", start_line)
        for raw in body[m.end():].split(","):
            ext = raw.strip()
            if not _EXTENSION_NAME.match(ext):
                _refuse(f"malformed LANGUAGE pragma near {ext[:30]!r}", start_line)
            if ext.lower() not in _EXTENSIONS_BY_LOWER:
                _refuse(f"language extension {ext} is not allowed; allowed: "
                        f"{', '.join(ALLOWED_EXTENSIONS)}", start_line)

    def _block_comment(self) -> None:
        start_line = self.line
        depth = 0
        s = self.s
        while self.i < len(s):
            if s.startswith("{-#", self.i):
                _refuse("pragma-like text '{-#' inside a comment is not allowed", self.line)
            if s.startswith("{-", self.i):
                depth += 1
                self.i += 2
            elif s.startswith("-}", self.i):
                depth -= 1
                self.i += 2
                if depth == 0:
                    return
            elif s[self.i] == "\n":
                self._newline()
            else:
                self.i += 1
        _refuse("unterminated {- comment", start_line)

    def _line_comment(self) -> None:
        end = self.s.find("\n", self.i)
        end = len(self.s) if end < 0 else end
        if "{-#" in self.s[self.i : end]:
            _refuse("pragma-like text '{-#' inside a comment is not allowed", self.line)
        self.i = end

    # -- literals -----------------------------------------------------------------
    def _string(self) -> None:
        s = self.s
        start = self.i
        start_line = self.line
        self.i += 1
        while self.i < len(s):
            ch = s[self.i]
            if ch == '"':
                self.i += 1
                self.out.append(Token("string", s[start : self.i], start_line))
                return
            if ch == "\n":
                _refuse("line break inside a string literal", self.line)
            if ch == "\\":
                nxt = s[self.i + 1] if self.i + 1 < len(s) else ""
                if nxt.isspace():
                    self._string_gap()
                    continue
                self.i += 2
                continue
            self.i += 1
        _refuse("unterminated string literal", start_line)

    def _string_gap(self) -> None:
        """``\\ <whitespace, newlines> \\`` inside a string: skip it, counting lines."""
        self.i += 1
        while self.i < len(self.s) and self.s[self.i].isspace():
            if self.s[self.i] == "\n":
                self.i += 1
                self.line += 1
            else:
                self.i += 1
        if self.i >= len(self.s) or self.s[self.i] != "\\":
            _refuse("malformed string gap", self.line)
        self.i += 1

    def _char(self) -> None:
        s = self.s
        i = self.i
        if i + 2 < len(s) and s[i + 1] not in "\\\n'" and s[i + 2] == "'":
            end = i + 3
        elif i + 3 < len(s) and s[i + 1] == "\\":
            j = i + 3
            while j < len(s) and (s[j].isalnum() or s[j] == "^") and j - i < 12:
                j += 1
            if j >= len(s) or s[j] != "'":
                _refuse("malformed character literal", self.line)
            end = j + 1
        else:
            _refuse("a quote ' outside a character literal is not allowed "
                    "(Template Haskell and promoted constructors are not supported)", self.line)
        self.out.append(Token("char", s[i:end], self.line))
        self.i = end

    # -- names, numbers, operators -------------------------------------------------
    def _name(self) -> None:
        s = self.s
        start = segment = self.i
        while True:
            while self.i < len(s) and _is_ident_char(s[self.i]):
                self.i += 1
            # Qualified names (Data.Map.Strict, M.lookup) are one lexeme.
            if (s[segment].isupper() and self.i + 1 < len(s) and s[self.i] == "."
                    and _is_ident_start(s[self.i + 1])):
                self.i += 1
                segment = self.i
                continue
            break
        self.out.append(Token("name", s[start : self.i], self.line))

    def _number(self) -> None:
        s = self.s
        start = self.i
        while self.i < len(s):
            ch = s[self.i]
            if ch.isalnum() or ch == "_":
                self.i += 1
            elif ch == "." and self.i + 1 < len(s) and s[self.i + 1].isdigit():
                self.i += 1
            elif (ch in "+-" and s[self.i - 1] in "eE"
                  and not s[start:self.i].lower().startswith("0x")):
                self.i += 1
            else:
                break
        self.out.append(Token("number", s[start : self.i], self.line))

    def _symbol(self) -> None:
        s = self.s
        start = self.i
        while self.i < len(s) and _is_symbol(s[self.i]):
            self.i += 1
        run = s[start : self.i]
        if len(run) >= 2 and set(run) == {"-"}:
            # A whole lexeme of two or more dashes starts a line comment.
            self.i = start
            self._line_comment()
            return
        self.out.append(Token("symbol", run, self.line))


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
