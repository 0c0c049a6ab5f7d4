"""A small reading API for profiles, shaped like Graphcore's libpva so that scripts port easily.

    import profiler
    report = profiler.open_report("DIR")            # or openReport; a profile.json or its directory
    report.compilation.target.numTiles
    [t.memory.total.includingGaps for t in report.compilation.tiles]
    report.compilation.tiles[5].memory.category.vertexCode.total
    max(s.notAlwaysLiveMemory.bytes for s in report.compilation.livenessProgramSteps)
    sum(step.ipus[0].cycles for step in report.execution.steps)
    report.execution.steps[3].tile_cycles          # NumPy array of cycles on every tile

libpva's camelCase names are provided next to Python snake_case ones, and its enums
(`Program.Type`, `Target.Type`); the `pva` package re-exports these classes under libpva's module
names (`import pva; pva.openReport(...)`). Everything is read from the document
(docs/profile-format.md); `report.doc` is the raw dict.
"""
from __future__ import annotations

import enum
import os
from collections.abc import Sequence

import numpy as np

from . import analysis
from ._format import check, decode_trace, load, step_class, unrle

# our category name -> libpva-style names
_CATEGORY_ALIASES = {
    "variables": ("variables",),
    "constants": ("constants",),
    "temporaries": ("temporaries", "notAlwaysLiveVariables"),
    "vertex_code": ("vertexCode",),
    "vertex_state": ("vertexState", "vertexInstanceState"),
    "exchange_code": ("exchangeCode", "internalExchangeCode"),
    "control_code": ("controlCode",),
    "stack": ("stack",),
    "code_loaded": ("codeLoaded",),
}


def open_report(path) -> "Report":
    """Open a profile file (profile.json) or the directory holding it."""
    return Report(load(path))


openReport = open_report


class Bytes:
    """A byte count shaped like libpva's memory records (`.total`, `.includingGaps`, `.bytes`)."""

    def __init__(self, n: int):
        self.total = self.includingGaps = self.excludingGaps = self.bytes = int(n)

    def __int__(self):
        return self.total

    def __index__(self):
        return self.total

    def __eq__(self, other):
        return int(self) == int(other)

    def __repr__(self):
        return f"Bytes({self.total})"


class Categories:
    """Memory of one tile (or of all tiles) by category: `.vertexCode.total`, `['vertex_code']`."""

    def __init__(self, values: dict):
        self._values = {k: int(v) for k, v in values.items()}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        for cat, aliases in _CATEGORY_ALIASES.items():
            if name == cat or name in aliases:
                return Bytes(self._values.get(cat, 0))
        if name in self._values:
            return Bytes(self._values[name])
        raise AttributeError(f"no memory category {name!r}; categories are {sorted(self._values)}")

    def __getitem__(self, cat):
        return self._values[cat]

    def items(self):
        return self._values.items()

    def as_dict(self) -> dict:
        return dict(self._values)

    def __repr__(self):
        return f"Categories({self._values})"


class TargetType(enum.IntEnum):
    """libpva's Target.Type: what the program was compiled for."""
    Cpu = 0
    IpuModel = 1
    Ipu = 2
    Unknown = 3


_DEVICE_TYPES = {"ipu_hw": TargetType.Ipu, "ipu_model": TargetType.IpuModel, "cpu": TargetType.Cpu}


class Target:
    Type = TargetType

    def __init__(self, d: dict, info: dict | None = None, replicas: int = 1):
        self._d = d
        self.name = d.get("name")
        desc = str((info or {}).get("device_desc") or "")
        self.type = next((t for k, t in _DEVICE_TYPES.items() if k in desc), TargetType.IpuModel
                         if desc.startswith("popart") else TargetType.Unknown)
        self.num_tiles = self.numTiles = int(d["num_tiles"])
        self.tiles_per_ipu = self.tilesPerIpu = self.tilesPerIPU = int(d["tiles_per_ipu"])
        self.num_ipus = self.numIPUs = int(d.get("ipus", 1))
        self.bytes_per_tile = self.bytesPerTile = int(d["bytes_per_tile"])
        self.bytes_per_ipu = self.bytesPerIPU = self.tiles_per_ipu * self.bytes_per_tile
        self.total_memory = self.totalMemory = self.num_tiles * self.bytes_per_tile
        self.clock_hz = self.clockFrequency = float(d["clock_hz"])
        # memory and cycles are of one replica; the replicas ran the same program in lock step
        self.num_replicas = self.numReplicas = int(replicas)
        self.ipus_per_replica = self.ipusPerReplica = self.num_ipus
        self.tiles_per_replica = self.tilesPerReplica = self.num_tiles
        self.memory_per_replica = self.memoryPerReplica = self.total_memory

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._d[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self):
        return (f"<Target {self.name}: {self.num_tiles} tiles, {self.bytes_per_tile:,} B/tile, "
                f"{self.clock_hz / 1e9:.2f} GHz>")


class TileMemory:
    def __init__(self, cats: dict, capacity: int, live_peak: int):
        self.category = self.by_category = Categories(cats)
        total = sum(cats.values())
        self.total = Bytes(total)
        self.used = total
        self.free = capacity - total
        # temporaries and code loaded from streaming memory are not always live
        self.alwaysLiveBytes = self.always_live_bytes = total - cats.get("temporaries", 0) - cats.get("code_loaded", 0)
        self.notAlwaysLiveBytes = self.not_always_live_bytes = int(live_peak)
        self.overflowed = Bytes(max(0, total - capacity))  # libpva: bytes beyond the tile's memory

    def __repr__(self):
        return f"<TileMemory {self.used:,} B used, {self.free:,} B free>"


class Tile:
    def __init__(self, number: int, memory: TileMemory, ipu: int):
        self.number = self.id = number
        self.ipu = ipu
        self.memory = memory

    def __repr__(self):
        return f"<Tile {self.number}: {self.memory.used:,} B>"


class ProgramType(enum.IntEnum):
    """libpva's Program.Type. The executable's steps are leaves: compute sets (OnTileExecute),
    exchanges (DoExchange; GlobalExchange between IPUs), syncs, and transfers to and from the host
    and streaming memory (StreamCopyMid: Poplar's stream copy, whose Begin and End parts the
    simulator folds into its sync step and the transfer)."""
    Empty = 0
    OnTileExecute = 1
    Repeat = 2
    RepeatWhileTrue = 3
    RepeatWhileFalse = 4
    If = 5
    Switch = 6
    Sequence = 7
    Copy = 8
    StreamCopyBegin = 9
    StreamCopyMid = 10
    StreamCopyEnd = 11
    DoExchange = 12
    GlobalExchange = 13
    Sync = 14
    Call = 15
    OnEveryTileSwitch = 16
    WriteUndef = 17
    Unknown = 18


# a step's libpva program type, by its profile class (a program kind of one's own has its class)
_CLASS_TYPES = {"compute": ProgramType.OnTileExecute, "exchange": ProgramType.DoExchange, "sync": ProgramType.Sync,
                "host": ProgramType.StreamCopyMid, "streaming": ProgramType.StreamCopyMid,
                "control": ProgramType.Switch}


class Program:
    """One program step of the executable (libpva's Program): a compute set, exchange, sync, ..."""

    Type = ProgramType

    def __init__(self, doc: dict, row: dict):
        self._doc = doc
        self._row = row
        self.id = row["id"]
        self.name = row["name"]
        self.kind = row["kind"]
        self.kind_class = step_class(row)
        self.type = _CLASS_TYPES.get(self.kind_class, ProgramType.Unknown)
        if self.kind == "exchange" and row.get("op_type") == "ipu_copy":
            self.type = ProgramType.GlobalExchange
        self.children: list = []  # steps are leaves of the program tree (`Compilation.program_tree`)
        self.op = row.get("op")
        self.op_type = row.get("op_type")
        self.scope = row.get("scope")
        self.cycles = int(row["cycles"])
        self.vertices = int(row.get("vertices", 0))
        self.bytes_moved = int(row.get("bytes_moved", 0))
        self.executions = int(row.get("executions", 0))
        self.executed_cycles = int(row.get("executed_cycles", 0))
        self._tc: np.ndarray | None = None

    @property
    def tile_cycles(self) -> np.ndarray:
        """Cycles on every tile (a sync or branch costs the same on every tile: its cycles)."""
        if self._tc is None:
            i = self._row.get("tile_cycles")
            n = int(self._doc["target"]["num_tiles"])
            self._tc = unrle(self._doc["tile_cycles_table"][i]) if i is not None else np.full(n, self.cycles, np.int64)
        return self._tc

    cyclesByTile = tile_cycles

    def __repr__(self):
        return f"<Program {self.id} {self.kind} {self.name!r}: {self.cycles} cycles>"


class _Ipu:
    def __init__(self, index: int, tiles: list):
        self.id = self.index = index
        self.tiles = tiles


class _Variable:
    def __init__(self, row: dict):
        self.name = row.get("name")
        self.size = int(row.get("bytes", 0))
        self.category = row.get("category")


class _NotAlwaysLive:
    def __init__(self, n):
        self.bytes = int(n)


class LivenessStep:
    def __init__(self, position: int, nbytes: int, program: Program | None):
        self.position = self.index = position
        self.notAlwaysLiveMemory = _NotAlwaysLive(nbytes)
        self.not_always_live_bytes = int(nbytes)
        self.program = program

    def __repr__(self):
        name = self.program.name if self.program else "?"
        return f"<LivenessStep {self.position} {name!r}: {self.not_always_live_bytes:,} B not always live>"


class Graph:
    def __init__(self, doc):
        steps = doc["steps"]
        self.numComputeSets = self.num_compute_sets = len({s["name"] for s in steps if s["kind"] == "compute"})
        unique = {s["name"]: s for s in steps if s["kind"] == "compute"}
        self.numVertices = self.num_vertices = sum(s.get("vertices", 0) for s in unique.values())
        self.numVariables = self.num_variables = len(doc["memory"].get("variables", []))
        self.numPrograms = self.num_programs = len(steps)


class Compilation:
    def __init__(self, report: "Report"):
        doc = report.doc
        self._doc = doc
        self.target = report.target
        self.programs = [Program(doc, r) for r in doc["steps"]]
        self.graph = Graph(doc)
        self.variables = doc["memory"].get("variables", [])
        self.program_tree = self.programTree = doc["programs"]
        mem = doc["memory"]
        self.memory = Categories(mem["totals"])
        self.total_memory = int(mem["total"])
        self.free_memory = int(mem["free"])
        self.always_live_bytes = self.alwaysLiveBytes = int(mem["always_live"]["total"])
        self._tiles: list[Tile] | None = None
        self._liveness: list[LivenessStep] | None = None

    @property
    def tiles(self) -> list[Tile]:
        if self._tiles is None:
            mem = self._doc["memory"]
            cats = {c: unrle(mem["tiles"][c]) for c in mem["categories"]}
            peak = unrle(mem.get("not_always_live_peak_tile", []))
            n = self.target.num_tiles
            if peak.size != n:
                peak = cats.get("temporaries", np.zeros(n, np.int64))
            cap = self.target.bytes_per_tile
            tpi = self.target.tiles_per_ipu
            self._tiles = [Tile(i, TileMemory({c: int(v[i]) for c, v in cats.items()}, cap, int(peak[i])), i // tpi)
                           for i in range(n)]
        return self._tiles

    @property
    def ipus(self) -> list:
        """libpva's per-IPU view: each IPU's tiles."""
        tpi = self.target.tiles_per_ipu
        return [_Ipu(i, self.tiles[i * tpi:(i + 1) * tpi]) for i in range(self.target.num_ipus)]

    @property
    def alwaysLiveVariables(self) -> list:  # noqa: N802 - libpva's name
        """Variables and constants (always live), largest first: `.name`, `.size` (bytes)."""
        return [_Variable(v) for v in self.variables if v.get("category") in ("variable", "constant")]

    @property
    def liveness_steps(self) -> list[LivenessStep]:
        """Not-always-live bytes (summed over tiles) at each program position."""
        if self._liveness is None:
            live = self._doc["liveness"]
            where = live.get("step_of_position") or [None] * len(live["not_always_live"])
            self._liveness = [LivenessStep(i, b, self.programs[s] if s is not None else None)
                              for i, (b, s) in enumerate(zip(live["not_always_live"], where))]
        return self._liveness

    livenessProgramSteps = liveness_steps

    @property
    def peak_liveness(self) -> LivenessStep | None:
        steps = self.liveness_steps
        return max(steps, key=lambda s: s.not_always_live_bytes) if steps else None


class _Range:
    def __init__(self, lo: int, hi: int):
        self.min = int(lo)
        self.max = int(hi)


class _CyclesFromTo:
    def __init__(self, start: int, ends):
        self.cyclesFrom = _Range(start, start)
        self.cyclesTo = _Range(start + int(ends.min(initial=0)), start + int(ends.max(initial=0)))


class _IpuCycles:
    """One IPU's part of an executed step (libpva's per-IPU step): its cycles, the tiles that
    worked, their balance, and the bytes a transfer moved to (dataIn) or from (dataOut) the IPU."""

    def __init__(self, step: "ExecutionStep", ipu: int):
        tpi = step._report.target.tiles_per_ipu
        tc = step.program.tile_cycles[ipu * tpi:(ipu + 1) * tpi]
        active = tc[tc > 0]
        self.ipu = ipu
        self.cycles = step.cycles
        self.cyclesFrom = step.cyclesFrom
        self.cyclesTo = step.cyclesTo
        self.tile_cycles = self.cyclesByTile = tc
        self.activeTiles = self.active_tiles = int(active.size)
        self.activeCycles = _CyclesFromTo(step.cyclesFrom, active if active.size else np.zeros(1, np.int64))
        peak = int(tc.max(initial=0))
        self.tileBalance = float(tc.mean()) / peak if peak else 1.0
        self.activeTileBalance = float(active.mean()) / peak if peak else 1.0
        moved = step.program.bytes_moved
        share = moved * self.activeTiles // max(1, int(np.count_nonzero(step.program.tile_cycles)))
        into = step.program.kind in ("host_to_device", "remote_load", "code_load")
        self.dataIn = share if into else 0
        self.dataOut = share if step.program.kind in ("device_to_host", "remote_store") else 0


class ExecutionStep:
    """One executed step: its program, start and end cycle, and cycles on every tile."""

    def __init__(self, report: "Report", index: int, program: Program, start: int, run: int):
        self._report = report
        self.index = index
        self.program = program
        self.name = program.name
        self.kind = program.kind
        self.cycles = program.cycles
        self.cyclesFrom = self.start_cycle = int(start)
        self.cyclesTo = self.end_cycle = int(start) + program.cycles
        self.run = run

    @property
    def tile_cycles(self) -> np.ndarray:
        return self.program.tile_cycles

    @property
    def ipus(self) -> list:
        return [_IpuCycles(self, i) for i in range(self._report.target.num_ipus)]

    def __repr__(self):
        return f"<ExecutionStep {self.index} {self.kind} {self.name!r} [{self.cyclesFrom}, {self.cyclesTo})>"


class ExecutionSteps(Sequence):
    """The executed steps in order, made on access (traces can be long)."""

    def __init__(self, report: "Report"):
        self._report = report
        self.step_ids, self.start_cycles = decode_trace(report.doc)
        runs = (report.doc.get("execution") or {}).get("runs") or []
        firsts = np.asarray([r.get("first_entry", 0) for r in runs], np.int64)
        self._run_of = firsts

    def __len__(self):
        return int(self.step_ids.size)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        run = int(np.searchsorted(self._run_of, i, side="right") - 1) if self._run_of.size else 0
        prog = self._report.compilation.programs[int(self.step_ids[i])]
        return ExecutionStep(self._report, i, prog, int(self.start_cycles[i]), max(run, 0))


class _Microseconds:
    def __init__(self, start: float, end: float):
        self.start = start
        self.end = end


class Run:
    """One run of a program (libpva's Run): its executed steps, and where it lies on the
    simulated IPU's timeline (`cyclesFrom` / `cyclesTo`, `microseconds` at the target's clock)."""

    def __init__(self, report: "Report", index: int, rec: dict):
        self._report = report
        self.index = index
        self.program = int(rec.get("program", 0))
        self.name = f"run {index} (program {self.program})"
        self._first = int(rec.get("first_entry", 0))
        self._n = int(rec.get("entries", 0))
        self.cyclesFrom = int(rec.get("start_cycle", 0))
        self.cyclesTo = self.cyclesFrom + int(rec.get("cycles", 0))
        hz = report.target.clock_hz
        self.microseconds = _Microseconds(self.cyclesFrom / hz * 1e6, self.cyclesTo / hz * 1e6)
        self.wall_seconds = rec.get("wall_seconds")

    @property
    def steps(self) -> list:
        steps = self._report.execution.steps
        return [steps[i] for i in range(self._first, min(self._first + self._n, len(steps)))]

    def __repr__(self):
        return f"<Run {self.index}: {self._n} steps, cycles [{self.cyclesFrom}, {self.cyclesTo})>"


class Execution:
    def __init__(self, report: "Report"):
        ex = report.doc.get("execution") or {}
        self._report = report
        self.total_cycles = self.totalCycles = int(ex.get("total_cycles", 0))
        self.seconds = ex.get("seconds_at_clock", 0.0)
        self.runs = [Run(report, i, r) for i, r in enumerate(ex.get("runs") or [])]
        self.cycles_by_kind = dict(ex.get("cycles_by_kind", {}))
        self.cycles_by_class = dict(ex.get("cycles_by_class", {}))
        self.trace_truncated = bool(ex.get("trace_truncated", False))
        self._steps: ExecutionSteps | None = None

    @property
    def steps(self) -> ExecutionSteps:
        if self._steps is None:
            self._steps = ExecutionSteps(self._report)
        return self._steps

    def busy_cycles_by_tile(self) -> dict:
        """'compute' / 'transfer' -> cycles every tile was busy over the whole execution."""
        return analysis.busy_cycles(self._report.doc)


class ProfileReportVersion:
    """libpva's report version: the profile document's (docs/profile-format.md)."""

    def __init__(self, doc: dict):
        self.major = int(doc.get("version", 0))
        self.minor = int(doc.get("minor_version", 0))
        self.point = 0
        self.isUnstableFormat = False
        self.string = f"{self.major}.{self.minor}.{self.point}"

    def __eq__(self, other):  # reads as the major version number, as this API always returned
        return self.major == other if isinstance(other, int) else NotImplemented

    def __int__(self):
        return self.major

    def __repr__(self):
        return f"<ProfileReportVersion {self.string}>"


class PoplarVersion:
    """libpva's Poplar version: no Poplar made these profiles; the simulator's profile format says
    what did."""

    def __init__(self, doc: dict):
        self.major = self.minor = self.point = 0
        self.packageHash = ""
        self.string = f"ipu-sim profile {doc.get('version', 0)}.{doc.get('minor_version', 0)} (no Poplar)"


class Report:
    def __init__(self, doc: dict):
        if not (isinstance(doc, dict) and doc.get("_file")):  # a dict load() has not checked
            check(doc, "profile document")
        self.doc = doc
        self.path = doc.get("_file")
        self.version = ProfileReportVersion(doc)
        self.poplarVersion = PoplarVersion(doc)
        self.target = Target(doc["target"], doc.get("info"), (doc.get("execution") or {}).get("replicas", 1))
        self.compilation = Compilation(self)
        self.execution = Execution(self)
        self.wall = dict(doc.get("wall") or {})

    def summary(self) -> dict:
        return analysis.summary(self.doc)

    def ops(self) -> list[dict]:
        """Executed cycles per popxl op, costliest first."""
        return analysis.ops(self.doc)

    def code_memory(self) -> dict:
        """Vertex code resident vs loaded from streaming memory (bytes, the saving, the loads'
        cycles); the raw per-tile arrays are in `doc["code"]` (None without code loading)."""
        return analysis.code_memory(self.doc)

    def __repr__(self):
        return f"<Report {os.path.basename(self.path or '?')} on {self.target.name}: " \
               f"{self.execution.total_cycles:,} cycles, {self.compilation.total_memory:,} B>"
