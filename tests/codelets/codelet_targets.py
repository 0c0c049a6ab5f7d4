"""The target the codelet tests run on."""
from dataclasses import replace

import ipu


def vertex_target(tiles: int = 2) -> ipu.Target:
    """A small target whose compute sets cost their vertices only: the codelet tests hold runs to
    the codelets' cost models; the compute-set launch is the machine's (tests/machine)."""
    return replace(ipu.small_target(tiles), compute_set_launch_cycles=0)
