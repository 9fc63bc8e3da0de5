"""Haskell 2010 lexical syntax (report, chapter 2) as GHC 9.0 reads it, for the lint.

The lint (lint.py) must see exactly the code GHC sees: if this lexer believed a string
or comment went on where GHC's had ended, a declaration after it would be hidden from
the lint (issue 9: ``"\\^\\"`` is ONE escape, FS; a lexer that skipped "backslash +
one character" stayed inside the string and missed a ``foreign`` declaration).
So strings and characters follow the report's grammar exactly::

    escape  -> \\ ( charesc | ascii | decimal | o octal | x hexadecimal )
    charesc -> a | b | f | n | r | t | v | \\ | " | ' | &
    ascii   -> ^cntrl | NUL | SOH | ... | US | SP | DEL      (longest match: \\SOH)
    cntrl   -> A..Z | @ | [ | \\ | ] | ^ | _
    gap     -> \\ whitechar {whitechar} \\                   (strings only)

``\\&`` is allowed in strings only; numeric escapes must be at most 0x10FFFF. Anything
outside the grammar raises :class:`LexError` rather than being guessed at. Where GHC
would stop with a lexical error anyway, refusing (or not) is harmless; the property
tests (tests/unit/test_haskell_lexer_ghc.py) check string, character and comment
boundaries and decoded values against GHC itself.

Non-ASCII characters are classified as GHC's lexer classifies them (``adj_c`` in
GHC's Lexer.x): only connector/dash/other punctuation and math/currency/modifier/other
symbols are operator characters; opening/closing/quote punctuation are not. Whether
``--`` starts a comment depends on the next character's class (``--‘`` is a comment,
``--→`` an operator); Python's Unicode tables are newer than GHC 9.0's, so dashes
directly followed by any non-ASCII character are refused rather than classified.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

ASCII_SYMBOLS = frozenset("!#$%&*+./<=>?@\\^|-~:")
_UNI_SYMBOL_CATEGORIES = frozenset({"Pc", "Pd", "Po", "Sm", "Sc", "Sk", "So"})
#: ASCII control names of the report's ``ascii`` production, longest first so that a
#: match is the longest one (``\\SOH`` is SOH, never SO followed by H).
ASCII_NAMES: dict[str, int] = {
    name: code for code, name in enumerate(
        "NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 "
        "NAK SYN ETB CAN EM SUB ESC FS GS RS US".split())}
ASCII_NAMES.update({"SP": 32, "DEL": 127})
_NAMES_LONGEST_FIRST = sorted(ASCII_NAMES, key=len, reverse=True)
CHARESC = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11,
           "\\": 92, '"': 34, "'": 39}
MAX_CODE_POINT = 0x10FFFF
_WHITE_IN_GAP = re.compile(r"[ \t\n\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+")


class LexError(Exception):
    """Source outside the lexical syntax this lexer accepts; ``line`` is 1-based."""

    def __init__(self, reason: str, line: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


@dataclass(frozen=True)
class Token:
    """A lexeme. kind: name, symbol, special, string, char, number, comment, pragma.

    ``text`` is the source text; for string and char tokens ``value`` is the decoded
    literal (code points), for pragmas the text between ``{-#`` and ``#-}``.
    """

    kind: str
    text: str
    line: int
    value: str = ""


def is_symbol(ch: str) -> bool:
    """An operator character (ascSymbol or GHC's non-ASCII symbol classes)."""
    if ord(ch) < 128:
        return ch in ASCII_SYMBOLS
    return unicodedata.category(ch) in _UNI_SYMBOL_CATEGORIES


def is_ident_start(ch: str) -> bool:
    if ord(ch) < 128:
        return ch == "_" or ch.isalpha()
    return unicodedata.category(ch) in ("Lu", "Ll", "Lt", "Lo")


def is_ident_char(ch: str) -> bool:
    if ord(ch) < 128:
        return ch == "_" or ch == "'" or ch.isalnum()
    return unicodedata.category(ch) in ("Lu", "Ll", "Lt", "Lo", "Lm", "Mn", "Nd", "Nl", "No")


class Lexer:
    """Splits normalised source (LF line ends) into tokens, comments included."""

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
            elif ch in " \t":
                self.i += 1
            elif s.startswith("{-#", self.i):
                self._pragma()
            elif s.startswith("{-", self.i):
                self._block_comment()
            elif ch == '"':
                self._string()
            elif ch == "'":
                self._char()
            elif is_ident_start(ch):
                self._name()
            elif "0" <= ch <= "9":
                self._number()
            elif is_symbol(ch):
                self._symbol()
            elif ch in "(),;[]`{}":
                self._emit("special", self.i + 1)
            else:
                raise LexError(f"character {ch!r} (U+{ord(ch):04X}) is not allowed here",
                               self.line)
        return self.out

    def _emit(self, kind: str, end: int, value: str = "", line: int | None = None) -> None:
        self.out.append(Token(kind, self.s[self.i:end], self.line if line is None else line,
                              value))
        self.i = end

    # -- layout ---------------------------------------------------------------------
    def _newline(self) -> None:
        self.i += 1
        self.line += 1
        self._check_line_start()

    def _check_line_start(self) -> None:
        """``#`` first on a line is a CPP directive, line marker or shebang (GHC's lexer
        reads ``# line`` markers itself, without CPP)."""
        j = self.i
        while j < len(self.s) and self.s[j] in " \t":
            j += 1
        if j < len(self.s) and self.s[j] == "#":
            raise LexError("lines starting with '#' (CPP directives, line markers) are "
                           "not allowed", self.line)

    # -- comments and pragmas -------------------------------------------------------
    def _pragma(self) -> None:
        start_line = self.line
        end = self.s.find("#-}", self.i + 3)
        if end < 0:
            raise LexError("unterminated {-# pragma", start_line)
        body = self.s[self.i + 3:end]
        self._emit("pragma", end + 3, body, start_line)
        self.line += body.count("\n")

    def _block_comment(self) -> None:
        """Nested ``{- -}`` comment; quotes inside it mean nothing (as in GHC)."""
        start, start_line, depth, s = self.i, self.line, 0, self.s
        j = self.i
        while j < len(s):
            if s.startswith("{-", j):
                depth += 1
                j += 2
            elif s.startswith("-}", j):
                depth -= 1
                j += 2
                if depth == 0:
                    self.out.append(Token("comment", s[start:j], start_line))
                    self.i = j
                    return
            elif s[j] == "\n":
                self.i = j
                self._newline()  # a '#' line inside a comment is refused too
                j = self.i
            else:
                j += 1
        raise LexError("unterminated {- comment", start_line)

    # -- literals -------------------------------------------------------------------
    def _escape(self, j: int, *, in_string: bool) -> tuple[int, str]:
        """Decode the escape at ``s[j] == '\\\\'``: (index after it, value ('' for \\&))."""
        s = self.s
        if j + 1 >= len(s):
            raise LexError("unterminated literal", self.line)
        c = s[j + 1]
        if c in CHARESC:
            return j + 2, chr(CHARESC[c])
        if c == "&":
            if not in_string:
                raise LexError("'\\&' is not allowed in a character literal", self.line)
            return j + 2, ""
        if c == "^":
            k = s[j + 2] if j + 2 < len(s) else ""
            if k and "@" <= k <= "_":  # @ A-Z [ \ ] ^ _
                return j + 3, chr(ord(k) - 64)
            raise LexError("malformed control escape '\\^' in a literal", self.line)
        digits, base, start = "0123456789", 10, j + 1
        if c == "o":
            digits, base, start = "01234567", 8, j + 2
        elif c == "x":
            digits, base, start = "0123456789abcdefABCDEF", 16, j + 2
        if c in "ox" or "0" <= c <= "9":
            end = start
            while end < len(s) and s[end] in digits:
                end += 1
            if end == start:
                raise LexError(f"malformed numeric escape '\\{c}' in a literal", self.line)
            code = int(s[start:end], base)
            if code > MAX_CODE_POINT:
                raise LexError("numeric escape out of range in a literal", self.line)
            return end, chr(code)
        for name in _NAMES_LONGEST_FIRST:
            if s.startswith(name, j + 1):
                return j + 1 + len(name), chr(ASCII_NAMES[name])
        raise LexError(f"unknown escape '\\{c}' in a literal", self.line)

    def _literal_char(self, j: int) -> None:
        """A raw character allowed inside a literal: graphic or space (no tab, newline)."""
        ch = self.s[j]
        if ch == "\n":
            raise LexError("line break inside a string literal", self.line)
        if ch == "\t" or unicodedata.category(ch) in ("Zl", "Zp"):
            raise LexError(f"character U+{ord(ch):04X} inside a literal (write an escape)",
                           self.line)

    def _string(self) -> None:
        s, start_line = self.s, self.line
        j, value = self.i + 1, []
        while j < len(s):
            ch = s[j]
            if ch == '"':
                self._emit("string", j + 1, "".join(value), start_line)
                return
            if ch == "\\":
                gap = _WHITE_IN_GAP.match(s, j + 1)
                if gap:
                    j = gap.end()
                    self.line += gap.group().count("\n")
                    if j >= len(s) or s[j] != "\\":
                        raise LexError("malformed string gap", self.line)
                    j += 1
                    continue
                j, decoded = self._escape(j, in_string=True)
                value.append(decoded)
                continue
            self._literal_char(j)
            value.append(ch)
            j += 1
        raise LexError("unterminated string literal", start_line)

    def _char(self) -> None:
        s, j = self.s, self.i + 1
        if j < len(s) and s[j] == "\\":
            end, value = self._escape(j, in_string=False)
        elif j < len(s) and s[j] not in "'\n":
            self._literal_char(j)
            end, value = j + 1, s[j]
        else:
            end, value = j, ""
        if end >= len(s) or s[end] != "'" or not value:
            raise LexError("a quote ' outside a character literal is not allowed "
                           "(Template Haskell and promoted constructors are not "
                           "supported)", self.line)
        self._emit("char", end + 1, value)

    # -- names, numbers, operators --------------------------------------------------
    def _name(self) -> None:
        s, j = self.s, self.i
        segment = j
        while True:
            while j < len(s) and is_ident_char(s[j]):
                j += 1
            # Qualified names (Data.Map.Strict, M.lookup) are one lexeme.
            if (s[segment].isupper() and j + 1 < len(s) and s[j] == "."
                    and is_ident_start(s[j + 1])):
                j += 1
                segment = j
                continue
            break
        self._emit("name", j)

    _NUMBER = re.compile(
        r"0[xX][0-9a-fA-F](_*[0-9a-fA-F])*|0[oO][0-7](_*[0-7])*"
        r"|[0-9](_*[0-9])*(\.[0-9](_*[0-9])*)?([eE][+-]?[0-9](_*[0-9])*)?")

    def _number(self) -> None:
        """Integer and float literals (NumericUnderscores allowed); a letter right after
        the digits starts a new lexeme, as in GHC (``1foreign`` is 1 then foreign)."""
        m = self._NUMBER.match(self.s, self.i)
        self._emit("number", m.end())

    def _symbol(self) -> None:
        s, j = self.s, self.i
        dashes = len(s[j:]) - len(s[j:].lstrip("-")) if s.startswith("--", j) else 0
        if dashes and j + dashes < len(s) and ord(s[j + dashes]) >= 128:
            # Comment or operator depends on the character's Unicode class, and GHC's
            # tables (older) may not classify it as Python's do: never guess.
            raise LexError("'--' directly followed by a non-ASCII character is ambiguous "
                           "(comment or operator); put a space after the dashes",
                           self.line)
        while j < len(s) and is_symbol(s[j]):
            j += 1
        run = s[self.i:j]
        if len(run) >= 2 and set(run) == {"-"}:
            # A whole lexeme of two or more dashes starts a line comment; -->, |-- are
            # operators.
            end = s.find("\n", self.i)
            self._emit("comment", len(s) if end < 0 else end)
            return
        self._emit("symbol", j)
