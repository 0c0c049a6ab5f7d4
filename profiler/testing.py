"""Cycle regression tests users can write: expected figures with a tolerance and a recorded source.

    from profiler.testing import assert_cycles, cycles_of, GoldenCycles

    session.run(inputs)                                   # with profiling on (IPU_SIM_PROFILE=dir)
    doc = profiler.load_profile("dir")
    assert_cycles(cycles_of(doc, op="matmul"), 45_000, rel=0.05,
                  source="poplibs estimate of the same plan")

    golden = GoldenCycles("tests/golden/my_model.json")   # figures with their sources
    golden.check("step", cycles_of(doc))                  # collects every mismatch ...
    golden.assert_ok()                                    # ... and fails once, with a diff table

A golden file is JSON: `{"figures": {name: {"cycles": N, "source": "...", "rel": 0.05, "abs": 0}}}`.
`source` says where the expected value came from: "measured on hardware ...", "poplibs estimate
...", or "this simulator at version X" (what `GoldenCycles.record` writes). Run with
IPU_SIM_UPDATE_GOLDEN=1 (or `update=True`) to record the current figures on purpose; recorded
figures keep a source the file already gives them when the value did not change.

The pytest fixture `golden_cycles` (enable it with `pytest_plugins = ["profiler.testing"]` in a
conftest.py) gives a GoldenCycles on `<test file dir>/golden/<test file name>.json` that is checked
when the test ends.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

__all__ = ["CycleMismatch", "Expected", "assert_cycles", "cycles_of", "GoldenCycles", "simulator_source"]

UPDATE_ENV = "IPU_SIM_UPDATE_GOLDEN"


class CycleMismatch(AssertionError):
    """Simulated cycles differ from an expected figure by more than its tolerance."""


@dataclass(frozen=True)
class Expected:
    """An expected cycle count, how far the simulator may be from it, and where it comes from."""

    cycles: int
    source: str
    rel: float = 0.0
    abs: int = 0

    def limit(self) -> float:
        return max(self.abs, self.rel * abs(self.cycles))

    def matches(self, actual: int) -> bool:
        return abs(int(actual) - self.cycles) <= self.limit() + 1e-9

    def describe(self, actual: int, what: str = "cycles") -> str:
        diff = int(actual) - self.cycles
        pct = f" ({100 * diff / self.cycles:+.2f}%)" if self.cycles else ""
        tol = []
        if self.rel:
            tol.append(f"{100 * self.rel:g}%")
        if self.abs:
            tol.append(f"{self.abs:,} cycles")
        return (f"{what}: got {int(actual):,}, expected {self.cycles:,}{pct} "
                f"(tolerance {' or '.join(tol) or 'exact'}; expected value from: {self.source})")


def simulator_source() -> str:
    """'this simulator at version X': the figure was recorded from ipu-sim itself."""
    try:
        from importlib.metadata import version

        v = version("ipu-sim")
    except Exception:  # noqa: BLE001 - not installed: a checkout
        v = "unknown"
    return f"this simulator (ipu-sim {v})"


def assert_cycles(actual, expected, *, rel: float = 0.0, abs: int = 0, source: str | None = None,
                  what: str = "cycles") -> None:
    """Raise CycleMismatch unless `actual` is within the tolerance of `expected`.

    expected: an Expected, or a number (then `source` is required: say where it comes from);
    rel / abs: relative and absolute tolerance (the larger applies)."""
    if not isinstance(expected, Expected):
        if not source:
            raise ValueError("assert_cycles: say where the expected figure comes from (source=...), e.g. "
                             "'measured on a Mk2 IPU', 'poplibs estimate', or simulator_source()")
        expected = Expected(int(expected), source, rel, abs)
    if not expected.matches(actual):
        raise CycleMismatch(expected.describe(actual, what))


# ------------------------------------------------------------------------------------------------
# reading cycles out of a profile


def _doc(profile) -> dict:
    if isinstance(profile, dict):
        return profile
    if hasattr(profile, "_doc"):  # a profiler Report
        return profile._doc
    from ._format import load

    return load(profile)


def cycles_of(profile, *, op: str | None = None, step: str | None = None, kind: str | None = None,
              executed: bool = True) -> int:
    """Cycles of a profile (a document, a file or directory, or a Report).

    Without filters: the total the engine counted over all runs (`execution.total_cycles`).
    op: the steps that came from popxl ops whose name (or name scope) equals or starts with `op/`;
    step: steps whose name equals `step` or starts with `step/`; kind: steps of one kind
    (compute, exchange, ...). executed=True sums executed cycles (every execution of the steps);
    False sums each matching step once (its cost per execution)."""
    doc = _doc(profile)
    if op is None and step is None and kind is None:
        if not executed:
            return sum(int(s["cycles"]) for s in doc["steps"])
        return int((doc.get("execution") or {}).get("total_cycles", 0))

    def under(name, prefix):
        return name is not None and (name == prefix or name.startswith(prefix + "/"))

    total = 0
    found = False
    for s in doc["steps"]:
        if op is not None and not (under(s.get("op"), op) or under(s.get("scope"), op)):
            continue
        if step is not None and not under(s.get("name"), step):
            continue
        if kind is not None and s.get("kind") != kind:
            continue
        found = True
        total += int(s.get("executed_cycles", s["cycles"]) if executed else s["cycles"])
    if not found:
        what = ", ".join(f"{k}={v!r}" for k, v in (("op", op), ("step", step), ("kind", kind)) if v is not None)
        raise KeyError(f"cycles_of: no step of the profile matches {what}")
    return total


# ------------------------------------------------------------------------------------------------
# golden files with sources


class GoldenCycles:
    """Expected figures kept in a JSON file, each with its source and tolerance.

    check(name, actual) compares and remembers mismatches; assert_ok() raises one CycleMismatch
    with a table of every mismatch. In update mode (update=True or IPU_SIM_UPDATE_GOLDEN=1) check()
    records the actual figure instead and save() (called by assert_ok) writes the file."""

    def __init__(self, path: str, update: bool | None = None, default_rel: float = 0.0):
        self.path = path
        self.update = bool(os.environ.get(UPDATE_ENV)) if update is None else update
        self.default_rel = default_rel
        self.figures: dict[str, Expected] = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            for name, f in (data.get("figures") or {}).items():
                if "cycles" not in f or "source" not in f:
                    raise ValueError(f"{path}: figure {name!r} needs 'cycles' and 'source'")
                self.figures[name] = Expected(int(f["cycles"]), str(f["source"]), float(f.get("rel", 0.0)),
                                              int(f.get("abs", 0)))
        self.mismatches: list[tuple[str, Expected | None, int]] = []
        self._dirty = False

    def expected(self, name: str) -> Expected | None:
        return self.figures.get(name)

    def check(self, name: str, actual: int, source: str | None = None) -> bool:
        exp = self.figures.get(name)
        if self.update:
            if exp is None or exp.cycles != int(actual) or (source and source != exp.source):
                keep = source or (exp.source if exp is not None and exp.cycles == int(actual) else simulator_source())
                rel = exp.rel if exp is not None else self.default_rel
                self.figures[name] = Expected(int(actual), keep, rel, exp.abs if exp is not None else 0)
                self._dirty = True
            return True
        if exp is None or not exp.matches(actual):
            self.mismatches.append((name, exp, int(actual)))
            return False
        return True

    def diff(self) -> str:
        """The mismatches as a readable table."""
        lines = [f"{len(self.mismatches)} figure(s) differ from {self.path}:",
                 f"  {'figure':<28} {'expected':>12} {'got':>12} {'change':>9}  tolerance   source"]
        for name, exp, got in self.mismatches:
            if exp is None:
                lines.append(f"  {name:<28} {'(none)':>12} {got:>12,} {'':>9}  -           no expected figure recorded")
                continue
            pct = f"{100 * (got - exp.cycles) / exp.cycles:+.2f}%" if exp.cycles else "-"
            tol = f"{100 * exp.rel:g}%" if exp.rel else ("exact" if not exp.abs else f"{exp.abs} cyc")
            lines.append(f"  {name:<28} {exp.cycles:>12,} {got:>12,} {pct:>9}  {tol:<10}  {exp.source}")
        lines.append(f"If the change is intended, record it: {UPDATE_ENV}=1 (and commit {self.path} "
                     "with the change that caused it).")
        return "\n".join(lines)

    def save(self) -> None:
        data = {"about": "Expected cycle figures, each with where the value came from. Record on purpose with "
                         f"{UPDATE_ENV}=1.",
                "figures": {k: {"cycles": e.cycles, "source": e.source,
                                **({"rel": e.rel} if e.rel else {}), **({"abs": e.abs} if e.abs else {})}
                            for k, e in sorted(self.figures.items())}}
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
            fh.write("\n")
        self._dirty = False

    def assert_ok(self) -> None:
        if self.update:
            if self._dirty:
                self.save()
            return
        if self.mismatches:
            raise CycleMismatch(self.diff())


try:  # the pytest fixture, when pytest is there (pytest_plugins = ["profiler.testing"])
    import pytest

    @pytest.fixture
    def golden_cycles(request):
        """A GoldenCycles on <test dir>/golden/<test module>.json, checked when the test ends."""
        path = os.path.join(os.path.dirname(str(request.fspath)), "golden",
                            os.path.splitext(os.path.basename(str(request.fspath)))[0] + ".json")
        g = GoldenCycles(path)
        yield g
        g.assert_ok()
except ImportError:  # pragma: no cover - pytest is only needed for the fixture
    pass
