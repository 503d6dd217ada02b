"""The round-h35-misc blind held-out rows (issue #23 item 7, "further published runs"), outside NVIDIA's and MLPerf's
tables: FlashAttention's GPT-3 training table, TinyLlama's README and InternLM-7B's scaling table, all on A100.

They were written into a sub-folder that `estimator validate` does not read, so that the model could be changed blind
to them, priced once when the model was frozen (7330199), then moved into validation/llm.csv (validation/llm_rows.md,
"Blind held-out rows, round h35 (dense models outside NVIDIA's tables)"). These checks price no step: every row
parses with the project's loader, is a run no other row describes, shares no source with a calibration row, sets only
facts of the run, reproduces the published numbers it is derived from, composes into a config the hybrid model
accepts and fits in memory, and is described in llm_rows.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import estimator
from estimator.parallel.spec import TransformerSpec
from estimator.validation import load_rows
from estimator.validation.llm import source_keys
from estimator.validation.predict import base_overrides
from tests.blind_checks import (
    MOE_ROUTER_KEYS,
    check_composes_and_fits,
    check_described,
    check_facts_only,
    check_no_calibration_source,
    check_rows_in_llm_file,
    document,
    overrides,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H35_MISC_IDS = ("fa2211-gpt3-125m-8gpu", "fa2211-gpt3-355m-8gpu", "fa2211-gpt3-760m-8gpu", "fa2211-gpt3-1.3b-8gpu",
                "fa2211-gpt3-2.7b-8gpu", "tinyllama-1.1b-a100-40gb-8gpu", "internlm-7b-ckpt-8gpu",
                "internlm-7b-ckpt-128gpu", "internlm-7b-ckpt-1024gpu", "internlm-7b-ckpt-1024gpu-mbs2",
                "internlm-7b-nockpt-8gpu", "internlm-7b-nockpt-128gpu", "internlm-7b-nockpt-1024gpu",
                "internlm-7b-nockpt-1024gpu-mn1")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H35_MISC_IDS]
SEEN = [r for r in ALL if r.id not in H35_MISC_IDS] + load_rows(VALIDATION / "pending")
SECTION = "## Blind held-out rows, round h35 (dense models outside NVIDIA's tables)"
FLASH = "Dao-AILab/flash-attention:training/README.md"
TINYLLAMA = "jzhang38/TinyLlama:README.md"
INTERNLM = "InternLM/InternLM:doc/en/train_performance.md"
DOCUMENTS = {FLASH: 5, TINYLLAMA: 1, INTERNLM: 8}
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "framework.attention_kernel", "framework.param_gather_overlap", "parallelism.zero", "parallelism.recompute",
                "parallelism.fp32_grads", "model.hidden_size", "model.num_layers", "model.num_heads",
                "model.num_kv_heads", "model.ffn_size", "model.vocab_size", "model.fused_kernels", "model.dropout",
                "device.memory_bytes", "device.mem_bw_Bps", "fabric.uplinks", "fabric.uplink_bandwidth_Bps"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED_KEYS |= {"framework.zero1_group"}  # twenty-third stop (h87): InternLM's ZeRO-1 shard group (zero1=8 in its config)
ALLOWED_KEYS |= {"framework.fsdp_version"}  # twenty-second stop: the PyTorch FSDP generation (1 | 2) the run used, read from its software column
# FlashAttention's table: (row name, node tokens/s as printed, tokens per step as printed).
FLASH_TABLE = {"125m": ("GPT3-125M", "1310k", "0.5M"), "355m": ("GPT3-355M", "503k", "0.5M"),
               "760m": ("GPT3-760M", "245k", "0.5M"), "1.3b": ("GPT3-1.3B", "169k", "1M"),
               "2.7b": ("GPT3-2.7B", "85k", "1M")}


def rows_of(doc: str) -> list:
    return [r for r in ROWS if document(r) == doc]


def test_rows_parse_and_come_from_three_documents():
    check_rows_in_llm_file(ROWS, DOCUMENTS, 14)
    assert all(r.system == "dgx_a100" for r in ROWS)


def test_rows_are_blind_and_new():
    """No other row of llm.csv (or pending/) has their ids or cites their documents."""
    assert not {r.id for r in SEEN} & {r.id for r in ROWS}
    for doc in DOCUMENTS:
        assert not [s.id for s in SEEN if doc in source_keys(s.source)], doc


def test_the_document_check_can_fail():
    """A row of llm.csv, re-read with one of these documents appended to its source, is caught."""
    seen = SEEN[0]
    assert FLASH not in source_keys(seen.source)
    assert FLASH in source_keys(seen.source + "; " + ROWS[0].source)


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    assert keys["framework"] == ("internlm" if document(row) == INTERNLM else "fsdp")  # internlm: twenty-third stop (h87)
    assert row.precision == "bf16" and row.layout["seq_len"] == 2048


@pytest.mark.parametrize("row", rows_of(FLASH), ids=lambda r: r.id)
def test_flash_attention_row_is_the_table_value_per_gpu(row):
    size = row.id.split("-")[2]
    name, node, batch = FLASH_TABLE[size]
    assert f"row '{name}'" in row.source and f"row '{name} | {batch} | {node} |" in row.measured_what
    assert row.gpus == 8 and row.measured == float(node.removesuffix("k")) * 1000 / 8
    tokens = row.layout["global_batch"] * row.layout["seq_len"]
    assert tokens == {"0.5M": 2**19, "1M": 2**20}[batch]
    ov = overrides(row)
    # DDP for the two small models (apex FusedAdam), ZeroRedundancyOptimizer (ZeRO-1, broadcast after the step) above.
    zero1 = size in ("760m", "1.3b", "2.7b")
    assert ov["parallelism.zero"] == ("1" if zero1 else "0")
    assert ("framework.param_gather_overlap" in ov) == zero1
    assert ov["parallelism.recompute"] == "none" and ov["parallelism.fp32_grads"] == "true"
    assert int(ov["model.ffn_size"]) == 4 * int(ov["model.hidden_size"]) and ov["model.vocab_size"] == "50264"
    # flash-attn 0.2.2 (the training Dockerfile): FlashAttention-1's CUDA kernels (ninth stop)
    assert ov["framework.attention_kernel"] == "flash1" and "flash-attn 0.2.2" in row.raw["software"]


@pytest.mark.parametrize("row", rows_of(FLASH), ids=lambda r: r.id)
def test_flash_attention_model_has_its_named_size(row):
    """The composed GPT-3 shape has the table's parameter count (the name), within 3 %."""
    named = {"125m": 125e6, "355m": 355e6, "760m": 760e6, "1.3b": 1.3e9, "2.7b": 2.7e9}[row.id.split("-")[2]]
    params = TransformerSpec.from_cfg(estimator.resolve_config(base_overrides(row))["model"]).params()
    assert abs(params / named - 1) < 0.03, params


def test_flash_attention_micro_batch_is_the_config_rule_at_80gb():
    """datamodule.batch_size of each config at gpu_mem = 82 (an A100 80GB), and the accumulation it implies."""
    micro = {r.id.split("-")[2]: r.layout["micro_batch_size"] for r in rows_of(FLASH)}
    assert micro == {"125m": 32, "355m": 32, "760m": 16, "1.3b": 8, "2.7b": 4}
    for row in rows_of(FLASH):
        assert f"gradient accumulation {row.layout['global_batch']} / (8 x {row.layout['micro_batch_size']})" \
            in row.measured_what


def test_tinyllama_row():
    (row,) = rows_of(TINYLLAMA)
    assert row.measured == 24000 and "24k tokens per second per A100-40G GPU" in row.source
    lay, ov = row.layout, overrides(row)
    assert (row.gpus, lay["micro_batch_size"], lay["global_batch"]) == (8, 8, 512)
    assert lay["micro_batch_size"] * lay["seq_len"] == 16384  # the README's "per-gpu batch size of 16k tokens"
    assert ov["parallelism.zero"] == "3" and ov["parallelism.recompute"] == "none"
    assert ov["parallelism.fp32_grads"] == "false" and ov["device.memory_bytes"] == "40e9"
    assert row.raw["unstated"].split() == ["fabric.nodes"]
    params = TransformerSpec.from_cfg(estimator.resolve_config(base_overrides(row))["model"]).params()
    assert 1.09e9 < params < 1.11e9, params  # TinyLlama "1.1B"


@pytest.mark.parametrize("row", rows_of(INTERNLM), ids=lambda r: r.id)
def test_internlm_row_is_its_table_row(row):
    lay, ov = row.layout, overrides(row)
    ckpt = "-ckpt-" in row.id
    cells = re.search(r"row '1 \| 8 \| TRUE \| (TRUE|FALSE) \| (\d+) \| 2048 \| (\d+) \| (\d+) \| ([\d.]+)M \| (\d+) \|'",
                      row.source).groups()
    flag, gpus, mbs, micro_num, global_m, tgs = cells
    assert (flag == "TRUE") == ckpt
    assert (int(gpus), int(mbs), float(tgs)) == (row.gpus, lay["micro_batch_size"], row.measured)
    assert lay["global_batch"] == row.gpus * lay["micro_batch_size"] * int(micro_num)
    assert lay["global_batch"] * lay["seq_len"] == float(global_m) * 2**20  # the table's Global Bsz in tokens
    assert ov["parallelism.recompute"] == ("full" if ckpt else "none")
    assert ov["parallelism.zero"] == "1" and ov["framework.param_gather_overlap"] == "false"
    assert ov["model.vocab_size"] == "103168" and ov["fabric.uplinks"] == "4"
    assert ov["fabric.uplink_bandwidth_Bps"] == "12.5e9"  # 4 x 100 Gb/s RoCE per node
    assert ov["framework.attention_kernel"] == "flash1" and "flash-attention v1.0.5" in row.raw["software"]
    assert ov["framework"] == "internlm" and ov["framework.zero1_group"] == "8"  # configs/7B_sft.py zero1=8


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_every_row_is_described():
    check_described(ROWS, SECTION)
