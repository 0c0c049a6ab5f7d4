"""The done-when of PopDist: examples/data_parallel_mnist.py --popdist under poprun (2 instances,
4 replicas) trains to weights bitwise identical to one process running the 4 replicas, in the
same simulated cycles, with all-reduced gradients and with replica-sharded (RTS) weights."""
import os
import re
import runpy

import numpy as np
import pytest

from poprun_helpers import ROOT, poprun

STEPS = 4


@pytest.mark.parametrize("rts", [False, True], ids=["all-reduce", "rts"])
def test_two_instances_train_bitwise_like_one_process(tmp_path, rts, monkeypatch):
    monkeypatch.delenv("IPU_SIM_TARGET", raising=False)  # the example's simulated GC200s
    save = tmp_path / "weights.npz"
    args = ["--num-instances", "2", "--num-replicas", "4", "python", os.path.join(ROOT, "examples",
            "data_parallel_mnist.py"), "--popdist", "--steps", str(STEPS), "--save", str(save)]
    p = poprun(args + (["--rts"] if rts else []), target=None, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[1,0]<stdout>:weights after 4 steps on 2 instances vs 4 replicas in one process: bitwise identical" \
        in p.stdout, p.stdout
    assert "[1,1]<stdout>:instance 1 of 2: replicas 2..3 of 4" in p.stdout
    dp = runpy.run_path(os.path.join(ROOT, "examples", "data_parallel_mnist.py"), run_name="dp")
    x, y, _, _ = dp["synthetic_mnist"](4 * 8 * STEPS, 1)
    one, losses, sess = dp["train"](4, 8, 64, 0.1, dp["init_weights"](64), x, y, STEPS, rts)
    got = np.load(save)
    for k in dp["NAMES"]:
        assert got[k].dtype == one[k].dtype and np.array_equal(got[k].view(np.uint32), one[k].view(np.uint32)), k
    assert losses[-1] < losses[0]
    # the gradients' collectives cross the instances at the cost of one IPU-POD: the same cycles
    per_step = re.findall(r"\[1,(\d)\]<stdout>:instance .* ([\d,]+) cycles / step", p.stdout)
    assert sorted(k for k, _ in per_step) == ["0", "1"], p.stdout
    assert {int(c.replace(",", "")) for _, c in per_step} == {sess.total_cycles // STEPS}
