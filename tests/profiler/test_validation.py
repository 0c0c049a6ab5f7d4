"""Documents that are not readable profiles get a clear message, never a traceback, in every
reader: `ipu-profile report`, `--json`, `compare`, and `profiler.open_report`."""
import copy
import gzip
import json

import pytest

import profiler
from profiler import _format
from profiler.cli import main


@pytest.fixture
def good_doc(profile_file):
    with open(profile_file) as fh:
        return json.load(fh)


def _write(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def _all_readers(path, good_path, capsys):
    """Every reader refuses `path` with a ProfileError whose message the CLI prints; returns it."""
    with pytest.raises(profiler.ProfileError) as e:
        profiler.open_report(path)
    msg = str(e.value)
    for argv in (["report", path], ["report", path, "--json"], ["compare", path, good_path],
                 ["compare", good_path, path]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "Traceback" not in err and "ipu-profile:" in err, err
    return msg


@pytest.mark.parametrize("section", ["steps", "memory", "target", "tile_cycles_table", "liveness"])
def test_missing_section(tmp_path, good_doc, profile_file, capsys, section):
    doc = copy.deepcopy(good_doc)
    del doc[section]
    msg = _all_readers(_write(tmp_path, "p.json", doc), profile_file, capsys)
    assert f"missing section '{section}'" in msg


def test_wrong_types_and_inconsistent_fields(tmp_path, good_doc, profile_file, capsys):
    doc = copy.deepcopy(good_doc)
    doc["memory"]["tiles"] = []
    doc["steps"][0]["cycles"] = "12"
    msg = _all_readers(_write(tmp_path, "p.json", doc), profile_file, capsys)
    assert "memory.tiles must be an object, not a list" in msg
    assert "steps[0].cycles must be an integer, not the string '12'" in msg
    doc = copy.deepcopy(good_doc)
    doc["steps"][1]["tile_cycles"] = 999
    msg = _all_readers(_write(tmp_path, "q.json", doc), profile_file, capsys)
    assert "points at entry 999 of tile_cycles_table" in msg
    doc = copy.deepcopy(good_doc)
    doc["memory"]["tile_total"] = [5, 3]
    assert "covers 3 tiles" in _all_readers(_write(tmp_path, "r.json", doc), profile_file, capsys)


def test_string_version_and_newer_version(tmp_path, good_doc, profile_file, capsys):
    doc = dict(good_doc, version="1")
    msg = _all_readers(_write(tmp_path, "p.json", doc), profile_file, capsys)
    assert "must be an integer" in msg and "the string '1'" in msg
    doc = dict(good_doc, version=7)
    msg = _all_readers(_write(tmp_path, "q.json", doc), profile_file, capsys)
    assert "version 7 is newer than this reader reads" in msg and "update ipu-sim" in msg


def test_binary_empty_and_broken_files(tmp_path, profile_file, capsys):
    b = tmp_path / "b.json"
    b.write_bytes(bytes(range(256)) * 4)
    assert "binary, not JSON text" in _all_readers(str(b), profile_file, capsys)
    e = tmp_path / "e.json"
    e.write_text("")
    assert "empty" in _all_readers(str(e), profile_file, capsys)
    j = tmp_path / "j.json"
    j.write_text('{"schema": "ipu-sim-profile", ')
    assert "not valid JSON at line 1" in _all_readers(str(j), profile_file, capsys)
    a = tmp_path / "a.json"
    a.write_text("[1, 2]")
    assert "not a JSON object" in _all_readers(str(a), profile_file, capsys)
    o = tmp_path / "o.json"
    o.write_text('{"hello": 1}')
    assert "no 'schema' field" in _all_readers(str(o), profile_file, capsys)


def test_gzip_profile_under_any_name_reads(tmp_path, good_doc):
    p = tmp_path / "profile.json"
    p.write_bytes(gzip.compress(json.dumps(good_doc).encode()))
    assert _format.load(str(p))["schema"] == "ipu-sim-profile"


def test_report_from_a_dict_is_validated(good_doc):
    from profiler.api import Report

    assert Report(good_doc).target.num_tiles > 0
    bad = dict(good_doc)
    del bad["memory"]
    with pytest.raises(profiler.ProfileError, match="missing section 'memory'"):
        Report(bad)
