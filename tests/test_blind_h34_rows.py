"""The round-h34 blind held-out rows (issue #23 item 7, "further published runs"), now in validation/llm.csv.

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(1479cc6), then moved into llm.csv (validation/llm_rows.md, "Blind held-out rows, round h34"). These checks price no
step: every row parses with the project's loader, is a run no other row describes, shares no source with a
calibration row, sets only facts of the run, reproduces the published numbers it is derived from, composes into a
config the hybrid model accepts and fits in memory, and is described in llm_rows.md.
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
    check_no_calibration_source,
    check_rows_in_llm_file,
    check_step_conversion,
    document,
    overrides,
    run_key,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H34_IDS = ("mbridge2509-llama3-8b-fp8-8gpu-mfsdp", "mlperf50-llama31-405b-eos-2432gpu",
           "mlperf50-llama31-405b-eos-2560gpu", "mlperf31-gpt3-eos-768gpu", "bloom-176b-384gpu-gbs16",
           "bigsci-prequel-20b-fp16-8gpu", "bigsci-prequel-200b-fp16-80gpu", "bigsci-prequel-200b-fp16-160gpu")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H34_IDS]
SEEN = [r for r in ALL if r.id not in H34_IDS] + load_rows(VALIDATION / "pending")
MBRIDGE = "NVIDIA-NeMo/Megatron-Bridge:docs/performance-summary-archive.md"
MLPERF50 = "mlcommons/training_results_v5.0:NVIDIA/results/*/llama31_405b"
MLPERF31 = "mlcommons/training_results_v3.1:NVIDIA/results/*/gpt3"
BLOOM = "bigscience-workshop/bigscience:train/tr11-176B-ml/README.md"
PREQUEL = "bigscience-workshop/bigscience:train/tr11-176B-ml/chronicles-prequel.md"
DOCUMENTS = {MBRIDGE: 1, MLPERF50: 2, MLPERF31: 1, BLOOM: 1, PREQUEL: 3}
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "parallelism.zero", "parallelism.virtual_stages", "parallelism.sequence_parallel",
                "parallelism.dp_overlap", "parallelism.recompute", "parallelism.fp32_grads", "framework.tp_comm_overlap",
                "fabric.nvls", "model.vocab_size", "model.hidden_size", "model.num_layers", "model.num_heads",
                "model.ffn_size", "model.fused_kernels", "model.dropout", "parallelism.first_stage_layers",
                "parallelism.last_stage_layers", "fabric.uplinks", "fabric.uplink_bandwidth_Bps"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED_KEYS |= {"fabric.uplink_technology", "fabric.ring_uplinks"}  # twenty-first stop: Jean Zay's Omni-Path (opa) and the one link its NCCL communicators used, facts of the hardware and its NCCL log
ALLOWED_KEYS |= {"model.position_embedding"}  # twenty-second stop: ALiBi (--position-embedding-type alibi in the runs' slurm scripts), a fact of the model
ALLOWED_KEYS |= {"framework.fused_softmax"}  # twenty-fourth stop: the BigScience fork's fused-softmax check (swapped arguments, Oct 2021 - Mar 2022), a fact of the code at the run date
STEP_ROWS = [r for r in ROWS if document(r) != MBRIDGE]


def _repeats(row, seen) -> list[str]:
    """Rows of ``seen`` from the same document that describe the same run (same system, shape, GPUs and layout)."""
    return [s.id for s in seen if document(row) in source_keys(s.source) and run_key(s) == run_key(row)]


def test_rows_parse_and_come_from_five_documents():
    check_rows_in_llm_file(ROWS, DOCUMENTS, 8)
    assert {r.system for r in ROWS} == {"dgx_h100", "dgx_a100"}


def test_rows_are_runs_no_other_row_describes():
    assert not {r.id for r in SEEN} & {r.id for r in ROWS}
    for row in ROWS:
        assert not _repeats(row, SEEN), f"{row.id} repeats {_repeats(row, SEEN)}"
    # Every document but the BigScience prequel is one llm.csv already cites (another size, batch or model of it:
    # another run); the prequel is new.
    for doc in DOCUMENTS:
        assert bool([s.id for s in SEEN if doc in source_keys(s.source)]) == (doc != PREQUEL), doc


def test_the_run_check_can_fail():
    """llm.csv's BLOOM row, re-read, is caught as a repeat; the GBS-16 row of the same training is not."""
    (seen,) = [s for s in SEEN if s.id == "bloom-176b-384gpu"]
    assert _repeats(seen, [seen]) == [seen.id]
    (gbs16,) = [r for r in ROWS if r.id == "bloom-176b-384gpu-gbs16"]
    assert not _repeats(gbs16, [seen])


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    assert keys["framework"] == ("deepspeed" if document(row) in (BLOOM, PREQUEL) else "megatron")


@pytest.mark.parametrize("row", STEP_ROWS, ids=lambda r: r.id)
def test_step_time_rows_reproduce_their_conversion(row):
    check_step_conversion(row)


def test_megatron_fsdp_row_is_the_table_value_and_zero3():
    (row,) = [r for r in ROWS if document(r) == MBRIDGE]
    lay = row.layout
    assert (f"'LLAMA3_8B | {row.gpus} | {lay['global_batch']} | {lay['micro_batch_size']} | {lay['seq_len']} | FSDP 8 | "
            f"TP {lay['tp']} | PP {lay['pp']} | CP {lay['cp']} | VP n/a | EP 1 | GA 16 | {row.measured:g} tokens/s/GPU"
            in row.source)
    ov = overrides(row)
    # Megatron FSDP 'optim_grads_params' shards weights, gradients and optimizer state: ZeRO-3 in the megatron profile.
    assert ov["framework"] == "megatron" and ov["parallelism.zero"] == "3" and row.precision == "fp8"
    assert lay["global_batch"] // (row.gpus * lay["micro_batch_size"]) == 16


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_every_row_is_described():
    doc = (VALIDATION / "llm_rows.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Blind held-out rows, round h34"):]
    for row in ROWS:
        assert f"`{row.id}`" in section, f"{row.id} is not listed in llm_rows.md, 'Blind held-out rows, round h34'"


@pytest.mark.parametrize("row", [r for r in ROWS if document(r) == PREQUEL], ids=lambda r: r.id)
def test_prequel_rows_are_the_slurm_of_their_date(row):
    """The prequel's fp16 runs of 2022-02-17 use the tr11-200B-ml.slurm of that day: TP 8, MBS 1, GBS 2048, hidden
    14400, ZeRO-1, activation checkpointing; the GPU count is the table's, DP = GPUs / (TP x PP)."""
    ov = overrides(row)
    assert "tr11-200B-ml/tr11-200B-ml.slurm" in row.source and "(commit 'a100', 2022-02-17" in row.source
    assert row.precision == "fp16" and row.layout["tp"] == 8 and row.layout["micro_batch_size"] == 1
    assert row.layout["global_batch"] == 2048 and ov["model.hidden_size"] == "14400"
    assert ov["parallelism.zero"] == "1" and ov["parallelism.recompute"] == "full"
    dp = row.gpus // (row.layout["tp"] * row.layout["pp"])
    assert f"'{row.gpus} | {'20B' if row.gpus == 8 else '200B'} | {dp} | 8 | {row.layout['pp']} | 1 | " in row.source
    assert "model.vocab_size" in row.raw["unstated"].split()
