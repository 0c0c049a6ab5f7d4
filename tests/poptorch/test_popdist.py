"""popdist.poptorch.Options under poprun: 2 instances of 2 replicas train like one process of 4."""
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _run(args, timeout=300):
    env = dict(os.environ, IPU_SIM_TARGET="small:4", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.mark.slow  # three processes that each import PyTorch and compile: about a minute
def test_two_instances_train_like_one_process(tmp_path):
    prog = os.path.join(HERE, "popdist_program.py")
    dist, single = tmp_path / "dist.npz", tmp_path / "single.npz"
    p = _run(["-m", "popdist.poprun", "--num-instances", "2", "--num-replicas", "4", "python", prog,
              "--save", str(dist)])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[1,1]<stdout>:instance 1 of 2: 2 replicas, first sample 12" in p.stdout, p.stdout
    p = _run([prog, "--single", "4", "--save", str(single)])
    assert p.returncode == 0, p.stdout + p.stderr
    got, want = np.load(dist), np.load(single)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-7, err_msg=k)
