"""The program-kind registry: every leaf program node has exactly one kind, duplicates are refused."""
import inspect

import pytest

import ipu
from ipu import kinds, program


def test_every_leaf_program_node_has_a_kind():
    control = {program.Sequence, program.Rerun, program.Repeat, program.If, program.Switch, program.Call}
    leaves = [c for _, c in inspect.getmembers(program, inspect.isclass)
              if issubclass(c, program.Program) and c is not program.Program and c not in control]
    leaves.append(ipu.CrossReplica)
    owners = {c: k.name for k in kinds.registered_kinds().values() for c in k.nodes}
    assert set(leaves) <= set(owners), set(leaves) - set(owners)


def test_a_second_kind_for_the_same_node_or_name_is_refused():
    with pytest.raises(ValueError, match="already"):
        kinds.register_kind(kinds.ProgramKind("compute", (), None, None))
    with pytest.raises(ValueError, match="Execute already belongs"):
        kinds.register_kind(kinds.ProgramKind("another", (program.Execute,), None, None))


def test_unknown_program_node_is_a_compile_error():
    class Odd(program.Program):
        pass

    g = ipu.Graph(ipu.small_target(tiles=2))
    with pytest.raises(ipu.CompileError, match="unknown program node Odd"):
        ipu.compile(g, Odd())
