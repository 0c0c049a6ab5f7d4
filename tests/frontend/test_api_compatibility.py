"""Every public PopXL 3.x name in ../shared/popxl-api.md (the SDK's signatures) exists here, and
every function or method listed takes the SDK's parameters, in the SDK's order: scripts written for
the SDK call them unchanged. docs/compatibility.md says how each feature behaves here."""
import importlib
import inspect
import os
import re

import pytest


def _find_api():
    """../shared/popxl-api.md from the checkout's root (or from a parent, for git worktrees)."""
    d = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    while True:
        candidate = os.path.join(os.path.dirname(d), "shared", "popxl-api.md")
        if os.path.exists(candidate) or os.path.dirname(d) == d:
            return candidate
        d = os.path.dirname(d)


API = _find_api()


def _sections():
    sections, cur = {}, None
    with open(API) as f:
        for line in f:
            m = re.match(r"^## (popxl/.*)\.py", line)
            if m:
                cur = m.group(1).replace("/", ".")
                cur = cur[: -len(".__init__")] if cur.endswith(".__init__") else cur
                sections[cur] = []
                continue
            m = re.match(r"^( +)(?:@[\w.]+ )?(def|class) (\w+)(?:\((.*)\))?", line)
            if cur is not None and m:
                sections[cur].append((len(m.group(1)), m.group(2), m.group(3), m.group(4) or ""))
    return sections


def _param_names(sig: str):
    parts, depth, cur = [], 0, ""
    for ch in sig:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    names = [p.strip().split(":")[0].split("=")[0].strip().lstrip("*") for p in parts]
    return [n for n in names if n and n not in ("self", "cls")]


def _entries():
    if not os.path.exists(API):
        return []
    out = []
    for module, items in _sections().items():
        owner = None
        for indent, kind, name, sig in items:
            if indent == 4:
                owner = name if kind == "class" else None
                out.append((module, None, name, kind, sig))
            elif owner is not None:
                out.append((module, owner, name, kind, sig))
    return out


ENTRIES = _entries()


@pytest.mark.skipif(not ENTRIES, reason="../shared/popxl-api.md is not beside the checkout")
@pytest.mark.parametrize("module,owner,name,kind,sig", ENTRIES,
                         ids=[f"{m}.{o + '.' if o else ''}{n}" for m, o, n, _, _ in ENTRIES])
def test_public_name_exists_with_the_sdk_parameters(module, owner, name, kind, sig):
    mod = importlib.import_module(module)
    obj = getattr(mod, owner) if owner else mod
    assert hasattr(obj, name), f"{module}.{owner + '.' if owner else ''}{name} is missing"
    member = getattr(obj, name)
    if kind != "def" or not callable(member):
        return
    try:
        ours = [p.lstrip("*") for p in inspect.signature(member).parameters if p not in ("self", "cls")]
    except (TypeError, ValueError):
        return
    want = _param_names(sig)
    assert ours[: len(want)] == want, f"{module}.{name}: SDK parameters {want}, ours {ours}"


def test_the_api_list_is_read():
    if ENTRIES:
        assert len(ENTRIES) > 350
