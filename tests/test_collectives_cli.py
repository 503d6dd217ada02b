"""`estimator collective`: curves, schedules, explicit pricing, custom topologies (in-process)."""

from __future__ import annotations

import json

import pytest

from estimator import cli


def run(capsys, *args):
    code = cli.run(["collective", *args])
    out = capsys.readouterr().out
    assert code == 0
    return out


def test_busbw_curve_json(capsys, tmp_path):
    fig = tmp_path / "busbw.png"
    out = run(capsys, "fabric=ideal", "fabric.nodes=8", "sizes=[1024,1048576,67108864]", "algorithm=ring",
              "output=json", f"busbw_plot={fig}")
    res = json.loads(out)
    rows = res["curve"]
    assert [r["bytes"] for r in rows] == [1024, 1048576, 67108864]
    for r in rows:
        assert r["busbw_Bps"] == pytest.approx(r["algbw_Bps"] * 2 * 7 / 8, rel=1e-12)
    assert rows[-1]["busbw_Bps"] > rows[0]["busbw_Bps"]
    assert rows[-1]["busbw_Bps"] < 300e9  # never above the link bandwidth
    assert fig.stat().st_size > 1000


def test_show_schedule_text_and_json(capsys):
    out = run(capsys, "fabric=ideal", "fabric.nodes=4", "algorithm=halving_doubling", "bytes=4096",
              "show_schedule=true", "output=json")
    sched = json.loads(out)["schedule"]
    assert len(sched) == 4
    assert sched[0]["transfers"][0] == [0, 1, 2048.0, 2048.0]
    text = run(capsys, "fabric=ideal", "fabric.nodes=4", "algorithm=ring", "bytes=4096", "show_schedule=true")
    ag = [line.split() for line in text.splitlines() if line.split()[:1] == ["3..5"]][0]  # 3 identical steps, one row
    assert ag[:4] == ["3..5", "-", "4", "4096"] and ag[4] == "0->1:1024"  # steps, reconf, transfers, bytes


def test_show_schedule_summarises_large_schedules_and_writes_the_full_one(capsys, tmp_path):
    out = json.loads(run(capsys, "fabric=ideal", "fabric.nodes=128", "collective=all_to_all", "algorithm=direct",
                         "bytes=1e6", "show_schedule=true", f"schedule_out={tmp_path / 's.json'}", "output=json"))
    assert "schedule" not in out  # 16,256 transfers: steps only on the terminal
    steps = out["schedule_steps"]
    assert sum(s["transfers"] for s in steps) == 128 * 127 and all(len(s["example"]) <= 4 for s in steps)
    full = json.loads((tmp_path / "s.json").read_text())
    assert sum(len(s["transfers"]) for s in full) == 128 * 127


def test_explicit_matches_closed_form_in_cli(capsys):
    args = ["fabric=torus2d", "fabric.nodes=16", "algorithm=torus2d", "bytes=1e6", "output=json"]
    fast = json.loads(run(capsys, *args))
    slow = json.loads(run(capsys, *args, "explicit=true"))
    assert slow["time_s"] == pytest.approx(fast["time_s"], rel=1e-9)
    assert slow["explicit"] is True


def test_custom_topology_file(capsys):
    out = run(capsys, "fabric=custom", "fabric.topology=topologies/two_leaves.yaml", "collective=all_to_all",
              "bytes=8e6", "output=json")
    res = json.loads(out)
    # 4 GPUs per leaf each send 4 x 1 MB across one 100 GB/s uplink: 16 MB / 100 GB/s + 4 links x 1 us
    assert res["time_s"] == pytest.approx(16e6 / 100e9 + 4e-6, rel=1e-9)


@pytest.mark.parametrize("args,match", [
    (["fabric=ideal", "bytes=-5"], "non-negative"),
    (["fabric=ideal", "collective=allsum"], "unknown collective"),
    (["fabric=ideal", "sizes=[]"], "non-empty"),
    (["fabric=ideal", "algorithm=nope"], "not offered"),
    (["fabric=custom", "fabric.topology=missing.yaml"], "cannot read"),
])
def test_user_errors(capsys, args, match):
    from estimator.errors import EstimatorError

    with pytest.raises(EstimatorError, match=match):
        cli.run(["collective", *args])


def test_show_schedule_collapses_repeated_steps(capsys, tmp_path):
    out = json.loads(run(capsys, "fabric=ring", "fabric.nodes=512", "algorithm=ring", "bytes=1e6", "show_schedule=true",
                         f"schedule_out={tmp_path / 's.json'}", "output=json"))
    steps = out["schedule_steps"]
    assert [(s["step"], s["repeat"], s["transfers"]) for s in steps] == [(0, 511, 512), (511, 511, 512)]
    full = json.loads((tmp_path / "s.json").read_text())
    assert [(s["step"], s["repeat"], len(s["transfers"])) for s in full] == [(0, 511, 512), (511, 511, 512)]
    assert "schedule" not in out  # 523,264 transfers in all
