"""Each instance of a PopDist run writes its own profile; ipu-profile report on the directory shows
the instances side by side with their time in collectives."""
import json
import os
import subprocess
import sys

from poprun_helpers import ROOT, poprun


def test_profiles_per_instance_and_report(tmp_path):
    prof = tmp_path / "prof"
    env = dict(os.environ, IPU_SIM_PROFILE=str(prof), IPU_SIM_TARGET="small:4")
    p = poprun(["--num-instances", "2", "--num-replicas", "4", "python", os.path.join(ROOT, "tests", "popdist",
                "mpi_program.py"), str(tmp_path), "collectives"], env=env)
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(prof)) == ["profile.instance0.json", "profile.instance1.json"]
    docs = [json.load(open(prof / f"profile.instance{k}.json")) for k in range(2)]
    for k, d in enumerate(docs):
        inst = d["info"]["instance"]
        assert inst["index"] == k and inst["instances"] == 2 and inst["replica_offset"] == 2 * k
        assert inst["local_replicas"] == 2 and inst["total_replicas"] == 4
        assert 0 < inst["collective_cycles"] < d["execution"]["total_cycles"]
        assert inst["mpi_calls"] > 0 and inst["mpi_bytes"] > 0
    # the same program in lock step: the same cycles on both instances
    assert docs[0]["execution"]["total_cycles"] == docs[1]["execution"]["total_cycles"]
    env = dict(os.environ, PYTHONPATH=ROOT, COLUMNS="160")
    r = subprocess.run([sys.executable, "-m", "profiler", "report", str(prof)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "PopDist instances · 2 of 2 profiled · 4 replicas" in r.stdout
    assert "0..1" in r.stdout and "2..3" in r.stdout and "in collectives" in r.stdout
    j = subprocess.run([sys.executable, "-m", "profiler", "report", str(prof), "--json"], capture_output=True,
                       text=True, env=env, timeout=120)
    out = json.loads(j.stdout)
    assert [row["instance"] for row in out["instances"]] == [0, 1] and len(out["profiles"]) == 2
    assert out["instances"][0]["collective_cycles"] == docs[0]["info"]["instance"]["collective_cycles"]
