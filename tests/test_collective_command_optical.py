"""`estimator collective` shows and prices explicit schedules of fabrics outside the library base."""

import json
import subprocess
import sys

from tests.conftest import REPO


def cli(*args):
    return subprocess.run([sys.executable, "-m", "estimator.cli", "collective", *args, "output=json"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


def test_lumorph_schedule_is_shown_round_by_round():
    out = cli("fabric=lumorph", "fabric.nodes=16", "algorithm=lumorph_4", "bytes=1e6", "show_schedule=true")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    steps = res["schedule"]
    assert len(steps) == 4  # radix-4 halving (2 rounds) then doubling (2 rounds) on 16 GPUs
    assert {len(s["transfers"]) for s in steps} == {16 * 3}  # each GPU talks to 3 peers per round
    assert steps[0]["transfers"][0][2] == 1e6 / 4


def test_terarack_explicit_pricing_on_the_wdm_ring():
    out = cli("fabric=terarack", "fabric.nodes=64", "collective=all_gather", "algorithm=optree", "explicit=true")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["explicit"] is True and res["algorithm"] == "optree" and res["time_s"] > 0
