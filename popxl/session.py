"""popxl.Session: compile an Ir for the simulated IPU and run it.

`Session(ir, "ipu_model")` lowers the Ir to tiles, compiles it for a simulated GC200 (or the
target named by the IPU_SIM_TARGET environment variable) and runs it on the engine. The API and
its rules are PopXL's: attach with a context manager, inputs keyed by host-to-device streams with
the leading (num_host_transfers, replication) dimensions, outputs keyed by device-to-host streams.
"""
from __future__ import annotations

import sys
import threading
import time
import warnings
from typing import Dict, Iterable, List, Mapping, Optional, Union

import numpy as np

import ipu
from ._profiling import session_event as _profile_event
from ._profiling import trace_limit as _profile_trace_limit

from . import _devices, _io_shapes, _logging, _memory_report, _replication, _run_options, dtypes
from ._casts import checked_downcast
from .lowering import lower
from .streams import DeviceToHostStream, HostToDeviceStream
from .tensor import Constant, Variable
from .utils import to_numpy

# PopXL's type aliases of a run's host buffers (popxl.session.h2dStreamBufferMaps / d2h...)
h2dStreamBufferMaps = Mapping[HostToDeviceStream, np.ndarray]  # noqa: N816
d2hStreamBufferMaps = Mapping[DeviceToHostStream, np.ndarray]  # noqa: N816

_hw_warned = False


def _target_for(device_desc: Union[str, _devices.DeviceInfo, ipu.Target],
                target_name: Optional[str] = None) -> ipu.Target:
    if isinstance(device_desc, ipu.Target):  # a target chosen by the caller (popart's sessions)
        return device_desc
    if isinstance(device_desc, _devices.DeviceInfo):  # a device the caller made (PopXL accepts one)
        return device_desc.getTarget()
    if device_desc not in ("ipu_model", "ipu_hw", "cpu"):
        raise ValueError(
            f"Unknown device_desc {device_desc!r}. Choose 'ipu_model' (a simulated GC200), 'ipu_hw' "
            f"(also simulated here) or 'cpu' (a small simulated IPU)."
        )
    return _devices.session_target(device_desc, target_name)


def _replica_space(ir):
    """(replicas this process runs, communicator): the Ir's replicas, or with replication='popdist'
    this PopRun instance's, plus the MPI communicator to the other instances when there are any."""
    settings = getattr(ir, "_popdist", None)
    if settings is None or ir.instance_replication_factor >= ir.replication_factor:
        return ir.instance_replication_factor, None
    from ._popdist import communicator

    return ir.instance_replication_factor, communicator(settings)


def _locked(method):
    """Run a Session method holding the session's lock (see Session.run_with_outputs)."""
    import functools

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


def _acquired(session) -> None:
    """Say what device the program takes, as device acquisition does (PopART logs it at info)."""
    import logging

    t = session.target
    msg = (f"Acquired a simulated device of {session.num_ipus} IPU(s): {session.replication_factor} replica(s) x "
           f"{session.ipus_per_replica} IPU(s) per replica, {t.name} with {t.tiles_per_ipu} tiles per IPU")
    logging.getLogger("popxl").info(msg)
    _logging.log("devicex", "INFO", msg)


class Session:
    def __init__(self, ir, device_desc: Union[str, _devices.DeviceInfo, ipu.Target] = "cpu",
                 weights_to_host_on_exit: bool = True) -> None:
        global _hw_warned
        from .ir import Ir

        if not isinstance(ir, Ir):
            raise TypeError(f"Session takes a popxl.Ir, got {type(ir).__name__}")
        self._ir = ir
        self.device_desc = device_desc
        if isinstance(device_desc, _devices.DeviceInfo):
            self.device_desc = _devices.device_kind(device_desc)
        self.weights_to_host_on_exit = weights_to_host_on_exit
        # engine options and IPU_SIM_* variables, read once here for the device, lowering, engine and profiler
        self.options = _run_options.resolve(ir)
        self.target = _target_for(device_desc, self.options.target)
        # a replica takes as many IPUs as its program is placed on (popxl.ipu(n), ops.ipu_copy)
        self.ipus_per_replica = _replication.ipus_per_replica(ir)
        if self.ipus_per_replica > 1:
            self.target = self.target.with_ipus(self.ipus_per_replica)
        popdist_settings = getattr(ir, "_popdist", None)
        if popdist_settings is not None and popdist_settings.is_set and \
                self.ipus_per_replica > popdist_settings.ipus_per_replica:
            raise ValueError(
                f"this program places ops on {self.ipus_per_replica} IPUs per replica (popxl.ipu), but PopRun gave "
                f"each replica {popdist_settings.ipus_per_replica} (POPDIST_NUM_IPUS_PER_REPLICA): launch with "
                f"poprun --ipus-per-replica {self.ipus_per_replica}")
        # replicas of this process (this instance's with PopDist), and the way to the others'
        self.replication_factor, self._comm = _replica_space(ir)
        self._replica_offset = self._comm.replica_offset if self._comm is not None else 0
        if self.device_desc == "ipu_hw" and not _hw_warned:
            _hw_warned = True
            warnings.warn("No IPU hardware is attached: 'ipu_hw' runs on the simulated GC200.", stacklevel=2)
        t0 = time.perf_counter()
        t1 = self._compile_or_load(ir)
        ir._mark_prepared()  # the session owns the Ir from here on (Ir._check_not_prepared)
        ir._write_dot_check("FINAL")  # PopART's dot checkpoint of the Ir a session compiles
        t2 = time.perf_counter()
        self.compile_seconds = t2 - t0
        self.lowering_seconds = t1 - t0
        self.engine = ipu.Engine(self.executable, replicas=self.replication_factor, communicator=self._comm,
                                 compiled=None if self.options.compiled else False, threads=self.options.threads,
                                 blas_threads=self.options.blas_threads, huge_pages=self.options.huge_pages)
        self.num_ipus = self.replication_factor * self.ipus_per_replica
        _acquired(self)
        # the device the program runs on (PopXL's: the one given, or one for device_desc; "ipu_hw"
        # is an offline device until the session is entered)
        if isinstance(device_desc, _devices.DeviceInfo):
            self._device = device_desc
        elif isinstance(device_desc, ipu.Target):  # a frontend's own target (popart attaches its device itself)
            self._device = _devices.DeviceInfo(_devices.DeviceType.IpuModel, self.num_ipus, device_desc)
        elif self.device_desc == "cpu":  # PopXL's CPU device has no replicas; the simulator's small IPU runs them
            self._device = _devices.DeviceInfo(_devices.DeviceType.Cpu, self.num_ipus, self.target.with_ipus(1)
                                               if self.target.ipus > 1 else self.target)
        else:
            self._device = _devices.to_device_info(device_desc, self.num_ipus,
                                                   _target_for(device_desc, self.options.target))
        self._compiled_for = (_devices.device_kind(self._device), self._device.numIpus, self._device.tilesPerIPU)
        self._was_attached_stack: list = []
        # remote variables: their value is an entry of a remote buffer in streaming memory
        self._remote_vars = dict(getattr(self._lowered, "remote_variables", {}))
        # the host buffer of every variable (PopART's TensorData): weights_to_host writes into it; a
        # variable made from an np.memmap keeps the user's memmap as its buffer
        self._host_weights: Dict[Variable, np.ndarray] = {}
        for v in [*self._lowered.variables, *self._remote_vars]:
            self._host_weights[v] = v._data if isinstance(v._data, np.memmap) else np.array(v._data, copy=True)
            _logging.log("devicex", "TRACE", f"Reusing TensorData for d2hWeightBuffer of tensor {v.id}")
        self._device_is_newer = False
        self._lock = threading.RLock()  # runs and weight transfers of one session, one thread at a time
        self.run_seconds = 0.0
        self.total_cycles = 0
        if self.is_attached:  # a device given attached: it gets the weights now (PopXL's rule)
            self.weights_from_host()

    def _compile_or_load(self, ir) -> float:
        """Lower and compile the Ir, or load the executable from the cache (popxl/_cache.py) when
        caching is on and an entry of this Ir, target and code exists. Returns when lowering ended."""
        from . import _cache

        directory = _cache.cache_dir(ir)
        key = None
        if directory is not None:
            kind = self.device_desc if isinstance(self.device_desc, str) else "ipu_model"
            try:
                key = _cache.executable_key(ir, self.target, kind, self.replication_factor,
                                            self.options.check_indices)
            except _cache.Uncacheable as e:
                _logging.log("session", "DEBUG", f"The executable is not cached: {e}")
        cached = None
        if directory is not None and key is not None:
            cached = _cache.load(directory, key, ir)
            if cached is not None:
                _logging.log("session", "DEBUG", f"Loading serialized PopART executable from "
                                                 f"{directory / (key + _cache.SUFFIX)}")
        self.loaded_from_cache = cached is not None
        if cached is not None:
            self.executable, self._lowered = cached
            self._fragment_programs = {name: i + 1 for i, name in enumerate(self._lowered.fragments)}
            self._lowered.fragments = {}
            return time.perf_counter()
        _logging.log("session", "DEBUG", "Starting compilation")
        with ipu.compile_progress.program():  # a status line once it takes more than a second
            self._lowered = lower(ir, self.target, self.options)
            t1 = time.perf_counter()
            try:
                # program 0 is the main program; the weights fragments (lowering/context.py) follow it
                fragments = self._lowered.fragments
                self._fragment_programs = {name: i + 1 for i, name in enumerate(fragments)}
                graph, main = self._lowered.graph, self._lowered.main
                assert graph is not None and main is not None  # a fresh lowering
                self.executable = ipu.compile(graph, [main, *fragments.values()])
            except ipu.OutOfMemoryError as e:  # say which name scopes own what overflows
                raise _memory_report.with_name_scopes(e, ir, self._lowered) from None
        _logging.log("session", "DEBUG", "Compilation complete")
        if directory is not None and key is not None:
            path = _cache.store(directory, key, self.executable, self._lowered)
            if path is not None:
                _logging.log("session", "DEBUG", f"Saved the compiled executable to {path}")
        # the executable holds what running needs; the lowering's graph and program tree (index
        # arrays of every view, vertex field tables) would otherwise stay for the session's life
        self._lowered.graph = self._lowered.main = None
        self._lowered.fragments = {}
        return t1

    # -- PopDist ----------------------------------------------------------------------------------
    def collective_cycles(self) -> int:
        """Cycles this session's runs spent in collectives between replicas (their syncs, link
        exchanges and reductions)."""
        ids = getattr(self, "_collective_step_ids", None)
        if ids is None:
            ids = sorted({i for st in self.executable.steps if isinstance(st.payload, ipu.collectives.Payload)
                          for i in st.payload.step_ids})
            self._collective_step_ids = ids = np.asarray(ids, np.int64)
        if not ids.size:
            return 0
        counts = self.engine.step_counts()  # every run, whether the trace kept it or not
        return int(sum(int(counts[i]) * self.executable.steps[i].cycles for i in ids))

    def instance_info(self):
        """This PopDist instance of a multi-instance run, for its profile (None in one process):
        index, replicas, cycles in collectives and the time spent in MPI."""
        if self._comm is None:
            return None
        s = self._ir._popdist
        return {"index": s.instance_index, "instances": s.num_instances, "replica_offset": self._replica_offset,
                "local_replicas": self.engine.replicas, "total_replicas": self._ir.replication_factor,
                "collective_cycles": self.collective_cycles(), **self._comm.stats()}

    # -- properties -----------------------------------------------------------------------------
    @property
    def ir(self):
        return self._ir

    def _set_host_weight(self, v, arr: np.ndarray) -> None:
        """The host copy of variable `v` (PopART's writeWeights; the device gets it at weightsFromHost)."""
        self._host_weights[v] = _into_host_buffer(self._host_weights[v], arr)

    @property
    def _pb_session(self):
        """PopART's session behind this one (writeWeights / weightsFromHost; popxl/_pb/session.py)."""
        from popxl._pb.session import PbSession
        return PbSession(self)

    @property
    def ir_(self):
        """The Ir (PopXL's attribute name; `ir` reads it too)."""
        return self._ir

    @property
    def is_attached(self) -> bool:
        return self._device.isAttached

    def _set_device(self, device) -> None:
        """Run on another device (PopXL's _set_device): entering the session checks that the
        executable runs there."""
        self._device = device

    def _check_device(self) -> None:
        kind, n, tiles = self._compiled_for
        got = (_devices.device_kind(self._device), self._device.numIpus, self._device.tilesPerIPU)
        if got != (kind, n, tiles):
            raise _devices.popart_exception(
                f"The executable was compiled for a {kind} device of {n} IPU(s) with {tiles} tiles each and cannot "
                f"be loaded on {self._device} ({got[0]}, {got[1]} IPU(s), {got[2]} tiles each). Create the Session "
                f"for the device it will run on.")

    @property
    def num_host_transfers(self) -> int:
        return self._ir.num_host_transfers

    # -- context manager --------------------------------------------------------------------------
    @_locked
    def __enter__(self) -> "Session":
        # as PopXL: an offline ("ipu_hw") device becomes an available device of the system; a
        # device not attached is attached; the weights go to the device if it was not attached
        should_setup = not self.is_attached
        if self._device.type == _devices.DeviceType.OfflineIpu:
            self._was_attached_stack.append(self._device)
            self._device = _devices.acquire_hw_device(self._device.numIpus, self._device.getTarget())
        else:
            self._was_attached_stack.append(self.is_attached)
            if not self.is_attached and not self._device.attach() and not self._device.tryAttachUntilTimeout():
                self._was_attached_stack.pop()
                raise RuntimeError(f"Could not attach to device {self._device.id}. Check `gc-monitor` for device "
                                   "usage. (Another session holds it: exit that session's context or detach its "
                                   "device.)")
        try:
            self._check_device()  # whether the device came attached or not: the executable must load there
            if should_setup:
                self.weights_from_host()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    @_locked
    def __exit__(self, exc_type, exc_value, exc_tb):
        # as PopXL: the context that attached copies the weights back (unless an error is
        # propagating) and detaches; a context entered while attached leaves the device attached
        was = self._was_attached_stack.pop()
        if not was or isinstance(was, _devices.DeviceInfo):
            if exc_type is None and self.weights_to_host_on_exit:
                self.weights_to_host()
            self._device.detach()
        if isinstance(was, _devices.DeviceInfo):
            self._device = was
        if not self.is_attached:
            _profile_event(self, "exit")

    # -- weights --------------------------------------------------------------------------------
    def _write_weights(self) -> None:
        for v, data in self._host_weights.items():
            if v in self._remote_vars:
                self._write_remote_variable(v, data)
                continue
            self._write_variable(v, data)
        self._run_fragment("WeightsFromHostFragment")  # PopART's WeightsFromHost program ends with these ops
        self._device_is_newer = False

    def _run_fragment(self, name: str) -> None:
        """Run the ops of the main graph in execution context `name`, if it has any (their cycles
        count in the profile, not in total_cycles, which counts runs as the weight copies do not)."""
        program = self._fragment_programs.get(name)
        if program is not None:
            self.engine.run(program)

    @_locked
    def weights_from_host(self) -> None:
        self._require_attached("weights_from_host")
        _logging.log("devicex", "DEBUG", "Writing weights from host, ")
        self._write_weights()
        _logging.log("devicex", "DEBUG", "Writing weights from host complete.")

    @_locked
    def weights_to_host(self) -> None:
        self._require_attached("weights_to_host")
        _logging.log("devicex", "DEBUG", "Writing weights to host")
        self._run_fragment("WeightsToHostFragment")  # before the weights are read, as PopART's WeightsToHost
        fetched = self._fetch_replicas(list(self._host_weights))
        for v in self._host_weights:
            value = _replication.host_value(v, lambda r: fetched[v][r], self._ir.replication_factor)
            self._host_weights[v] = _into_host_buffer(self._host_weights[v], value)
        self._device_is_newer = False
        _logging.log("devicex", "DEBUG", "Writing weights to host complete.")

    def _read_local(self, v, r: int) -> np.ndarray:
        """Device storage of variable `v` on replica r of this process."""
        if v in self._remote_vars:
            rb, entry = self._remote_vars[v]
            return self.engine.read_remote(rb, entry, replica=r)
        return self.engine.read_tensor(self._lowered.variables[v], replica=r)

    def _fetch_replicas(self, variables) -> dict:
        """{variable: {global replica: device storage}} for the replicas each variable's host value
        is read from. With PopDist every instance reads its own replicas and the instances exchange
        what they read (PopXL's weights_to_host), so each ends with the whole value."""
        R, off, local = self._ir.replication_factor, self._replica_offset, self.engine.replicas
        want = {v: _replication.replicas_read(v, R) for v in variables}
        got = {v: {r: self._read_local(v, r - off) for r in rs if off <= r < off + local} for v, rs in want.items()}
        if self._comm is not None:
            ids = {v: i for i, v in enumerate(variables)}
            mine = {(ids[v], r): x for v, d in got.items() for r, x in d.items()}
            for part in self._comm.allgather(mine):
                for (i, r), x in part.items():
                    got[variables[i]].setdefault(r, x)
        return got

    def _local_values(self, v, data):
        """What to write on each replica of this process: one array for all, or a list per replica."""
        values = _replication.device_values(v, data, self._ir.replication_factor)
        if isinstance(values, list):
            return values[self._replica_offset:self._replica_offset + self.engine.replicas]
        return values

    def _write_variable(self, v, data) -> None:
        """Host data of variable `v` to every replica, following its replica grouping and sharding."""
        var = self._lowered.variables[v]
        values = self._local_values(v, data)
        if isinstance(values, list):
            for r, x in enumerate(values):
                self.engine.write_tensor(var, x, replica=r)
        else:
            self.engine.write_tensor(var, values)

    def _write_remote_variable(self, v, data) -> None:
        """Host data of remote variable `v` into its entry of streaming memory on every replica."""
        rb, entry = self._remote_vars[v]
        values = self._local_values(v, data)
        if isinstance(values, list):
            for r, x in enumerate(values):
                self.engine.write_remote(rb, x, entry, replica=r)
        else:
            self.engine.write_remote(rb, values, entry)

    @_locked
    def get_tensor_data(self, tensor: Union[Variable, Constant]) -> np.ndarray:
        if isinstance(tensor, Constant):
            return np.array(tensor._data, copy=True)
        if not isinstance(tensor, Variable):
            raise TypeError(
                f"{tensor} is not of type Constant or Variable. get_tensor_data is not supported for this "
                f"type. (It reads variables and constants; stream intermediate tensors out with host_store.)"
            )
        self._check_ir(tensor)
        if self.is_attached and self._device_is_newer:
            self.weights_to_host()
        # all_replicas: one value per replica, whether the host copy came from the device or not
        host = self._host_weights[tensor]
        got = _replication.retrieved(tensor, host, self._ir.replication_factor)
        if isinstance(host, np.memmap) and got.shape == host.shape:
            return host  # the user's memmap itself, as PopXL returns it
        return got

    def get_tensors_data(self, tensors: Iterable[Union[Variable, Constant]]):
        tensors = list(tensors)
        for t in tensors:  # as PopXL: check every argument before reading any
            if not isinstance(t, (Variable, Constant)):
                self.get_tensor_data(t)
        return {t: self.get_tensor_data(t) for t in tensors}

    @_locked
    def write_variable_data(self, tensor: Variable, data: np.ndarray) -> None:
        self._write_variable_data(tensor, data, sdk_refusals=True)

    @_locked
    def _write_variable_data_any(self, tensor: Variable, data: np.ndarray) -> None:
        """write_variable_data without PopXL's refusal of "all_replicas" variables, for the frontends
        whose own API writes them (PopART's writeWeights of VariableRetrievalMode.AllReplicas)."""
        self._write_variable_data(tensor, data, sdk_refusals=False)

    def _write_variable_data(self, tensor: Variable, data: np.ndarray, sdk_refusals: bool) -> None:
        if not isinstance(tensor, Variable):
            raise TypeError(f"Tensor {getattr(tensor, 'id', tensor)} is not of type Variable. write_variable_data "
                            f"is not supported for this type. (Got a {type(tensor).__name__}.)")
        self._check_ir(tensor)
        import numbers

        if isinstance(data, numbers.Number):
            data = np.array(data).astype(tensor.dtype.as_numpy())
        arr = _float8_bytes(np.asarray(data), tensor.dtype, f"write_variable_data({tensor.id!r})")
        if arr.dtype != tensor.dtype.as_numpy():
            raise TypeError(
                f"The dtype of the input array {arr.dtype} must match the equivalent type of the tensor "
                f"{tensor.id} : {tensor.dtype}. (Convert it with .astype({tensor.dtype.as_numpy().name!r}).)"
            )
        if not _replication.accepts_host_shape(tensor, arr.shape, self._ir.replication_factor):
            raise ValueError(
                f"The shape of the input array {arr.shape} must match the shape of the tensor {tensor.id} : "
                f"{tensor.shape}. (Variable {tensor.id!r} takes host data of shape "
                f"{' or '.join(map(str, _replication.expected_host_shapes(tensor, self._ir.replication_factor)))}.)"
            )
        if sdk_refusals and tensor.retrieval_mode == "all_replicas" and tensor.replica_grouping.group_size > 1:
            # PopXL's Session.write_variables_data refuses these (after its dtype and shape checks)
            raise NotImplementedError(
                f'Copying to tensor {tensor.id} with "all_replicas" retreval mode is not yet supported. (PopXL '
                f"writes only variables whose replica groups have one member, or whose retrieval_mode is "
                f'"one_per_group"; the simulator follows it.)')
        arr = np.array(arr, copy=True)
        if self.is_attached and self._device_is_newer:
            self.weights_to_host()
        self._host_weights[tensor] = _into_host_buffer(self._host_weights[tensor], arr)
        if self.is_attached:
            if tensor in self._remote_vars:  # an entry of a remote buffer in streaming memory
                self._write_remote_variable(tensor, arr)
            else:
                self._write_variable(tensor, arr)

    # -- for frontends (poptorch): one variable at a time, no collective between PopDist instances --
    @_locked
    def read_variable_local(self, tensor: Variable) -> np.ndarray:
        """The device value of a variable that every replica holds whole and alike (a data-parallel
        weight), read from this process's first replica: no other variable is read and, under
        PopDist, no other instance takes part (Session.get_tensor_data reads every variable, from
        the replicas PopXL names, with the instances exchanging what they read)."""
        self._check_ir(tensor)
        self._require_attached("read_variable_local")
        if tensor in self._remote_vars or _replication.replicas_read(tensor, self._ir.replication_factor) != [0]:
            raise ValueError(f"read_variable_local: {tensor.id!r} is not held alike by every replica; use "
                             f"get_tensor_data")
        return np.array(self._read_local(tensor, 0), copy=True)

    @_locked
    def write_variable_local(self, tensor: Variable, data: np.ndarray) -> None:
        """write_variable_data for a frontend that keeps its own host copies: the variable's host copy
        and device value become `data`, without first reading the other variables back from the
        device (write_variable_data does that when the device is newer)."""
        self._check_ir(tensor)
        arr = np.array(np.asarray(data), dtype=tensor.dtype.as_numpy(), copy=True)
        if not _replication.accepts_host_shape(tensor, arr.shape, self._ir.replication_factor):
            raise ValueError(f"write_variable_local: {tensor.id!r} takes host data of shape {tensor.shape}, got "
                             f"{arr.shape}")
        self._host_weights[tensor] = arr
        if self.is_attached:
            self._write_variable(tensor, arr)

    def write_variables_data(self, tensors: Mapping[Variable, np.ndarray]) -> None:
        for t, d in tensors.items():
            self.write_variable_data(t, d)

    def _check_ir(self, tensor) -> None:
        if tensor.ir is not self._ir:
            raise ValueError(f"tensor {tensor.id!r} belongs to another Ir than this session's")
        if tensor not in self._host_weights:
            raise ValueError(f"variable {tensor.id!r} is not in this session's main graph")

    # -- streams --------------------------------------------------------------------------------
    def expected_inputs(self) -> List[HostToDeviceStream]:
        return list(self._lowered.h2d)

    def _leading(self) -> tuple:
        # (num_host_transfers, this instance's replicas (PopDist)), each left out when it is 1
        return _io_shapes.extra_input_dims(self._ir)

    # PopXL's own helpers of the same jobs, which Graphcore's tutorials and tests call
    @property
    def _extra_input_dims(self) -> tuple:
        return self._leading()

    def _full_input_shape(self, shape) -> tuple:
        """The shape of the host array of a stream of `shape`: the leading dims, then `shape`."""
        return self._leading() + tuple(shape)

    def _expected_outputs(self) -> List[DeviceToHostStream]:
        return list(self._lowered.d2h)

    def _verify_io_shape(self, s, arr: np.ndarray) -> None:
        _io_shapes.verify_io_shape(self._ir, s, np.asarray(arr))

    def _validate_run_io_streams(self, stream_buffer_map, expected_streams) -> None:
        _io_shapes.validate_io_streams(self._ir, stream_buffer_map, expected_streams)

    def _validate_run_inputs(self, inputs) -> None:
        self._validate_run_io_streams(inputs, self.expected_inputs())

    def _validate_run_outputs(self, outputs) -> None:
        self._validate_run_io_streams(outputs, self._expected_outputs())

    def _leading_hint(self) -> str:
        """What the leading dimensions of host buffers are, for error messages."""
        lead = self._leading()
        if not lead:
            return "num_host_transfers and the replication factor are 1, so there are no leading dims."
        return (f"the leading dims are {lead}: num_host_transfers {self._ir.num_host_transfers}, then this "
                f"instance's replicas {self._ir.instance_replication_factor}, each left out when it is 1.")

    def create_host_outputs(self) -> Dict[DeviceToHostStream, np.ndarray]:
        lead = self._leading()
        return {s: np.zeros(lead + tuple(s.shape), dtype=s.dtype.as_numpy()) for s in self._lowered.d2h}

    def _to_engine_layout(self, arr: np.ndarray) -> np.ndarray:
        """(transfers, replicas, ...) as PopXL takes it -> (replicas, transfers, ...) for the engine."""
        if self._ir.num_host_transfers > 1 and self._ir.instance_replication_factor > 1:
            return np.ascontiguousarray(np.moveaxis(arr, 1, 0))
        return np.ascontiguousarray(arr)

    def _check_inputs(self, inputs, downcast_inputs: bool) -> dict:
        if inputs is not None and not isinstance(inputs, Mapping):
            raise TypeError(f"inputs must be a dict {{popxl.HostToDeviceStream: array}}, got {type(inputs).__name__}")
        inputs = dict(inputs or {})
        expected = self._lowered.h2d
        for s in inputs:
            if not isinstance(s, HostToDeviceStream):
                raise ValueError(f"inputs must be keyed by popxl.HostToDeviceStream, got {type(s).__name__}")
            if s.ir is not self._ir:
                raise ValueError(f"input stream {s.tensor_id!r} belongs to another popxl.Ir than this session's; "
                                 f"key the inputs by this Ir's streams {[x.tensor_id for x in expected]}")
            if s not in expected:
                raise ValueError(
                    f"Unexpected/Missing input.\n  Unexpected: {{{str(s)!r}}}\n  Missing: "
                    f"{set(x.tensor_id for x in expected if x not in inputs) or set()}\n(Input stream "
                    f"{s.tensor_id!r} is not used by this program: no host_load reads it. Expected inputs are "
                    f"{[x.tensor_id for x in expected]}.)"
                )
        missing = [s.tensor_id for s in expected if s not in inputs]
        if missing:
            raise ValueError(f"Unexpected/Missing input.\n  Unexpected: set()\n  Missing: {set(missing)}\n"
                             f"(Pass an array for each of the session's input streams in `inputs`.)")
        lead = self._leading()
        out = {}
        for s, data in inputs.items():
            if (type(data) is np.ndarray and data.shape == lead + tuple(s.shape) and data.flags.c_contiguous
                    and data.dtype == s.dtype.as_numpy() and s.dtype not in dtypes.FLOAT8_DTYPES):
                out[s] = data  # what the checks below give such an array back (a training loop's every step)
                continue
            try:  # NumPy arrays, sequences, torch tensors
                arr = to_numpy(data, downcast=False, copy=False)
            except (TypeError, ValueError) as e:
                raise type(e)(f"input for stream {s.tensor_id!r}: {e}") from None
            want = lead + tuple(s.shape)
            if arr.shape != want and arr.size == int(np.prod(want)) and arr.squeeze().shape == tuple(
                    d for d in want if d != 1):
                arr = arr.reshape(want)  # dimensions of size 1 dropped or added, as PopXL accepts
            try:  # what else PopXL accepts (a longer num_host_transfers dimension), or its error
                arr = _io_shapes.fit_to_stream(self._ir, s, arr)
            except ValueError as e:
                raise ValueError(f"{e}. (Input stream {s.tensor_id!r}: {self._leading_hint()})") from None
            npd = s.dtype.as_numpy()
            arr = _float8_bytes(arr, s.dtype, f"input for stream {s.tensor_id!r}")
            if arr.dtype != npd:
                can_down = downcast_inputs and arr.dtype.itemsize == 8 and np.dtype(npd).itemsize == 4 \
                    and arr.dtype.kind == np.dtype(npd).kind
                if not can_down:
                    raise ValueError(
                        f"input for stream {s.tensor_id!r} is {arr.dtype}, the stream carries "
                        f"{s.dtype.name}; convert it (64-bit data is downcast when downcast_inputs=True)"
                    )
                arr = checked_downcast(arr, npd, f"input for stream {s.tensor_id!r}")
            out[s] = arr
        return out

    # -- running --------------------------------------------------------------------------------
    def _require_attached(self, what: str, allow_exit: bool = False) -> None:
        if not self.is_attached and not allow_exit:
            raise ValueError(
                "Must be attached to device before calling a runtime function. Put the call inside a "
                f"`Session` context, for example `with session: session.run()`. (Session.{what}: `with "
                "session:` attaches and loads the weights.)"
            )

    def run_with_outputs(self, inputs=None, outputs=None, downcast_inputs: bool = True) -> None:
        # one run at a time: the engine's memory, stream buffers and cycle count belong to the run
        # in progress, so runs from several threads are serialised (each sees the state the one
        # before it left)
        with self._lock:
            self._run_with_outputs(inputs, outputs, downcast_inputs)

    def _check_outputs(self, outputs) -> None:
        """Output buffers must be NumPy arrays of each stream's shape (with the leading dimensions)
        and type: results are never converted or truncated into another type."""
        if not isinstance(outputs, Mapping):
            raise TypeError(f"outputs must be a dict {{popxl.DeviceToHostStream: array}} "
                            f"(session.create_host_outputs() makes one), got {type(outputs).__name__}")
        lead = self._leading()
        for s, o in outputs.items():
            if not isinstance(s, DeviceToHostStream):
                raise ValueError(f"outputs must be keyed by popxl.DeviceToHostStream, got {type(s).__name__}")
            if s.ir is not self._ir:
                raise ValueError(f"output stream {s.tensor_id!r} belongs to another popxl.Ir than this session's")
            if s not in self._lowered.d2h:
                raise ValueError(
                    f"output stream {s.tensor_id!r} is not written by this program (no host_store writes it); "
                    f"the program's output streams are {[x.tensor_id for x in self._lowered.d2h]}")
            want = lead + tuple(s.shape)
            if not isinstance(o, np.ndarray) or o.shape != want:
                got = f"shape {o.shape}" if isinstance(o, np.ndarray) else type(o).__name__
                raise ValueError(
                    f"output array for stream {s.tensor_id!r} must be a NumPy array of shape {want}, got {got}")
            npd = np.dtype(s.dtype.as_numpy())
            if o.dtype != npd:
                raise TypeError(
                    f"output array for stream {s.tensor_id!r} is {o.dtype}, the stream carries {s.dtype.name}: "
                    f"pass an array of {npd.name} (session.create_host_outputs() makes them)")
            if not o.flags.writeable:
                raise ValueError(f"output array for stream {s.tensor_id!r} is read-only")

    def _run_with_outputs(self, inputs, outputs, downcast_inputs) -> None:
        self._require_attached("run")
        ins = self._check_inputs(inputs, downcast_inputs)
        if outputs is None:
            outputs = {}
        self._check_outputs(outputs)
        for s, arr in ins.items():
            self.engine.connect_stream(self._lowered.h2d[s].name, self._to_engine_layout(arr))
        lead = self._leading()
        staging = {}
        for s in self._lowered.d2h:
            shape = lead + tuple(s.shape)
            if len(lead) == 2:
                shape = (lead[1], lead[0]) + tuple(s.shape)
            buf = np.zeros(shape, s.dtype.as_numpy())
            staging[s] = buf
            self.engine.connect_stream(self._lowered.d2h[s].name, buf)
        self._run_engine()
        for s, buf in staging.items():
            if s in outputs:
                res = np.moveaxis(buf, 0, 1) if len(lead) == 2 else buf
                outputs[s][...] = res

    def _run_engine(self) -> int:
        """Run the program once with the streams already connected; returns its cycles."""
        self.engine.log.limit = _profile_trace_limit(self)
        # From here the device may change. A run that fails part way (a remote buffer offset out of
        # range, an index check, a host callback raising) leaves the steps before the failing one
        # applied, as hardware would: the device copy is marked newer first, so reads after the
        # error return what the device holds (docs/errors.md).
        self._device_is_newer = True
        t0 = time.perf_counter()
        cycles = 0
        try:
            cycles = self.engine.run()
            self.total_cycles += cycles
            if self._comm is not None:  # every instance ends the run: none took a path the others did not
                self._comm.check_step(-self.engine.runs)
        except ipu.ApplicationRuntimeError as e:
            from popxl.errors import poplar_application_runtime_error
            if isinstance(e, poplar_application_runtime_error):
                raise
            raise poplar_application_runtime_error(
                f"The program stopped on the device: {' '.join(str(a) for a in e.args)}. ({type(e).__name__})") from e
        finally:
            self.run_seconds += time.perf_counter() - t0
        _profile_event(self, "run")  # writes a profile when POPLAR_ENGINE_OPTIONS / IPU_SIM_PROFILE say so
        return cycles

    def run_streams(self, h2d: Mapping[HostToDeviceStream, np.ndarray],
                    d2h: Mapping[DeviceToHostStream, np.ndarray]) -> int:
        """Run once with host buffers given per stream in the engine's layout ([replicas,]
        transfers, *shape), each stream moving as many transfers as its buffer holds: for
        frontends (popart) whose streams do not all move num_host_transfers elements. Returns the
        run's cycles."""
        with self._lock:
            self._require_attached("run")
            for s, buf in h2d.items():
                self.engine.connect_stream(self._lowered.h2d[s].name, buf)
            for d, buf in d2h.items():
                self.engine.connect_stream(self._lowered.d2h[d].name, buf)
            return self._run_engine()

    def run(self, inputs=None, downcast_inputs: bool = True) -> Dict[DeviceToHostStream, np.ndarray]:
        outputs = self.create_host_outputs()
        self.run_with_outputs(inputs, outputs, downcast_inputs)
        return outputs

    def __repr__(self) -> str:
        return f"<popxl.Session on simulated {self.target.name} ({self.device_desc})>"


def _into_host_buffer(buf: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Put `value` in a variable's host buffer: into it when it is the user's np.memmap (written and
    flushed to its file, as PopXL's weights_to_host does), else as the new buffer."""
    if isinstance(buf, np.memmap) and buf.shape == value.shape:
        buf[...] = value
        buf.flush()
        return buf
    return value


def _float8_bytes(arr: np.ndarray, dtype, what: str) -> np.ndarray:
    """float8 host data is the encoded bytes: the format's structured dtype, or plain uint8 (taken as
    that format's codes). Float data must be encoded first (its scale is the user's choice)."""
    if dtype not in dtypes.FLOAT8_DTYPES or arr.dtype == dtype.as_numpy():
        return arr
    if arr.dtype == np.uint8:
        return arr.view(dtype.as_numpy())
    raise TypeError(f"{what}: {dtype.name} data must be the encoded bytes ({dtype.as_numpy()} or uint8), got "
                    f"{arr.dtype}; encode it with popxl.fp8_utils.host_pow2scale_cast_to_fp8(data, "
                    f"popxl.{dtype.name}, log2_scale).")
