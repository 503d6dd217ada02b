"""The round-h37 blind held-out rows: dense decoder training on H100 with PyTorch-native FSDP stacks (issue #23 item 7),
now in validation/llm.csv: torchao's float8 training benchmarks (torchtitan, 8 H100), NeMo AutoModel's Llama 3.1 70B
pre-training line (64 H100, CP 2) and the single-node long-sequence lines of llm-foundry's MPT "H100 80GB BF16" table
and lines of its "H100 80GB FP8" table.

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(66561ef), then moved into llm.csv unchanged (validation/llm_rows.md, "Blind held-out rows, round h37 (PyTorch FSDP
stacks)"). These checks price no step: every row parses with the project's loader, is an independent llm row that
repeats no run already described, shares no source with a calibration row, sets only facts of the run, reproduces the
published numbers it is derived from, composes into a config the hybrid model accepts and fits in memory, and is
described with its value in llm_rows.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from estimator.validation import load_rows
from estimator.validation.llm import source_keys
from tests.blind_checks import (
    MOE_ROUTER_KEYS,
    check_composes_and_fits,
    check_facts_only,
    check_moved_once,
    check_mpt_table,
    check_new_runs,
    check_no_calibration_source,
    document,
    other_blind_rows,
    overrides,
    run_key,
    section,
    stated_layer,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H37_FSDP_IDS = ("torchao2503-llama3-8b-8gpu-bf16", "torchao2503-llama3-8b-8gpu-fp8-tensorwise",
                "automodel2604-llama31-70b-bf16-64gpu-cp2", "mpt-30b-h100-8gpu-s8192", "mpt-13b-h100-8gpu-s16384",
                "mpt-13b-h100-8gpu-s32768", "mpt-7b-h100-8gpu-s8192", "mpt-7b-h100-8gpu-s32768",
                "mpt-7b-h100-8gpu-s65536", "mpt-3b-h100-8gpu-s32768", "mpt-1b-h100-8gpu-s16384",
                "mpt-1b-h100-8gpu-s65536", "mpt-3b-h100-8gpu-s2048-fp8", "mpt-3b-h100-8gpu-s8192-fp8",
                "mpt-3b-h100-8gpu-s32768-fp8", "mpt-1b-h100-8gpu-s8192-fp8", "mpt-1b-h100-8gpu-s32768-fp8")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H37_FSDP_IDS]
SEEN = [r for r in ALL + load_rows(VALIDATION / "pending") if r.kind == "llm" and r.id not in H37_FSDP_IDS]
SECTION = "## Blind held-out rows, round h37 (PyTorch FSDP stacks)"
OTHER_BLIND = other_blind_rows()
TORCHAO = "pytorch/ao:torchao/float8/README.md"
AUTOMODEL = "NVIDIA-NeMo/Automodel:docs/performance-summary.md"
FOUNDRY = "mosaicml/llm-foundry:scripts/train/benchmarking/README.md"
DOCUMENTS = {TORCHAO: 2, AUTOMODEL: 1, FOUNDRY: 14}
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "framework.attention_kernel", "parallelism.zero", "parallelism.recompute", "parallelism.fp32_grads",
                "parallelism.cp_comm", "model.fused_kernels", "model.hidden_size", "model.num_layers",
                "model.num_heads", "model.ffn_size", "model.vocab_size", "model.dropout"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED_KEYS |= {"framework.fsdp_version"}  # twenty-second stop: the PyTorch FSDP generation (1 | 2) the run used, read from its software column
# h101: torchtitan's max_norm clipping, fully_shard root unit and last block kept gathered, read from its code
ALLOWED_KEYS |= {"framework.grad_clip", "framework.zero3_root_unit", "framework.zero3_keep_last_unit"}


def rows_of(doc: str) -> list:
    return [r for r in ROWS if document(r) == doc]


def test_rows_parse_and_come_from_three_documents():
    assert len(ROWS) == sum(DOCUMENTS.values()) == 17 and len({r.id for r in ROWS}) == 17
    assert tuple(r.id for r in ROWS) == H37_FSDP_IDS
    assert {r.file for r in ROWS} == {"validation/llm.csv"}
    assert all(r.kind == "llm" and r.role == "independent" and r.system == "dgx_h100" for r in ROWS)
    assert {doc: len(rows_of(doc)) for doc in DOCUMENTS} == DOCUMENTS


def test_estimator_validate_reads_the_rows_from_llm_csv():
    """Priced once, the rows are in the default validation folder's llm.csv, each id once (not also in pending/ or a
    blind sub-folder)."""
    check_moved_once(H37_FSDP_IDS, ALL)


def test_rows_are_runs_no_other_row_describes():
    """No id of llm.csv, pending/ or another blind round; the MPT lines are other lines of a table llm.csv already
    uses (same release), so a run repeats only if its whole layout does; torchao's table is cited by no other row and
    AutoModel's only by a mixture-of-experts row."""
    others = SEEN + OTHER_BLIND
    assert not {r.id for r in others} & {r.id for r in ROWS}
    check_new_runs(rows_of(TORCHAO) + rows_of(AUTOMODEL), others, lambda r: r.id.split("-", 1)[0])
    assert not [s.id for s in others if TORCHAO in source_keys(s.source)]
    # (round h36's Qwen3-30B-A3B and round h51's DeepSeek-V3 / Kimi K2 lines: mixture-of-experts models only)
    assert {s.model for s in others if AUTOMODEL in source_keys(s.source)} <= {"qwen3_30b_a3b", "deepseek_v3", "kimi_k2"}
    seen_runs = {run_key(s) for s in others}
    assert not [r.id for r in ROWS if run_key(r) in seen_runs]
    # ... and the run check can fail: an MPT row of llm.csv is found by its key.
    mpt = next(s for s in SEEN if s.id == "mpt-13b-h100-8gpu-s4096")
    assert run_key(mpt) in seen_runs


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    assert keys["framework"] == "fsdp" and keys["parallelism.zero"] == "3"
    assert keys["model.fused_kernels"] == stated_layer(row)


@pytest.mark.parametrize("row", rows_of(TORCHAO), ids=lambda r: r.id)
def test_torchao_row_is_the_table_line(row):
    lay, ov = row.layout, overrides(row)
    fp8 = row.precision == "fp8"
    scaling = "tensorwise with float8 all-gather" if fp8 else "none (bfloat16)"
    value = "7689.5" if fp8 else "6150"
    assert f"row 'Llama3-8b | {scaling} | per op SAC |" in row.source and f"| {value} |'" in row.source
    assert row.measured == float(value) and row.model == "llama3_8b" and row.gpus == 8
    assert (lay["micro_batch_size"], lay["global_batch"], lay["seq_len"]) == (1, 8, 8192)  # batch 1 per rank
    assert ov["parallelism.recompute"] == "op" and ov["parallelism.fp32_grads"] == "true"
    assert row.raw["unstated"].split() == ["device", "fabric.nccl_version"]


def test_automodel_row_is_the_table_line_and_its_step_time():
    (row,) = rows_of(AUTOMODEL)
    lay, ov = row.layout, overrides(row)
    cells = re.search(r"row '\| Llama3 70B \| (\d+) \| (\d+) \| (\d+) \| 1 \| (\d+) \| (\d+) \| 1 \| 1 \| (\d+) \| - \| - "
                      r"\| (\d+) \| TE \+ fsdp2_prefetch \| ([\d.]+) \| \d+ \| ([\d.]+) \|'", row.source).groups()
    gpus, gbs, mbs, ga, seq, cp, fsdp, step, tps = cells
    assert (int(gpus), int(gbs), int(mbs), int(seq), int(cp)) == (
        row.gpus, lay["global_batch"], lay["micro_batch_size"], lay["seq_len"], lay["cp"])
    dp = row.gpus // lay["cp"]
    assert int(fsdp) == dp and int(ga) == lay["global_batch"] // (dp * lay["micro_batch_size"])
    assert row.measured == float(tps)
    assert abs(lay["global_batch"] * lay["seq_len"] / (float(step) * row.gpus) / row.measured - 1) < 1e-3
    assert ov["parallelism.cp_comm"] == "torch" and ov["parallelism.recompute"] == "full"
    assert ov["parallelism.fp32_grads"] == "false" and row.model == "llama3_70b"


@pytest.mark.parametrize("row", rows_of(FOUNDRY), ids=lambda r: r.id)
def test_mpt_row_is_a_line_of_the_h100_tables(row):
    """BF16 rows: the long-sequence lines (>= 8k tokens) of "H100 80GB BF16"; FP8 rows: lines of "H100 80GB FP8"."""
    assert not check_mpt_table(row)  # MP Mode DEFAULT: float32 gradient reduction
    lay, ov = row.layout, overrides(row)
    fp8 = row.precision == "fp8"
    assert row.gpus == 8 and row.id.endswith(f"-8gpu-s{lay['seq_len']}" + ("-fp8" if fp8 else ""))
    assert fp8 or lay["seq_len"] >= 8192
    assert ("Precision amp_fp8" if fp8 else "Precision amp_bf16") in row.measured_what
    size = row.id.split("-")[1]
    table = "H100 80GB FP8" if fp8 else "H100 80GB BF16"
    assert f"(table '{table}', row '{size} | {lay['seq_len']} | 8 | h100_80gb'" in row.source
    ac = re.search(r"Activation Checkpointing (True|False)", row.measured_what).group(1)
    assert ov["parallelism.recompute"] == ("full" if ac == "True" else "none")
    ga = int(re.search(r"GradAccum (\d+)", row.measured_what).group(1))
    assert lay["global_batch"] == row.gpus * lay["micro_batch_size"] * ga


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_every_row_is_described_with_its_value():
    text = section(VALIDATION / "llm_rows.md", SECTION)
    for row in ROWS:
        assert f"`{row.id}`" in text, row.id
        assert f"{row.measured:g}" in text.replace(",", ""), row.id
