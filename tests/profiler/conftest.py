"""Fixtures of the profiler tests."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from profiler import build_profile  # noqa: E402
from profiler import write_document  # noqa: E402
from profiler_helpers import known_program  # noqa: E402


@pytest.fixture
def ran_known():
    exe, engine, expected = known_program()
    engine.run()
    return exe, engine, expected


@pytest.fixture
def profile_file(tmp_path, ran_known):
    exe, engine, _ = ran_known
    doc = build_profile(exe, engine, info={"compile_seconds": 0.1, "run_seconds": 0.01},
                        ops={"my_op": {"type": "scaled_add", "scope": "", "graph": ""}})
    path = tmp_path / "profile.json"
    write_document(doc, str(path))
    return str(path)
