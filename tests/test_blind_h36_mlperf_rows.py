"""The round-h36 blind held-out MLPerf rows (issue #23 item 7): MLPerf Training v6.0 llama31_8b on Cisco's Zeus H100
systems, now in validation/llm.csv.

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(3b910d2), then moved into llm.csv (validation/llm_rows.md, "Blind held-out rows, round h36 (MLPerf v6.0)"). These
checks price no step: every row parses with the project's loader, is a run no other row describes (and not a
resubmission of logs another row already converted), shares no source with a calibration row, sets only facts of the
run, reproduces its step-time -> throughput conversion and the layout its config states, composes into a config the
hybrid model accepts and fits in memory, and is described in llm_rows.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from estimator.validation import load_rows
from estimator.validation.llm import source_keys
from tests.blind_checks import (
    MOE_ROUTER_KEYS,
    check_composes_and_fits,
    check_facts_only,
    check_new_runs,
    check_no_calibration_source,
    check_step_conversion,
    document,
    overrides,
    run_key,
    section,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H36_MLPERF_IDS = ("mlperf60-llama31-8b-cisco-zeus-64gpu", "mlperf60-llama31-8b-cisco-zeus-128gpu")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H36_MLPERF_IDS]
# rows seen before this round: later rounds' rows are checked against this one by their own tests (round h46's
# Cisco C885A H200 row is another system of the same submitter's v6.0 results: tests/test_blind_h46_rows.py)
LATER = ("mlperf60-llama31-8b-cisco-c885a-h200-16gpu",)
SEEN = [r for r in ALL + load_rows(VALIDATION / "pending")
        if r.kind == "llm" and r.id not in H36_MLPERF_IDS and r.id not in LATER]
SECTION = "## Blind held-out rows, round h36 (MLPerf v6.0)"
V60_CISCO = "mlcommons/training_results_v6.0:Cisco/results/*/llama31_8b"
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "parallelism.zero", "parallelism.sequence_parallel", "parallelism.dp_overlap",
                "parallelism.recompute", "parallelism.fp32_grads", "framework.tp_comm_overlap", "fabric.nvls"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED_KEYS |= {"framework.fp8_param_gather"}  # round h107: Megatron-core's FP8 parameter all-gather (NeMo FP8_PARAMS / FP8_PARAM_GATHER), a fact of the stack the run used
ALLOWED_KEYS |= {"fabric.uplink_technology"}  # round h107: the system JSON's Ethernet compute fabric (roce), a fact of the system
# The config files' settings (Cisco/benchmarks/llama31_8b/nemo/config_DGXH100_8x8x36xtp8pp8cp2.sh, which the 16-node
# file sources): TENSOR_MODEL_PARALLEL=2, PIPELINE_MODEL_PARALLEL=1, CONTEXT_PARALLEL=1, MICRO_BATCH_SIZE=1, MINIBS=1.
TP, PP, CP, MBS, MINIBS = 2, 1, 1, 1, 1


def _release(row) -> str:
    """The MLPerf round a row's source names (training_results_vX.Y)."""
    return next(k.split(":")[0].rsplit("_v", 1)[1] for k in source_keys(row.source) if "training_results_v" in k)


def _resubmitted(row, seen) -> list[str]:
    """Rows of ``seen`` whose published number this row's logs repeat: the same model, GPUs and global batch with the
    same measured value (a round that re-files another round's logs gives the same median to the last digit)."""
    return [s.id for s in seen if (s.model, s.gpus, s.layout["global_batch"], s.measured)
            == (row.model, row.gpus, row.layout["global_batch"], row.measured)]


def test_rows_parse_are_independent_and_come_from_one_document():
    assert tuple(r.id for r in ROWS) == H36_MLPERF_IDS
    assert {r.file for r in ROWS} == {"validation/llm.csv"}
    assert all(r.kind == "llm" and r.role == "independent" for r in ROWS)
    assert {document(r) for r in ROWS} == {V60_CISCO}
    assert {r.system for r in ROWS} == {"dgx_h100"} and {r.model for r in ROWS} == {"llama3_8b"}


def test_estimator_validate_reads_the_rows_from_llm_csv():
    """Priced once, the rows are in the default validation folder's llm.csv, each id once (not also in pending/)."""
    assert set(H36_MLPERF_IDS) <= {r.id for r in ALL} and {r.file for r in ROWS} == {"validation/llm.csv"}
    everywhere = [r.id for r in ALL + load_rows(VALIDATION / "pending") if r.id in H36_MLPERF_IDS]
    assert sorted(everywhere) == sorted(H36_MLPERF_IDS)


def test_rows_are_runs_no_other_row_describes():
    check_new_runs(ROWS, SEEN, _release)
    for row in ROWS:
        assert not [s.id for s in SEEN if run_key(s) == run_key(row) and _release(s) == _release(row)], row.id
        assert not _resubmitted(row, SEEN), f"{row.id} repeats the logs of {_resubmitted(row, SEEN)}"
    # No row of llm.csv or pending/ cites the v6.0 Cisco results; the v5.1 Cisco rows are another round's runs.
    assert not [s.id for s in SEEN if V60_CISCO in source_keys(s.source)]
    v51 = [s for s in SEEN if s.id.startswith("mlperf51-llama31-8b-cisco")]
    assert v51 and {_release(s) for s in v51} == {"5.1"} and {_release(r) for r in ROWS} == {"6.0"}
    # The 128-GPU row has the layout of v5.1's hpf_n16 row (TP 2, GBS 64) but is another system and run: other NICs
    # (ConnectX-8 vs BlueField-3 ConnectX-7) named in the hardware, and a step time 28 % shorter.
    (old,) = [s for s in v51 if s.gpus == 128]
    (new,) = [r for r in ROWS if r.gpus == 128]
    assert run_key(old) == run_key(new) and "ConnectX-8" in new.hardware and "ConnectX-8" not in old.hardware
    assert new.measured > 1.3 * old.measured


def test_the_run_checks_can_fail():
    """A copy of a v5.1 Cisco row is caught both as the same run and as resubmitted logs."""
    (cisco,) = [s for s in SEEN if s.id == "mlperf51-llama31-8b-cisco-64gpu"]
    assert _resubmitted(cisco, SEEN) == [cisco.id]
    assert [s.id for s in SEEN if run_key(s) == run_key(cisco)] == [cisco.id]
    # The 64-GPU row differs from it in layout (TP 2, GBS 32 vs TP 1, GBS 64).
    assert run_key(ROWS[0]) != run_key(cisco)


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    assert keys == {"framework": "megatron", "parallelism.zero": "1", "parallelism.sequence_parallel": "true",
                    "parallelism.dp_overlap": "true", "parallelism.recompute": "none",
                    "framework.tp_comm_overlap": "true", "parallelism.fp32_grads": "false", "fabric.nvls": "false",
                    "framework.loss_kernel": "te_fused",  # config_common.sh CE_FUSION_IMPL=te (added with the loss kernels)
                    "framework.fp8_recipe": "delayed",  # config_common.sh FP8_RECIPE="delayed" (round h63)
                    "framework.fp8_param_gather": "true",  # config_common.sh FP8_PARAM_GATHER=True (round h107)
                    "fabric.uplink_technology": "roce"}  # system JSON: 8x ConnectX-8 'RDMA over Ethernet' (round h107)
    assert row.precision == "fp8" and row.raw["unstated"].split() == []
    assert "NCCL_NVLS_ENABLE=0" in row.measured_what and "grad_reduce_in_fp32=False" in row.measured_what


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_step_time_rows_reproduce_their_conversion(row):
    check_step_conversion(row)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_layout_is_the_config_files(row):
    """GPUs = nodes x 8 (the system name), TP/PP/CP/MBS as the config sets, GBS = MINIBS x DP, sequence 8192."""
    nodes = int(row.source.split("Zeus_")[1].split("x")[0])
    lay = row.layout
    assert nodes * 8 == row.gpus and (lay["tp"], lay["pp"], lay["cp"], lay["micro_batch_size"]) == (TP, PP, CP, MBS)
    assert lay["global_batch"] == MINIBS * row.gpus // (TP * PP * CP) and lay["seq_len"] == 8192
    assert f"global_batch_size {lay['global_batch']}, gradient_accumulation_steps 1" in row.measured_what
    assert "parallelism.virtual_stages" not in overrides(row)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_every_row_is_described():
    readme = section(VALIDATION / "llm_rows.md", SECTION)
    for row in ROWS:
        assert f"`{row.id}`" in readme and f"{row.measured:.3f}" in readme, row.id
        step = row.measured_what.split(" s per step")[0].rsplit(" ", 1)[1]
        assert f"median {step} s" in readme, row.id
