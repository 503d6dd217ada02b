"""The round-h30 blind held-out rows (issue #23 item 7, "further published runs"), now in validation/llm.csv.

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(6aa58ef), then moved into llm.csv (validation/llm_rows.md, "Blind held-out rows, round h30"). These checks price
no step: every row parses with the
project's loader, is a run no other row describes (id, document, or another software version of a document already
used), shares no source with a calibration row, sets only facts of the run, reproduces the published numbers it is
derived from, composes into a config the hybrid model accepts and fits in memory, and is described in the README.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import estimator
from estimator.validation import load_rows
from estimator.validation.llm import source_keys
from estimator.validation.predict import base_overrides
from tests.blind_checks import (
    MOE_ROUTER_KEYS,
    STEP,
    check_composes_and_fits,
    check_facts_only,
    check_no_calibration_source,
    check_step_conversion,
)
from tests.test_blind_h41_nemo_rows import H41_NEMO_IDS, H41_NEMO_REFUSED_IDS
from tests.test_blind_h42_hist_rows import H42_HIST_IDS

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H30_IDS = ("mlperf40-gpt3-eos-512gpu", "mlperf40-gpt3-eos-10752gpu", "mlperf40-gpt3-eos-11616gpu",
           "mlperf41-gpt3-eos-256gpu", "mlperf41-gpt3-eos-512gpu", "mlperf41-gpt3-oracle-1536gpu",
           "mlperf41-gpt3-oracle-3072gpu", "dgxc2501-nemotron4-15b-bf16-16gpu", "dgxc2501-nemotron4-15b-bf16-256gpu",
           "dgxc2501-nemotron4-15b-bf16-2048gpu", "dgxc2501-nemotron4-15b-fp8-16gpu", "dgxc2501-nemotron4-15b-fp8-256gpu",
           "dgxc2501-nemotron4-15b-fp8-2048gpu", "dgxc2504-gpt3-175b-bf16-128gpu", "dgxc2504-gpt3-175b-bf16-512gpu",
           "dgxc2504-gpt3-175b-fp8-128gpu", "dgxc2504-gpt3-175b-fp8-512gpu", "dgxc2503-llama31-405b-bf16-576gpu",
           "dgxc2503-llama31-405b-fp8-576gpu", "nemo-longseq-llama2-7b-fp8-s4k-4gpu", "nemo-longseq-llama2-7b-fp8-s8k-8gpu",
           "nemo-longseq-llama2-7b-fp8-s16k-16gpu", "nemo-longseq-llama2-7b-fp8-s32k-32gpu", "nemo-longseq-llama2-7b-fp8-s64k-64gpu",
           "nemo-longseq-llama2-7b-fp8-s128k-128gpu", "nemo-longseq-llama2-7b-fp8-s256k-256gpu", "nemo-longseq-llama2-7b-fp8-s512k-512gpu",
           "nemo-longseq-llama2-7b-fp8-s1024k-1024gpu", "mbridge2602-llama3-70b-fp8-64gpu", "mbridge2602-llama31-405b-fp8-1024gpu",
           "titan2408-llama31-405b-128gpu-tp8-fp8-asynctp")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H30_IDS]
# Rows written before this round: round h41's rows are later lines of the same tables (the Megatron-Bridge archive's
# 26.02 Qwen3-235B-A22B line, another model of the 26.02 release: test_blind_h41_nemo_rows.py), and so are round h42's
# (the 'None' and 'Float8' lines of the same torchtitan 405B table at 3faaa1a0, and the April-2024 revision of the
# same docs/performance.md: test_blind_h42_hist_rows.py).
LATER = H41_NEMO_IDS + H41_NEMO_REFUSED_IDS + H42_HIST_IDS
SEEN = [r for r in ALL + load_rows(VALIDATION / "pending") if r.id not in H30_IDS + LATER]
# What these rows may set: layout, recipe and model-shape facts the sources state; no efficiency, no measured or
# fitted value.
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "parallelism.zero", "parallelism.virtual_stages", "parallelism.sequence_parallel",
                "parallelism.dp_overlap", "parallelism.recompute", "parallelism.fp32_grads", "framework.tp_comm_overlap",
                "fabric.nvls", "model.fused_kernels", "model.dropout", "model.num_kv_heads", "model.vocab_size",
                "device", "framework.attention_kernel"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
# Rows per source document (the first repository-file key of source_keys).
DOCUMENTS = {"mlcommons/training_results_v4.0:NVIDIA/results/*/gpt3": 3,
             "mlcommons/training_results_v4.1:NVIDIA/results/*/gpt3": 2,
             "mlcommons/training_results_v4.1:Oracle/results/*/gpt3": 2,
             "NVIDIA/dgxc-benchmarking:nemotron/README_15b.md": 6,
             "NVIDIA/dgxc-benchmarking:nemo_megatron/README_175b.md": 4,
             "NVIDIA/dgxc-benchmarking:llama3.1/README_405b.md": 2,
             "NVIDIA/NeMo:docs/source/performance/performance_long_sequence.md": 9,
             "NVIDIA-NeMo/Megatron-Bridge:docs/performance-summary-archive.md": 2,
             "pytorch/torchtitan:docs/performance.md": 1}
VERSION = re.compile(r"\b(2\d\.\d\d(?:\.\d\d)?)\b")  # a NeMo container release, e.g. 24.12 or 26.04.01


def _document(row) -> str:
    return sorted(k for k in source_keys(row.source) if ":" in k and not k.startswith("arxiv:"))[0]


def _version(row) -> str:
    found = VERSION.search(row.software)
    assert found, f"{row.id}: no software release in {row.software!r}"
    return found.group(1)


def test_rows_parse_and_come_from_nine_documents():
    assert [r.id for r in ROWS] == list(H30_IDS) and {r.file for r in ROWS} == {"validation/llm.csv"}
    assert len(ROWS) == sum(DOCUMENTS.values()) == 31
    assert len({r.id for r in ROWS}) == len(ROWS)
    assert all(r.kind == "llm" and r.role == "independent" and r.system == "dgx_h100" for r in ROWS)
    assert {doc: sum(_document(r) == doc for r in ROWS) for doc in DOCUMENTS} == DOCUMENTS
    assert sum(r.gpus >= 1000 for r in ROWS) >= 5


def test_rows_are_runs_no_other_row_describes():
    assert not {r.id for r in SEEN} & {r.id for r in ROWS}
    for row in ROWS:
        # The measurement's document (a settings file may be shared) already used counts only at another software
        # release: another run of the same table.
        same_document = [s for s in SEEN if _document(row) in source_keys(s.source)]
        clashes = [s.id for s in same_document if VERSION.search(s.software) and _version(s) == _version(row)]
        assert not clashes, f"{row.id} repeats the release of {clashes}"
        assert all(VERSION.search(s.software) for s in same_document), row.id


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    assert keys["framework"] == ("fsdp" if row.id.startswith("titan") else "megatron")
    if "device" in keys:  # Grand Teton's 500 W H100 96 GB HBM2e (torchtitan's hardware section), nothing else
        assert keys["device"] == "h100_gt" and row.id.startswith("titan")
    if "framework.attention_kernel" in keys:  # the launcher's NVTE_FUSED_ATTN: 0, cited in the row (round h31)
        assert keys["framework.attention_kernel"] == "flash2" and "NVTE_FUSED_ATTN: 0" in row.measured_what


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


@pytest.mark.parametrize("row", [r for r in ROWS if STEP.search(r.measured_what)], ids=lambda r: r.id)
def test_step_time_rows_reproduce_the_conversion(row):
    check_step_conversion(row)


@pytest.mark.parametrize("row", [r for r in ROWS if r.id.startswith("nemo-longseq-")], ids=lambda r: r.id)
def test_long_sequence_rows_convert_the_table_tflops_with_nemos_count(row):
    """NeMo's 2024 Llama 2 count per token: l h^2 (12 + 12 g/a + 18 f/h + 12 s/h + 6 V/(l h)), from the composed
    model; the table's TFLOP/s per GPU divided by it is the row's tokens/s per GPU."""
    m = estimator.resolve_config(base_overrides(row))["model"]
    layers, h, s = m["num_layers"], m["hidden_size"], m["seq_len"]
    per_token = layers * h * h * (12 + 12 * m["num_kv_heads"] / m["num_heads"] + 18 * m["ffn_size"] / h
                                  + 12 * s / h + 6 * m["vocab_size"] / (layers * h))
    tflops = float(re.search(r"\| ([\d.]+) TFLOPS/GPU\)", row.source).group(1))
    assert row.measured == round(tflops * 1e12 / per_token, 2)
    assert f"SeqLen {s // 1024}K | {row.gpus} GPUs | Batch Size {row.layout['global_batch']}" in row.source


@pytest.mark.parametrize("row", [r for r in ROWS if r.id.startswith("mbridge")], ids=lambda r: r.id)
def test_bridge_rows_are_the_table_value(row):
    assert f"{row.measured:g} tokens/s/GPU" in row.source


def test_torchtitan_row_is_the_table_value_and_its_batch():
    (row,) = [r for r in ROWS if r.id.startswith("titan")]
    assert f"| {row.measured:g} | 24.52% | Float8 + Async TP" in row.source
    fsdp = row.gpus // row.layout["tp"]
    assert fsdp == 16 and row.layout["global_batch"] == row.layout["micro_batch_size"] * fsdp == 32


def test_every_row_is_described():
    doc = (VALIDATION / "llm_rows.md").read_text(encoding="utf-8")
    for row in ROWS:
        assert f"`{row.id}`" in doc, f"{row.id} is not listed in validation/llm_rows.md"
