"""The round-h38-foundry blind held-out rows (issue #23 item 7): published PyTorch-native training runs whose
attention kernel is stated -- lines of llm-foundry's MPT benchmark tables (``attn_impl: triton`` by the pinned
script's default) and IBM fms-fsdp's Llama 34B / 70B table (PyTorch SDPA's FlashAttention-2).

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(975dea9, with `framework.attention_kernel=triton` as written), then moved into validation/llm.csv unchanged
(validation/llm_rows.md, "Blind held-out rows, round h38 (llm-foundry MPT with the Triton kernel, fms-fsdp)"). These
checks price no step: every row parses with the project's loader, is an independent llm row that repeats no run already
described, shares no source with a calibration row, sets only facts of the run (its attention kernel among them),
reproduces the published numbers it is derived from, composes into a config the hybrid model accepts and fits in
memory, and is described with its value and kernel in llm_rows.md.
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
    check_facts_only,
    check_moved_once,
    check_mpt_table,
    check_no_calibration_source,
    document,
    other_blind_rows,
    overrides,
    run_key,
    section,
    stated_layer,
    table_line,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H38_FOUNDRY_IDS = ("mpt-30b-h100-8gpu-s4096", "mpt-13b-h100-8gpu-s1024", "mpt-13b-h100-8gpu-s2048",
                   "mpt-13b-h100-32gpu-s2048", "mpt-7b-h100-8gpu-s4096", "mpt-7b-h100-8gpu-s1024",
                   "mpt-3b-h100-8gpu-s65536", "mpt-3b-h100-8gpu-s16384", "mpt-3b-h100-8gpu-s8192",
                   "mpt-3b-h100-16gpu-s2048", "mpt-1b-h100-8gpu-s32768", "mpt-1b-h100-8gpu-s4096",
                   "mpt-1b-h100-32gpu-s2048", "mpt-3b-h100-8gpu-s512-fp8", "mpt-1b-h100-8gpu-s512-fp8",
                   "mpt-13b-a100-40gb-8gpu-s8192", "mpt-7b-a100-40gb-8gpu-s16384", "mpt-3b-a100-40gb-8gpu-s32768",
                   "mpt-1b-a100-40gb-64gpu-s2048", "mpt-30b-a100-40gb-32gpu-s2048",
                   "fms2403-llama-34b-a100-128gpu-mb2", "fms2403-llama-34b-h100-96gpu-mb2",
                   "fms2403-llama-70b-a100-128gpu-mb2", "fms2403-llama-70b-h100-96gpu-mb2",
                   "fms2402-llama-34b-a100-128gpu-mb8", "fms2402-llama-34b-h100-96gpu-mb8",
                   "fms2402-llama-70b-a100-128gpu-mb6", "fms2402-llama-70b-h100-96gpu-mb6")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H38_FOUNDRY_IDS]
SEEN = [r for r in ALL + load_rows(VALIDATION / "pending") if r.kind == "llm" and r.id not in H38_FOUNDRY_IDS]
SECTION = "## Blind held-out rows, round h38 (llm-foundry MPT with the Triton kernel, fms-fsdp)"
OTHER_BLIND = other_blind_rows()
FOUNDRY = "mosaicml/llm-foundry:scripts/train/benchmarking/README.md"
FMS = "foundation-model-stack/fms-fsdp:README.md"
DOCUMENTS = {FOUNDRY: 20, FMS: 8}
KERNEL = {FOUNDRY: "triton", FMS: "flash2"}
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "framework.attention_kernel", "parallelism.zero", "parallelism.recompute",
                "parallelism.fp32_grads", "model.fused_kernels", "model.hidden_size", "model.num_layers",
                "model.num_heads", "model.ffn_size", "model.vocab_size", "model.dropout", "device.memory_bytes",
                "device.mem_bw_Bps", "fabric.uplinks", "fabric.uplink_bandwidth_Bps"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED_KEYS |= {"framework.fsdp_version"}  # twenty-second stop: the PyTorch FSDP generation (1 | 2) the run used, read from its software column
# fms-fsdp's table, per release: (size, GPU) -> tokens/sec/GPU, and the per-GPU batch and AC cell of each size.
FMS_TABLES = {"2403": ({("34b", "a100"): 700, ("34b", "h100"): 1550, ("70b", "a100"): 370, ("70b", "h100"): 800},
                       {"34b": (2, "Full AC"), "70b": (2, "Full AC")}),
              "2402": ({("34b", "a100"): 772, ("34b", "h100"): 1700, ("70b", "a100"): 380, ("70b", "h100"): 850},
                       {"34b": (8, "True"), "70b": (6, "True")})}


def rows_of(doc: str) -> list:
    return [r for r in ROWS if document(r) == doc]


def test_rows_parse_and_come_from_two_documents():
    assert len(ROWS) == sum(DOCUMENTS.values()) == 28 and len({r.id for r in ROWS}) == 28
    assert tuple(r.id for r in ROWS) == H38_FOUNDRY_IDS
    assert {r.file for r in ROWS} == {"validation/llm.csv"}
    assert all(r.kind == "llm" and r.role == "independent" for r in ROWS)
    assert {doc: len(rows_of(doc)) for doc in DOCUMENTS} == DOCUMENTS
    assert sum(r.system == "dgx_h100" for r in ROWS) == 19  # H100 first: 15 MPT + 4 fms lines


def test_estimator_validate_reads_the_rows_from_llm_csv():
    """Priced once, the rows are in the default validation folder's llm.csv, each id once (not also in pending/ or a
    blind sub-folder)."""
    check_moved_once(H38_FOUNDRY_IDS, ALL)


def test_rows_are_runs_no_other_row_describes():
    """No id of llm.csv, pending/ or another blind round; no run (system, shape, precision, GPUs, layout) of them;
    fms-fsdp is cited by no other row. The run check can fail: a row of llm.csv is found by its key."""
    others = SEEN + OTHER_BLIND
    assert not {r.id for r in others} & {r.id for r in ROWS}
    seen_runs = {run_key(s) for s in others}
    assert not [r.id for r in ROWS if run_key(r) in seen_runs]
    assert len({run_key(r) for r in ROWS}) == len(ROWS)
    assert not [s.id for s in others if FMS in source_keys(s.source)]
    assert run_key(next(s for s in SEEN if s.id == "mpt-13b-h100-8gpu-s4096")) in seen_runs


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_and_names_its_attention_kernel(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    doc = document(row)
    assert keys["framework"] == "fsdp" and keys["parallelism.zero"] == "3"
    assert keys["model.fused_kernels"] == stated_layer(row)
    assert keys["framework.attention_kernel"] == KERNEL[doc]
    evidence = {FOUNDRY: "attn_impl 'triton' (submit_benchmarks.py --attn_impl default 'triton' at",
                FMS: "'SDPA implementation of Flash attention v2' (README l.5 at"}[doc]
    assert evidence in row.software + row.measured_what


@pytest.mark.parametrize("row", rows_of(FOUNDRY), ids=lambda r: r.id)
def test_mpt_row_is_a_line_of_its_table(row):
    """Parameter count = the table's NumParams, measured = Throughput (T/s) / GPUs, the gradient dtype follows the MP
    mode (PURE only in the A100 40GB table), AC -> recompute, and the global batch is GPUs x micro x accumulation."""
    pure = check_mpt_table(row)
    lay, ov = row.layout, overrides(row)
    a100 = row.system == "dgx_a100"
    assert pure == a100 and (ov.get("device.memory_bytes") == "40e9") == a100
    table = ("A100 40GB with 1600 Gbps node-node interconnect (RoCE)" if a100
             else "H100 80GB FP8" if row.precision == "fp8" else "H100 80GB BF16")
    size = row.id.split("-")[1]
    gpu = "a100_40gb" if a100 else "h100_80gb"
    assert f"(table '{table}', row '{size} | {lay['seq_len']} | {row.gpus} | {gpu}'" in row.source
    assert row.id.endswith(f"-{row.gpus}gpu-s{lay['seq_len']}" + ("-fp8" if row.precision == "fp8" else ""))
    ac = re.search(r"Activation Checkpointing (True|False)", row.measured_what).group(1)
    assert ov["parallelism.recompute"] == ("full" if ac == "True" else "none")
    ga = int(re.search(r"GradAccum (\d+)", row.measured_what).group(1))
    assert lay["global_batch"] == row.gpus * lay["micro_batch_size"] * ga
    assert ov["model.ffn_size"] == str(4 * int(ov["model.hidden_size"])) and ov["model.vocab_size"] == "50368"


@pytest.mark.parametrize("row", rows_of(FMS), ids=lambda r: r.id)
def test_fms_row_is_a_line_of_its_table(row):
    tag, size, gpu = re.match(r"fms(\d{4})-llama-(\d+b)-(a100|h100)-", row.id).groups()
    values, cells = FMS_TABLES[tag]
    batch, ac = cells[size]
    lay, ov = row.layout, overrides(row)
    assert row.measured == values[(size, gpu)]
    assert f"table row '| {size} | FSDP | {ac} | {batch} |'" in row.source
    assert (row.gpus, row.system) == ((128, "dgx_a100") if gpu == "a100" else (96, "dgx_h100"))
    assert lay["micro_batch_size"] == batch and lay["global_batch"] == batch * row.gpus  # no accumulation
    assert lay["seq_len"] == 4096 and row.precision == "bf16" and row.model == "llama2_70b"
    assert ov["parallelism.recompute"] == "full" and ov["parallelism.fp32_grads"] == "false"
    assert ov["fabric.uplinks"] == ("4" if gpu == "a100" else "8") and ov["fabric.uplink_bandwidth_Bps"] == "12.5e9"
    params = TransformerSpec.from_cfg(estimator.resolve_config(base_overrides(row))["model"]).params()
    named = {"34b": 33.7e9, "70b": 68.98e9}[size]  # Code Llama 34B / Llama 2 70B released checkpoints
    assert abs(params / named - 1) < 0.01, params


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_every_row_is_described_with_its_value_and_kernel():
    text = section(VALIDATION / "llm_rows.md", SECTION)
    for row in ROWS:
        line = table_line(text, row.id)
        assert line, row.id
        assert f"| {KERNEL[document(row)]} | {row.measured:g} |" in line, row.id
