"""The round-h31 blind held-out rows (issue #23 item 7, "further published runs"), now in validation/llm.csv.

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(b1a8a8b), then moved into llm.csv (validation/llm_rows.md, "Blind held-out rows, round h31"). These checks price no
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
    check_no_calibration_source,
    check_step_conversion,
)
from tests.blind_checks import document as _document
from tests.blind_checks import overrides as _overrides
from tests.test_blind_h34_rows import H34_IDS

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H31_IDS = ("dgxc2504-llama31-70b-bf16-64gpu", "dgxc2504-llama31-70b-bf16-2048gpu", "dgxc2504-llama31-70b-fp8-64gpu",
           "dgxc2504-llama31-70b-fp8-2048gpu", "dgxc2504-llama31-405b-bf16-512gpu",
           "dgxc2504-llama31-405b-bf16-2048gpu", "dgxc2504-llama31-405b-fp8-512gpu",
           "dgxc2504-llama31-405b-fp8-2048gpu", "dgxc2504-llama31-8b-bf16-128gpu", "dgxc2504-llama31-8b-fp8-128gpu",
           "dgxc2502-nemotron4-15b-bf16-16gpu", "dgxc2502-nemotron4-15b-bf16-2048gpu",
           "dgxc2502-nemotron4-15b-fp8-16gpu", "dgxc2502-nemotron4-15b-fp8-2048gpu",
           "mlperf50-llama31-405b-eos-512gpu", "mlperf50-llama31-405b-eos-2048gpu",
           "mlperf50-llama31-405b-eos-8192gpu", "mlperf50-llama31-405b-nebius-h200-512gpu",
           "mlperf50-llama31-405b-nebius-h200-1024gpu", "mlperf51-llama31-8b-cisco-64gpu",
           "mlperf51-llama31-8b-cisco-128gpu", "mbridge260201-llama3-70b-fp8-64gpu",
           "mbridge2604-llama3-70b-fp8-64gpu", "mbridge260401-llama31-405b-fp8-1024gpu",
           "olmocore16-olmo-1b-8gpu-bf16", "olmocore16-olmo-1b-8gpu-fp8")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H31_IDS]
# round h34's rows are later lines of some of these documents (test_blind_h34_rows.py checks them)
SEEN = [r for r in ALL if r.id not in H31_IDS and r.id not in H34_IDS] + load_rows(VALIDATION / "pending")
# What these rows may set: layout, recipe and model-shape facts the sources state; no efficiency, no measured or
# fitted value.
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "parallelism.zero", "parallelism.virtual_stages", "parallelism.sequence_parallel",
                "parallelism.dp_overlap", "parallelism.recompute", "parallelism.fp32_grads", "framework.tp_comm_overlap",
                "fabric.nvls", "model.fused_kernels", "model.vocab_size", "model.hidden_size", "model.num_layers",
                "model.num_heads", "model.num_kv_heads", "model.ffn_size"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED_KEYS |= {"framework.fp8_param_gather"}  # round h107: Megatron-core's FP8 parameter all-gather (NeMo FP8_PARAMS / FP8_PARAM_GATHER), a fact of the stack the run used
ALLOWED_KEYS |= {"fabric.uplink_technology"}  # round h107: the system JSON's Ethernet compute fabric (roce), a fact of the system
# Rows per source document (the first repository-file key of source_keys).
DOCUMENTS = {"NVIDIA/dgxc-benchmarking:llama3.1/README.md": 10,
             "NVIDIA/dgxc-benchmarking:nemotron/README_15b.md": 4,
             "mlcommons/training_results_v5.0:NVIDIA/results/*/llama31_405b": 3,
             "mlcommons/training_results_v5.0:Nebius/results/*/llama31_405b": 2,
             "mlcommons/training_results_v5.1:Cisco/results/*/llama31_8b": 2,
             "NVIDIA-NeMo/Megatron-Bridge:docs/performance-summary-archive.md": 3,
             "allenai/OLMo-core:README.md": 2}
# A software release: a NeMo container (24.12, 25.02.01, 26.04.01) or a repository commit (OLMo-core @41400c46).
RELEASE = re.compile(r"\b(2\d\.\d\d(?:\.\d\d)?)\b|@([0-9a-f]{8})")


def _release(row) -> str:
    found = RELEASE.search(row.software)
    assert found, f"{row.id}: no software release in {row.software!r}"
    return found.group(1) or found.group(2)


def test_rows_parse_and_come_from_seven_documents():
    assert len(ROWS) == sum(DOCUMENTS.values()) == 26
    assert {r.file for r in ROWS} == {"validation/llm.csv"}
    assert len({r.id for r in ROWS}) == len(ROWS)
    assert all(r.kind == "llm" and r.role == "independent" for r in ROWS)
    assert {doc: sum(_document(r) == doc for r in ROWS) for doc in DOCUMENTS} == DOCUMENTS
    assert {r.system for r in ROWS} == {"dgx_h100", "dgx_h200"}
    assert sum(r.gpus >= 1000 for r in ROWS) >= 5


def test_rows_are_runs_no_other_row_describes():
    assert not {r.id for r in SEEN} & {r.id for r in ROWS}
    for row in ROWS:
        # A document already used counts only at another software release, or for a model no row of that release has.
        same_document = [s for s in SEEN if _document(row) in source_keys(s.source)]
        clashes = [s.id for s in same_document if _release(s) == _release(row) and s.model == row.model]
        assert not clashes, f"{row.id} repeats {clashes}"


def test_the_run_check_can_fail():
    """A copy of a llm.csv row with its document and release is caught by the check above."""
    (seen,) = [s for s in SEEN if s.id == "mbridge260401-llama3-70b-fp8-64gpu"]
    (row,) = [r for r in ROWS if r.id == "mbridge2604-llama3-70b-fp8-64gpu"]
    assert _document(row) in source_keys(seen.source) and seen.model == row.model
    assert _release(row) == "26.04" != _release(seen) == "26.04.01"


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    assert keys["framework"] == ("fsdp" if row.id.startswith("olmocore") else "megatron")


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


STEP_ROWS = [r for r in ROWS if STEP.search(r.measured_what)]


def test_step_time_rows_are_the_dgxc_and_mlperf_rows():
    assert {r.id for r in STEP_ROWS} == {r.id for r in ROWS if r.id.startswith(("dgxc", "mlperf"))}
    assert len(STEP_ROWS) == 21


@pytest.mark.parametrize("row", STEP_ROWS, ids=lambda r: r.id)
def test_step_time_rows_reproduce_the_conversion(row):
    check_step_conversion(row)


@pytest.mark.parametrize("row", [r for r in ROWS if r.id.startswith("dgxc2504")], ids=lambda r: r.id)
def test_dgxc_llama_rows_use_the_scripts_batch_rule(row):
    """llama31_auto_configs: GBS = 16 x GPUs (8B), 2 x GPUs (70B), GPUs / 2 (405B) at MBS 1."""
    per_gpu = {"llama3_8b": 16, "llama3_70b": 2, "llama3_405b": 0.5}[row.model]
    assert row.layout["global_batch"] == per_gpu * row.gpus and row.layout["micro_batch_size"] == 1


@pytest.mark.parametrize("row", [r for r in ROWS if r.id.startswith("mlperf50-llama31-405b")], ids=lambda r: r.id)
def test_mlperf_405b_rows_state_the_benchmark_tokenizer(row):
    assert _overrides(row)["model.vocab_size"] == "32768"  # Mixtral 8x22B's tokenizer (the benchmark's README)
    assert ("H200" in row.hardware) == (row.system == "dgx_h200")


@pytest.mark.parametrize("row", [r for r in ROWS if r.id.startswith(("mbridge", "olmocore"))], ids=lambda r: r.id)
def test_table_rows_are_the_table_value(row):
    if row.id.startswith("mbridge"):
        assert f"{row.measured:g} tokens/s/GPU" in row.source
    else:
        assert f"'Throughput' {row.measured:,.0f} TPS" in row.measured_what


def test_every_row_is_described():
    doc = (VALIDATION / "llm_rows.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Blind held-out rows, round h31"):]
    for row in ROWS:
        assert f"`{row.id}`" in section, f"{row.id} is not listed in llm_rows.md, 'Blind held-out rows, round h31'"
