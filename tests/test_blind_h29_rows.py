"""The round-h29 blind held-out rows (issue #23 item 7, "further published runs"), now in validation/llm.csv.

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was
frozen, then moved into llm.csv unchanged (validation/llm_rows.md, "Blind held-out rows, round h29"). These
checks price no step: every row parses with the project's loader, is a run no other row describes (id and
source), sets only facts of the run, reproduces the published numbers it is derived from, composes into a
config the hybrid model accepts and fits in memory, and is described in validation/llm_rows.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import estimator
from estimator.parallel.estimate import validate_hybrid
from estimator.validation import load_rows
from estimator.validation.llm import shares_source, source_keys
from estimator.validation.predict import base_overrides
from tests.blind_checks import MOE_ROUTER_KEYS, check_mpt_table
from tests.test_blind_h33_rows import H33_IDS
from tests.test_blind_h34_rows import H34_IDS
from tests.test_blind_h37_fsdp_rows import H37_FSDP_IDS
from tests.test_blind_h38_foundry_rows import H38_FOUNDRY_IDS
from tests.test_blind_h41_foundry_rows import H41_FOUNDRY_IDS

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H29_IDS = ("mpt-70b-a100-80gb-64gpu", "mpt-70b-a100-80gb-32gpu", "mpt-30b-a100-80gb-8gpu", "mpt-7b-a100-80gb-8gpu",
           "mpt-70b-a100-40gb-128gpu", "mpt-30b-a100-40gb-128gpu", "mpt-13b-a100-40gb-128gpu", "mpt-7b-a100-40gb-128gpu",
           "mpt-3b-a100-40gb-128gpu", "mpt-70b-h100-64gpu", "mpt-30b-h100-32gpu", "mpt-13b-h100-64gpu",
           "olmocore-olmo-1b-8gpu-bf16", "olmocore-olmo-1b-8gpu-fp8", "olmocore-olmo-7b-8gpu-bf16",
           "olmocore-olmo-7b-8gpu-fp8", "olmocore-llama-8b-8gpu-bf16", "olmocore-llama-8b-8gpu-fp8",
           "olmocore-olmo-13b-8gpu-bf16", "olmocore-olmo-13b-8gpu-fp8", "bloom-176b-384gpu")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H29_IDS]
# round h34's rows are later lines of some of these documents (test_blind_h34_rows.py checks them), and so are round
# h37's MPT rows (the H100 BF16 table's long-sequence lines and the H100 FP8 table: test_blind_h37_fsdp_rows.py) and
# round h38's (more lines of the H100 BF16 / FP8 and A100 40GB tables: test_blind_h38_foundry_rows.py) and round h41's
# (more lines of the H100 BF16 table and of the April-2023 A100 80GB table: test_blind_h41_foundry_rows.py)
LATER = H34_IDS + H37_FSDP_IDS + H38_FOUNDRY_IDS + H41_FOUNDRY_IDS
SEEN = [r for r in ALL if r.id not in H29_IDS + LATER] + load_rows(VALIDATION / "pending")
# What these rows may set: layout, recipe and model-shape facts, and datasheet facts of the hardware the
# source states (memory size and bandwidth of a 40 GB A100, NIC count and line rate); no efficiency, no
# measured bandwidth, no fitted value.
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "framework.attention_kernel", "parallelism.zero", "parallelism.recompute", "parallelism.fp32_grads",
                "parallelism.first_stage_layers", "parallelism.last_stage_layers", "model.fused_kernels",
                "model.dropout", "model.hidden_size", "model.num_layers", "model.num_heads", "model.num_kv_heads",
                "model.ffn_size", "model.vocab_size", "device.memory_bytes", "device.mem_bw_Bps", "fabric.uplinks",
                "fabric.uplink_bandwidth_Bps",
                "parallelism.sequence_parallel"}  # false on BLOOM's rows: Megatron-DeepSpeed of 2022 had none
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED_KEYS |= {"fabric.uplink_technology", "fabric.ring_uplinks"}  # twenty-first stop: Jean Zay's Omni-Path (opa) and the one link its NCCL communicators used, facts of the hardware and its NCCL log
ALLOWED_KEYS |= {"framework.fsdp_version"}  # twenty-second stop: the PyTorch FSDP generation (1 | 2) the run used, read from its software column
ALLOWED_KEYS |= {"model.position_embedding"}  # twenty-second stop: ALiBi (--position-embedding-type alibi in BLOOM's slurm script), a fact of the model
# Rows per source document (the first repository-file key of source_keys).
DOCUMENTS = {"mosaicml/llm-foundry:scripts/train/benchmarking/README.md": 12,
             "allenai/OLMo-core:README.md": 8,
             "bigscience-workshop/bigscience:train/tr11-176B-ml/README.md": 1}


def _overrides(row) -> dict[str, str]:
    return dict(ov.split("=", 1) for ov in row.overrides)


def _document(row) -> str:
    return sorted(k for k in source_keys(row.source) if ":" in k and not k.startswith("arxiv:"))[0]


def test_rows_parse_and_come_from_three_documents():
    assert [r.id for r in ROWS] == list(H29_IDS) and {r.file for r in ROWS} == {"validation/llm.csv"}
    assert all(r.kind == "llm" and r.role == "independent" for r in ROWS)
    assert {doc: sum(_document(r) == doc for r in ROWS) for doc in DOCUMENTS} == DOCUMENTS
    assert len(ROWS) == sum(DOCUMENTS.values())


def test_rows_are_runs_no_other_row_describes():
    seen_ids = {r.id for r in SEEN}
    assert not seen_ids & {r.id for r in ROWS}
    # Round h31's OLMo-core 1.6 rows are a later release of the same README table (test_blind_h31_rows.py checks them).
    seen_docs = {k for r in SEEN if not r.id.startswith("olmocore16-") for k in source_keys(r.source)}
    assert not seen_docs & set(DOCUMENTS) - {"mosaicml/llm-foundry:scripts/train/benchmarking/README.md"}
    # MosaicML's README is already cited for its H100 large-scale table; these are other tables of it (round h33 later
    # added more lines of these tables: test_blind_h33_rows.py checks them).
    mpt_seen = {r.source.split("table '")[1].split("'")[0] for r in SEEN if r.id.startswith("mpt-") and r.id not in H33_IDS}
    mpt_new = {r.source.split("table '")[1].split("'")[0] for r in ROWS if r.id.startswith("mpt-")}
    assert mpt_seen == {"H100 80GB BF16 (Large Scale, >= 128 GPUs)"} and not mpt_seen & mpt_new


def test_no_row_shares_a_source_with_a_calibration_row():
    calibration = [r for r in SEEN if r.role == "calibration"]
    for row in ROWS:
        assert not [c.id for c in calibration if shares_source(row.source, c.source)], row.id


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = _overrides(row)
    assert set(keys) <= ALLOWED_KEYS, set(keys) - ALLOWED_KEYS
    assert row.metric == "tokens_per_s_per_gpu" and row.raw["flops_formula"] == ""
    lay = row.layout
    dp = row.gpus // (lay["tp"] * lay["pp"] * lay["cp"])
    assert row.gpus == dp * lay["tp"] * lay["pp"] * lay["cp"]
    assert lay["global_batch"] % (dp * lay["micro_batch_size"]) == 0
    if "device.memory_bytes" in keys:  # only the A100 40GB table (datasheet: 40 GB HBM2, 1,555 GB/s)
        assert (keys["device.memory_bytes"], keys["device.mem_bw_Bps"]) == ("40e9", "1.555e12")
        assert "a100-40gb" in row.id and row.system == "dgx_a100"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    cfg = estimator.resolve_config(base_overrides(row))
    validate_hybrid(cfg)
    assert cfg["model"]["seq_len"] == row.layout["seq_len"]


@pytest.mark.parametrize("row", [r for r in ROWS if r.id.startswith("mpt-")], ids=lambda r: r.id)
def test_mpt_rows_reproduce_the_published_table(row):
    check_mpt_table(row)


@pytest.mark.parametrize("row", [r for r in ROWS if r.id.startswith("olmocore-")], ids=lambda r: r.id)
def test_olmo_core_rows_follow_the_scripts(row):
    """Vocabulary: dolma2's 100,278 padded to 128; FFN: OLMo-core's llama_like rule (8h/3, x multiplier,
    rounded up to a multiple); measured: the README's per-device TPS as published."""
    cfg = estimator.resolve_config(base_overrides(row))["model"]
    assert cfg["vocab_size"] == 128 * -(-100278 // 128) == 100352
    multiplier, multiple = (1.3, 1024) if cfg["num_kv_heads"] == 8 else (None, 256)
    hidden = int(8 * cfg["hidden_size"] / 3)
    hidden = int(multiplier * hidden) if multiplier else hidden
    assert cfg["ffn_size"] == multiple * -(-hidden // multiple)
    assert f"'Throughput' {row.measured:,.0f} TPS" in row.measured_what
    assert "fabric.nodes" in row.raw["unstated"].split()


def test_bloom_row_reproduces_the_log_line():
    (row,) = [r for r in ROWS if r.id.startswith("bloom-")]
    assert row.measured == round(2048 * 2048 / 104.70 / 384, 2)
    cfg = estimator.resolve_config(base_overrides(row))
    assert cfg["parallelism"]["first_stage_layers"] + 10 * 6 + cfg["parallelism"]["last_stage_layers"] == 70


def test_every_row_is_described():
    doc = (VALIDATION / "llm_rows.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Blind held-out rows, round h29"):]
    for row in ROWS:
        assert f"`{row.id}`" in section, f"{row.id} is not listed in validation/llm_rows.md's round-h29 section"
