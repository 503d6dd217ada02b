"""The round-h41-foundry blind held-out rows (issue #23 item 7): llm-foundry (then mosaicml/examples) MPT benchmark lines
no row had used -- the full sweep ``FULL_TABLES.md`` of 22d724c89 (Dec 2022, ``attn_impl: flash`` = flash-attn 0.2.2's
FlashAttention-1), the April-2023 A100 80GB table of 9fa3ceb9a as the README showed it until c6cfb4284 (``attn_impl``
triton by the script's default), and unused lines of the current README's "H100 80GB BF16" table (triton).

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(acde128), then moved into validation/llm.csv unchanged (validation/llm_rows.md, "Blind held-out rows, round h41
(llm-foundry FULL_TABLES, FlashAttention-1 and Triton, A100 / H100)"). These checks price no step: every row parses with the project's loader, is an independent
llm row that repeats no run already described, shares no source with a calibration row, sets only facts of the run (its
attention kernel among them, with the evidence of its table's version), reproduces the table line it is derived from
(parameter count, throughput over GPUs, batch), composes into a config the hybrid model accepts and fits in memory, and
is described in llm_rows.md.
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
H41_FOUNDRY_IDS = ("mpt2212f-30b-a100-80gb-256gpu-s2048-gb2048", "mpt2212f-30b-a100-80gb-64gpu-s8192-gb128",
                   "mpt2212f-30b-a100-80gb-128gpu-s4096-gb512", "mpt2212f-13b-a100-80gb-128gpu-s8192-gb256",
                   "mpt2212f-13b-a100-80gb-8gpu-s16384-gb128", "mpt2212f-13b-a100-80gb-8gpu-s1024-gb1024",
                   "mpt2212f-7b-a100-80gb-8gpu-s16384-gb128", "mpt2212f-3b-a100-80gb-8gpu-s1024-gb2048",
                   "mpt2212f-760m-a100-80gb-8gpu-s512-gb4096", "mpt2212f-350m-a100-80gb-8gpu-s4096-gb512",
                   "mpt2212f-125m-a100-80gb-8gpu-s512-gb8192", "mpt2212f-30b-a100-40gb-32gpu-s2048-gb256",
                   "mpt2212f-13b-a100-40gb-8gpu-s2048-gb256", "mpt2212f-7b-a100-40gb-16gpu-s8192-gb1024",
                   "mpt2212f-1b-a100-40gb-16gpu-s2048-gb4096", "mpt2212f-760m-a100-40gb-16gpu-s8192-gb1024",
                   "mpt2212f-125m-a100-40gb-32gpu-s8192-gb1024", "mpt0723-7b-a100-80gb-8gpu-s65536",
                   "mpt0723-13b-a100-80gb-8gpu-s32768", "mpt0723-30b-a100-80gb-32gpu-s2048",
                   "mpt0723-3b-a100-80gb-32gpu-s2048", "mpt0723-760m-a100-80gb-16gpu-s2048",
                   "mpt0723-350m-a100-80gb-8gpu-s32768", "mpt0723-125m-a100-80gb-32gpu-s2048",
                   "mpt-30b-h100-8gpu-s1024", "mpt-13b-h100-16gpu-s2048", "mpt-3b-h100-32gpu-s2048",
                   "mpt-760m-h100-8gpu-s32768")
ALL = load_rows(VALIDATION)
PENDING = load_rows(VALIDATION / "pending")
ROWS = [r for r in ALL if r.id in H41_FOUNDRY_IDS]
OTHER_BLIND = other_blind_rows()
SEEN = [r for r in ALL + PENDING if r.kind == "llm" and r.id not in H41_FOUNDRY_IDS] + OTHER_BLIND
SECTION = "## Blind held-out rows, round h41 (llm-foundry FULL_TABLES, FlashAttention-1 and Triton, A100 / H100)"
FULL = "mosaicml/llm-foundry:llm/throughput/FULL_TABLES.md"
BENCH = "mosaicml/llm-foundry:scripts/train/benchmarking/README.md"
DEC22_README = "mosaicml/llm-foundry:llm/throughput/README.md"
DOCUMENTS = {FULL: 17, BENCH: 11}
FULL_COMMIT = "22d724c8933fe5f0fac81d9017728c92648dd0cf"
# The benchmarking README's two versions used here: commit -> (id prefix, system, MP mode PURE, settings commit).
BENCH_VERSIONS = {"c6cfb4284d280daef0e79e57b5dce82673dc565e": ("mpt0723-", "dgx_a100", True, "9fa3ceb9a"),
                  "8c8dd48f72168c5d51e2f7b151595892a8fba43d": ("mpt-", "dgx_h100", False, "b2a43a147")}
# The yamls' shapes (d_model, n_heads, n_layers), the same in every version used.
SHAPES = {"125m": (768, 12, 12), "350m": (1024, 16, 24), "760m": (1536, 12, 24), "1b": (2048, 16, 24),
          "3b": (2560, 20, 32), "7b": (4096, 32, 32), "13b": (5120, 40, 40), "30b": (7168, 56, 48)}
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
FULL_ID = re.compile(r"mpt2212f-(\d+[mb])-a100-(40|80)gb-(\d+)gpu-s(\d+)-gb(\d+)$")
BENCH_ID = re.compile(r"(mpt0723-|mpt-)(\d+[mb])-(a100-80gb|h100)-(\d+)gpu-s(\d+)$")
# The README lines of 22d724c89 (round h40's mpt2212-* rows) are the same sweep: none may be taken again.
README_LINES = {("70b", "80", 128, 2048, 1024), ("30b", "80", 16, 2048, 128), ("13b", "80", 32, 8192, 64),
                ("13b", "80", 8, 2048, 2048), ("13b", "80", 8, 512, 1024), ("7b", "80", 8, 4096, 1024),
                ("3b", "80", 8, 16384, 256), ("1b", "80", 8, 8192, 512), ("760m", "80", 8, 16384, 256),
                ("125m", "80", 8, 16384, 256), ("7b", "40", 16, 2048, 4096), ("3b", "40", 8, 512, 16384),
                ("1b", "40", 16, 16384, 512), ("350m", "40", 8, 16384, 512)}


def rows_of(doc: str) -> list:
    return [r for r in ROWS if document(r) == doc]


def bench_commit(row) -> str:
    return re.search(r"mosaicml/llm-foundry@([0-9a-f]{40}):scripts/train/benchmarking/README\.md", row.source).group(1)


def test_rows_parse_and_come_from_two_documents():
    assert len(ROWS) == sum(DOCUMENTS.values()) == 28 and len({r.id for r in ROWS}) == 28
    assert tuple(r.id for r in ROWS) == H41_FOUNDRY_IDS
    assert {r.file for r in ROWS} == {"validation/llm.csv"}
    assert all(r.kind == "llm" and r.role == "independent" for r in ROWS)
    assert {doc: len(rows_of(doc)) for doc in DOCUMENTS} == DOCUMENTS
    assert all(r.precision == "bf16" and r.model == "megatron_gpt" for r in ROWS)
    assert sorted(bench_commit(r)[:9] for r in rows_of(BENCH)) == ["8c8dd48f7"] * 4 + ["c6cfb4284"] * 7


def test_estimator_validate_reads_the_rows_from_llm_csv():
    """Priced once (none refused), the rows are in the default validation folder's llm.csv, each id once (not also in
    pending/ or a blind sub-folder)."""
    check_moved_once(H41_FOUNDRY_IDS, ALL)


def test_rows_are_runs_no_other_row_describes():
    """No id or run (system, shape, precision, GPUs, layout) of another row of llm.csv, pending/ or a blind folder; no other row
    cites FULL_TABLES.md, and no row here cites the README of 22d724c89 (round h40's document). The run check can fail:
    a row of llm.csv is found by its key."""
    assert not {r.id for r in SEEN} & {r.id for r in ROWS}
    seen_runs = {run_key(s) for s in SEEN}
    assert not [r.id for r in ROWS if run_key(r) in seen_runs]
    assert len({run_key(r) for r in ROWS}) == len(ROWS)
    assert not [s.id for s in SEEN if FULL in source_keys(s.source)]
    assert not [r.id for r in ROWS if DEC22_README in source_keys(r.source)]
    assert run_key(next(s for s in SEEN if s.id == "mpt0723-7b-a100-80gb-64gpu")) in seen_runs


def test_no_full_tables_row_is_a_readme_line_of_the_same_sweep():
    """The README of 22d724c89 shows a subset of FULL_TABLES.md's lines; those are rows already (mpt2212-*)."""
    def line(match) -> tuple:
        size, mem, gpus, seq, gb = match.groups()
        return size, mem, int(gpus), int(seq), int(gb)

    assert not {line(FULL_ID.match(r.id)) for r in rows_of(FULL)} & README_LINES
    h40 = [s for s in SEEN if s.id.startswith("mpt2212-")]
    assert {line(FULL_ID.match(s.id.replace("mpt2212-", "mpt2212f-"))) for s in h40} == README_LINES


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_and_names_its_attention_kernel(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    assert keys["framework"] == "fsdp" and keys["parallelism.zero"] == "3" and keys["model.fused_kernels"] == stated_layer(row)
    assert keys["model.dropout"] == "0.0"
    if document(row) == FULL:
        # attn_impl 'flash' at 22d724c89 = flash-attn 0.2.2's FlashMHA: FlashAttention-1 CUDA kernels
        assert keys["framework.attention_kernel"] == "flash1"
        assert "attn_impl 'flash'" in row.software and "FlashMHA" in row.software
        assert "flash-attn==0.2.2" in row.software and f"@{FULL_COMMIT}:llm/throughput/FULL_TABLES.md" in row.source
    else:
        _, _, _, settings = BENCH_VERSIONS[bench_commit(row)]
        assert keys["framework.attention_kernel"] == "triton"
        assert f"submit_benchmarks.py --attn_impl default 'triton' at {settings}" in row.software


@pytest.mark.parametrize("row", rows_of(FULL), ids=lambda r: r.id)
def test_full_tables_row_is_a_line_of_the_sweep(row):
    """Shape = the size's yaml, parameter count = the line's, measured = Throughput (T/s) / GPUs, global batch = GPUs x
    micro x GradAccum, ActCkpt -> recompute, MP Mode DEFAULT -> fp32 gradients, 40 GB cards -> the datasheet's memory."""
    size, mem, gpus, seq, gb = FULL_ID.match(row.id).groups()
    lay, ov = row.layout, overrides(row)
    h, heads, layers = SHAPES[size]
    assert (row.system, row.gpus, lay["seq_len"], lay["global_batch"]) == ("dgx_a100", int(gpus), int(seq), int(gb))
    assert (lay["tp"], lay["pp"], lay["cp"]) == (1, 1, 1)
    assert (ov["model.hidden_size"], ov["model.num_heads"], ov["model.num_layers"]) == (str(h), str(heads), str(layers))
    assert ov["model.ffn_size"] == str(4 * h) and ov["model.vocab_size"] == "50257"
    published = int(re.search(r"MosaicGPT-\w+ \((\d+) parameters", row.measured_what).group(1))
    assert published == layers * (12 * h * h + 13 * h) + (50257 + int(seq)) * h + 2 * h
    cfg = estimator.resolve_config(base_overrides(row))["model"]
    assert TransformerSpec.from_cfg(cfg).params() == published
    total = float(re.search(r"'Throughput \(T/s\)' ([\d.]+) over (\d+) GPUs", row.measured_what).group(1))
    assert row.measured == round(total / row.gpus, 1)
    ga = int(re.search(r"GradAccum (\d+)", row.measured_what).group(1))
    assert lay["global_batch"] == row.gpus * lay["micro_batch_size"] * ga
    ckpt = re.search(r"Activation Checkpointing (True|False)", row.measured_what).group(1)
    assert ov["parallelism.recompute"] == ("full" if ckpt == "True" else "none")
    # Composer 0.11.1 / 0.12.1 MP Mode DEFAULT: fp32 parameters gathered, bf16 reduction (twenty-third stop, h91)
    assert "MP Mode DEFAULT" in row.measured_what and ov["parallelism.fp32_grads"] == "false"
    assert ov["framework.fsdp_param_bytes"] == "4" and ov["framework.attention_host_sync"] == "true"
    assert f"'gpt{size} | {seq} | {gpus}xA100_{mem}GB | GlobalBatchSize {gb} |" in row.source
    assert (ov.get("device.memory_bytes"), ov.get("device.mem_bw_Bps")) == \
        (("40e9", "1.555e12") if mem == "40" else (None, None))
    assert row.raw["unstated"].split() == ["fabric.nccl_version"] + (["fabric.uplink_bandwidth_Bps"] * (row.gpus > 8))


@pytest.mark.parametrize("row", rows_of(BENCH), ids=lambda r: r.id)
def test_benchmarking_row_is_a_line_of_its_table(row):
    """Parameter count = NumParams, measured = Throughput (T/s) / GPUs, the gradient dtype follows the MP mode (PURE in
    the April-2023 A100 table, DEFAULT in the H100 table), AC -> recompute, global batch = GPUs x micro x accumulation."""
    pure = check_mpt_table(row)
    prefix, system, table_pure, _ = BENCH_VERSIONS[bench_commit(row)]
    got_prefix, size, gpu, gpus, seq = BENCH_ID.match(row.id).groups()
    lay, ov = row.layout, overrides(row)
    assert (got_prefix, row.system, pure) == (prefix, system, table_pure)
    assert (row.gpus, lay["seq_len"]) == (int(gpus), int(seq)) and (lay["tp"], lay["pp"], lay["cp"]) == (1, 1, 1)
    h, heads, layers = SHAPES[size]
    assert (ov["model.hidden_size"], ov["model.num_heads"], ov["model.num_layers"]) == (str(h), str(heads), str(layers))
    assert ov["model.ffn_size"] == str(4 * h) and ov["model.vocab_size"] == "50368"
    ga = int(re.search(r"GradAccum (\d+)", row.measured_what).group(1))
    assert lay["global_batch"] == row.gpus * lay["micro_batch_size"] * ga
    ac = re.search(r"Activation Checkpointing (True|False)", row.measured_what).group(1)
    assert ov["parallelism.recompute"] == ("full" if ac == "True" else "none")
    card = "a100_80gb" if gpu == "a100-80gb" else "h100_80gb"
    assert f"row '{size} | {seq} | {gpus} | {card}'" in row.source
    assert "device.memory_bytes" not in ov


def test_the_line_checks_can_fail():
    """A FULL_TABLES row re-read with the later vocabulary misses its line's parameter count."""
    row = rows_of(FULL)[0]
    published = int(re.search(r"MosaicGPT-\w+ \((\d+) parameters", row.measured_what).group(1))
    cfg = estimator.resolve_config(base_overrides(row) + ["model.vocab_size=50368"])["model"]
    assert TransformerSpec.from_cfg(cfg).params() != published


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_every_row_is_described_with_its_value():
    text = section(VALIDATION / "llm_rows.md", SECTION)
    for row in ROWS:
        line = table_line(text, row.id)
        assert line, row.id
        assert f"= {row.measured} |" in line and line.endswith("| runs |")
        assert f"| {overrides(row)['framework.attention_kernel']} |" in line
