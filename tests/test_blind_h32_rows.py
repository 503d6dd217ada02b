"""The round-h32 blind held-out rows (issue #23 item 7, "further published runs"), now in validation/llm.csv.

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(1b02223), then moved into llm.csv (validation/llm_rows.md, "Blind held-out rows, round h32"). These checks price no
step: every row parses
with the project's loader, is a run no other row describes (id, or document + software release + model), shares no
source with a calibration row, sets only facts of the run, reproduces the published numbers it is derived from,
composes into a config the hybrid model accepts and fits in memory, and is described in the folder's README.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from estimator.validation import load_rows
from estimator.validation.llm import source_keys
from tests.blind_checks import (
    MOE_ROUTER_KEYS,
    STEP,
    check_composes_and_fits,
    check_facts_only,
    check_new_runs,
    check_no_calibration_source,
    check_rows_in_llm_file,
    check_step_conversion,
    document,
    overrides,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H32_IDS = ("dgxc2504-nemotron4-15b-bf16-16gpu", "dgxc2504-nemotron4-15b-bf16-2048gpu",
           "dgxc2504-nemotron4-15b-fp8-16gpu", "dgxc2504-nemotron4-15b-fp8-2048gpu",
           "dgxc2504-nemotron4-340b-bf16-256gpu", "dgxc2504-nemotron4-340b-bf16-2048gpu",
           "dgxc2504-nemotron4-340b-fp8-256gpu", "dgxc2504-nemotron4-340b-fp8-2048gpu", "nfl2405-gpt3-5b-fp8-64gpu",
           "nfl2405-gpt3-20b-fp8-64gpu", "nfl2405-llama2-7b-fp8-8gpu", "nfl2405-llama2-13b-fp8-16gpu",
           "nfl2405-llama2-70b-fp8-64gpu", "nfl2405-llama3-8b-fp8-8gpu", "nfl2405-llama3-70b-fp8-64gpu",
           "mlm08-gpt-1.7b-48gpu", "mlm08-gpt-7.1b-96gpu", "mlm08-gpt-16b-192gpu", "mlm08-gpt-32b-384gpu",
           "mlm08-gpt-70b-768gpu", "mlm08-gpt-119b-1536gpu", "mlm08-gpt-177b-2304gpu", "mlm08-gpt-314b-3072gpu",
           "mlm08-gpt-462b-6144gpu", "mbridge2509-llama3-70b-fp8-64gpu")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H32_IDS]
SEEN = [r for r in ALL if r.id not in H32_IDS] + load_rows(VALIDATION / "pending")
# What these rows may set: layout, recipe and model-shape facts the sources state; no efficiency, no measured or
# fitted value.
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "parallelism.zero", "parallelism.virtual_stages", "parallelism.sequence_parallel",
                "parallelism.dp_overlap", "parallelism.recompute", "parallelism.fp32_grads", "framework.tp_comm_overlap",
                "framework.attention_kernel", "fabric.nvls", "model.vocab_size", "model.hidden_size",
                "model.num_layers", "model.num_heads", "model.num_kv_heads", "model.ffn_size"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
# Rows per source document (the first repository-file key of source_keys).
DOCUMENTS = {"NVIDIA/dgxc-benchmarking:nemotron/README.md": 8,
             "NVIDIA/NeMo-Framework-Launcher:examples/README.md": 7,
             "NVIDIA/Megatron-LM:images/model_table.png": 9,
             "NVIDIA-NeMo/Megatron-Bridge:docs/performance-summary-archive.md": 1}
# A software release: a NeMo container (24.05, 25.02.01, 25.09), a Megatron-Core release (r0.8.0) or a commit.
RELEASE = re.compile(r"\b(2\d\.\d\d(?:\.\d\d)?)\b|\br(\d+\.\d+\.\d+)\b|@([0-9a-f]{8})")
# "'Per-GPU teraFLOP/s' 432.8" in a Megatron-LM row's measured_what.
TFLOPS = re.compile(r"'Per-GPU teraFLOP/s' (\d+(?:\.\d+)?)")


def _release(row) -> str:
    found = RELEASE.search(row.software)
    assert found, f"{row.id}: no software release in {row.software!r}"
    return next(g for g in found.groups() if g)


def test_rows_parse_and_come_from_four_documents():
    check_rows_in_llm_file(ROWS, DOCUMENTS, 25)
    assert {r.system for r in ROWS} == {"dgx_h100"}
    assert sum(r.gpus >= 1000 for r in ROWS) >= 5
    assert {_release(r) for r in ROWS} == {"25.02.01", "24.05", "0.8.0", "25.09"}


def test_rows_are_runs_no_other_row_describes():
    check_new_runs(ROWS, SEEN, _release)


def test_the_run_check_can_fail():
    """The 25.09 row shares its document and model with the 25.11 row of llm.csv; only the release tells them apart."""
    (seen,) = [s for s in SEEN if s.id == "mbridge2511-llama3-70b-fp8-64gpu"]
    (row,) = [r for r in ROWS if r.id == "mbridge2509-llama3-70b-fp8-64gpu"]
    assert document(row) in source_keys(seen.source) and seen.model == row.model
    assert _release(row) == "25.09" != _release(seen) == "25.11"


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    assert keys["framework"] == "megatron"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


STEP_ROWS = [r for r in ROWS if STEP.search(r.measured_what)]


def test_step_time_rows_are_the_dgxc_rows():
    assert {r.id for r in STEP_ROWS} == {r.id for r in ROWS if r.id.startswith("dgxc")}
    assert len(STEP_ROWS) == 8


@pytest.mark.parametrize("row", STEP_ROWS, ids=lambda r: r.id)
def test_step_time_rows_reproduce_the_conversion(row):
    check_step_conversion(row)


@pytest.mark.parametrize("row", STEP_ROWS, ids=lambda r: r.id)
def test_dgxc_nemotron_rows_use_the_launch_scripts_batch_rule(row):
    """nemotron/launch.sh: 15B GBS = 4 x GPUs at TP 2 MBS 2; 340B GBS = GPUs / 4 at TP 8 PP 8 VP 12 MBS 1."""
    lay = row.layout
    if row.model == "nemotron4_15b":
        assert (lay["global_batch"], lay["tp"], lay["pp"], lay["micro_batch_size"]) == (4 * row.gpus, 2, 1, 2)
    else:
        assert (lay["global_batch"], lay["tp"], lay["pp"], lay["micro_batch_size"]) == (row.gpus // 4, 8, 8, 1)
        assert overrides(row)["parallelism.virtual_stages"] == "12"


MLM_ROWS = [r for r in ROWS if r.id.startswith("mlm08")]


def _megatron_flops_per_token(row) -> float:
    """Megatron-LM core_r0.8.0 num_floating_point_operations per token (no GQA, no SwiGLU, no MoE)."""
    ov = overrides(row)
    h, layers, vocab, ffn = (int(ov[k]) for k in ("model.hidden_size", "model.num_layers", "model.vocab_size",
                                                  "model.ffn_size"))
    s = row.layout["seq_len"]
    return 12 * layers * h * h * ((1 + 1 + s / h) + ffn / h + vocab / (2 * layers * h))


@pytest.mark.parametrize("row", MLM_ROWS, ids=lambda r: r.id)
def test_megatron_lm_rows_reproduce_the_table_and_its_flop_count(row):
    tflops = TFLOPS.search(row.measured_what).group(1)
    assert f"{tflops} TFLOP/s/GPU" in row.source
    assert row.measured == round(float(tflops) * 1e12 / _megatron_flops_per_token(row), 3)
    ov = overrides(row)
    assert ov["model.vocab_size"] == "131072" and row.layout["seq_len"] == 4096
    assert int(ov["model.ffn_size"]) == 4 * int(ov["model.hidden_size"])
    # --tp-comm-overlap needs --sequence-parallel; both only where TP > 1.
    assert (ov["parallelism.sequence_parallel"] == "true") == (row.layout["tp"] > 1) == ("framework.tp_comm_overlap" in ov)


def test_megatron_lm_rows_are_the_weak_scaling_table():
    """Nine rows, 48-6,144 GPUs, DP 48 throughout and the batch growing with the model (the table's weak scaling)."""
    assert len(MLM_ROWS) == 9
    assert all(r.gpus // (r.layout["tp"] * r.layout["pp"]) == 48 for r in MLM_ROWS)
    assert sorted(r.gpus for r in MLM_ROWS) == [48, 96, 192, 384, 768, 1536, 2304, 3072, 6144]


@pytest.mark.parametrize("row", [r for r in ROWS if r.id.startswith(("nfl", "mbridge"))], ids=lambda r: r.id)
def test_table_rows_are_the_table_value(row):
    assert f"{row.measured:g} tokens/s/GPU" in row.source
    lay = row.layout
    if row.id.startswith("nfl"):
        assert (f"| {row.gpus} | GBS {lay['global_batch']} | MBS {lay['micro_batch_size']} | {lay['seq_len']} | "
                f"TP {lay['tp']} | PP {lay['pp']} | CP {lay['cp']} |") in row.source
        assert overrides(row)["framework.attention_kernel"] == "flash2"  # the 24.05 launcher's NVTE_FUSED_ATTN: 0


def test_every_row_is_described():
    doc = (VALIDATION / "llm_rows.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Blind held-out rows, round h32"):]
    for row in ROWS:
        assert f"`{row.id}`" in section, f"{row.id} is not listed in llm_rows.md, 'Blind held-out rows, round h32'"
