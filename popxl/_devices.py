"""DeviceManager and DeviceInfo: the simulated devices a session runs on (PopART's classes;
`popart.DeviceManager` / `popart.DeviceInfo` are these, and a popxl.Session holds one as PopXL's
does).

`createIpuModelDevice({"numIPUs": n, "tilesPerIPU": t})` is a simulated Mk2 IPU model with t tiles
per IPU (1472 by default; "ipuVersion": "ipu1" gives a Mk1 GC2); `createCpuDevice()` a small
16-tile IPU (as popxl's "cpu"); `acquireAvailableDevice(n)` / `acquireDeviceById(id)` "hardware":
full GC200s (or the target IPU_SIM_TARGET names) of a simulated IPU-POD64, listed by
`enumerateDevices()` the way `gc-info -l` lists them (ids 0-63 single IPUs, then groups of 2, 4,
..., 64).
"""
from __future__ import annotations

import enum
from dataclasses import replace
from typing import Dict, List, Optional

import ipu

from .errors import popart_exception


class DeviceType(enum.Enum):
    IpuModel = 0
    Cpu = 1
    Ipu = 2
    OfflineIpu = 3
    Sim = 4


class DeviceConnectionType(enum.Enum):
    Always = 0
    OnDemand = 1
    Never = 2


class SyncPattern(enum.Enum):
    Full = 0
    SinglePipeline = 1
    ReplicaAndLadder = 2


class DeviceSelectionCriterion(enum.Enum):
    First = 0
    Random = 1


POD_IPUS = 64
_attached: Dict[int, "DeviceInfo"] = {}


def _pod_devices() -> List[tuple]:
    """(id, first IPU, number of IPUs) of every device of the simulated POD16, as gc-info lists them."""
    out, did = [], 0
    size = 1
    while size <= POD_IPUS:
        for first in range(0, POD_IPUS, size):
            out.append((did, first, size))
            did += 1
        size *= 2
    return out


CPU_BYTES_PER_TILE = 1 << 32  # the CPU device's tiles: host memory, not 624 KiB


class DeviceInfo:
    """A simulated device: its type, IPUs and tiles. A context manager that detaches on exit."""

    def __init__(self, device_type: DeviceType, num_ipus: int, target: ipu.Target, device_id: int = 0,
                 ipus: Optional[range] = None, connection=DeviceConnectionType.Always):
        self.type = device_type
        self._num_ipus = int(num_ipus)
        self._target = target
        self._id = device_id
        self._ipus = ipus if ipus is not None else range(num_ipus)
        self.connectionType = connection
        self._attached = False

    # -- PopART's properties ------------------------------------------------------------------------
    @property
    def id(self) -> int:  # noqa: A003
        return self._id

    @property
    def numIpus(self) -> int:  # noqa: N802
        return self._num_ipus

    @property
    def tilesPerIPU(self) -> int:  # noqa: N802
        return self._target.tiles_per_ipu

    @property
    def driverIds(self) -> List[int]:  # noqa: N802
        return list(self._ipus)

    @property
    def version(self) -> str:
        return "ipu1" if self._target.name.upper().startswith("GC2") and "GC200" not in self._target.name else "ipu2"

    @property
    def isAttached(self) -> bool:  # noqa: N802
        return self._attached

    def getNumIpus(self) -> int:  # noqa: N802
        return self._num_ipus

    def getTilesPerIPU(self) -> int:  # noqa: N802
        return self.tilesPerIPU

    def getTarget(self) -> ipu.Target:  # noqa: N802
        return self._target

    # -- attach ---------------------------------------------------------------------------------------
    def attach(self) -> bool:
        if self._attached:
            return True
        if self.type == DeviceType.Ipu:
            holder = next((d for d in _attached.values() if set(d._ipus) & set(self._ipus)), None)
            if holder is not None:
                return False
            _attached[id(self)] = self
        self._attached = True
        return True

    def tryAttachUntilTimeout(self) -> bool:  # noqa: N802
        return self.attach()

    def detach(self) -> None:
        _attached.pop(id(self), None)
        self._attached = False

    def __enter__(self) -> "DeviceInfo":
        return self

    def __exit__(self, *exc) -> None:
        self.detach()

    # -- what a session runs on -------------------------------------------------------------------------
    def target_for(self, replicas: int, ipus_per_replica: int) -> ipu.Target:
        need = replicas * ipus_per_replica
        if need != self._num_ipus:
            raise popart_exception(
                f"The model needs {need} IPU(s) ({replicas} replica(s) x {ipus_per_replica} IPU(s) per replica) "
                f"but the device has {self._num_ipus}; acquire a device with {need} IPU(s) (for example "
                f"DeviceManager().acquireAvailableDevice({need}) or createIpuModelDevice({{'numIPUs': {need}}}))")
        return self._target

    def __repr__(self) -> str:
        return (f"Device Type:{self.type.name} Connection Type:{self.connectionType.name} Id:{self._id} "
                f"Version:{self.version} NumIPUs:{self._num_ipus} NumTilesPerIPU:{self.tilesPerIPU}")

    __str__ = __repr__


def _hardware_target() -> ipu.Target:
    """The IPU of the simulated "hardware": a GC200, or what IPU_SIM_TARGET names."""
    return ipu.get_target(None)


def _model_target(opts: dict) -> ipu.Target:
    version = str(opts.get("ipuVersion", "ipu2")).lower()
    base = {"ipu1": ipu.GC2, "ipu2": ipu.GC200, "ipu21": ipu.GC200}.get(version)
    if base is None:
        raise popart_exception(f"ipuVersion {version!r} is not known; use 'ipu1' (Mk1 GC2) or 'ipu2' (Mk2 GC200)")
    tiles = int(opts.get("tilesPerIPU", opts.get("tilesPerIpu", base.tiles_per_ipu)))
    if tiles < 1 or tiles > base.tiles_per_ipu:
        raise popart_exception(f"tilesPerIPU={tiles} is outside 1..{base.tiles_per_ipu} for {base.name}")
    if tiles == base.tiles_per_ipu:
        return base
    return replace(base, name=f"{base.name}-{tiles}tiles", tiles_per_ipu=tiles)


class DeviceManager:
    """Creates and acquires simulated devices."""

    def __init__(self):
        self._attach_timeout = 0

    def createIpuModelDevice(self, opts: Optional[dict] = None) -> DeviceInfo:  # noqa: N802
        opts = dict(opts or {})
        known = {"numIPUs", "tilesPerIPU", "tilesPerIpu", "ipuVersion", "compileIPUCode", "syncPattern"}
        unknown = set(opts) - known
        if unknown:
            raise popart_exception(f"createIpuModelDevice: unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
        n = int(opts.get("numIPUs", 1))
        if n < 1:
            raise popart_exception(f"createIpuModelDevice: numIPUs must be >= 1, not {n}")
        return DeviceInfo(DeviceType.IpuModel, n, _model_target(opts))

    def createSimDevice(self, opts: Optional[dict] = None) -> DeviceInfo:  # noqa: N802
        d = self.createIpuModelDevice(opts)
        d.type = DeviceType.Sim
        return d

    def createCpuDevice(self) -> DeviceInfo:  # noqa: N802
        """Poplar's CPU device runs a model on the host, unbounded by tile memory: here 16 simulated
        tiles whose memory does not run out (a model that fits no IPU still runs, as on the CPU
        device; its cycles and memory report say what 16 tiles would do)."""
        return DeviceInfo(DeviceType.Cpu, 1,
                          ipu.small_target(16, bytes_per_tile=CPU_BYTES_PER_TILE, name="CPU-16tiles"))

    def createOfflineIPUDevice(self, opts: Optional[dict] = None) -> DeviceInfo:  # noqa: N802
        opts = dict(opts or {})
        n = int(opts.get("numIPUs", 1))
        return DeviceInfo(DeviceType.OfflineIpu, n, _model_target(opts))

    def enumerateDevices(self, pattern=SyncPattern.Full, numIpus: int = 1, deviceType=DeviceType.Ipu,  # noqa: N802,N803
                         connectionType=DeviceConnectionType.Always, tilesPerIPU: int = 0) -> List[DeviceInfo]:  # noqa: N803
        return [DeviceInfo(DeviceType.Ipu, n, _hardware_target(), did, range(first, first + n), connectionType)
                for did, first, n in _pod_devices() if n == numIpus or numIpus == 0]

    def _check_ipus(self, numIpus: int) -> None:  # noqa: N803
        if numIpus < 1 or numIpus > POD_IPUS or numIpus & (numIpus - 1):
            raise popart_exception(f"Cannot acquire a device of {numIpus} IPUs: the simulated IPU-POD{POD_IPUS} has "
                                   f"devices of 1, 2, 4, ..., {POD_IPUS} IPUs")

    def tryAcquireAvailableDevice(self, numIpus: int = 1, tilesPerIpu: int = 0, pattern=SyncPattern.Full,  # noqa: N802,N803
                                  connectionType=DeviceConnectionType.Always,  # noqa: N803
                                  selectionCriterion=DeviceSelectionCriterion.First) -> Optional[DeviceInfo]:  # noqa: N803
        self._check_ipus(numIpus)
        hw = _hardware_target()
        if not 0 <= tilesPerIpu <= hw.tiles_per_ipu:
            raise popart_exception(f"tilesPerIpu={tilesPerIpu}: hardware devices have {hw.tiles_per_ipu} "
                                   f"tiles per IPU; ask for 1..{hw.tiles_per_ipu} (0: all)")
        for d in self.enumerateDevices(numIpus=numIpus, connectionType=connectionType):
            if tilesPerIpu and tilesPerIpu != hw.tiles_per_ipu:
                # a virtual device of the first tilesPerIpu tiles of each IPU (Poplar's createVirtualDevice)
                d._target = replace(hw, name=f"{hw.name}-{tilesPerIpu}tiles", tiles_per_ipu=tilesPerIpu)
            if connectionType != DeviceConnectionType.Always or d.attach():
                return d
        return None

    def acquireAvailableDevice(self, numIpus: int = 1, tilesPerIpu: int = 0, pattern=SyncPattern.Full,  # noqa: N802,N803
                               connectionType=DeviceConnectionType.Always,  # noqa: N803
                               selectionCriterion=DeviceSelectionCriterion.First) -> DeviceInfo:  # noqa: N803
        d = self.tryAcquireAvailableDevice(numIpus, tilesPerIpu, pattern, connectionType, selectionCriterion)
        if d is None:
            raise popart_exception(f"No device of {numIpus} IPU(s) is available: every one is attached to another "
                                   f"session (detach them with device.detach())")
        return d

    def tryAcquireDeviceById(self, id: int, pattern=SyncPattern.Full,  # noqa: N802,A002
                             connectionType=DeviceConnectionType.Always) -> Optional[DeviceInfo]:  # noqa: N803
        for did, first, n in _pod_devices():
            if did == id:
                d = DeviceInfo(DeviceType.Ipu, n, _hardware_target(), did, range(first, first + n), connectionType)
                if connectionType == DeviceConnectionType.Always and not d.attach():
                    return None
                return d
        raise popart_exception(f"No device with id {id}; ids 0-{len(_pod_devices()) - 1} exist (enumerateDevices())")

    def acquireDeviceById(self, id: int, pattern=SyncPattern.Full,  # noqa: N802,A002
                          connectionType=DeviceConnectionType.Always) -> DeviceInfo:  # noqa: N803
        d = self.tryAcquireDeviceById(id, pattern, connectionType)
        if d is None:
            raise popart_exception(f"Device {id} is attached to another session (detach it with device.detach())")
        return d

    def setOnDemandAttachTimeout(self, attachTimeout: int) -> None:  # noqa: N802,N803
        self._attach_timeout = int(attachTimeout)


# -- the devices of popxl.Session ------------------------------------------------------------------
# What a Session("ipu_model" / "ipu_hw" / "cpu") compiles for: a full Mk2 GC200 unless
# IPU_SIM_TARGET names another target; "cpu" has no tiles to speak of in PopXL, so a small
# simulated IPU runs it.
_SESSION_TARGETS = {"ipu_model": None, "ipu_hw": None, "cpu": "small:16"}


def session_target(device_type: str, target_name: Optional[str] = None) -> ipu.Target:
    """The target of a Session of `device_type`: the one `target_name` names (the session's
    options: IPU_SIM_TARGET), else the device type's."""
    if device_type not in _SESSION_TARGETS:
        raise ValueError(
            f"Incorrect device type provided: {device_type}, must be one of: `ipu_hw`, `ipu_model`, `cpu`. "
            f"('ipu_model' is a simulated GC200, 'ipu_hw' too here, 'cpu' a small simulated IPU.)")
    if target_name:
        return ipu.get_target(target_name)
    name = _SESSION_TARGETS[device_type]
    return ipu.get_target(name) if name else ipu.GC200


def to_device_info(device_type: str, num_ipus: int = 1, target: Optional[ipu.Target] = None) -> DeviceInfo:
    """PopXL's `_to_device_info`: the device a Session of `device_type` compiles for. "ipu_hw" is
    an offline device of the (simulated) system, as PopXL's: entering the session acquires an
    available one of the same size."""
    if device_type == "cpu" and num_ipus > 1:
        raise ValueError(f"For a cpu device, multiple devices (provided: {num_ipus}) are not supported.")
    target = target or session_target(device_type, ipu.env.target_name())  # outside a Session: now
    if device_type == "ipu_hw":
        n = 1 << max(0, int(num_ipus) - 1).bit_length()  # IPU devices come in powers of two
        return DeviceInfo(DeviceType.OfflineIpu, n, target)
    kind = DeviceType.Cpu if device_type == "cpu" else DeviceType.IpuModel
    return DeviceInfo(kind, int(num_ipus), target)


def device_kind(device: DeviceInfo) -> str:
    """What an executable compiled for `device` runs on: 'ipu_hw', 'ipu_model' or 'cpu' (Poplar's
    target types: an IPU executable does not load on the IPU model or the CPU, nor the reverse)."""
    if device.type in (DeviceType.Ipu, DeviceType.OfflineIpu):
        return "ipu_hw"
    return "cpu" if device.type == DeviceType.Cpu else "ipu_model"


def acquire_hw_device(num_ipus: int, target: ipu.Target) -> DeviceInfo:
    """An attached IPU device of the simulated POD with `num_ipus` IPUs of `target` (PopXL's
    _acquire_hw_device_with_timeout; every device here is free unless another session holds it)."""
    for did, first, n in _pod_devices():
        if n == num_ipus:
            d = DeviceInfo(DeviceType.Ipu, n, target, did, range(first, first + n))
            if d.attach():
                return d
    raise RuntimeError(f"Failed to acquire device with {num_ipus} IPUs: every device of that size in the simulated "
                       f"IPU-POD{POD_IPUS} is attached to another session (exit their `with session:` contexts or "
                       f"detach their devices).")
