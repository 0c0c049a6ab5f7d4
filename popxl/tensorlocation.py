"""Where a tensor lives: on chip or in streaming memory, sharded over replicas or not."""
from enum import Enum

__all__ = ["TensorStorage", "ReplicatedTensorSharding", "TensorLocation", "TileSet"]


class TensorStorage(Enum):
    """``OnChip``: in tile memory. ``OffChip``: in streaming (remote) memory."""
    OnChip = 0
    OffChip = 1


class ReplicatedTensorSharding(Enum):
    """Whether a tensor is split in equal shards across replicas."""
    Off = 0
    On = 1


class TileSet(Enum):
    """The tiles of an IPU an op runs on: compute tiles or IO tiles."""
    Compute = 0
    IO = 1
    Undefined = 2
    N = 3


class TensorLocation:
    """The storage and sharding of a tensor."""

    def __init__(self, storage: TensorStorage = TensorStorage.OnChip,
                 replicated_tensor_sharding: ReplicatedTensorSharding = ReplicatedTensorSharding.Off) -> None:
        self._storage = storage
        self._replicated_tensor_sharding = replicated_tensor_sharding

    @property
    def storage(self) -> TensorStorage:
        return self._storage

    @property
    def replicated_tensor_sharding(self) -> ReplicatedTensorSharding:
        return self._replicated_tensor_sharding

    def __eq__(self, other) -> bool:
        return (isinstance(other, TensorLocation) and self._storage == other._storage
                and self._replicated_tensor_sharding == other._replicated_tensor_sharding)

    def __hash__(self) -> int:
        return hash((self._storage, self._replicated_tensor_sharding))

    def __repr__(self) -> str:
        return (f"TensorLocation(storage={self._storage.name}, "
                f"replicated_tensor_sharding={self._replicated_tensor_sharding.name})")
