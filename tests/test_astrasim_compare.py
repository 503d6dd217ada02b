"""The estimator against real ASTRA-sim runs (validation/astrasim/collectives.csv): every stored row,
repriced live, is within the project's tolerance of the ASTRA-sim time stored beside it (5 % with
one chunk, 10 % with several). The ASTRA-sim side was produced by benchmarks/astrasim_compare.py;
ASTRA-sim itself is not needed here."""

from __future__ import annotations

import shlex

import pytest

from estimator.errors import EstimatorError
from estimator.workloads.astrasim_compare import (
    CSV_PATH,
    load,
    ours_us,
    relative_error,
    store_and_forward_us,
    tolerance,
)

ROWS = load(CSV_PATH)


def _id(r: dict) -> str:
    return f"{r['backend']}-{r['setup']}-{r['collective']}-n{r['npus']}-k{r['chunks']}-{r['bytes']}"


def test_csv_covers_what_it_claims():
    """One- and multi-chunk runs on a Switch and a Ring dimension, 8..64 NPUs, 1 MiB..1 GiB, each
    from a recorded ASTRA-sim commit and binary."""
    unaware = [r for r in ROWS if r["backend"] == "congestion_unaware" and r["collective"] == "all_reduce"]
    assert {(r["topology"], r["chunks"] > 1) for r in unaware} == {("Switch", False), ("Switch", True),
                                                                   ("Ring", False), ("Ring", True)}
    assert {r["npus"] for r in unaware} >= {8, 16, 64}
    assert min(r["bytes"] for r in unaware) == 2**20 and max(r["bytes"] for r in unaware) == 2**30
    assert {r["collective"] for r in ROWS} == {"all_reduce", "all_gather", "reduce_scatter"}
    for r in ROWS:
        assert len(r["astrasim_commit"]) == 40 and len(r["network_backend_commit"]) == 40
        assert r["collective"] in ("all_reduce", "all_gather", "reduce_scatter")
        assert r["how"].startswith("AstraSim_Analytical_Congestion_" + r["backend"].split("_")[1].capitalize())


@pytest.mark.parametrize("row", [r for r in ROWS if not store_and_forward_us(r)], ids=_id)
def test_live_estimate_within_tolerance_of_astrasim(row):
    ours = ours_us(shlex.split(row["overrides"]), row["bytes"], row["collective"])
    err = relative_error(ours, row["astrasim_us"])
    assert abs(err) <= tolerance(row["chunks"]), (ours, row["astrasim_us"], err)


@pytest.mark.parametrize("row", [r for r in ROWS if store_and_forward_us(r)], ids=_id)
def test_congestion_aware_switch_differs_by_its_second_serialization(row):
    """The congestion-aware backend serializes a Switch message on both of its links: the estimator
    is below it (by up to half at 1 GiB), and agrees once that one extra size / bandwidth per
    message is added."""
    ours = ours_us(shlex.split(row["overrides"]), row["bytes"], row["collective"])
    assert ours < row["astrasim_us"]
    err = relative_error(ours + store_and_forward_us(row), row["astrasim_us"])
    assert abs(err) <= tolerance(row["chunks"]), (ours, row["astrasim_us"], err)


def test_loader_rejects_bad_file(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("setup,bytes\nring,1\n")
    with pytest.raises(EstimatorError, match="header must be"):
        load(bad)
    with pytest.raises(EstimatorError, match="cannot read"):
        load(tmp_path / "missing.csv")
    header = CSV_PATH.read_text().splitlines()[0]
    bad.write_text(header + "\n" + "x," * (header.count(",")) + "x\n")
    with pytest.raises(EstimatorError, match=r"x\.csv:2: npus/chunks/bytes must be integers"):
        load(bad)
