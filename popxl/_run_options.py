"""The options of one popxl Session, resolved once when the session is made: engine options (the
Ir's session options, as PopART passes them, under POPLAR_ENGINE_OPTIONS, which wins as in
Poplar) and the simulator's IPU_SIM_* environment variables (read through `ipu.env`, the one
place the machine reads them). The session hands them to the device (target), the lowering (index
checks), the engine (compiled loop, threads, BLAS threads, huge pages) and the profiler (when and
where to write a profile); none of them reads the environment or the Ir's options for itself.

docs/options.md has the table of every environment variable the project reads.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional

from ipu import env as machine_env
from profiler.options import ProfileOptions
from profiler.options import options as profile_options

CHECK_INDICES = "debug.checkIndices"
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class RunOptions:
    """engine_options: every engine option of the session (the Ir's, then POPLAR_ENGINE_OPTIONS').
    check_indices: the debug.checkIndices option (IPU_SIM_CHECK_INDICES wins): the lowering adds
    host checks of run-time indices (popxl/lowering/index_checks.py).
    profile: where and what to profile (IPU_SIM_PROFILE, autoReport.*), None when off.
    compiled / threads: the engine's step loop (IPU_SIM_COMPILED; IPU_SIM_THREADS, None: as many
    as Numba has).
    target: the target name sessions compile for (IPU_SIM_TARGET; None: the device's own).
    blas_threads / huge_pages: the engine's host resources (IPU_SIM_BLAS_THREADS, 0: BLAS left
    alone; IPU_SIM_HUGE_PAGES)."""
    engine_options: Dict[str, str] = field(default_factory=dict)
    check_indices: bool = False
    profile: Optional[ProfileOptions] = None
    compiled: bool = True
    threads: Optional[int] = None
    target: Optional[str] = None
    blas_threads: int = 1
    huge_pages: bool = True


def _ir_engine_options(ir) -> Dict[str, str]:
    try:
        return {str(k): v for k, v in dict(ir._pb_ir.getSessionOptions().engineOptions).items()}
    except AttributeError:
        return {}


def _env_engine_options(environ: Mapping[str, str]) -> Dict[str, str]:
    text = environ.get("POPLAR_ENGINE_OPTIONS")
    if not text:
        return {}
    try:
        opts = json.loads(text)
    except ValueError:
        opts = None
    if not isinstance(opts, dict):
        return {}  # profiler.options warns about it once, as profiling is what it switches
    return {str(k): v for k, v in opts.items()}


def resolve(ir, environ: Optional[Mapping[str, str]] = None) -> RunOptions:
    """The options of a session of `ir` in this environment (os.environ by default)."""
    env = os.environ if environ is None else environ
    engine_options = {**_ir_engine_options(ir), **_env_engine_options(env)}
    check = env.get("IPU_SIM_CHECK_INDICES")
    if check is None:
        check = str(engine_options.get(CHECK_INDICES, "false"))
    profile = profile_options(None if environ is None else env)
    if profile is None:
        # autoReport.* set on the Ir's session options only (POPLAR_ENGINE_OPTIONS wins when set)
        auto = {k: v for k, v in _ir_engine_options(ir).items() if k.startswith("autoReport.")}
        if auto:
            profile = profile_options({"POPLAR_ENGINE_OPTIONS": json.dumps(auto)})
    return RunOptions(engine_options, check.strip().lower() in _TRUE, profile, machine_env.compiled(env),
                      machine_env.threads(env), machine_env.target_name(env), machine_env.blas_threads(env),
                      machine_env.huge_pages(env))
