"""The executable cache: a Session of an Ir compiled before (in this process or another) loads the
executable instead of lowering and compiling again, as PopART's engine caching does.

Turned on by the session options `enableEngineCaching` + `cachePath`
(`ir._pb_ir.getSessionOptions()`), or by the POPXL_CACHE_DIR / POPART_CACHE_DIR environment
variables. An entry is one file `<key>.popef` in the cache directory (PopART's extension; the
content is ours: a pickle of the compiled `ipu.Executable` and of the tensors and streams the
session binds to the Ir, with a format version). The key is a hash of everything that changes the
executable: the Ir (every graph, op, attribute, tensor shape and type, constant values; not the
variables' values, which the session writes at weights_from_host as PopART's weightsFromHost
does), the session options and engine options, the target and the kind of device, the numbers of
replicas and host transfers, and the code that lowers and compiles (the sources of `ipu`,
`codelets` and `popxl`, and of any module outside them that registered a lowering rule or a
codelet used by the Ir).

Writes go to a temporary file renamed into place, so concurrent sessions never read half an
entry. An entry that cannot be read (corrupt, an older format, not the key it is named for, not
binding to the Ir) is compiled again with a warning and replaced; it is never used.

The file is a short header, the pickle, then the large arrays' bytes (pickle protocol 5's
out-of-band buffers, 64-byte aligned) and their table; the pickle streams into the file. Loading
maps the file copy-on-write and those arrays are views of the mapping: a session loads its
executable without copying it (BERT-base, 4 inline layers: a 700 MB entry, mostly copy tables and
tensor layouts), and the pages come in as the first run reads them. A process that maps an entry
keeps it even when another writer replaces the file (the rename leaves the old file to the
mapping).
"""
from __future__ import annotations

import enum
import hashlib
import inspect
import mmap
import os
import pickle
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

import numpy as np

import ipu

FORMAT_VERSION = 3  # header, pickle, mapped out-of-band arrays, their table (1: one plain pickle; 2: table first)
SUFFIX = ".popef"
MAGIC = b"IPUSIMX\x03"
_HEAD = struct.Struct("<8sQQQ")  # magic, pickle bytes, number of buffers, where their (offset, bytes) table is
_ALIGN = 64
_INBAND_BELOW = 1 << 16  # arrays smaller than this stay inside the pickle

__all__ = ["cache_dir", "decode", "encode", "executable_key", "load", "store", "Uncacheable"]


class Uncacheable(Exception):
    """The Ir holds something the key cannot describe (the session compiles without the cache)."""


def cache_dir(ir) -> Optional[Path]:
    """Where this Ir's sessions cache executables, or None when caching is off."""
    opts = ir._pb_ir.getSessionOptions()
    if getattr(opts, "enableEngineCaching", False):
        return Path(getattr(opts, "cachePath", "") or "session_cache")
    for var in ("POPXL_CACHE_DIR", "POPART_CACHE_DIR"):
        if os.environ.get(var):
            return Path(os.environ[var])
    return None


# -- the key -------------------------------------------------------------------------------------
_PACKAGES = ("ipu", "codelets", "popxl")
_code_hash: Optional[str] = None


def _source_hash(paths) -> str:
    h = hashlib.sha256()
    for p in sorted(set(paths)):
        h.update(str(p).encode())
        try:
            h.update(Path(p).read_bytes())
        except OSError:
            h.update(b"?")
    return h.hexdigest()


def code_fingerprint() -> str:
    """A hash of the lowering and compiling code (computed once per process)."""
    global _code_hash
    if _code_hash is None:
        root = Path(__file__).resolve().parent.parent
        files = [p.relative_to(root) for pkg in _PACKAGES for p in (root / pkg).rglob("*.py")]
        h = hashlib.sha256()
        for rel in sorted(files):
            h.update(str(rel).encode())
            h.update((root / rel).read_bytes())
        h.update(f"{sys.version_info[:2]} numpy {np.__version__} format {FORMAT_VERSION}".encode())
        _code_hash = h.hexdigest()
    return _code_hash


def _ours(module: str) -> bool:
    return module.split(".")[0] in _PACKAGES


def _user_code(ir) -> str:
    """A hash of modules outside the package that defined a lowering rule or codelet this Ir
    uses (a user's own op or codelet): their source files."""
    from .lowering.registry import LOWERING_RULES
    files = []
    for g in ir.graphs:
        for op in g._ops:
            rule = LOWERING_RULES.get(op.type)
            if rule is not None and not _ours(getattr(rule, "__module__", "") or ""):
                files.append(inspect.getsourcefile(rule) or rule.__module__)
    for codelet in ipu.codelet.registered_codelets().values():
        mod = type(codelet).__module__
        if not _ours(mod):
            files.append(inspect.getsourcefile(type(codelet)) or mod)
    return _source_hash(files) if files else ""


def _canon(v: Any, depth: int = 0) -> Any:
    """A value made of tuples, strings and numbers that describes `v` the same way in any process."""
    from popxl.graph import Graph
    from popxl.tensor import Constant, Tensor
    from popxl.remote_buffer import RemoteBuffer
    from popxl.replica_grouping import ReplicaGrouping
    from popxl.streams import Stream
    from popxl import dtypes

    if depth > 20:
        raise Uncacheable("an attribute nested too deep")
    if v is None or isinstance(v, (bool, int, float, str, bytes)):
        return v
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return v.item()
    if isinstance(v, enum.Enum):
        return ("enum", type(v).__qualname__, v.name)
    if isinstance(v, np.ndarray):
        return ("nd", str(v.dtype), v.shape, hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest())
    if isinstance(v, dtypes.dtype):
        return ("dtype", v.name)
    if isinstance(v, Constant):
        return ("const", v.id)
    if isinstance(v, Tensor):
        return ("tensor", v.id)
    if isinstance(v, Graph):
        return ("graph", v.id)
    if isinstance(v, Stream):
        return ("stream", type(v).__name__, v.tensor_id, tuple(v.shape), v.dtype.name)
    if isinstance(v, RemoteBuffer):
        return ("rb", v.remote_buffer_id, tuple(v.tensor_shape), v.tensor_dtype.name, v.entries,
                tuple(getattr(v, "_meta_shape", ()) or ()), getattr(v, "_shard_over", None),
                _canon(getattr(v, "_replica_grouping", None), depth + 1))
    if isinstance(v, ReplicaGrouping):
        return ("rg", tuple(v.assignment))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_canon(x, depth + 1) for x in v))
    if isinstance(v, (set, frozenset)):
        return ("set", tuple(sorted((_canon(x, depth + 1) for x in v), key=repr)))
    if isinstance(v, dict):
        return ("dict", tuple(sorted(((_canon(k, depth + 1), _canon(x, depth + 1)) for k, x in v.items()), key=repr)))
    if callable(v) and hasattr(v, "__qualname__"):
        return ("fn", getattr(v, "__module__", ""), v.__qualname__)
    if hasattr(v, "__dataclass_fields__"):
        fields = tuple((f, _canon(getattr(v, f), depth + 1)) for f in v.__dataclass_fields__)
        return ("dc", type(v).__qualname__, fields)
    raise Uncacheable(f"a {type(v).__module__}.{type(v).__qualname__} attribute")


def _tensor(t) -> tuple:
    from popxl.tensor import Constant, Variable
    desc = (t.id, tuple(t.shape), t.dtype.name, tuple(getattr(t, "_meta_shape", ()) or ()))
    if isinstance(t, Constant):
        return desc + (_canon(np.asarray(t._data)),)
    if isinstance(t, Variable):
        return desc + (_canon(t.replica_grouping), t.retrieval_mode, getattr(t, "_shard_over", None),
                       _canon(getattr(t, "_remote_buffer", None)), getattr(t, "_remote_offset", None),
                       bool(getattr(t, "_remote_rts", False)), str(getattr(t, "_location", "")))
    return desc


def _describe_ir(ir) -> tuple:
    graphs = []
    for g in ir.graphs:
        position = {id(op): i for i, op in enumerate(g._ops)}
        ops = []
        for op in g._ops:
            try:
                attrs = _canon(op.attrs)
            except Uncacheable as e:
                raise Uncacheable(f"op {op.name!r} ({op.type}) has {e}") from None
            ops.append((op.type, op.name, op.scope, attrs, tuple(t.id if t is not None else None for t in op.inputs),
                        tuple(_tensor(t) for t in op.outputs), op.ipu, op.tile_set, bool(op.inplace),
                        tuple(op.modified), tuple(sorted(op.aliases.items())), tuple(c.id for c in op.called_graphs),
                        tuple(position.get(id(a), -1) for a in op.after), str(op.execution_context)))
        leaves = [_tensor(t) for t in (*g.variables, *g.constants)]
        graphs.append((g.id, tuple(_tensor(t) for t in g.inputs), tuple(t.id for t in g.outputs),
                       tuple(sorted(t.id for t in g._by_ref_inputs)), tuple(leaves), tuple(ops)))
    return tuple(graphs)


def _options(ir) -> tuple:
    opts = vars(ir._pb_ir.getSessionOptions())
    skip = {"enableEngineCaching", "cachePath", "logDir", "dotChecks", "firstDotOp", "finalDotOp",
            "separateCallOpPdfs"}  # where files go and which dot files are written: not the executable
    return _canon({k: v for k, v in opts.items() if k not in skip})


def executable_key(ir, target: ipu.Target, device_kind: str, replicas: int, check_indices: bool = False) -> str:
    """The hash an executable of this Ir for this target is cached under (check_indices: the
    session's debug.checkIndices, which adds checks to the program)."""
    h = hashlib.sha256()
    popdist = getattr(ir, "_popdist", None)
    parts = (FORMAT_VERSION, code_fingerprint(), _user_code(ir), repr(target), device_kind, replicas,
             ir.replication_factor, ir.instance_replication_factor, ir.num_host_transfers, _options(ir),
             _canon(vars(popdist)) if popdist is not None else None,  # this instance's replicas and offset
             bool(check_indices),
             _describe_ir(ir))
    h.update(repr(parts).encode())
    return h.hexdigest()


# -- entries ---------------------------------------------------------------------------------------
def _binding(lowered) -> dict:
    """What the session holds of the lowering, keyed by names the next Ir will have too."""
    return {
        "variables": [(v.id, x) for v, x in lowered.variables.items()],
        "constants": [(c.id, x) for c, x in lowered.constants.items()],
        "h2d": [(s.tensor_id, x) for s, x in lowered.h2d.items()],
        "d2h": [(s.tensor_id, x) for s, x in lowered.d2h.items()],
        "op_names": dict(lowered.op_names),
        "remote_buffers": [(b.remote_buffer_id, x) for b, x in lowered.remote_buffers.items()],
        "remote_variables": [(v.id, x) for v, x in lowered.remote_variables.items()],
        "fragments": list(lowered.fragments),
    }


def _rebind(binding: dict, ir):
    """The LoweredIr of `ir` from a cached binding (KeyError: it does not fit this Ir)."""
    from .lowering.context import LoweredIr
    tensors = {t.id: t for g in ir.graphs for t in (*g.variables, *g.constants)}
    streams = {}
    for g in ir.graphs:
        for op in g._ops:
            s = op.attrs.get("stream") if op.type in ("host_load", "host_store") else None
            if s is not None:
                streams[(op.type, s.tensor_id)] = s
    buffers = {b.remote_buffer_id: b for b in ir._remote_buffers}
    lowered = LoweredIr(
        graph=None, main=None,
        variables={tensors[i]: x for i, x in binding["variables"]},
        constants={tensors[i]: x for i, x in binding["constants"]},
        h2d={streams[("host_load", i)]: x for i, x in binding["h2d"]},
        d2h={streams[("host_store", i)]: x for i, x in binding["d2h"]},
        op_names=dict(binding["op_names"]),
        remote_buffers={buffers[i]: x for i, x in binding["remote_buffers"]},
        remote_variables={tensors[i]: x for i, x in binding["remote_variables"]},
        fragments={name: None for name in binding["fragments"]})
    return lowered


def encode(entry, f) -> None:
    """Write `entry` to the binary file `f` (seekable): header, pickle, the large arrays' bytes,
    their table. The pickle streams into the file (BERT-base's is 230 MB: never held in memory)."""
    bufs = []

    def out_of_band(pb):
        if pb.raw().nbytes < _INBAND_BELOW:
            return True  # in the pickle
        bufs.append(pb)
        return False

    start = f.tell()
    f.write(b"\0" * _HEAD.size)
    pickle.dump(entry, f, protocol=5, buffer_callback=out_of_band)
    plen = f.tell() - start - _HEAD.size
    spans = []
    for pb in bufs:
        at = f.tell() - start
        pad = -at % _ALIGN
        f.write(b"\0" * pad)
        raw = pb.raw()
        spans.append((at + pad, raw.nbytes))
        f.write(raw)
    table = f.tell() - start
    for o, n in spans:
        f.write(struct.pack("<QQ", o, n))
    end = f.tell()
    f.seek(start)
    f.write(_HEAD.pack(MAGIC, plen, len(bufs), table))
    f.seek(end)


def decode(path):
    """The entry in file `path`, its large arrays views of a copy-on-write mapping of the file
    (writable, and private to this process). Raises ValueError for a file that is not one."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < _HEAD.size:
            raise ValueError("the file is shorter than its header")
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    view = memoryview(mm)
    magic, plen, nbuf, table = _HEAD.unpack_from(view, 0)
    if magic != MAGIC:
        raise ValueError(f"not an executable cache entry of this ipu-sim's format (format {FORMAT_VERSION})")
    if _HEAD.size + plen > size or table + 16 * nbuf > size:
        raise ValueError("the file is truncated")
    buffers = []
    for i in range(nbuf):
        o, n = struct.unpack_from("<QQ", view, table + 16 * i)
        if o + n > table:
            raise ValueError("a buffer of the entry runs past its table")
        buffers.append(view[o:o + n])
    return pickle.loads(view[_HEAD.size:_HEAD.size + plen], buffers=buffers)


def load(directory: Path, key: str, ir):
    """(executable, LoweredIr) from the cache, or None: a missing entry quietly, an unusable one
    with a warning (it is compiled again and replaced)."""
    path = Path(directory) / f"{key}{SUFFIX}"
    if not path.is_file():
        return None
    from . import _logging
    try:
        entry = decode(path)
        if not isinstance(entry, dict) or entry.get("format") != FORMAT_VERSION:
            raise ValueError(f"format {entry.get('format') if isinstance(entry, dict) else '?'}, this ipu-sim "
                             f"reads format {FORMAT_VERSION}")
        if entry.get("key") != key:
            raise ValueError("the entry is not the one its name says")
        return entry["executable"], _rebind(entry["binding"], ir)
    except Exception as e:  # noqa: BLE001 - any failure means: do not use it
        _logging.warn_popxl(f"The cached executable {path} cannot be used ({type(e).__name__}: {e}); compiling "
                            f"again and replacing it.")
        return None


def store(directory: Path, key: str, executable, lowered) -> Optional[Path]:
    """Write the entry atomically (a temporary file renamed into place); None when it cannot be
    written (the session runs anyway, with a warning)."""
    from . import _logging
    directory = Path(directory)
    path = directory / f"{key}{SUFFIX}"
    entry = {"format": FORMAT_VERSION, "key": key, "executable": executable, "binding": _binding(lowered)}
    tmp = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as f:
            encode(entry, f)
        os.chmod(tmp, 0o644)  # readable as any file the user writes (mkstemp makes it private)
        os.replace(tmp, path)
        return path
    except Exception as e:  # noqa: BLE001 - a cache that cannot be written must not stop the session
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        _logging.warn_popxl(f"Could not write the executable cache entry {path} ({type(e).__name__}: {e}).")
        return None
