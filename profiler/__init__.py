"""Profiles of simulated IPU runs: reading, reports, HTML pages, traces and the ipu-profile CLI.

    import profiler
    report = profiler.open_report("profile_dir")      # libpva-shaped reading API
    report.compilation.tiles[0].memory.category.vertexCode.total
    sum(step.ipus[0].cycles for step in report.execution.steps)

`profiler/` builds, writes and reads the profile document (docs/profile-format.md; the format
is defined once, in `_format.py`); it never imports `popxl`. Importing this package is cheap: the
document builder, reports, HTML and CLI load on first use.

    doc = profiler.build_profile(executable, engine)   # an ipu.Executable and the Engine that ran it
    profiler.write_document(doc, "profile.json")
"""
from __future__ import annotations

from .schema import ProfileError  # what reading a file that is not a readable profile raises

__all__ = ["open_report", "openReport", "load_profile", "build_profile", "write_document", "ProfileError"]


def open_report(path):
    """Open a profile (a profile.json file or a directory holding one) as a Report."""
    from .api import open_report as _open

    return _open(path)


openReport = open_report  # noqa: N816  (libpva's spelling)


def load_profile(path) -> dict:
    """The raw profile document (a dict) of a file or directory."""
    from ._format import load

    return load(path)


def build_profile(executable, engine=None, **facts) -> dict:
    """The profile document of an `ipu.Executable` and the `ipu.Engine` that ran it (see
    `profiler.document.build_profile` for the facts a frontend adds: op names, runs, wall times)."""
    from .document import build_profile as _build

    return _build(executable, engine, **facts)


def write_document(doc: dict, path) -> str:
    """Write a profile document to `path` atomically; returns the path."""
    from ._format import write_document as _write

    return _write(doc, path)
