"""The simulated IPU: targets, tile memory, tile-level graphs, programs, compiler and engine.

`ipu/` imports nothing else of the project. Write a tile-level program directly:

    import ipu
    import codelets  # registers the built-in vertex types (ScaledAdd, UnaryOp, ...)
    g = ipu.Graph(ipu.GC200)
    x = g.add_variable("x", (1024,), "float32"); g.map_linearly(x)
    ...
    exe = ipu.compile(g, ipu.Sequence(...))
    engine = ipu.Engine(exe)
    engine.run()
"""
from . import compile_progress, env, kernel_cache

kernel_cache.configure()  # before any cached kernel is defined: stale inlined helpers never run
compile_progress.install()  # a line on stderr while a first run compiles kernels (not silence)

from .codelet import (IN, INOUT, OUT, Codelet, Columns, Field, Vertex, VertexTable, columns, get_codelet,  # noqa: E402
                      register, registered_codelets)
from .collectives import CrossReplica, groups_from_assignment, replica_groups
from .compiler import compile
from .executable import Executable, Step
from .kinds import ProgramKind, StepKind, Use, register_kind, register_step_kind
from .engine import Engine
from .errors import ApplicationRuntimeError, CompileError, IpuError, MappingError, OutOfMemoryError, StreamError
from .graph import Graph
from .graph_objects import ComputeSet, Function, HostStream, RemoteBuffer
from .half import load, store
from .codeload import CodeLiveness
from .remote import StreamingMemory
from .program import CodeLoad, MultiExchange, RemoteLoad, RemoteStore
from .program import (Call, Copy, DeviceToHost, Execute, HostToDevice, If, Program, Repeat, Rerun, Sequence,
                      Switch, Sync)
from .target import BOW, C600, GC2, GC200, Target, get_target, small_target
from .tensor import CONSTANT, TEMPORARY, VARIABLE, IndexBlocks, Tensor, Variable
from .types import (ALL_TYPES, BOOL, FLOAT8_143, FLOAT8_152, FLOAT8_TYPES, FLOAT16, FLOAT32, INT8, INT16, INT32, UINT8,
                    UINT16, UINT32, ElementType, element_type)

__all__ = [
    "ALL_TYPES", "BOOL", "BOW", "C600", "CONSTANT", "FLOAT16", "FLOAT32", "GC2", "GC200", "IN", "INOUT", "INT8",
    "INT16", "INT32", "OUT", "TEMPORARY", "UINT8", "UINT16", "UINT32", "VARIABLE",
    "Call", "CodeLiveness", "CodeLoad", "Codelet", "Columns", "CompileError", "ComputeSet", "Copy", "CrossReplica",
    "DeviceToHost", "ElementType", "Engine", "Executable", "Execute", "Field", "Function", "Graph", "HostStream",
    "HostToDevice", "If", "IpuError", "MappingError", "MultiExchange", "OutOfMemoryError", "Program", "ProgramKind",
    "RemoteBuffer", "RemoteLoad", "RemoteStore", "Repeat", "Rerun", "Sequence", "Step", "StepKind", "StreamError",
    "StreamingMemory", "Switch", "Sync", "Target", "Tensor", "IndexBlocks", "Use", "Variable", "Vertex", "VertexTable",
    "columns", "compile", "element_type", "get_codelet", "get_target", "groups_from_assignment", "load", "register",
    "register_kind", "register_step_kind", "registered_codelets", "replica_groups", "small_target", "store",
]
