"""Groupings of replicas, used by variables (how host data maps to replicas) and collectives (which
replicas communicate).

A grouping partitions the ``replication_factor`` replicas of an Ir into groups of equal size.
``Ir.replica_grouping(stride, group_size)`` makes the regular ones: ``group_size`` replicas per
group, consecutive members ``stride`` apart; ``Ir.replica_grouping_from_assignments`` takes the
group of every replica. A grouping whose members are not a constant stride apart ("non-const")
serves variables only: collectives need a constant stride, as GCL's groups do.
"""
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

if TYPE_CHECKING:
    from popxl.ir import Ir

__all__ = ["ReplicaGrouping"]


def _regular_assignment(replicas: int, stride: int, group_size: int) -> List[int]:
    block = stride * group_size
    return [(r // block) * stride + (r % stride) for r in range(replicas)]


def _const_params(assignment: List[int]) -> Optional[Tuple[int, int]]:
    """(stride, group_size) of a regular grouping with exactly this assignment, or None."""
    n = len(assignment)
    groups = max(assignment) + 1 if assignment else 1
    size = n // groups
    for stride in range(1, n + 1):
        if n % (stride * size) == 0 and _regular_assignment(n, stride, size) == assignment:
            return stride, size
    return None


class ReplicaGrouping:
    """A partition of the replicas of an Ir into equal groups.

    Replicas ``r`` with the same ``assignment[r]`` form a group; a replica's rank in its group is
    its position among the group's members in increasing replica order. Create groupings with
    :meth:`popxl.Ir.replica_grouping` or :meth:`popxl.Ir.replica_grouping_from_assignments`.
    """

    # set by _from_params / _from_assignment (the constructor is closed to users)
    _ir: "Ir"
    _rf: int  # the Ir's replication factor
    _group_size: int
    _assignment: List[int]  # replica -> group
    _const: bool  # the members of every group are a constant stride apart
    _stride: Optional[int]  # that stride (None when not const)

    def __init__(self):
        raise RuntimeError("popxl.ReplicaGrouping cannot be constructed directly (use ir.replica_grouping).")

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def _from_params(cls, ir: "Ir", stride: int = 1, group_size: Optional[int] = None) -> "ReplicaGrouping":
        rf = ir.replication_factor
        stride = int(stride)
        if stride < 1:
            raise ValueError(f"The replica grouping stride must be >= 1, not {stride}.")
        if group_size is None:
            group_size = rf // stride
        group_size = int(group_size)
        if group_size < 1:
            raise ValueError(f"The replica grouping group size must be >= 1, not {group_size} "
                             f"(replication factor {rf}, stride {stride}).")
        if rf % (stride * group_size) != 0:
            raise ValueError(
                f"A replica grouping with stride {stride} and group size {group_size} does not partition the "
                f"{rf} replica(s) of the Ir: the replication factor must be a multiple of stride x group_size "
                f"({stride * group_size}).")
        self = object.__new__(cls)
        self._ir = ir
        self._rf = rf
        self._stride = stride
        self._group_size = group_size
        self._assignment = _regular_assignment(rf, stride, group_size)
        self._const = True
        return self

    @classmethod
    def _from_assignment(cls, ir: "Ir", assignment: List[int]) -> "ReplicaGrouping":
        assignment = [int(a) for a in assignment]
        rf = ir.replication_factor
        if len(assignment) != rf:
            raise ValueError(f"The assignment {assignment} must give the group of each of the {rf} replicas "
                             f"(it has {len(assignment)} entries).")
        order = []
        for a in assignment:
            if a not in order:
                order.append(a)
        if order != list(range(len(order))):
            raise ValueError(f"The group indices of the assignment {assignment} must start at 0 and each new group "
                             f"must take the next index (0, 1, 2, ... in order of first appearance).")
        sizes = {g: assignment.count(g) for g in order}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"All groups of the assignment {assignment} must have the same size; sizes are {sizes}.")
        params = _const_params(assignment)
        self = object.__new__(cls)
        self._ir = ir
        self._rf = rf
        self._group_size = next(iter(sizes.values()))
        self._assignment = assignment
        self._const = params is not None
        self._stride = params[0] if params else None
        return self

    # -- properties ---------------------------------------------------------------------------
    @property
    def stride(self) -> int:
        """The offset between consecutive members of a group.

        Raises:
            NotImplementedError: for a grouping whose members are not a constant stride apart.
        """
        if not self._const or self._stride is None:
            raise NotImplementedError(f"The replica grouping with assignment {self._assignment} has no constant "
                                      "stride.")
        return self._stride

    @property
    def group_size(self) -> int:
        """The number of replicas in each group."""
        return self._group_size

    @property
    def num_groups(self) -> int:
        """The number of groups."""
        return self._rf // self._group_size

    @property
    def num_replicas(self) -> int:
        return self._rf

    @property
    def assignment(self) -> List[int]:
        """The group index of every replica."""
        return list(self._assignment)

    @property
    def is_const(self) -> bool:
        """True if the members of every group are a constant stride apart (a grouping collectives can use)."""
        return self._const

    @property
    def const_rg(self) -> "ReplicaGrouping":
        """The grouping itself if it is const; else the coarsest grouping of consecutive replicas
        that refines it (every one of its groups lies inside one group of this grouping)."""
        if self._const:
            return self
        size = self._group_size
        while size > 1:
            if self._rf % size == 0 and all(len(set(self._assignment[b:b + size])) == 1
                                            for b in range(0, self._rf, size)):
                break
            size -= 1
        return ReplicaGrouping._from_params(self._ir, 1, size)

    @property
    def to_device_map(self) -> Optional[List[int]]:
        """For a non-const grouping: the group of this grouping of each group of ``const_rg`` (host
        data of group ``to_device_map[i]`` goes to const group i). None for a const grouping."""
        if self._const:
            return None
        c = self.const_rg
        first: Dict[int, int] = {}  # group of const_rg -> its first replica
        for r, g in enumerate(c.assignment):
            first.setdefault(g, r)
        return [self._assignment[first[g]] for g in range(c.num_groups)]

    @property
    def to_host_map(self) -> Optional[List[int]]:
        """For a non-const grouping: the ``const_rg`` group read back for each group of this
        grouping (its first). None for a const grouping."""
        if self._const:
            return None
        dev = self.to_device_map
        assert dev is not None  # not const, so it has a device map
        return [dev.index(g) for g in range(self.num_groups)]

    # -- helpers used by variables, collectives and the Session ---------------------------------
    def _groups(self) -> List[List[int]]:
        """The members of every group in increasing replica order (index = group index)."""
        out: List[List[int]] = [[] for _ in range(self.num_groups)]
        for r, g in enumerate(self._assignment):
            out[g].append(r)
        return out

    def _rank(self, replica: int) -> int:
        """The position of `replica` among the members of its group."""
        return self._groups()[self._assignment[replica]].index(replica)

    def _to_variable_settings(self, retrieval_mode: Optional[str] = None) -> "VariableSettings":
        """The grouping in PopART's VariableSettings form (stride, group size, retrieval mode).

        Raises:
            NotImplementedError: for a grouping without a constant stride.
            ValueError: for an unknown retrieval mode.
        """
        if not self._const:
            raise NotImplementedError("This ReplicaGrouping has a non-constant stride and has no VariableSettings "
                                      "representation.")
        if retrieval_mode not in (None, "one_per_group", "all_replicas"):
            raise ValueError(f"Invalid retrieval_mode: {retrieval_mode}")
        return VariableSettings(self, retrieval_mode or "one_per_group")

    @property
    def _pb_replica_grouping(self) -> "ReplicaGrouping":
        """PopART's `_ir.ReplicaGrouping` handle: this grouping itself (it has the stride, group
        size and assignment the collectives read)."""
        return self

    def getStride(self) -> int:  # noqa: N802 - PopART's name
        return self.stride

    def getGroupSize(self) -> int:  # noqa: N802
        return self.group_size

    def getNumReplicas(self) -> int:  # noqa: N802
        return self.num_replicas

    def transpose(self) -> "ReplicaGrouping":
        """The grouping whose group i holds the i-th member of every group of this one.

        For 8 replicas, ``replica_grouping(1, 2)`` ([0,0,1,1,2,2,3,3]) transposes to
        ``replica_grouping(2, 4)`` ([0,1,0,1,0,1,0,1]); the result may be non-const.
        """
        groups = self._groups()
        assignment = [0] * self._rf
        for members in groups:
            for k, r in enumerate(members):
                assignment[r] = k
        # renumber by first appearance so group indices are 0, 1, ... in order
        seen: dict = {}
        assignment = [seen.setdefault(a, len(seen)) for a in assignment]
        params = _const_params(assignment)
        if params is not None:
            return ReplicaGrouping._from_params(self._ir, *params)
        return ReplicaGrouping._from_assignment(self._ir, assignment)

    def __eq__(self, other) -> bool:
        return isinstance(other, ReplicaGrouping) and self._assignment == other._assignment

    def __hash__(self) -> int:
        return hash(tuple(self._assignment))

    def __repr__(self) -> str:
        if self._const:
            return (f"ReplicaGrouping(num_replicas={self._rf}, stride={self._stride}, "
                    f"group_size={self._group_size}, num_groups={self.num_groups})")
        return (f"ReplicaGrouping(num_replicas={self._rf}, assignment={self._assignment}, "
                f"group_size={self._group_size}, num_groups={self.num_groups})")


class VariableSettings:
    """PopART's description of a grouped variable (what ``ReplicaGrouping._to_variable_settings``
    returns): stride, group size and retrieval mode, and the groups for a replication factor."""

    def __init__(self, grouping: ReplicaGrouping, retrieval_mode: str = "one_per_group"):
        self._rg = grouping
        self._mode = retrieval_mode

    def getStride(self) -> int:
        return self._rg.stride

    def getGroupSize(self) -> int:
        return self._rg.group_size

    def isUsingCommGroup(self) -> bool:
        return False

    def getRetrievalMode(self) -> str:
        return self._mode

    def getGroupCount(self, replicationFactor: int) -> int:
        return replicationFactor // self._rg.group_size

    def numReplicasReturningVariable(self, replicationFactor: int) -> int:
        return replicationFactor if self._mode == "all_replicas" else self.getGroupCount(replicationFactor)

    def groups(self, replicationFactor: int) -> List[List[int]]:
        """The replicas of every group, in order."""
        size = self._rg.group_size
        stride = self._rg.stride
        out = []
        for b in range(0, replicationFactor, stride * size):
            for s in range(stride):
                out.append([b + s + k * stride for k in range(size)])
        return out

    def verify(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"VariableSettings(stride={self.getStride()}, group_size={self.getGroupSize()}, mode={self._mode})"
