"""The profile document's schema (docs/profile-format.md), checked before any reader touches it.

`validate(doc, where)` raises ProfileError listing what is wrong (a missing section, a field of the
wrong type, a run-length array that does not cover the tiles, a step pointing at a table entry
that does not exist) instead of letting a report fail later with a KeyError. Only what the readers
(`ipu-profile report`, `--json`, `--html`, `--trace`, `compare`, `profiler.open_report`) rely on is
required; fields added in later minor versions are optional.
"""
from __future__ import annotations

SCHEMA = "ipu-sim-profile"
SUPPORTED_VERSIONS = (1,)


class ProfileError(Exception):
    """A file that is not a profile this version can read."""


# A field spec: (type name, required, nested spec). Type names: int, num, str, bool, list, dict,
# rle (a flat list of [value, count] pairs of integers). A trailing "?" allows null.
_RLE = ("rle", True, None)
_INT = ("int", True, None)
_SCHEMA_V1 = {
    "target": ("dict", True, {
        "name": ("str", True, None),
        "num_tiles": _INT,
        "tiles_per_ipu": _INT,
        "bytes_per_tile": _INT,
        "clock_hz": ("num", True, None),
    }),
    "programs": ("dict", True, {"programs": ("list", True, None), "functions": ("list", False, None)}),
    "steps": ("list", True, "step"),
    "tile_cycles_table": ("list", True, "rle"),
    "memory": ("dict", True, {
        "categories": ("list", True, "str"),
        "tiles": ("dict", True, "rle"),
        "tile_total": _RLE,
        "totals": ("dict", True, "int"),
        "total": _INT,
        "capacity": _INT,
        "free": _INT,
        "max_tile": ("dict", True, {"tile": _INT, "bytes": _INT}),
        "always_live": ("dict", True, {"total": _INT, "tile": _RLE}),
        "worst_tiles": ("list", False, None),
        "variables": ("list", False, None),
        "dtypes": ("dict", False, None),
    }),
    "liveness": ("dict", True, {"not_always_live": ("list", True, "int")}),
    "code": ("dict?", False, {
        "resident": _RLE,
        "loaded_peak": _RLE,
        "all_resident": _RLE,
        "totals": ("dict", True, {k: _INT for k in ("resident", "loaded_peak", "with_loading", "all_resident",
                                                     "saved")}),
        "busiest_tile": ("dict", True, None),
        "peak_tile": ("dict", True, {"all_resident": ("dict", True, {"bytes": _INT}),
                                     "with_loading": ("dict", True, {"bytes": _INT}), "saved": _INT}),
        "functions": ("list", False, None),
        "load_steps": ("list", False, None),
    }),
    "execution": ("dict?", False, {
        "total_cycles": _INT,
        "runs": ("list", False, None),
        "steps_executed": ("int", False, None),
        "cycles_by_kind": ("dict", False, "int"),
        "trace": ("dict?", False, {"encoding": ("str", True, None), "length": _INT,
                                   "runs": ("list", True, "int"), "first_start": ("int", False, None)}),
    }),
    "wall": ("dict", False, None),
    "info": ("dict", False, None),
}
_STEP = {
    "id": _INT,
    "kind": ("str", True, None),
    "class": ("str", False, None),
    "name": ("str", True, None),
    "cycles": _INT,
    "tile_cycles": ("int?", False, None),
    "executions": ("int", False, None),
    "executed_cycles": ("int", False, None),
}
_MAX_PROBLEMS = 6


def _type_ok(value, tname: str) -> bool:
    if tname.endswith("?"):
        if value is None:
            return True
        tname = tname[:-1]
    if tname == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if tname == "num":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tname == "str":
        return isinstance(value, str)
    if tname == "bool":
        return isinstance(value, bool)
    if tname in ("list", "rle"):
        return isinstance(value, list)
    if tname == "dict":
        return isinstance(value, dict)
    raise AssertionError(tname)


def _describe(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    return {"list": "a list", "dict": "an object"}.get(type(value).__name__, type(value).__name__)


_TYPE_WORDS = {"int": "an integer", "num": "a number", "str": "a string", "bool": "a boolean",
               "list": "a list", "dict": "an object", "rle": "a run-length list [value, count, ...]"}


class _Checker:
    def __init__(self, num_tiles=None):
        self.problems: list[str] = []
        self.num_tiles = num_tiles

    def add(self, msg: str) -> None:
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(msg)

    def value(self, path: str, value, tname: str, nested) -> None:
        if not _type_ok(value, tname):
            self.add(f"{path} must be {_TYPE_WORDS[tname.rstrip('?')]}"
                     f"{' or null' if tname.endswith('?') else ''}, not {_describe(value)}")
            return
        if value is None:
            return
        base = tname.rstrip("?")
        if base == "rle":
            self.rle(path, value)
        elif isinstance(nested, dict):
            self.fields(path, value, nested)
        elif isinstance(nested, str):
            items = value.items() if base == "dict" else enumerate(value)
            for k, v in items:
                sub = f"{path}[{k!r}]" if base == "dict" else f"{path}[{k}]"
                if nested == "step":
                    self.value(sub, v, "dict", _STEP)
                else:
                    self.value(sub, v, nested, None)
                if len(self.problems) >= _MAX_PROBLEMS:
                    return

    def fields(self, path: str, obj: dict, spec: dict) -> None:
        for name, (tname, required, nested) in spec.items():
            sub = f"{path}.{name}" if path else name
            if name not in obj:
                if required:
                    self.add(f"missing {'section' if not path else 'field'} {sub!r}")
                continue
            self.value(sub, obj[name], tname, nested)

    def rle(self, path: str, runs: list) -> None:
        if len(runs) % 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in runs):
            self.add(f"{path} must be a run-length list of integer [value, count] pairs")
            return
        if self.num_tiles is not None and runs and path.startswith(("memory", "code")):
            covered = sum(runs[1::2])
            if covered != self.num_tiles:
                self.add(f"{path} covers {covered} tiles, the target has {self.num_tiles}")


def check_header(doc, where: str) -> None:
    if not isinstance(doc, dict):
        raise ProfileError(f"{where}: not an {SCHEMA} document (the file holds {_describe(doc)}, "
                           f"not a JSON object)")
    if doc.get("schema") != SCHEMA:
        got = "no 'schema' field" if "schema" not in doc else f"schema {_describe(doc.get('schema'))}"
        raise ProfileError(f"{where}: not an {SCHEMA} document ({got}; expected \"schema\": \"{SCHEMA}\")")
    v = doc.get("version")
    if not (isinstance(v, int) and not isinstance(v, bool)):
        raise ProfileError(f"{where}: the profile version must be an integer (the major version, e.g. 1), "
                           f"not {_describe(v) if 'version' in doc else 'missing'}")
    if v not in SUPPORTED_VERSIONS:
        newer = v > max(SUPPORTED_VERSIONS)
        raise ProfileError(
            f"{where}: profile version {v} is {'newer than' if newer else 'not one'} this reader "
            f"{'reads' if newer else 'knows'} (versions {', '.join(map(str, SUPPORTED_VERSIONS))})"
            f"{'; update ipu-sim to read it' if newer else ''}")


def validate(doc, where: str = "profile") -> None:
    """Raise ProfileError when `doc` is not a readable profile document, saying what is wrong."""
    check_header(doc, where)
    target = doc.get("target")
    n = target.get("num_tiles") if isinstance(target, dict) else None
    c = _Checker(n if isinstance(n, int) and not isinstance(n, bool) else None)
    c.fields("", doc, _SCHEMA_V1)
    if not c.problems:
        _cross_checks(doc, c)
    if c.problems:
        more = " (and perhaps more)" if len(c.problems) >= _MAX_PROBLEMS else ""
        raise ProfileError(f"{where}: not a valid {SCHEMA} version {doc['version']} document: "
                           + "; ".join(c.problems) + more
                           + ". Was it written by ipu-sim (IPU_SIM_PROFILE / POPLAR_ENGINE_OPTIONS) and left "
                             "unchanged?")


def _cross_checks(doc, c: _Checker) -> None:
    steps = doc["steps"]
    table = len(doc["tile_cycles_table"])
    for i, s in enumerate(steps):
        if s["id"] != i:
            c.add(f"steps[{i}].id is {s['id']}: steps must be listed by id")
            break
        tc = s.get("tile_cycles")
        if tc is not None and not 0 <= tc < table:
            c.add(f"steps[{i}].tile_cycles points at entry {tc} of tile_cycles_table, which has {table}")
            break
    mem = doc["memory"]
    for cat in mem["categories"]:
        if cat not in mem["tiles"]:
            c.add(f"memory.tiles has no entry for category {cat!r}")
    ex = doc.get("execution")
    trace = ex.get("trace") if isinstance(ex, dict) else None
    if isinstance(trace, dict) and trace.get("length"):
        runs = trace["runs"]
        if len(runs) % 3:
            c.add("execution.trace.runs must be a flat list of [first_step, count, repeat] triples")
        elif any(not 0 <= f < len(steps) or f + k > len(steps) for f, k in zip(runs[0::3], runs[1::3])):
            c.add("execution.trace.runs names steps that are not in 'steps'")
