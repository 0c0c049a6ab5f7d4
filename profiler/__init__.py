"""Profiles of simulated IPU runs: reading, reports, HTML pages, traces and the ipu-profile CLI.

    import profiler
    report = profiler.open_report("profile_dir")      # libpva-shaped reading API
    report.compilation.tiles[0].memory.category.vertexCode.total
    sum(step.ipus[0].cycles for step in report.execution.steps)

`profiler/` reads the profile document (docs/profile-format.md); it never imports `popxl`.
Importing this package is cheap: the reports, HTML and CLI load on first use.
"""
from __future__ import annotations

from .schema import ProfileError  # what reading a file that is not a readable profile raises

__all__ = ["open_report", "openReport", "load_profile", "ProfileError"]


def open_report(path):
    """Open a profile (a profile.json file or a directory holding one) as a Report."""
    from .api import open_report as _open

    return _open(path)


openReport = open_report  # libpva's spelling


def load_profile(path) -> dict:
    """The raw profile document (a dict) of a file or directory."""
    from ._format import load

    return load(path)
