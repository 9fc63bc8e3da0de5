"""Property test: the lint's lexer sees strings, characters and comments where GHC does.

Hypothesis writes a module whose one list, ``xs :: [String]``, holds literals built
from the report's tricky pieces (``\\^\\``, ``\\SOH`` next to ``\\SO``, numeric escapes,
``\\&``, string gaps over line breaks, quotes, comment-like text), character literals,
primed identifiers and an operator that starts with ``--``, with line and nested
block comments between the elements. The oracle is GHC itself: ``ghc -e`` prints
every element's code points. The lexer's view is its tokens: each element must be
exactly one string token, one ``[char]``, a name, or ``string --> string``, with the
same decoded value. If the lexer ended or continued a string, character or comment
anywhere GHC did not, the elements it sees would differ.

One GHC call per example (about 0.2 s here: ``ghc -e`` interprets the module, no
link); 30 examples, no shrinking (a failure names the first differing element
instead). Measured: two deliberate lexer bugs (``\\^\\`` read as two escapes; the
ASCII names matched shortest first, so ``\\SOH`` read as SO then H) each made the
generated examples alone fail in 3 of 3 runs; the explicit example fails on each.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from haskell_bridge.lexer import ASCII_NAMES, Lexer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("ghc") is None, reason="GHC is not installed"),
]

DEFINITIONS = {"p'": "P1", "p''": "P2", "q'r'": "P3", "x_'": "P4"}
HEADER = ("module Gen where\n"
          "(-->) :: String -> String -> String\n"
          "_ --> b = b\n"
          + "".join(f'{name} :: String\n{name} = "{value}"\n'
                    for name, value in DEFINITIONS.items())
          + "xs :: [String]\nxs =\n  [ ")

_PLAIN = st.sampled_from(list("aHzZ09 .,;:!?()[]{}|/~#$%&*+<=>@^_`") + [
    "é", "μ", "中", "→", "‘", "--", "{-", "-}", "{-#", "'", "-->", "x'"])
_CNTRL = [chr(c) for c in range(ord("@"), ord("_") + 1)]
_NUMERIC = st.one_of(
    st.integers(0, 0x10FFFF).map(lambda n: f"\\{n}"),
    st.integers(0, 0x10FFFF).map(lambda n: f"\\o{n:o}"),
    st.integers(0, 0x10FFFF).map(lambda n: f"\\x{n:x}"),
    st.integers(0, 0xFF).map(lambda n: f"\\x{n:02X}"),
)
_ESCAPE = st.one_of(
    st.sampled_from([f"\\{c}" for c in "abfnrtv\\\"'"]),
    st.sampled_from([f"\\^{c}" for c in _CNTRL]),
    st.sampled_from([f"\\{name}" for name in ASCII_NAMES]),
    _NUMERIC,
)
# The pieces a lexer is most likely to get wrong, drawn often.
_TRICKY = st.sampled_from(["\\^\\", "\\^@", "\\^_", "\\SO", "\\SOH", "H", "\\&", "\\DEL",
                           "\\\"", "\\\\", "\\'", "\\1", "\\x", "--", "{-", "'", "\\ \\"])
_GAP = st.builds(lambda ws: f"\\{ws}\\",
                 st.text(alphabet=" \n", min_size=1, max_size=4))


@st.composite
def string_literal(draw) -> str:
    pieces = draw(st.lists(st.one_of(_TRICKY, _TRICKY, _PLAIN, _ESCAPE, _GAP), max_size=10))
    out = []
    for k, piece in enumerate(pieces):
        out.append(piece)
        nxt = pieces[k + 1] if k + 1 < len(pieces) else ""
        # a numeric escape would swallow following digits (and could overflow): GHC
        # programs separate them with \&, as this does
        if piece in ("\\1", "\\x"):  # tricky digits-to-come: complete the escape
            out[-1] = piece + "7"
        if piece[:2] in ("\\o", "\\x") or piece[1:2].isdigit():
            if nxt[:1] and nxt[:1] in "0123456789abcdefABCDEF":
                out.append("\\&")
    return '"' + "".join(out) + '"'


_CHAR = st.one_of(
    st.sampled_from(list("aZ0 \"{}-#`") + ["é", "μ", "‘"]).map(lambda c: f"'{c}'"),
    st.sampled_from(["'\\''", "'\\\\'", "'\\\"'"]),
    st.one_of(st.sampled_from([f"\\^{c}" for c in _CNTRL]),
              st.sampled_from([f"\\{n}" for n in ASCII_NAMES]), _NUMERIC).map(
        lambda e: f"'{e}'"),
)

_COMMENT_TEXT = st.lists(st.sampled_from(
    ["a", " ", '"', "'", "\\", "\\^\\", "--", "->", "{ ", " }", "é", "‘", "x'"]),
    max_size=6).map("".join)


@st.composite
def block_comment(draw, depth: int = 0) -> str:
    parts = draw(st.lists(st.one_of(_COMMENT_TEXT, st.just("\n   ")), max_size=4))
    if depth < 2 and draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), draw(block_comment(depth + 1)))
    return "{- " + " ".join(parts) + " -}"


# Dashes alone, or followed by an ASCII character that is no operator character (else
# the lexeme would be an operator such as --> and not a comment; dashes followed by a
# non-ASCII character are refused by the lexer).
_LINE_COMMENT = st.one_of(
    st.sampled_from(["--", "---", "----"]),
    st.builds(lambda dashes, start, text: dashes + start + text,
              st.sampled_from(["--", "---", "----"]),
              st.sampled_from([" ", " ‘", "a", '"', "'", "{", "}", "_", "("]),
              _COMMENT_TEXT))

_ELEMENT = st.one_of(
    string_literal(),
    _CHAR.map(lambda c: f"[ {c} ]"),
    st.sampled_from(sorted(DEFINITIONS)),
    st.builds(lambda a, c, b: f"{a} --> {c}{b}", string_literal(),
              st.one_of(st.just(""), block_comment().map(lambda c: c + " ")),
              string_literal()),
)


@st.composite
def module(draw) -> str:
    elements = draw(st.lists(_ELEMENT, min_size=8, max_size=30))
    out = HEADER
    for k, element in enumerate(elements):
        if k:
            out += "  , "
        out += element
        trailer = draw(st.one_of(st.just(""), block_comment(), _LINE_COMMENT))
        out += (" " + trailer if trailer else "") + "\n"
    return out + "  ]\n"


def ghc_view(source: str) -> list[list[int]]:
    """Code points of every element of ``xs``, as GHC evaluates them."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Gen.hs"
        path.write_text(source, encoding="utf-8")
        done = subprocess.run(
            ["ghc", "-ignore-dot-ghci", "-XHaskell2010", "-v0", "-e",
             "mapM_ (print . map fromEnum) xs", str(path)],
            capture_output=True, text=True, timeout=120, cwd=tmp,
            env={"PATH": "/usr/bin:/bin", "HOME": tmp, "LANG": "C.UTF-8"})
    assert done.returncode == 0, f"GHC refused the generated module:\n{done.stderr}\n{source}"
    return [json.loads(line) for line in done.stdout.splitlines()]


def lexer_view(source: str) -> list[list[int]]:
    """The same, from the lexer's tokens: each element must be one recognised form."""
    tokens = [t for t in Lexer(source).tokens() if t.kind not in ("comment", "pragma")]
    start = next(k for k in range(len(tokens) - 2)
                 if [t.text for t in tokens[k:k + 3]] == ["xs", "=", "["]) + 3
    assert tokens[-1].text == "]", tokens[-3:]
    elements, current = [], []
    for tok in tokens[start:-1]:
        if tok.kind == "special" and tok.text == ",":
            elements.append(current)
            current = []
        else:
            current.append(tok)
    elements.append(current)
    values = []
    for element in elements:
        shape = [t.kind if t.kind in ("string", "char", "name") else t.text for t in element]
        if shape == ["string"]:
            value = element[0].value
        elif shape == ["[", "char", "]"]:
            value = element[1].value
        elif shape == ["name"] and element[0].text in DEFINITIONS:
            value = DEFINITIONS[element[0].text]
        elif shape == ["string", "-->", "string"]:
            value = element[2].value
        else:
            raise AssertionError(f"the lexer sees an element GHC does not: {element}")
        values.append([ord(c) for c in value])
    return values


@settings(max_examples=30, deadline=None, database=None,
          phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(module())
@example(HEADER + '"\\^\\" --> "x"\n  , "\\SOH\\SO\\&H\\SOH"\n  , [ \'\\^\\\' ] -- ‘ "\n'
         '  , "a\\\n   \\b" {- {- "-}" \n -} -- " -}\n  , p\'\' ---\n  , "\\1234\\&5"\n  ]\n')
def test_lexer_agrees_with_ghc(source):
    expected = ghc_view(source)
    got = lexer_view(source)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"element {k}: lexer {g} != GHC {e}\n{source}"
    assert len(got) == len(expected), f"lexer {len(got)} elements, GHC {len(expected)}"
