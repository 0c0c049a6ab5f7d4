"""Reading the C++ sources a cppimport binding module is compiled from.

Several programs ship a custom op under the same module name (popxl-addons' `rotary_pos_embed_binding`,
and the copies in Graphcore's Dolly and Llama applications, which rotate other pairs of units). The
op that runs must be the one the program's cppimport would have compiled, so a served binding is
resolved from its sources: the binding `.cpp` beside the importing package and the files its
cppimport configuration lists (`cfg['sources'] = [...]`). The arithmetic of an op lives in a few
named functions (the Opx's helpers and `grow`); a function is identified by its body with comments,
string literals, logging statements and all whitespace removed, so formatting, comments and
copyright lines do not matter, while any change to the code does.
"""
from __future__ import annotations

import hashlib
import os
import re
from functools import lru_cache
from typing import Dict, Optional, Tuple

_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"')
_LOGGING = re.compile(r"(?:popart::)?logging::\w+(?:::\w+)?\([^;]*\);")
_CFG_SOURCES = re.compile(r"cfg\[['\"]sources['\"]\]\s*=\s*\[([^\]]*)\]")


def _strip(text: str) -> str:
    """Code without comments and with every string literal emptied (braces in strings are text)."""
    return _STRINGS.sub('""', _COMMENTS.sub(" ", text))


def listed_sources(binding_text: str) -> Tuple[str, ...]:
    """The file names of `cfg['sources']` in a binding's cppimport configuration (a comment)."""
    m = _CFG_SOURCES.search(binding_text)
    if not m:
        return ()
    return tuple(re.findall(r"['\"]([^'\"]+)['\"]", m.group(1)))


def function_body(code: str, name: str) -> Optional[str]:
    """The normalised body of the first definition of function `name` (`ns::Class::f` or a plain
    name) in stripped code, or None."""
    for m in re.finditer(r"(?<![\w:])" + re.escape(name) + r"\s*\(", code):
        # a definition: the parameter list closes, optional qualifiers, then its body
        depth, i = 0, m.end() - 1
        while i < len(code):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            if depth == 0:
                break
            i += 1
        rest = re.match(r"\)\s*(?:const\s*)?(?:override\s*)?(?:final\s*)?\{", code[i:])
        if not rest:
            continue  # a call or a declaration
        start = i + rest.end()
        depth, j = 1, start
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        body = _LOGGING.sub("", code[start:j - 1])
        return re.sub(r"\s+", "", body)
    return None


def digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:16]


class CppSources:
    """The binding `.cpp` at `path` and the sources its cppimport configuration compiles with it."""

    def __init__(self, path: str):
        self.path = path
        with open(path, encoding="utf-8", errors="replace") as f:
            binding = f.read()
        folder = os.path.dirname(path)
        self.files = [path] + [os.path.join(folder, s) for s in listed_sources(binding)]
        self.code: Dict[str, str] = {}  # file -> stripped code
        for p in self.files:
            if os.path.exists(p):
                with open(p, encoding="utf-8", errors="replace") as f:
                    self.code[p] = _strip(f.read())

    def where(self, name: str) -> Optional[str]:
        """The file that defines function `name`."""
        return next((p for p, code in self.code.items() if function_body(code, name) is not None), None)

    def fingerprint(self, name: str) -> Optional[str]:
        for code in self.code.values():
            body = function_body(code, name)
            if body is not None:
                return digest(body)
        return None


@lru_cache(maxsize=None)
def sources(path: str) -> CppSources:
    return CppSources(path)


class Variant:
    """One known implementation of a binding module: the fingerprints its functions must have
    ({function name: set of digests}) and the binding classes that serve it."""

    def __init__(self, description: str, fingerprints: Dict[str, set], classes: list):
        self.description = description
        self.fingerprints = fingerprints
        self.classes = classes

    def matches(self, src: CppSources) -> bool:
        return all(src.fingerprint(f) in allowed for f, allowed in self.fingerprints.items())

    def differences(self, src: CppSources) -> list:
        """The functions of `src` that are not as in this variant."""
        return [f for f, allowed in self.fingerprints.items() if src.fingerprint(f) not in allowed]


def unservable(binding: str, src: CppSources, variants) -> str:
    """Why `src` cannot be served: the functions in which it differs from every known variant."""
    nearest = min(variants, key=lambda v: len(v.differences(src)))
    parts = []
    for f in nearest.differences(src):
        where = src.where(f)
        parts.append(f"`{f}` in {where}" if where else f"`{f}` (defined in none of {', '.join(src.files)})")
    known = "; ".join(v.description for v in variants)
    return (f"{binding}: the C++ custom op cppimport would compile from {src.path} is not one the simulator "
            f"can serve: {', '.join(parts)} differs from every implementation it knows ({known}). No C++ is "
            f"compiled here, and another op's numbers are never used instead; write the op in Python with "
            f"popxl.custom_op (docs/custom-ops.md).")
