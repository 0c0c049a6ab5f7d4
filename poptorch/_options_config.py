"""Options.loadFromFile: each line is a method call on the options object without its `options.`
prefix (`deviceIterations(4)`, `Training.gradientAccumulation(2)`,
`outputMode(poptorch.OutputMode.All)`); blank lines and `#` comments are skipped.

Each line is parsed with `ast` and only calls of option methods with literal arguments (or
`poptorch.<Enum>.<Member>` / `torch.<dtype>`) are applied: a file cannot run arbitrary code.
"""
from __future__ import annotations

import ast


def _value(node, where, error):
    import torch

    from . import enums
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    parts = []
    n = node
    while isinstance(n, ast.Attribute):
        parts.append(n.attr)
        n = n.value
    if isinstance(n, ast.Name):
        parts.append(n.id)
        parts.reverse()
        if parts[0] == "poptorch" and len(parts) == 3 and hasattr(enums, parts[1]):
            return getattr(getattr(enums, parts[1]), parts[2])
        if parts[0] == "torch" and len(parts) == 2 and isinstance(getattr(torch, parts[1], None), torch.dtype):
            return getattr(torch, parts[1])
    raise error(f"{where}: arguments must be literals, poptorch enum members or torch dtypes")


def parse_and_set_options(options, filepath: str, error) -> None:
    with open(filepath, encoding="utf-8") as f:
        lines = f.readlines()
    for lineno, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{filepath}:{lineno}: {line!r}"
        try:
            tree = ast.parse(line, mode="eval").body
        except SyntaxError as e:
            raise error(f"{where}: not a valid option call ({e.msg})") from None
        if not isinstance(tree, ast.Call):
            raise error(f"{where}: each line must call an option, for example deviceIterations(4)")
        path = []
        fn = tree.func
        while isinstance(fn, ast.Attribute):
            path.append(fn.attr)
            fn = fn.value
        if not isinstance(fn, ast.Name):
            raise error(f"{where}: each line must call an option, for example deviceIterations(4)")
        path.append(fn.id)
        path.reverse()
        target = options
        for name in path[:-1]:
            if name.startswith("__") or not hasattr(target, name):
                raise error(f"{where}: unknown option group {name!r}")
            target = getattr(target, name)
        method = getattr(target, path[-1], None) if not path[-1].startswith("_") else None
        if not callable(method):
            raise error(f"{where}: unknown option {'.'.join(path)!r}")
        args = [_value(a, where, error) for a in tree.args]
        kwargs = {k.arg: _value(k.value, where, error) for k in tree.keywords}
        try:
            method(*args, **kwargs)
        except (ValueError, TypeError, AssertionError) as e:
            raise error(f"{where}: {e}") from None
