"""Static gate, CUDA/C++ half: the rules read off a source's text rather than its syntax tree.

    text_findings(code, kept, line_of, add, fmt, profile, readable_asm)   # `add(rule, text_line, what)`
    asm_text_findings(asm, line, add)                                     # the rules on one asm text

`code` is the spliced source with comments, strings and char literals blanked, `kept` the same with strings kept
(both of one length, so an offset means the same place in each); `line_of(offset)` is the source line of an offset.
The rules:
- directives by allow-list (DIRECTIVES): `#line` and line markers are line-directive; `#include_next`, `#import`,
  `#embed` and an #include that names a header by macro or one off the allow-list are forbidden-include; any other
  directive (`#ident`, `#assert`, `#sccs`, ...) is `directive`;
- pragmas by allow-list (PRAGMAS) in every form: `#pragma`, `_Pragma("...")` (whose argument must be one string
  literal, not a macro or a stringised parameter) and `__pragma(...)`; `omp` is threads, `GCC dependency`
  (which tells whether a file exists and how old it is) forbidden-include, any other `pragma`;
- file-existence probes: `__has_include`, `__has_include_next`, `__has_embed` in any spelling are forbidden-include;
- digraphs (`%:`, `<%`, `%>`, `<:`, `:>`) anywhere in code: `digraph`;
- thread-local storage (`thread_local`, `__thread`, `_Thread_local`), whose objects are built by code that runs
  when a thread first touches them (or the library loads): load-time-code;
- the assembly text of every asm statement (string literals concatenated and unescaped), wherever it stands: an
  assembler directive that places bytes, sections or symbols (`.byte`, `.long`, `.quad`, `.inst`, `.incbin`,
  `.section`, `.pushsection`, ...) is inline-asm-host (PTX has none of them: only host assembly can use them), and
  an instruction that enters the kernel (`syscall`, `sysenter`, `int $0x80`) is process-or-file-or-network;
- an asm keyword the syntax tree did not read as a whole asm statement (`#define A __asm__`, `asm(D(x))`, a
  template built by a function-like macro): inline-asm-host, since neither its place nor its text is known.
"""
from __future__ import annotations

import re

from pipeline.evaluation.gate.profile import GateProfile
from pipeline.evaluation.gate.source_text import LITERALS

DIRECTIVES = {"if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif", "define", "undef", "include",
              "pragma", "error", "warning", ""}
_PRAGMAS = re.compile(r"(unroll|nounroll|once|pack|GCC\s+(unroll|ivdep|diagnostic)|clang\s+diagnostic"
                      r"|(nv_)?diag_(suppress|default|warning|error|once)|nv_diagnostic|nv_exec_check_disable"
                      r"|hd_warning_disable)\b.*|(unroll|pack)\s*\(.*", re.S)
_DIRECTIVE_LINE = re.compile(r"^[ \t]*(#|%:)[ \t]*(\w*)(.*)$", re.M)
# names reserved to the compiler and its libraries (__CUDA_ARCH__, __CUDACC__, _GLIBCXX_ASSERTIONS, ...): defining or
# undefining one changes what the system headers and the compiler's own passes mean; one common honest spelling kept
_RESERVED_NAME = re.compile(r"__\w*|_[A-Z]\w*")
_RESERVED_OK = {"_USE_MATH_DEFINES"}
_PRAGMA_OPERATOR = re.compile(r"""_Pragma\s*\(\s*(?:L|u8|u|U)?"((?:\\.|[^"\\\n])*)"\s*\)""")
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b(?:\s|\bvolatile\b|\b__volatile__\b|\bgoto\b|\binline\b)*\(")
_ASM_LITERAL = re.compile(LITERALS, re.S)  # the source's literals, lexed as the compiler does
_HOST_ASM_DIRECTIVE = re.compile(
    r"(?:^|[\s;{}:])\.(byte|2byte|4byte|8byte|word|hword|short|int|long|quad|octa|inst\w*|incbin|insn|reloc"
    r"|ascii|asciz|string\w*|fill|skip|space|zero|org|section|pushsection|popsection|previous|subsection|text|data"
    r"|bss|init_array|fini_array|preinit_array|symver|set|equ|equiv|type|size|uleb128|sleb128|dc\.\w+)\b")
_SYSCALL_WORD = re.compile(r"\b(syscall|sysenter|int\s*\$?0x80|int\s*\$?128)\b", re.I)



# --- includes -----------------------------------------------------------------------------------
# cuda.h declares the driver API, whose calls stay refused by name (driver-api) and, once built, as
# symbols; vector, limits, math_constants.h and cuComplex.h are header-only.
_INCLUDES = {"cuda_runtime.h", "cuda_runtime_api.h", "device_launch_parameters.h", "cuda_fp16.h",
             "cuda_bf16.h", "cuda_fp8.h", "mma.h", "cooperative_groups.h", "cuda/pipeline", "cuda/barrier",
             "stdint.h", "cstdint", "cstddef", "stddef.h", "math.h", "cmath", "cfloat", "float.h", "climits",
             "limits.h", "algorithm", "type_traits", "utility", "cstdio", "stdio.h", "assert.h", "cassert",
             "vector_types.h", "cuda.h", "math_constants.h", "vector", "limits", "cuComplex.h",
             "curand_kernel.h"}  # cuRAND's device generators (header only; its host API, curand.h, is not listed)
_INCLUDE_PREFIXES = ("cooperative_groups/", "cub/", "cuda/std/")
# parts of what torch/extension.h includes anyway
_TORCH_INCLUDES = {"torch/extension.h", "ATen/cuda/CUDAContext.h", "c10/cuda/CUDAStream.h", "ATen/ATen.h",
                   "torch/types.h", "c10/cuda/CUDAGuard.h"}


def include_allowed(path: str, fmt: str, profile: GateProfile) -> bool:
    """Whether a candidate of format `fmt` may #include `path` under the gate profile `profile`."""
    if ".." in path or path.startswith("/") or "\\" in path:
        return False
    return (path in _INCLUDES or path.startswith(_INCLUDE_PREFIXES)
            or (fmt == "kernelbench" and (path in _TORCH_INCLUDES or path in profile.includes)))


def _pragma_rule(body: str) -> tuple[str, str] | None:
    """(rule, what) for the text of a pragma that is not on the allow-list, else None."""
    body = " ".join(body.split())
    if re.match(r"omp\b", body):
        return "threads", "uses an OpenMP pragma"
    if re.match(r"GCC\s+dependency\b", body):
        return "forbidden-include", (f"has the pragma {body[:60]!r}, which tells whether a file of the compile "
                                     f"machine exists and how old it is")
    if _PRAGMAS.fullmatch(body):
        return None
    return "pragma", f"has the pragma {body[:60]!r}, which is not on the allow-list"


def _unescape(body: str) -> str:
    simple = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
    return re.sub(r"\\([xX][0-9a-fA-F]+|[0-7]{1,3}|.)", lambda m: (
        chr(int(m.group(1)[1:], 16) % 0x110000) if m.group(1)[0] in "xX" else
        chr(int(m.group(1), 8)) if m.group(1)[0] in "01234567" else simple.get(m.group(1), m.group(1))), body)


def _closing(code: str, open_at: int) -> int:
    """The offset just past the parenthesis that closes the one at `open_at` (the text's end if none)."""
    depth = 0
    for i in range(open_at, len(code)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return i + 1
    return len(code)


def text_findings(code: str, kept: str, line_of, add, fmt: str, profile: GateProfile,
                  readable_asm: dict[int, int]) -> None:
    """Apply the text rules (module docstring) to one source; each finding goes to `add(rule, line, what)`.
    `readable_asm` counts, per source line, the asm statements the syntax tree read whole (keyword and
    assembly of string literals and string macros); an asm keyword beyond them is inline-asm-host."""
    for m in _DIRECTIVE_LINE.finditer(kept):
        name, rest, line = m.group(2), m.group(3).strip(), line_of(m.start())
        if name == "line" or name[:1].isdigit():
            add("line-directive", line, "has a #line directive or line marker")
        elif name in ("include", "include_next", "import", "embed"):
            target = re.match(r"""(<([^>]*)>|"([^"]*)")\s*$""", rest)
            path = target and (target.group(2) or target.group(3))
            if name != "include" or not path or not include_allowed(path, fmt, profile):
                add("forbidden-include", line, f"has the directive #{name} {rest[:60]}")
        elif name == "pragma":
            hit = _pragma_rule(rest)
            if hit:
                add(hit[0], line, hit[1])
        elif name not in DIRECTIVES:
            add("directive", line, f"has the directive #{name}, which is not on the allow-list")
        elif name in ("define", "undef"):
            macro = re.match(r"\s*(\w+)", rest)
            if macro and _RESERVED_NAME.fullmatch(macro.group(1)) and macro.group(1) not in _RESERVED_OK:
                add("reserved-macro", line, f"#{name}s {macro.group(1)}, a name reserved to the compiler and its "
                                       f"libraries")
    for m in re.finditer(r"\b(_Pragma|__pragma)\b", code):
        if m.group(1) == "__pragma":
            add("pragma", line_of(m.start()), "uses __pragma(...), which is not on the allow-list")
            continue
        literal = _PRAGMA_OPERATOR.match(kept, m.start())
        hit = _pragma_rule(_unescape(literal.group(1))) if literal else \
            ("pragma", "uses _Pragma with an argument that is not one string literal (a macro or a stringised "
                       "parameter hides the pragma)")
        if hit:
            add(hit[0], line_of(m.start()), hit[1])
    for m in re.finditer(r"\b__has_(include|embed)\w*", code):
        add("forbidden-include", line_of(m.start()), f"asks {m.group()} whether a file exists, which turns the "
                                                     f"compile machine's files into compile results")
    for m in re.finditer(r"%:|<%|%>|<:(?!:[^:>])|:>", code):
        add("digraph", line_of(m.start()), f"writes the digraph {m.group()}")
    for m in re.finditer(r"\b(thread_local|__thread|_Thread_local)\b", code):
        add("load-time-code", line_of(m.start()), f"declares {m.group()} storage, whose objects are built by code "
                                                  f"that runs outside the entry point")
    for m in _ASM.finditer(code):
        end = _closing(code, m.end() - 1)
        asm = "".join(lit.group("raw") if lit.group("raw") is not None else _unescape(lit.group("string") or "")
                      for lit in _ASM_LITERAL.finditer(kept, m.end(), end))
        asm_text_findings(asm, line_of(m.start()), add)
    seen: dict[int, int] = {}
    for m in re.finditer(r"\b(asm|__asm__|__asm)\b", code):
        line = line_of(m.start())
        seen[line] = seen.get(line, 0) + 1
        if seen[line] > readable_asm.get(line, 0):
            add("inline-asm-host", line, f"uses {m.group()} where the gate cannot read the statement's assembly "
                                         f"(a macro names the keyword or builds its text)")


def asm_text_findings(asm: str, line: int, add) -> None:
    """The rules on the assembly text `asm` of one asm statement at `line` (module docstring)."""
    directive, syscall = _HOST_ASM_DIRECTIVE.search(asm), _SYSCALL_WORD.search(asm)
    if directive:
        add("inline-asm-host", line, f"has an asm statement with the assembler directive .{directive.group(1)}, "
                                     f"which places host bytes, sections or symbols")
    if syscall:
        add("process-or-file-or-network", line, f"has an asm statement with the instruction {syscall.group(1)}, "
                                                f"a direct system call")
