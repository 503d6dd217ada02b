"""Megatron-core's shared-expert overlap (framework.moe_shared_expert_overlap, estimator/parallel/moe_comm.py): the
shared expert's fc1 behind the dispatch all-to-all and its fc2 behind the combine, in forward and backward."""

from __future__ import annotations

import subprocess
import sys

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.estimate import setup_hybrid
from estimator.parallel.layout import layer_kinds
from estimator.parallel.moe_comm import fc1_share, shared_hidden
from estimator.parallel.step import mlp_flops, outside_attention, part_times
from tests.conftest import REPO

# DeepSeek-V2-Lite (64 routed experts of 1,408, a 2,816-wide shared expert) on 16 H100: one stage, so every
# MoE layer of a microbatch is on the rank the step is accounted on
LITE = ["model=deepseek_v2_lite", "system=dgx_h100", "fabric.nodes=16", "parallelism.tp=1", "parallelism.pp=1",
        "parallelism.ep=16", "parallelism.global_batch=256", "precision=bf16"]
ON = "framework.moe_shared_expert_overlap=true"


def cfg(overrides):
    return estimator.resolve_config(["parallelism=hybrid", *overrides])


def run(overrides):
    return estimate(cfg(overrides)).metrics


def shared_seconds(overrides) -> float:
    """Per step, the shared expert's forward + backward seconds on the rank (what the overlap may hide at most)."""
    s = setup_hybrid(cfg(overrides))
    spec, device, precision, L, fw = s.spec, s.device, s.precision, s.layout, s.framework
    per_layer = 0.0
    for kind, n in layer_kinds(spec, L):
        if kind.experts:
            parts = part_times(kind, L.tp, L.sequence_parallel, L.micro_batch_size, device, precision, L.cp,
                               fw.attention_kernel, L.expert_tp, L.ep, fw.moe_dispatcher == "alltoall")
            per_layer += max(n) * sum(outside_attention(parts["layer"], parts["attention"],
                                                        mlp_flops(kind, L, kind.shared_ffn)))
    return L.microbatches * per_layer


def test_shared_hidden_is_bounded_by_the_all_to_alls_and_the_shared_parts():
    assert shared_hidden(1.0, 0.3, 0.2) == pytest.approx((1.5, 0.5))  # all of the shared expert hidden
    assert shared_hidden(1.0, 3.0, 0.2) == pytest.approx((0.8, 1.2))  # the dispatch hidden whole, never below 0
    assert shared_hidden(0.0, 3.0, 2.0) == (0.0, 0.0)
    assert fc1_share(True) == pytest.approx(2 / 3) and fc1_share(False) == 0.5


def test_off_by_default_leaves_the_estimate_unchanged():
    plain = run(LITE)
    off = run([*LITE, "framework.moe_shared_expert_overlap=false"])
    assert off["iter_time_s"] == plain["iter_time_s"]
    assert plain["ep_exposed_time_s"] == plain["ep_comm_time_s"]


def test_on_lowers_the_exposed_all_to_all_by_at_most_the_shared_experts_time():
    plain, on = run(LITE), run([*LITE, ON])
    assert on["ep_comm_time_s"] == plain["ep_comm_time_s"]  # the same bytes, partly hidden
    assert on["compute_time_s"] == plain["compute_time_s"]  # the shared expert still runs, on a side stream
    saved = plain["ep_exposed_time_s"] - on["ep_exposed_time_s"]
    assert saved > 0
    assert saved <= shared_seconds(LITE) * (1 + 1e-9)
    assert on["iter_time_s"] == pytest.approx(plain["iter_time_s"] - saved, rel=1e-9)
    assert on["ep_exposed_time_s"] >= 0


def test_the_flex_dispatchers_sms_slow_the_shared_gemms_it_runs_beside():
    flex = [*LITE, "framework.moe_dispatcher=deepep", ON]
    few, many = run([*flex, "framework.moe_dispatcher_sms=1"]), run([*flex, "framework.moe_dispatcher_sms=65"])
    assert many["ep_exposed_time_s"] > few["ep_exposed_time_s"]
    plain = run([*LITE, "framework.moe_dispatcher=deepep"])
    assert many["ep_exposed_time_s"] < plain["ep_exposed_time_s"]  # 65 of 132 SMs: half the hidden time still saved


@pytest.mark.parametrize("extra, needle", [
    (["model=qwen3_30b_a3b"], "model qwen3_30b_a3b has no shared expert"),
    (["model=llama3_8b", "parallelism.ep=1"], "model llama3_8b has no shared expert"),
    (["framework.moe_a2a_overlap=true"], "refuses it with overlap_moe_expert_parallel_comm"),
    (["parallelism.recompute=selective", "parallelism.recompute_modules=[shared_experts]"],
     "refuses shared_experts in recompute_modules"),
])
def test_refuses_what_megatron_refuses_or_ignores(extra, needle):
    with pytest.raises(EstimatorError, match=needle):
        run([*LITE, ON, *extra])


def test_cli_error_is_one_line_exit_2():
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "parallelism=hybrid", *LITE, ON,
                          "model=qwen3_30b_a3b"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "no shared expert" in out.stderr
