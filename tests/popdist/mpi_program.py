"""Run under poprun: python mpi_program.py OUT_DIR PROGRAM [PROGRAM ...]; each instance writes
OUT_DIR/PROGRAM.instance<k>.npz with its replicas' outputs (out/...), the variables it read
(var/...) and its simulated cycles (stat/...)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import popdist  # noqa: E402
from programs import run  # noqa: E402

out_dir, programs = sys.argv[1], sys.argv[2:]
R, first, local = popdist.getNumTotalReplicas(), popdist.getReplicaIndexOffset(), popdist.getNumLocalReplicas()
for name in programs:
    stats = {}
    outs, got = run(name, "popdist", R, first, local, stats=stats)
    arrays = {f"out/{k}": v for k, v in outs.items()}
    arrays.update({f"var/{k}": v for k, v in got.items()})
    arrays.update({f"stat/{k}": np.int64(v) for k, v in stats.items()})
    np.savez(os.path.join(out_dir, f"{name}.instance{popdist.getInstanceIndex()}.npz"), **arrays)
    print(f"{name}: ok", flush=True)
