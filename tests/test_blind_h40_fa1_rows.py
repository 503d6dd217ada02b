"""The round-h40-fa1 blind held-out rows (issue #23 item 7): lines of llm-foundry's (then mosaicml/examples') MPT
benchmark tables that were measured with FlashAttention-1 -- the README of 22d724c89 (Dec 2022, flash-attn 0.2.2) and
of d14a7c94a (Feb 2023, release 0.0.3, flash-attn 0.2.8), both with ``attn_impl: flash`` (flash-attn's ``FlashMHA``).

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(7a16001), then moved into validation/llm.csv unchanged (validation/llm_rows.md, "Blind held-out rows, round h40
(llm-foundry MPT with FlashAttention-1, A100, 2022-2023)"). These checks price no step: every row parses with the
project's loader, is an independent llm row that repeats no run already described, shares no source with a
calibration row, sets only facts of the run (``framework.attention_kernel=flash1`` among them), reproduces the table
numbers it is derived from, composes into a config the hybrid model accepts and fits in memory, and is described in
llm_rows.md.
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
H40_FA1_IDS = ("mpt2212-70b-a100-80gb-128gpu-s2048-gb1024", "mpt2212-30b-a100-80gb-16gpu-s2048-gb128",
               "mpt2212-13b-a100-80gb-32gpu-s8192-gb64", "mpt2212-13b-a100-80gb-8gpu-s2048-gb2048",
               "mpt2212-13b-a100-80gb-8gpu-s512-gb1024", "mpt2212-7b-a100-80gb-8gpu-s4096-gb1024",
               "mpt2212-3b-a100-80gb-8gpu-s16384-gb256", "mpt2212-1b-a100-80gb-8gpu-s8192-gb512",
               "mpt2212-760m-a100-80gb-8gpu-s16384-gb256", "mpt2212-125m-a100-80gb-8gpu-s16384-gb256",
               "mpt2212-7b-a100-40gb-16gpu-s2048-gb4096", "mpt2212-3b-a100-40gb-8gpu-s512-gb16384",
               "mpt2212-1b-a100-40gb-16gpu-s16384-gb512", "mpt2212-350m-a100-40gb-8gpu-s16384-gb512",
               "mpt2302-13b-a100-80gb-16gpu-s2048-gb256", "mpt2302-7b-a100-80gb-16gpu-s2048-gb256",
               "mpt2302-350m-a100-80gb-16gpu-s2048-gb256", "mpt2302-125m-a100-80gb-16gpu-s2048-gb512",
               "mpt2302-7b-a100-40gb-32gpu-s2048-gb256", "mpt2302-3b-a100-40gb-32gpu-s2048-gb2048",
               "mpt2302-1b-a100-40gb-8gpu-s2048-gb2048")
ALL = load_rows(VALIDATION)
PENDING = load_rows(VALIDATION / "pending")
ROWS = [r for r in ALL if r.id in H40_FA1_IDS]
OTHER_BLIND = other_blind_rows()
SEEN = [r for r in ALL + PENDING if r.kind == "llm" and r.id not in H40_FA1_IDS] + OTHER_BLIND
SECTION = "## Blind held-out rows, round h40 (llm-foundry MPT with FlashAttention-1, A100, 2022-2023)"
DEC22 = "mosaicml/llm-foundry:llm/throughput/README.md"
FEB23 = "mosaicml/llm-foundry:examples/llm/throughput/README.md"
DOCUMENTS = {DEC22: 14, FEB23: 7}
# Per README version: id prefix, commit, flash-attn pinned in the requirements, vocabulary (padded to 16 in Feb 2023).
RELEASES = {DEC22: ("mpt2212", "22d724c8933fe5f0fac81d9017728c92648dd0cf", "flash-attn==0.2.2", 50257),
            FEB23: ("mpt2302", "d14a7c94a0f805f56a7c865802082bf6d8ac8903", "flash-attn==0.2.8", 50272)}
# The yamls' shapes: size -> (d_model, n_heads, n_layers).
SHAPES = {"125m": (768, 12, 12), "350m": (1024, 16, 24), "760m": (1536, 12, 24), "1b": (2048, 16, 24),
          "3b": (2560, 20, 32), "7b": (4096, 32, 32), "13b": (5120, 40, 40), "30b": (7168, 56, 48),
          "70b": (8192, 64, 80)}
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "framework.attention_kernel", "parallelism.zero", "parallelism.recompute",
                "parallelism.fp32_grads", "model.fused_kernels", "model.hidden_size", "model.num_layers",
                "model.num_heads", "model.ffn_size", "model.vocab_size", "model.dropout", "device.memory_bytes",
                "device.mem_bw_Bps"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED_KEYS |= {"framework.fsdp_param_bytes", "framework.attention_host_sync"}  # twenty-third stop (h91): Composer DEFAULT's fp32 gather, flash-attn 0.2.x's sync
ALLOWED_KEYS |= {"framework.fsdp_version"}  # twenty-second stop: the PyTorch FSDP generation (1 | 2) the run used, read from its software column
ID = re.compile(r"(mpt2212|mpt2302)-(\d+[mb])-a100-(40|80)gb-(\d+)gpu-s(\d+)-gb(\d+)$")


def rows_of(doc: str) -> list:
    return [r for r in ROWS if document(r) == doc]


def published_params(row) -> int:
    return int(re.search(r"MosaicGPT-\w+ \((\d+) parameters", row.measured_what).group(1))


def test_rows_parse_and_come_from_two_readme_versions():
    assert len(ROWS) == sum(DOCUMENTS.values()) == 21 and len({r.id for r in ROWS}) == 21
    assert tuple(r.id for r in ROWS) == H40_FA1_IDS
    assert {r.file for r in ROWS} == {"validation/llm.csv"}
    assert all(r.kind == "llm" and r.role == "independent" for r in ROWS)
    assert {doc: len(rows_of(doc)) for doc in DOCUMENTS} == DOCUMENTS
    assert all(r.system == "dgx_a100" and r.precision == "bf16" and r.model == "megatron_gpt" for r in ROWS)


def test_estimator_validate_reads_the_rows_from_llm_csv():
    """Priced once (none refused), the rows are in the default validation folder's llm.csv, each id once (not also in
    pending/ or a blind sub-folder)."""
    check_moved_once(H40_FA1_IDS, ALL)


def test_rows_are_runs_no_other_row_describes():
    """No id or run (system, shape, precision, GPUs, layout) of another row of llm.csv, pending/ or a blind folder;
    neither README version is cited by another row. The run check can fail: a row of llm.csv is found by its key."""
    assert not {r.id for r in SEEN} & {r.id for r in ROWS}
    seen_runs = {run_key(s) for s in SEEN}
    assert not [r.id for r in ROWS if run_key(r) in seen_runs]
    assert len({run_key(r) for r in ROWS}) == len(ROWS)
    for doc in DOCUMENTS:
        assert not [s.id for s in SEEN if doc in source_keys(s.source)], doc
    assert run_key(next(s for s in SEEN if s.id == "mpt-7b-a100-80gb-8gpu")) in seen_runs
    assert DEC22 in source_keys(SEEN[0].source + "; " + rows_of(DEC22)[0].source)


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_and_names_flash_attention_1(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    assert keys["framework"] == "fsdp" and keys["parallelism.zero"] == "3" and keys["model.fused_kernels"] == stated_layer(row)
    # Composer 0.11.1 / 0.12.1 MP Mode DEFAULT: fp32 parameters gathered, bf16 reduction (twenty-third stop, h91)
    assert "MP Mode DEFAULT" in row.measured_what and keys["parallelism.fp32_grads"] == "false"
    assert keys["framework.fsdp_param_bytes"] == "4" and keys["framework.attention_host_sync"] == "true"
    assert keys["model.dropout"] == "0.0"
    # attn_impl 'flash' = flash-attn 0.2.x's FlashMHA: FlashAttention-1 CUDA kernels, not the Triton kernel
    prefix, commit, pin, _ = RELEASES[document(row)]
    assert keys["framework.attention_kernel"] == "flash1"
    assert "attn_impl 'flash'" in row.software and "FlashMHA" in row.software and pin in row.software
    assert row.id.startswith(prefix + "-") and f"@{commit}:" in row.source


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_is_a_line_of_its_table(row):
    """Shape = the size's yaml, parameter count = the table's, measured = Throughput (T/s) / GPUs, global batch =
    GPUs x micro x GradAccum, ActCkpt -> recompute, 40 GB cards -> the datasheet's memory size and bandwidth."""
    _, size, mem, gpus, seq, gb = ID.match(row.id).groups()
    lay, ov = row.layout, overrides(row)
    h, heads, layers = SHAPES[size]
    vocab = RELEASES[document(row)][3]
    assert (row.gpus, lay["seq_len"], lay["global_batch"]) == (int(gpus), int(seq), int(gb))
    assert (lay["tp"], lay["pp"], lay["cp"]) == (1, 1, 1)
    assert ov["model.hidden_size"] == str(h) and ov["model.num_heads"] == str(heads)
    assert ov["model.num_layers"] == str(layers) and ov["model.ffn_size"] == str(4 * h)
    assert ov["model.vocab_size"] == str(vocab)
    published = published_params(row)
    assert published == layers * (12 * h * h + 13 * h) + (vocab + int(seq)) * h + 2 * h
    total = float(re.search(r"'Throughput \(T/s\)' ([\d.]+) over (\d+) GPUs", row.measured_what).group(1))
    assert row.measured == round(total / row.gpus, 1)
    ga = int(re.search(r"GradAccum (\d+)", row.measured_what).group(1))
    assert lay["global_batch"] == row.gpus * lay["micro_batch_size"] * ga
    ckpt = re.search(r"Activation Checkpointing (True|False)", row.measured_what).group(1)
    assert ov["parallelism.recompute"] == ("full" if ckpt == "True" else "none")
    gpu = f"a100_{mem}gb"
    assert f"row 'gpt{size} | {seq} | {gpus} | {gpu} | GlobalBatchSize {gb}'" in row.source
    forty = mem == "40"
    assert (ov.get("device.memory_bytes"), ov.get("device.mem_bw_Bps")) == \
        (("40e9", "1.555e12") if forty else (None, None))
    assert row.raw["unstated"].split() == ["fabric.nccl_version"] + (["fabric.uplink_bandwidth_Bps"] * (row.gpus > 8))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_composed_model_has_the_tables_parameter_count(row):
    cfg = estimator.resolve_config(base_overrides(row))["model"]
    assert TransformerSpec.from_cfg(cfg).params() == published_params(row)


def test_the_parameter_check_can_fail():
    """A row re-read with the other release's vocabulary misses the table's count."""
    row = rows_of(DEC22)[0]
    cfg = estimator.resolve_config(base_overrides(row) + ["model.vocab_size=50272"])["model"]
    assert TransformerSpec.from_cfg(cfg).params() != published_params(row)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_every_row_is_described_with_its_value():
    text = section(VALIDATION / "llm_rows.md", SECTION)
    for row in ROWS:
        line = table_line(text, row.id)
        assert line, row.id
        assert f"= {row.measured} |" in line and line.endswith("| runs |")
