"""The PyTorch FSDP / FSDP2 rows of validation/llm.csv (issue #23 item 7): torchtitan's published benchmarks
and MosaicML llm-foundry's MPT table, added blind (no model change after their errors were seen).

Checked without pricing a step unless said: every row is independent, names the framework its source used,
sets only facts of the run, reproduces the published numbers it is derived from (MPT's parameter count from
the layer shapes, tokens/s per GPU from the table's total), is described in validation/llm_rows.md, and its
published layout is accepted and fits (torchtitan's two 8-GPU 8B rows were refused until
``parallelism.recompute=op`` modelled its per-op checkpointing; they moved from validation/pending/ then). Where each number comes from: validation/llm_rows.md, "FSDP-family rows".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import estimator
from estimator.parallel.spec import TransformerSpec
from estimator.validation import load_rows
from estimator.validation.llm import shares_source, source_keys
from estimator.validation.predict import base_overrides

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
PREFIXES = ("titan-", "titan25-", "trainy-", "mpt-")
# (MPT rows of the README's other tables came with round h29: tests/test_blind_h29_rows.py checks them)
ROWS = [r for r in load_rows(VALIDATION) if r.kind == "llm" and r.id.startswith(PREFIXES)
        and not (r.id.startswith("mpt-") and not re.search(r"-h100-(128|256|512)gpu$", r.id))]
REFUSED = [r for r in load_rows(VALIDATION / "pending") if r.id.startswith(PREFIXES)]
# What these rows may set: layout, recipe and model-shape facts, and the datasheet capacity and bandwidth of a
# non-standard GPU the source states, or the device preset of that GPU (device=h100_gt: Grand Teton's H100; never an
# efficiency, a measured bandwidth or a fitted value).
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "framework.attention_kernel", "framework.tp_comm_overlap", "parallelism.zero", "parallelism.recompute",
                "parallelism.sequence_parallel", "parallelism.fp32_grads", "parallelism.dp_overlap",
                "parallelism.cp_comm", "parallelism.virtual_stages", "model.fused_kernels", "model.dropout",
                "model.hidden_size", "model.num_layers", "model.num_heads", "model.ffn_size", "model.vocab_size",
                "device.memory_bytes", "device.mem_bw_Bps", "device"}
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED_KEYS |= {"framework.fsdp_version"}  # twenty-second stop: the PyTorch FSDP generation (1 | 2) the run used, read from its software column
# h101: torchtitan's max_norm clipping, fully_shard root unit and last block kept gathered, read from its code
ALLOWED_KEYS |= {"framework.grad_clip", "framework.zero3_root_unit", "framework.zero3_keep_last_unit"}
# Rows per source document (source_keys' first key) in llm.csv and in the refused file.
DOCUMENTS = {"mosaicml/llm-foundry:scripts/train/benchmarking/README.md": (18, 0),
             "pytorch/torchtitan:benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md": (8, 0),
             "pytorch/torchtitan:benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md": (2, 0),
             "pytorch/torchtitan:benchmarks/llama3_h100_202412_torchtitan.md": (18, 0)}


def _overrides(row) -> dict[str, str]:
    return dict(ov.split("=", 1) for ov in row.overrides)


def _document(row) -> str:
    return next(k for k in sorted(source_keys(row.source)) if ":benchmarks/" in k or ":scripts/" in k)


def test_rows_per_source_document():
    for doc, (kept, refused) in DOCUMENTS.items():
        assert sum(_document(r) == doc for r in ROWS) == kept, doc
        assert sum(_document(r) == doc for r in REFUSED) == refused, doc
    assert len(ROWS) == 46 and not REFUSED


@pytest.mark.parametrize("row", ROWS + REFUSED, ids=lambda r: r.id)
def test_row_is_an_fsdp_run_stated_by_facts(row):
    keys = _overrides(row)
    assert row.role == "independent" and keys["framework"] == "fsdp"
    assert set(keys) <= ALLOWED_KEYS, set(keys) - ALLOWED_KEYS
    assert keys.get("parallelism.fp32_grads") == "true"  # torchtitan and Composer DEFAULT reduce in float32
    assert row.metric == "tokens_per_s_per_gpu" and row.raw["flops_formula"] == ""
    lay = row.layout
    dp = row.gpus // (lay["tp"] * lay["pp"] * lay["cp"])
    assert row.gpus == dp * lay["tp"] * lay["pp"] * lay["cp"] and lay["global_batch"] % (dp * lay["micro_batch_size"]) == 0
    grand_teton = "Grand Teton" in row.hardware  # torchtitan's H100s: 96 GB HBM2e, 2.4 TB/s, 500 W
    assert (keys.get("device") == "h100_gt") == grand_teton and "device.mem_bw_Bps" not in keys
    if grand_teton:  # the preset's peak is an assumption within the source's bracket (conf/device/h100_gt.yaml)
        assert {"device.peak_flops_bf16", "device.peak_flops_fp8"} <= set(row.raw["unstated"].split())


def test_grand_teton_preset_is_h100_with_its_stated_memory_and_a_bracketed_peak():
    sxm = estimator.resolve_config(["device=h100"])["device"]
    gt = estimator.resolve_config(["device=h100_gt"])["device"]
    assert (gt["memory_bytes"], gt["mem_bw_Bps"]) == (96e9, 2.4e12)
    assert 835e12 < gt["peak_flops_bf16"] < sxm["peak_flops_bf16"] and 1670e12 < gt["peak_flops_fp8"] < sxm["peak_flops_fp8"]
    assert gt["compute_efficiency"] == sxm["compute_efficiency"]  # fractions of the peak, not refitted


def test_no_row_shares_a_source_with_a_calibration_row():
    calibration = [r for r in load_rows(VALIDATION) if r.role == "calibration"]
    for row in ROWS + REFUSED:
        assert not [c.id for c in calibration if shares_source(row.source, c.source)], row.id


@pytest.mark.parametrize("row", [r for r in ROWS if r.id.startswith("mpt-")], ids=lambda r: r.id)
def test_mpt_rows_reproduce_the_published_table(row):
    """The GPT layer with MPT's shapes has exactly the table's NumParams, and the measured value is the table's
    'Throughput (T/s)' over the GPU count."""
    cfg = estimator.resolve_config(base_overrides(row))["model"]
    published = int(re.search(r"MPT-\w+ \((\d+) parameters", row.measured_what).group(1))
    assert TransformerSpec.from_cfg(cfg).params() == published
    total = int(re.search(r"'Throughput \(T/s\)' ([\d,]+) over (\d+) GPUs", row.measured_what).group(1).replace(",", ""))
    assert row.measured == round(total / row.gpus, 1)
    assert cfg["position_embedding"] == "learned" and cfg["dropout"] == 0.0 and cfg["vocab_size"] == 50368


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_is_accepted_and_fits(row):
    from estimator.parallel.estimate import validate_hybrid

    validate_hybrid(estimator.resolve_config(base_overrides(row)))


def test_every_row_is_described():
    doc = (VALIDATION / "llm_rows.md").read_text(encoding="utf-8")
    for row in ROWS + REFUSED:
        assert f"`{row.id}`" in doc, f"{row.id} is not listed in validation/llm_rows.md"
