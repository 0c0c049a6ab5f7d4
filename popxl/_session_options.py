"""`ir._pb_ir.getSessionOptions()`: the PopART session options object that PopXL scripts reach
through the Ir's internal handle to set engine options, IO tiles, partials types, caching...

`Ir._pb_ir` is a view of the Ir with PopART's `_internal.ir` interface (popxl/_pb); it holds one
of these objects. The options object keeps every attribute a script sets, starting from PopART's
defaults for the common ones. What the simulator acts on: nothing yet changes the simulated
program (IO tiles, partials types and engine options are recorded, not simulated); reading them
back works, so scripts that set and check options run unchanged.
"""
from __future__ import annotations

import os


class SessionOptions:
    """A permissive attribute bag with PopART's defaults for the options scripts commonly touch."""

    def __init__(self):
        cache = os.environ.get("POPART_CACHE_DIR")
        self.engineOptions: dict = {}
        self.convolutionOptions: dict = {}
        self.lstmOptions: dict = {}
        self.matmulOptions: dict = {}
        self.reportOptions: dict = {}
        self.numIOTiles = 0
        self.partialsTypeMatMuls = ""
        self.enableStochasticRounding = False
        self.enableEngineCaching = cache is not None
        self.cachePath = cache or "session_cache"
        self.constantWeights = True
        self.useHostCopyOps = False
        self.enableExplicitMainLoops = False
        self.aliasZeroCopy = False
        self.explicitRecomputation = False
        self.enableFloatingPointChecks = False
        self.instrumentWithHardwareCycleCounter = False
        self.logDir = ""  # where dot checkpoints go ("" = the working directory)
        self.dotChecks: set = set()  # dot checkpoints to write ("ALL" for every one)
        self.separateCallOpPdfs = True  # a dot file per graph (else <check>_all.dot)
        self.firstDotOp = 0  # the ops of the schedule drawn in dot files: [firstDotOp, finalDotOp)
        self.finalDotOp = 10000
        # float8: stop the program (poplar_application_runtime_error) when a log2 scale tensor holds
        # a value outside [-32, 32) at run time; acted on by the float8 casts, matmul and conv
        self.throwIfLog2ScaleTensorNotInRange = True

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()) if v not in ({}, "", False, 0))
        return f"SessionOptions({items})"
