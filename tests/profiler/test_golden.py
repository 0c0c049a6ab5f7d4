"""Cycle regression: the examples' cycles and memory equal tests/golden/examples.json.

When a change moves them on purpose, run `python -m profiler.golden --update` and commit the new
golden file with the change.
"""
from profiler import golden


def test_examples_match_their_golden_cycles_and_memory():
    expected = golden.read_golden()
    assert set(golden.EXAMPLES) <= set(expected), "an example has no golden numbers: python -m profiler.golden --update"
    current = golden.collect()
    changes = golden.drift({k: expected[k] for k in golden.EXAMPLES}, current)
    assert not changes, ("cycles / memory drifted from tests/golden/examples.json:\n  " + "\n  ".join(changes)
                         + "\nIf this is intended, run: python -m profiler.golden --update")


def test_drift_is_reported_readably():
    a = {"x": {"total_cycles": 100, "memory_by_category": {"stack": 8}}}
    b = {"x": {"total_cycles": 110, "memory_by_category": {"stack": 8}}}
    assert golden.drift(a, b) == ["x.total_cycles: 100 -> 110 (+10.00%)  [expected value from: unknown (no source "
                                  "recorded)]"]
    assert golden.drift(a, a) == []
    a["x"]["sources"] = {"*": "this simulator (ipu-sim 0.1.0)", "total_cycles": "measured on a Mk2 IPU"}
    assert golden.drift(a, b) == ["x.total_cycles: 100 -> 110 (+10.00%)  [expected value from: measured on a Mk2 IPU]"]


def test_golden_file_carries_a_source_for_every_example():
    for name, entry in golden.read_golden().items():
        assert entry.get("sources", {}).get("*"), f"{name} has no source"
