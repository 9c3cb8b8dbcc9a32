"""The text the compiler reads: one normalisation, and the refusal of bytes that mean one thing to the gate
and another to the compiler.

    compiler_text(raw) -> str                                 # what the gate scans and the compile step builds
    unreadable_findings(raw, line_offset, cpp) -> list[Finding]   # refused: no single meaning
    unreadable(raw) -> bool                                   # a character no rule can read (nothing else is read)

The only change `compiler_text` makes is CRLF -> LF (a Windows file reads the same to every tool after it). Every
other byte sequence that tools read differently is refused, not rewritten, so the gate, the compile step and the
artefact check all hold one text:
- line ends other than LF and CRLF: a lone CR (a line end to the compiler, not to a regex over lines), the
  Unicode line breaks U+0085, U+2028 and U+2029 (line ends to Python's str.splitlines, not to the compiler);
- control characters other than tab and newline (NUL, form feed, vertical tab, escape, DEL, C1 controls), a
  byte order mark anywhere, lone surrogates (not encodable: no file holds them), and the bidirectional
  overrides (text that displays in another order than it compiles);
and, in C/C++ text (`cpp`):
- trigraphs (`??=` is `#` under -std=c++14, which a load_inline flag may ask for);
- a raw string whose `R` is glued to a longer name (`xR"(`: the compiler reads the name xR and a plain string)
  and a raw-string delimiter of characters other than letters, digits and `_` (`R"x"(...)x""`), which
  lexers read differently;
- a line splice with blanks between the backslash and the line end (gcc splices it, a reader does not), a
  splice that ends a `//` comment (the comment swallows the next line) and a splice between two characters
  that would then form one token (`sys\\<newline>tem`): a splice must have a blank on at least one side.
Each finding names the rule `source-text` and the 1-based line of the candidate file.

LITERALS is the one pattern of C/C++ comments and literals that every regex of the gate lexes with, as the
compiler's lexer does: a raw string only with a prefix that starts a token (`u8R"`, not `xR"`), a delimiter of
up to 16 characters other than parentheses, backslash and blanks, a pp-number with its digit separators only
before a letter or digit (`1'"'` is the number 1 and the character '"').
"""
from __future__ import annotations

import re

from pipeline.core.records import Finding
from pipeline.evaluation.gate.rules import SOURCE_TEXT, make_finding

_NAMES = {"\r": "a carriage return that is not part of a CRLF line end", "\0": "a NUL byte", "\f": "a form feed",
          "\v": "a vertical tab", "\x85": "the line break U+0085 (NEL)", "\u2028": "the line separator U+2028",
          "\u2029": "the paragraph separator U+2029", "\ufeff": "a byte order mark (U+FEFF)"}
# C0 controls but tab and LF (CR only outside CRLF), DEL, C1 controls, BOM, U+2028/9, bidi controls, surrogates
_ODD = re.compile("\r(?!\n)|[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\ufeff\u2028\u2029\u202a-\u202e\u2066-\u2069"
                  "\ud800-\udfff]")
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>-]")
_BLANK_SPLICE = re.compile(r"\\[ \t]+\n")
_SPLICE = re.compile(r"\\\n")
# a // comment (outside strings and block comments) that ends in a backslash
LITERALS = (r"""(?P<comment>//[^\n]*)|/\*.*?\*/|\b[0-9](?:[eEpP][+-]|'\w|[\w.])*"""
            r"""|(?<!\w)(?:u8|u|U|L)?R"(?P<delim>[^()\\\s]{0,16})\((?P<raw>.*?)\)(?P=delim)\""""
            r"""|(?:(?<!\w)(?:u8|u|U|L))?"(?P<string>(?:\\.|[^"\\\n])*)"|'(?:\\.|[^'\\\n])*'""")
_LEXEME = re.compile(LITERALS, re.S)
# a raw-string opening that lexers read differently: a longer name ending in R, or an unusual delimiter
_ODD_RAW = re.compile(r'(?<!\w)(\w*R)"([^()\\\s]{0,16})\(')


def compiler_text(raw: str) -> str:
    """The text every later step reads for a candidate's source `raw`: CRLF line ends made LF."""
    return raw.replace("\r\n", "\n")


def unreadable(raw: str) -> bool:
    """Whether `raw` holds a character of the first list above: no rule can read it as the compiler does (the
    C/C++ forms of the second list are refused, but the rest of the text still reads one way)."""
    return bool(_ODD.search(compiler_text(raw)))


def unreadable_findings(raw: str, line_offset: int = 0, cpp: bool = True) -> list[Finding]:
    """Findings for what in `raw` (whose line 1 is file line `line_offset + 1`) has no single meaning; `cpp`
    adds the C/C++ forms (trigraphs, line splices). One finding per kind and line."""
    text = compiler_text(raw)
    out, seen = [], set()

    def add(pos: int, what: str) -> None:
        line = line_offset + text.count("\n", 0, pos) + 1
        if (line, what) not in seen:
            seen.add((line, what))
            out.append(make_finding("source-text", SOURCE_TEXT, line, what))

    for m in _ODD.finditer(text):
        c = m.group()
        add(m.start(), f"has {_NAMES.get(c) or f'the control or format character U+{ord(c):04X}'}, which the "
                       f"compiler and the gate would read differently")
    if not cpp:
        return out
    for m in _TRIGRAPH.finditer(text):
        add(m.start(), f"has the trigraph {m.group()}, which some compiler modes read as another character")
    for m in _BLANK_SPLICE.finditer(text):
        add(m.start(), "has blanks between a line-continuation backslash and the line end (the compiler still "
                       "joins the lines)")
    for m in _SPLICE.finditer(text):
        before, after = text[m.start() - 1:m.start()], text[m.end():m.end() + 1]
        if before not in (" ", "\t", "\n", "") and after not in (" ", "\t", "\n", ""):
            add(m.start(), "joins two lines with a backslash between characters that become one token")
    for m in _ODD_RAW.finditer(text):
        if m.group(1) not in ("R", "u8R", "uR", "UR", "LR"):
            add(m.start(), f"glues the name {m.group(1)[:40]} to a raw-string opening {m.group(1)[-1:]}\"(, which "
                           f"the compiler reads as a name and a plain string")
        elif re.search(r"\W", m.group(2)):
            add(m.start(), f"opens a raw string with the delimiter {m.group(2)!r}; use letters, digits and _ only")
    for m in _LEXEME.finditer(text):
        comment = m.group("comment")
        if comment and comment.rstrip(" \t").endswith("\\"):
            add(m.start(), "ends a // comment with a backslash, which continues the comment onto the next line")
    return out
