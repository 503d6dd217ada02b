"""The round-h46 blind held-out MLPerf row: MLPerf Training v6.0 llama31_8b on Cisco's 2-node UCS C885A H200 system,
the one H100/H200 MLPerf LLM-pretraining result no row used yet (validation/blind_h46/README.md lists what else was
read and why it was left out: GB200/GB300/B200/MI3xx systems, H200 NVL PCIe boxes, and two rounds that re-file
logs a row already converted).

Written before any prediction was seen; the lead prices it once. These checks price no step: the row parses with the
project's loader, is an independent tokens/s llm row that repeats no run already described (nor re-files logs one
converted), shares no source with a calibration row, sets only facts of the run, reproduces its step-time ->
throughput conversion and the layout its log prints, and composes into a config the hybrid model accepts and fits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from estimator.validation.llm import source_keys
from tests.blind_checks import (
    MOE_ROUTER_KEYS,
    check_composes_and_fits,
    check_described,
    check_facts_only,
    check_moved_once,
    check_no_calibration_source,
    check_step_conversion,
    document,
    other_blind_rows,
    overrides,
    round_rows,
    run_key,
    table_line,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
IDS = ("mlperf60-llama31-8b-cisco-c885a-h200-16gpu",)
ALL, ROWS, SEEN = round_rows(IDS)
OTHER_BLIND = other_blind_rows()
SECTION = "## Blind held-out rows, round h46 (MLPerf Training v6.0, Cisco C885A H200, Llama 3.1 8B)"
V60_CISCO = "mlcommons/training_results_v6.0:Cisco/results/*/llama31_8b"
COMMIT = "eabf23a07b2a0c60a289ff871dc3a46fff0d0421"
ALLOWED = {"framework", "parallelism.zero", "parallelism.sequence_parallel", "parallelism.dp_overlap",
           "parallelism.recompute", "parallelism.fp32_grads", "framework.tp_comm_overlap", "framework.loss_kernel"}
ALLOWED |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
# The configuration result_0.txt prints (what ran): 2 nodes x 8 GPUs, TP/PP/CP 1, micro-batch 1, global batch 32,
# 'setting number of microbatches to constant 2'.
NODES, TP, PP, CP, MBS, GBS, MICROBATCHES = 2, 1, 1, 1, 1, 32, 2


def test_row_parses_as_an_independent_h200_llm_row():
    assert tuple(r.id for r in ROWS) == IDS
    (row,) = ROWS
    assert row.file == "validation/llm.csv" and row.kind == "llm" and row.role == "independent"
    assert (row.system, row.model, row.precision) == ("dgx_h200", "llama3_8b", "fp8")
    assert document(row) == V60_CISCO and f"training_results_v6.0@{COMMIT}" in row.source


def test_row_is_a_run_no_other_row_describes():
    """No id or run key of llm.csv, pending/ or another blind round. The Cisco v6.0 llama31_8b rows already in
    llm.csv (same document key: one submitter's llama31_8b results) are the Zeus H100 system at 64 and 128 GPUs; this
    row is another system (H200, 2 nodes) with another step time. The check can fail: a seen row's own key is
    caught."""
    others = SEEN + OTHER_BLIND
    assert not {r.id for r in others} & set(IDS)
    seen = {run_key(s) for s in others}
    assert not [r.id for r in ROWS if run_key(r) in seen]
    assert run_key(SEEN[0]) in seen
    zeus = [s for s in others if V60_CISCO in source_keys(s.source)]
    assert zeus and {s.system for s in zeus} == {"dgx_h100"} and all("Zeus" in s.source for s in zeus)
    (row,) = ROWS
    assert "Zeus" not in row.source and {s.gpus for s in zeus}.isdisjoint({row.gpus})


def test_row_repeats_no_converted_logs():
    """No seen row has this row's model, GPUs, global batch and measured value (a round that re-files another
    round's logs gives the same median to the last digit, as v5.1's Nebius H200 405B folders re-file v5.0's)."""
    others = SEEN + OTHER_BLIND
    for row in ROWS:
        same = [s.id for s in others if (s.model, s.gpus, s.layout["global_batch"], s.measured)
                == (row.model, row.gpus, row.layout["global_batch"], row.measured)]
        assert not same, f"{row.id} repeats the logs of {same}"
    (nebius,) = [s for s in SEEN if s.id == "mlperf50-llama31-405b-nebius-h200-512gpu"]
    assert nebius.measured == round(1152 * 8192 / (50.015970 * 512), 3)  # also the v5.1 folder's 738-value median


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED)
    assert keys == {"framework": "megatron", "parallelism.zero": "1", "parallelism.sequence_parallel": "false",
                    "parallelism.dp_overlap": "true", "parallelism.recompute": "none",
                    "parallelism.fp32_grads": "false", "framework.tp_comm_overlap": "false",
                    "framework.loss_kernel": "te_fused",
                    "framework.fp8_recipe": "tensorwise"}  # the log's [model] fp8_recipe: 'tensorwise' (round h63)
    # NCCL_NVLS_ENABLE's value is in a config file the snapshot lacks: no fabric.nvls override, the key is unstated
    assert "fabric.nvls" not in keys and row.raw["unstated"].split() == ["fabric.nvls", "fabric.uplink_technology"]
    for fact in ("use_megatron_fsdp=False", "grad_reduce_in_fp32=False", "recompute_granularity=None",
                 "cross_entropy_fusion_impl 'te'", "sequence_parallel=False", "tp_comm_overlap=False"):
        assert fact in row.measured_what, fact


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_step_time_row_reproduces_its_conversion(row):
    check_step_conversion(row)
    assert "all 207 logged values of result_0.txt" in row.measured_what


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_layout_is_the_one_the_log_prints(row):
    """GPUs = 2 nodes x 8 (the system JSON), TP/PP/CP/MBS 1, GBS 32 = 2 microbatches x DP 16, sequence 8192."""
    lay = row.layout
    assert row.gpus == NODES * 8 and f"{NODES} nodes x 8x H200" in row.hardware
    assert (lay["tp"], lay["pp"], lay["cp"], lay["micro_batch_size"]) == (TP, PP, CP, MBS)
    dp = row.gpus // (TP * PP * CP)
    assert lay["global_batch"] == GBS == MICROBATCHES * MBS * dp and lay["seq_len"] == 8192
    assert f"'setting number of microbatches to constant {MICROBATCHES}'" in row.measured_what
    assert "parallelism.virtual_stages" not in overrides(row)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_priced_once_then_moved_into_llm_csv_and_described():
    """Priced once at 92a3d35 (validation/llm_rows.md, round h46), then moved unchanged into validation/llm.csv."""
    check_moved_once(IDS, ALL)
    check_described(ROWS, SECTION, measured=True)
    assert table_line((VALIDATION / "llm_rows.md").read_text(encoding="utf-8"), IDS[0])
