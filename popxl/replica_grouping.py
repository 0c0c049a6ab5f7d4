"""Groupings of replicas, used by variables and collectives.

With replication factor 1 (the only one this simulator runs so far) every grouping is the trivial
one group of one replica. Full groupings over several replicas arrive with issue 7 (replication).
"""
from typing import TYPE_CHECKING, List, Optional

if TYPE_CHECKING:
    from popxl.ir import Ir

__all__ = ["ReplicaGrouping"]


class ReplicaGrouping:
    """A partition of the replicas of an Ir into equal groups.

    Replicas ``r`` with the same ``assignment[r]`` are in one group; ``stride`` is the distance
    between consecutive members of a group and ``group_size`` the number of members.
    Create them with :meth:`popxl.Ir.replica_grouping`.
    """

    def __init__(self):
        raise RuntimeError("ReplicaGrouping cannot be constructed directly: use Ir.replica_grouping().")

    @classmethod
    def _from_params(cls, ir: "Ir", stride: int = 1, group_size: Optional[int] = None) -> "ReplicaGrouping":
        rf = ir.replication_factor
        if group_size is None:
            group_size = rf // stride if stride > 0 else 0
        if stride < 1 or group_size < 1:
            raise ValueError(f"Replica grouping stride ({stride}) and group size ({group_size}) must be >= 1.")
        if stride * group_size > rf or rf % (stride * group_size) != 0:
            raise ValueError(
                f"A replica grouping with stride {stride} and group size {group_size} does not partition "
                f"{rf} replica(s). Groupings over several replicas arrive with issue 7 (replication).")
        self = object.__new__(cls)
        self._ir = ir
        self._stride = stride
        self._group_size = group_size
        self._assignment = None
        return self

    @classmethod
    def _from_assignment(cls, ir: "Ir", assignment: List[int]) -> "ReplicaGrouping":
        assignment = [int(a) for a in assignment]
        if len(assignment) != ir.replication_factor:
            raise ValueError(f"The assignment {assignment} must have one entry per replica "
                             f"({ir.replication_factor}).")
        if sorted(set(assignment)) != list(range(len(set(assignment)))):
            raise ValueError(f"Group indices of the assignment {assignment} must be 0, 1, ... in order.")
        sizes = {g: assignment.count(g) for g in set(assignment)}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"All groups of the assignment {assignment} must have the same size.")
        self = object.__new__(cls)
        self._ir = ir
        self._group_size = next(iter(sizes.values()))
        members = [r for r, g in enumerate(assignment) if g == 0]
        strides = {b - a for a, b in zip(members, members[1:])}
        self._stride = strides.pop() if len(strides) == 1 else (1 if not strides else 0)
        self._assignment = assignment
        return self

    @property
    def stride(self) -> int:
        return self._stride

    @property
    def group_size(self) -> int:
        return self._group_size

    @property
    def num_groups(self) -> int:
        return self._ir.replication_factor // self._group_size

    @property
    def assignment(self) -> List[int]:
        """The group index of every replica."""
        if self._assignment is not None:
            return list(self._assignment)
        rf, s, n = self._ir.replication_factor, self._stride, self._group_size
        block = s * n
        return [(r // block) * s + (r % s) for r in range(rf)]

    @property
    def is_const(self) -> bool:
        """True if the members of every group are a constant stride apart."""
        return self._assignment is None or self._stride > 0

    def transpose(self) -> "ReplicaGrouping":
        """The grouping whose groups take one replica from each group of this one."""
        rf = self._ir.replication_factor
        if not self.is_const:
            raise ValueError("Only a grouping with a constant stride can be transposed.")
        if self.num_groups == 1:
            return ReplicaGrouping._from_params(self._ir, 1, 1)
        if self._group_size == 1:
            return ReplicaGrouping._from_params(self._ir, 1, rf)
        if self._stride == 1:
            return ReplicaGrouping._from_params(self._ir, self._group_size, rf // self._group_size)
        if self._stride * self._group_size == rf:
            return ReplicaGrouping._from_params(self._ir, 1, self._stride)
        raise NotImplementedError(f"Transposing {self} is not supported.")

    def __eq__(self, other) -> bool:
        return isinstance(other, ReplicaGrouping) and self.assignment == other.assignment

    def __hash__(self) -> int:
        return hash(tuple(self.assignment))

    def __repr__(self) -> str:
        return (f"ReplicaGrouping(num_replicas={self._ir.replication_factor}, stride={self._stride}, "
                f"group_size={self._group_size})")
