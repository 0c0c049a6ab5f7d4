"""`import pva`: PopVision's analysis library (libpva) Python API over the simulator's profiles.

    import pva
    report = pva.openReport("profile_dir/profile.json")    # or the directory; a Session's
    report.compilation.target.numTiles                     # session._pb_session.getReport()
    [t.memory.total.includingGaps for t in report.compilation.tiles]
    report.compilation.tiles[0].memory.category.vertexCode.total
    max(s.notAlwaysLiveMemory.bytes for s in report.compilation.livenessProgramSteps)
    [s for s in report.execution.steps if s.program.type == pva.Program.Type.StreamCopyMid]
    report.execution.runs[0].microseconds.end

The classes are the profiler's libpva-shaped reading API (profiler/api.py), under libpva's names
and module layout (`pva.pva_core` is this module, as libpva's classes live in `pva.pva_core`).
The profiles are the simulator's documents (docs/profile-format.md), not PopVision's .pop files.
"""
import sys as _sys

from profiler.api import (Bytes, Categories, Compilation, Execution, ExecutionStep, LivenessStep, PoplarVersion,
                          ProfileReportVersion, Program, Report, Run, Target, Tile, TileMemory)
from profiler.api import open_report as openReport  # noqa: N813 - libpva's name

__all__ = ["openReport", "Report", "Compilation", "Execution", "ExecutionStep", "Program", "Run", "Target", "Tile",
           "TileMemory", "LivenessStep", "Categories", "Bytes", "ProfileReportVersion", "PoplarVersion",
           "CompilationReport", "ExecutionReport", "pva_core"]

CompilationReport = Compilation  # libpva's class names
ExecutionReport = Execution
pva_core = _sys.modules[__name__]
