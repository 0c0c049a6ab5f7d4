"""Every ATen translation rule is exercised by the op tests (test_aten_*.py compare each with
PyTorch, forward and backward), and no rule is registered for an op PyTorch always decomposes
before the capture sees it (a rule that can never run would claim support that is not tested).
Capturing costs no compile, so this checks all cases quickly."""
import torch

from poptorch import _capture
from poptorch._translate.context import RULES, find_rule

import poptorch_helpers as H
import test_aten_elementwise as E
import test_aten_nn as N
import test_aten_shape as S

FAMILIES = (E.unary_cases, E.binary_cases, E.logic_cases, S.view_cases, S.index_cases, S.reduce_cases,
            N.matmul_cases, N.conv_cases, N.norm_cases, N.loss_cases)
# tested elsewhere: random numbers (test_random.py), PopTorch's own ops (test_options_and_ops.py)
# and div.Scalar, which PyTorch's CPU dropout divides its mask with (test_random.py)
ELSEWHERE = {"aten::bernoulli.default", "aten::bernoulli.p", "aten::native_dropout", "aten::rand", "aten::rand_like",
             "aten::randn", "aten::randn_like", "aten::uniform", "aten::div.Scalar"}


def _rule_key(node):
    rule = find_rule(node)
    return next(k for k, r in RULES.items() if r is rule and (k == node.op_name or k == node.op_name.split(".")[0]
                                                              or node.op_name.split(".")[0].endswith("_")))


def test_every_rule_is_exercised():
    hit = set()
    for family in FAMILIES:
        for case in family():
            for training in (True, False):
                for n in _capture.capture(H._CaseModule(case), (), {}, training).nodes:
                    assert find_rule(n) is not None, f"{case.name}: {n.op_name} has no rule"
                    hit.add(_rule_key(n))
    untested = sorted(k for k in RULES if k not in hit and k not in ELSEWHERE and not k.startswith("poptorch::"))
    assert not untested, f"rules no op test reaches: {untested}"


def _composite(ns, packet, overload) -> bool:
    name = f"{ns}::{packet}" + ("" if overload == "default" else f".{overload}")
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd")
    except RuntimeError:
        return False


def test_no_rule_for_ops_pytorch_always_decomposes():
    """A rule for one overload must be for one that reaches the capture; a rule for a packet, for a
    packet with at least one such overload."""
    dead = []
    for key in RULES:
        ns, rest = key.split("::")
        packet, _, overload = rest.partition(".")
        overloads = [overload] if overload else getattr(getattr(torch.ops, ns), packet).overloads()
        if all(_composite(ns, packet, o) for o in overloads):
            dead.append(key)
    assert not dead, dead
