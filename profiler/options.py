"""When to profile: POPLAR_ENGINE_OPTIONS (the SDK way) or IPU_SIM_PROFILE (ours).

    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"DIR"}'
    IPU_SIM_PROFILE=DIR            (1 / true / on: the current directory; 0 / off / empty: off)

Poplar options read from POPLAR_ENGINE_OPTIONS:
  autoReport.all                           graph and execution profile
  autoReport.outputGraphProfile            memory, program tree, steps (no execution trace alone)
  autoReport.outputExecutionProfile        the execution trace and cycle totals
  autoReport.directory                     where profile.json goes (default: the current directory)
  autoReport.executionProfileProgramRunCount   keep the trace of only the first N runs of a session
Other autoReport.* options (outputLoweredVars, outputArchive, outputDebugInfo, ...) have no
counterpart here and are ignored. With both variables set, IPU_SIM_PROFILE's directory wins.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class ProfileOptions:
    directory: str
    graph: bool = True
    execution: bool = True
    run_count: int | None = None  # trace kept for the first N runs only


_cache: dict = {}


def _truthy(v) -> bool:
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in _TRUE


def options(environ=None) -> ProfileOptions | None:
    """The profiling options of the environment, or None when profiling is off."""
    env = os.environ if environ is None else environ
    sim = env.get("IPU_SIM_PROFILE")
    pe = env.get("POPLAR_ENGINE_OPTIONS")
    if sim is None and pe is None:
        return None
    key = (sim, pe)
    if environ is None and key in _cache:
        return _cache[key]
    result = _parse(sim, pe)
    if environ is None:
        _cache[key] = result
    return result


def _parse(sim, pe) -> ProfileOptions | None:
    graph = execution = False
    directory = None
    run_count = None
    if pe:
        try:
            opts = json.loads(pe)
            if not isinstance(opts, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            warnings.warn(f"POPLAR_ENGINE_OPTIONS is not a JSON object of options ({e}); profiling stays off",
                          stacklevel=3)
            opts = {}
        if _truthy(opts.get("autoReport.all", False)):
            graph = execution = True
        if "autoReport.outputGraphProfile" in opts:
            graph = _truthy(opts["autoReport.outputGraphProfile"])
        if "autoReport.outputExecutionProfile" in opts:
            execution = _truthy(opts["autoReport.outputExecutionProfile"])
        if graph or execution:
            directory = str(opts.get("autoReport.directory") or ".")
        n = opts.get("autoReport.executionProfileProgramRunCount")
        if n is not None:
            try:
                run_count = max(0, int(n))
            except (TypeError, ValueError):
                warnings.warn(f"autoReport.executionProfileProgramRunCount={n!r} is not a number; ignored",
                              stacklevel=3)
    if sim is not None:
        v = sim.strip()
        if v.lower() in _FALSE:
            pass
        else:
            directory = "." if v.lower() in _TRUE else v
            graph = execution = True
    if directory is None or not (graph or execution):
        return None
    return ProfileOptions(directory=directory, graph=True, execution=execution, run_count=run_count)
