"""The layout a command does not state (``parallelism.tp`` / ``pp`` / ``placement`` null by default): with neither tp
nor pp given the estimate is the fastest layout that fits (searched, micro-batch as given); with one of them given the
other is 1 (Megatron-LM's default); ``placement=fixed`` / ``auto`` keep their meaning, auto keeping what is stated."""

from __future__ import annotations

import subprocess
import sys

import pytest

import estimator
from estimator.estimate import estimate
from estimator.parallel.estimate import _placement

H100 = ["model=llama3_8b", "system=dgx_h100", "parallelism.global_batch=64"]


def run(*overrides):
    return estimate(estimator.resolve_config([*H100, *overrides])).metrics


def test_placement_rule():
    assert _placement({}) == ("auto", ("tp", "pp"), (1,))
    assert _placement({"micro_batch_size": 2}) == ("auto", ("tp", "pp"), (2,))
    assert _placement({"tp": 8}) == ("fixed", (), ())
    assert _placement({"pp": 4}) == ("fixed", (), ())
    assert _placement({"placement": "fixed"}) == ("fixed", (), ())
    assert _placement({"placement": "auto", "tp": 4}) == ("auto", ("pp", "micro_batch_size"), (1, 2, 4))
    with pytest.raises(estimator.EstimatorError, match="placement must be fixed, auto or null"):
        _placement({"placement": "best"})


def test_unstated_layout_is_searched_and_beats_the_old_tp8_default():
    searched = run("fabric.nodes=8")
    assert searched["placement"] == "auto" and searched["searched"] == "tp, pp, recompute" and searched["layouts_evaluated"] > 1
    assert searched["micro_batch_size"] == 1  # the micro-batch is as given (default 1), not searched
    tp8 = run("fabric.nodes=8", "parallelism.tp=8")  # the default before: TP 8 over the node
    assert tp8["placement"] == "fixed" and tp8["layout"].startswith("tp8 pp1 dp1")
    assert searched["iter_time_s"] <= tp8["iter_time_s"]  # the search includes tp8 pp1


def test_one_stated_degree_keeps_the_other_at_one():
    assert run("fabric.nodes=16", "parallelism.pp=2")["layout"].startswith("tp1 pp2 dp8")
    assert run("fabric.nodes=16", "parallelism.tp=4")["layout"].startswith("tp4 pp1 dp4")


def test_explicit_auto_keeps_a_stated_degree():
    m = run("fabric.nodes=16", "parallelism.placement=auto", "parallelism.tp=4")
    assert m["tp"] == 4 and m["searched"] == "pp, micro_batch_size, recompute"


def test_nothing_fits_is_one_line_exit_2():
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "model=llama3_405b", "system=dgx_h100",
                          "fabric.nodes=8"], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "no layout of llama3_405b on 8 GPUs fits" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_gpu_count_the_layout_does_not_divide_names_fabric_nodes():
    with pytest.raises(estimator.EstimatorError, match=r"tp x pp = 8 does not divide the fabric's 4 GPUs .*counts GPUs"):
        estimate(estimator.resolve_config(["model=llama3_8b", "fabric=ideal", "fabric.nodes=4", "parallelism.tp=8"]))


def test_search_reaches_a_pp_that_does_not_divide_the_layers():
    """Llama 3 405B's 126 layers on 16 stages (Dubey et al. 2024 Sec. 3.3.2) is among the searched layouts: the
    uneven split of estimator/parallel/layout.py; with only divisors of 126 no layout of 16,384 GPUs fits."""
    m = estimate(estimator.resolve_config(["model=llama3_405b", "system=dgx_h100", "fabric.nodes=16384",
                                            "precision=bf16"])).metrics
    assert m["pp"] > 2 and 126 % m["pp"] and m["stage_layers"].count(",") == m["pp"] - 1


def test_a_stated_expert_degree_is_kept_by_the_search():
    from estimator.parallel.layout import Layout
    from estimator.parallel.search import candidates
    from estimator.parallel.spec import TransformerSpec

    cfg = estimator.resolve_config(["model=mixtral_8x7b", "system=dgx_h100", "fabric.nodes=64"])
    spec = TransformerSpec.from_cfg(cfg["model"])
    base = Layout.from_cfg({**cfg["parallelism"], "tp": 1, "pp": 1, "recompute": "selective"}, spec, 64)
    assert cfg["parallelism"]["ep"] is None and base.ep == 1  # unstated: 1 for a stated layout
    free = candidates(spec, base, 64, 8, 64, (1,))
    kept = candidates(spec, base, 64, 8, 64, (1,), {"ep": 4})
    assert {c.ep for c in free} > {4} and {c.ep for c in kept} == {4}  # searched vs kept
    assert 0 < len(kept) < len(free)
    whole = candidates(spec, base, 64, 8, 64, (1,), {"ep": 8, "etp": 1})
    assert whole and {(c.ep, c.expert_tp or c.tp) for c in whole} == {(8, 1)}
