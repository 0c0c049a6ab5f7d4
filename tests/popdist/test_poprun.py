"""poprun: launch checks, the environment of each instance, tagged and filtered output, and
failing instances (the run ends, the error is shown, nothing is left running)."""
import os
import sys
import textwrap
import time
import uuid

import pytest

from poprun_helpers import poprun, wait_gone

ENV_SCRIPT = """
import os, popdist
names = ["POPDIST_NUM_TOTAL_REPLICAS", "POPDIST_NUM_LOCAL_REPLICAS", "POPDIST_REPLICA_INDEX_OFFSET",
         "POPDIST_NUM_IPUS_PER_REPLICA", "POPDIST_UNIFORM_REPLICAS_PER_INSTANCE", "POPDIST_LOCAL_INSTANCE_INDEX"]
print(" ".join(f"{n}={os.environ[n]}" for n in names))
print(f"index={popdist.getInstanceIndex()} instances={popdist.getNumInstances()} set={popdist.isPopdistEnvSet()}")
"""


def _script(tmp_path, text, name="prog.py"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


@pytest.mark.parametrize("args, message", [
    (["--num-instances", "2", "--num-replicas", "3"], "--num-replicas 3 does not divide over --num-instances 2"),
    (["--num-instances", "4", "--num-replicas", "2"], "more than --num-replicas 2"),
    (["--num-instances", "0"], "--num-instances must be at least 1"),
    (["--num-instances", "2", "--ipus-per-replica", "0"], "--ipus-per-replica must be at least 1"),
    (["--num-instances", "2", "--only-output-from-instance", "2"], "the instances are 0..1"),
    (["--num-instances", "3", "--num-replicas", "3", "--host", "localhost,localhost"], "does not divide over the 2 hosts"),
    (["--num-instances", "2", "--mpi-global-args", "'unclosed"], "--mpi-global-args"),
])
def test_inconsistent_arguments_fail_before_start(tmp_path, args, message):
    marker = tmp_path / "started"
    prog = _script(tmp_path, f"open({str(marker)!r}, 'w').close()\n")
    t0 = time.monotonic()
    p = poprun([*args, sys.executable, prog])
    assert p.returncode == 2, p.stderr
    assert "poprun: error:" in p.stderr and message in p.stderr, p.stderr
    assert not marker.exists() and time.monotonic() - t0 < 20


def test_missing_program_and_unknown_command(tmp_path):
    p = poprun(["--num-instances", "2"])
    assert p.returncode == 2 and "no program to run" in p.stderr
    p = poprun(["--num-instances", "2", "no-such-program-xyz"])
    assert p.returncode == 2 and "'no-such-program-xyz' not found" in p.stderr


def test_environment_of_each_instance_and_tagged_output(tmp_path):
    prog = _script(tmp_path, ENV_SCRIPT)
    p = poprun(["--num-instances", "2", "--num-replicas", "4", "--ipus-per-replica", "2", sys.executable, prog])
    assert p.returncode == 0, p.stderr
    for k in range(2):
        assert (f"[1,{k}]<stdout>:POPDIST_NUM_TOTAL_REPLICAS=4 POPDIST_NUM_LOCAL_REPLICAS=2 "
                f"POPDIST_REPLICA_INDEX_OFFSET={2 * k} POPDIST_NUM_IPUS_PER_REPLICA=2 "
                f"POPDIST_UNIFORM_REPLICAS_PER_INSTANCE=1 POPDIST_LOCAL_INSTANCE_INDEX={k}") in p.stdout
        assert f"[1,{k}]<stdout>:index={k} instances=2 set=True" in p.stdout
    # two hosts (both this machine) of one instance each: the local index restarts on each host
    p = poprun(["--num-instances", "2", "--host", "localhost,127.0.0.1", sys.executable, prog])
    assert p.returncode == 0, p.stderr
    assert "POPDIST_LOCAL_INSTANCE_INDEX=0" in p.stdout and "POPDIST_LOCAL_INSTANCE_INDEX=1" not in p.stdout


def test_only_output_from_one_instance_and_untagged(tmp_path):
    prog = _script(tmp_path, ENV_SCRIPT)
    p = poprun(["--num-instances", "4", "--num-replicas", "4", "--only-output-from-instance", "2", sys.executable, prog])
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("[1,2]<stdout>:") for ln in lines), p.stdout
    p = poprun(["--num-instances", "2", "--tag-output", "no", sys.executable, prog])
    assert "index=0 instances=2" in p.stdout and "[1," not in p.stdout


def test_topology_verbose_and_sdk_flags(tmp_path):
    prog = _script(tmp_path, "print('hello')\n")
    p = poprun(["--num-instances", "2", "--num-replicas", "4", "--print-topology", "yes", "-v", "--numa-aware", "yes",
                "--offline-mode", "yes", "--vipu-partition", "part0", "--vipu-server-host", "h",
                "--mpi-global-args", "", "--mpi-local-args", "", sys.executable, prog])
    assert p.returncode == 0, p.stderr
    top = p.stdout.split("[1,")[0]
    assert "poprun topology" in top and "| instances |" in top and "| replicas  | 0 | 1 | 2 | 3 |" in top
    assert "POPRUN [I] Running command:" in p.stderr and "popdist._instance" in p.stderr
    assert "--vipu-partition ignored" in p.stderr and "no V-IPU partition" in p.stderr
    assert p.stdout.count("hello") == 2


# Open MPI options as Graphcore's documentation, PopXL's multi-instance tests and users' launch
# scripts pass them (Graphcore's poprun runs Open MPI): they run with whichever launcher is installed
DOCUMENTED_MPI_ARGS = [
    ([], ["--mpi-local-args=-x TMPDIR -x LD_LIBRARY_PATH -x PYTHONPATH -x PATH -x G_ARG -x L_ARG=l1"]),
    (["--mpi-global-args", "--tag-output --allow-run-as-root --mca oob_tcp_if_include eno1 "
                           "--mca btl_tcp_if_include eno1 -x G_ARG"],
     ["--mpi-local-args", " -x OPAL_PREFIX -x IPUOF_VIPU_API_TIMEOUT=600 -x POPLAR_LOG_LEVEL=WARN -x L_ARG=l1 "
                          "-x TF_CPP_VMODULE='poplar_compiler=0, poplar_executor=0'"]),
    (["--mpi-global-args=--tag-output --bind-to none --map-by :OVERSUBSCRIBE --report-bindings"],
     ["--mpi-local-args=-x G_ARG -x L_ARG=l1 -x CPATH"]),
]


@pytest.mark.parametrize("glob, loc", DOCUMENTED_MPI_ARGS)
def test_documented_mpi_args_run_with_the_installed_launcher(tmp_path, glob, loc):
    prog = _script(tmp_path, "import os\nprint('env', os.environ.get('G_ARG'), os.environ.get('L_ARG'))\n")
    env = dict(os.environ, G_ARG="g1")
    env.pop("TMPDIR", None)
    p = poprun(["--num-instances", "2", "--vipu-partition", "p", "--remove-partition", "no", "--update-partition",
                "yes", *glob, *loc, sys.executable, prog], env=env)
    assert p.returncode == 0, p.stderr
    lines = sorted(ln for ln in p.stdout.splitlines() if "env " in ln)
    assert lines == ["[1,0]<stdout>:env g1 l1", "[1,1]<stdout>:env g1 l1"], p.stdout  # tagged once


def test_hydra_options_reach_the_launcher(tmp_path):
    """MPICH's own spelling (-genv / -env) works too, whichever launcher is installed."""
    prog = _script(tmp_path, "import os\nprint('env', os.environ.get('G_ARG'), os.environ.get('L_ARG'))\n")
    p = poprun(["--num-instances", "2", "--mpi-global-args", "-genv G_ARG g1", "--mpi-local-args", "-env L_ARG l1",
                sys.executable, prog])
    assert p.returncode == 0, p.stderr
    assert "[1,0]<stdout>:env g1 l1" in p.stdout and "[1,1]<stdout>:env g1 l1" in p.stdout, p.stdout


def test_sdk_options_accepted(tmp_path):
    """Options of Graphcore's poprun that have no V-IPU or cluster to act on here are accepted;
    --executable-cache-path gives the instances their cache directory; --num-ilds shapes the topology."""
    prog = _script(tmp_path, "import os\nprint('cache', os.environ.get('POPXL_CACHE_DIR'))\n")
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost  # this machine\n\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_CACHE_DIR")}
    p = poprun(["-vv", "--num-instances", "2", "--num-replicas", "4", "--num-ilds", "2", "--hostfile", str(hosts),
                "--vipu-server-host=h", "--vipu-server-timeout", "600", "--vipu-allocation", "a",
                "--vipu-partition-attempts", "2", "--reset-partition=no", "--numa-aware", "1",
                "--executable-cache-path", str(tmp_path / "cache"), "--print-topology=yes", sys.executable, prog],
               env=env)
    assert p.returncode == 0, p.stderr
    assert f"[1,1]<stdout>:cache {tmp_path / 'cache'}" in p.stdout
    assert "| ILDs      |   0   |   1   |" in p.stdout, p.stdout
    assert "POPRUN [I] MPI launcher:" in p.stderr
    v = poprun(["--version"])
    assert v.returncode == 0 and v.stdout.startswith("poprun")


FAILING = """
import os, sys, time, popdist
popdist.init()
print("started", flush=True)
if popdist.getInstanceIndex() == {bad}:
    time.sleep(0.3)
    raise ValueError("instance {bad} is broken ({marker})")
popdist.synchronize()  # the others wait in an MPI barrier that instance {bad} never reaches
time.sleep(120)
"""


@pytest.mark.parametrize("instances, bad, only", [(2, 1, None), (4, 2, 0)])
def test_a_failing_instance_ends_the_run(tmp_path, instances, bad, only):
    marker = f"poprun-test-{uuid.uuid4().hex}"
    prog = _script(tmp_path, FAILING.format(bad=bad, marker=marker), name=f"{marker}.py")
    args = ["--num-instances", str(instances)]
    if only is not None:  # its output is filtered out, its error is shown all the same
        args += ["--only-output-from-instance", str(only)]
    t0 = time.monotonic()
    p = poprun([*args, sys.executable, prog], timeout=60)
    assert time.monotonic() - t0 < 30
    assert p.returncode == 1, p.stderr
    assert f"[1,{bad}]<stderr>:ValueError: instance {bad} is broken" in p.stderr, p.stderr
    assert f"poprun: instance {bad} (exit code 1) failed" in p.stderr
    assert wait_gone(marker) == [], "processes left behind"


def test_instances_at_different_points_say_so(tmp_path):
    """Instances whose programs diverge (one at another collective) fail with a clear error instead
    of hanging, as they would on an IPU-POD."""
    marker = f"poprun-test-{uuid.uuid4().hex}"
    prog = _script(tmp_path, """
        import popdist
        from popdist import _backend
        comm = _backend.communicator(popdist.getReplicaIndexOffset(), 1, 2, expected_instances=2)
        comm.check_step(10 + popdist.getInstanceIndex())
    """, name=f"{marker}.py")
    p = poprun(["--num-instances", "2", sys.executable, prog], timeout=60)
    assert p.returncode == 1
    assert "is at another point of the program" in p.stderr, p.stderr
    assert wait_gone(marker) == []


def test_a_popdist_program_not_started_by_poprun(tmp_path):
    """POPDIST_* set by hand for instance 1 of 2 without an MPI launcher: a clear error, no hang."""
    prog = _script(tmp_path, """
        import numpy as np, popxl
        ir = popxl.Ir(replication="popdist")
        with ir.main_graph:
            popxl.variable(np.ones(2, np.float32)) + 1
        popxl.Session(ir, "cpu")
    """)
    env = dict(os.environ, POPDIST_NUM_TOTAL_REPLICAS="4", POPDIST_NUM_LOCAL_REPLICAS="2",
               POPDIST_REPLICA_INDEX_OFFSET="2", IPU_SIM_TARGET="small:4")
    import subprocess

    p = subprocess.run([sys.executable, prog], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 1 and "launch it with `poprun --num-instances 2" in p.stderr, p.stderr


def test_execute_on_instances_and_registered_communicators(tmp_path):
    """Synchronisation inside execute_on_instances and over a registered communicator involves only
    those instances (a barrier over all four would never complete)."""
    prog = _script(tmp_path, """
        import popdist
        me = popdist.getInstanceIndex()

        def work(x):
            popdist.synchronize()  # only instances 1 and 3 take part
            return x * 10 + me

        out = popdist.execute_on_instances({1, 3}, work, 4)
        print(f"execute_on_instances -> {out}", flush=True)
        popdist.registerCommunicator({0, 2}, "evens")
        if me in (0, 2):
            popdist.synchronize("evens")
        popdist.synchronize(participants={2, 3}) if me in (2, 3) else None
        popdist.synchronize()  # everyone
        print(f"backend {popdist.isBackendInitialized()}", flush=True)
    """)
    p = poprun(["--num-instances", "4", sys.executable, prog], timeout=60)
    assert p.returncode == 0, p.stderr
    for k, want in ((0, None), (1, 41), (2, None), (3, 43)):
        assert f"[1,{k}]<stdout>:execute_on_instances -> {want}" in p.stdout
        assert f"[1,{k}]<stdout>:backend True" in p.stdout


def test_open_mpi_options_for_each_launcher():
    """The same --mpi-*-args spelt for Open MPI and for MPICH's hydra (no launch: both launchers need
    not be installed)."""
    from popdist._launchers import Launcher, LaunchError, run_environment, translate

    ompi, hydra = Launcher("/x/mpirun", "openmpi", (5, 0)), Launcher("/x/mpiexec", "hydra")
    env = {"PATH": "/bin", "G": "1"}
    text = "--tag-output --allow-run-as-root --mca btl_tcp_if_include eno1 -x G -x UNSET -x A=1 --bind-to none -genv B 2"
    o = translate(text, ompi, "global", env, local_only=True)
    assert o.args == ["--allow-run-as-root", "-x", "G", "-x", "A=1", "--bind-to", "none", "-x", "B=2"] and o.tag
    assert any("btl_tcp_if_include" in n for n in o.notes)
    o = translate(text, ompi, "global", env, local_only=False)  # other hosts: the interface choice stays
    assert ["--mca", "btl_tcp_if_include", "eno1"] == o.args[1:4]
    h = translate(text, hydra, "global", env, local_only=True)
    assert h.args == ["-genv", "A", "1", "-bind-to", "none", "-genv", "B", "2", "-genvlist", "G"] and h.tag
    h = translate("-x G -x PATH -x L=l --map-by ppr:2:numa --oversubscribe", hydra, "local", env, local_only=True)
    assert h.args == ["-env", "L", "l", "-envlist", "G,PATH"] and "ppr:2:numa left out" in h.notes[0]
    with pytest.raises(LaunchError, match="--num-instances"):
        translate("-np 4", ompi, "local", env, local_only=True)
    with pytest.raises(LaunchError, match="-x needs 1 value"):
        translate("-x", hydra, "local", env, local_only=True)
    e = {}
    run_environment(ompi, e, numa=False, as_root=True)
    assert e["OMPI_ALLOW_RUN_AS_ROOT"] == e["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    assert e["PRTE_MCA_rmaps_default_mapping_policy"] == ":oversubscribe"
    e = {"OMPI_ALLOW_RUN_AS_ROOT": "0"}
    run_environment(hydra, e, numa=False, as_root=True)
    assert e == {"OMPI_ALLOW_RUN_AS_ROOT": "0"}  # hydra needs nothing; the user's own settings stay
