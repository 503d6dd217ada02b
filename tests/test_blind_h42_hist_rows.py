"""The round-h42-hist blind held-out rows (issue #23 item 7): numbers from revisions of torchtitan's
docs/performance.md that no row used -- the FSDP2 tables on 64 A100 of April 2024 (Llama 3 8B / 70B, Llama 2 13B /
70B) and the two other lines of the August 2024 Llama 3.1 405B table (no optimization, Float8).

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(438e00d, whose predictions are acde128's), then moved into validation/llm.csv unchanged (validation/llm_rows.md,
"Blind held-out rows, round h42 (torchtitan docs/performance.md of Apr / Aug 2024: A100 FSDP2, Llama 3.1 405B on
H100)"). These checks price no step: every row parses with the project's loader, is an independent llm row that
repeats no run already described, shares no source with a calibration row, sets only facts of the run, quotes the
published table line it takes its value from, composes into a config the hybrid model accepts and fits in memory, and
is described with its value in llm_rows.md.
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
    check_no_calibration_source,
    other_blind_rows,
    overrides,
    run_key,
    section,
    table_line,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H42_HIST_IDS = ("titan2404-llama3-8b-a100-64gpu-sacop", "titan2404-llama3-70b-a100-64gpu-full",
                "titan2404-llama2-13b-a100-64gpu-noac", "titan2404-llama2-13b-a100-64gpu-sacop",
                "titan2404-llama2-70b-a100-64gpu-full", "titan2404-llama2-70b-a100-64gpu-sacop-mb1",
                "titan2408-llama31-405b-128gpu-tp8-bf16", "titan2408-llama31-405b-128gpu-tp8-fp8")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H42_HIST_IDS]
SEEN = [r for r in ALL + load_rows(VALIDATION / "pending") if r.kind == "llm" and r.id not in H42_HIST_IDS]
OTHER_BLIND = other_blind_rows()
SECTION = ("## Blind held-out rows, round h42 (torchtitan docs/performance.md of Apr / Aug 2024: A100 FSDP2, "
           "Llama 3.1 405B on H100)")
PERFORMANCE = "pytorch/torchtitan:docs/performance.md"
APR24 = "1ea476e9f24be439eda358aa864f45c1c37a8a88"  # Llama 3 table first published; Llama 2 table unchanged
AUG24 = "3faaa1a0dee68ce028400e3dafd1735d152cb4f8"  # the 405B table with 'None' corrected to 109
ALLOWED = {"framework", "parallelism.zero", "parallelism.recompute", "parallelism.fp32_grads", "model.fused_kernels",
           "parallelism.sequence_parallel", "device", "model.hidden_size", "model.num_layers", "model.num_heads",
           "model.num_kv_heads", "model.ffn_size"}
ALLOWED |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
# (model, micro batch, recompute) -> the table's WPS, docs/performance.md @1ea476e9f (64 A100 80GB, FSDP2 only)
APR24_WPS = {("llama3_8b", 1, "op"): 2973, ("llama3_70b", 1, "full"): 331, ("llama2_13b", 2, "none"): 2162,
             ("llama2_13b", 2, "op"): 1904, ("llama2_70b", 2, "full"): 353, ("llama2_70b", 1, "op"): 355}
# precision -> WPS, docs/performance.md @3faaa1a0d (128 H100, TP 8 x FSDP 16, local batch 2, full AC)
AUG24_WPS = {"bf16": 109, "fp8": 177}
COMMIT = re.compile(r"@([0-9a-f]{40}):docs/performance\.md")


def shape(row) -> str:
    """The torchtitan flavour a row runs: Llama 2 13B is llama2_7b with the 13B shape."""
    return "llama2_13b" if overrides(row).get("model.hidden_size") == "5120" else row.model


def key(row) -> tuple:
    """A run: run_key plus async TP (the 405B Float8 run differs from the seen Float8 + Async TP run only there)."""
    return (*run_key(row), overrides(row).get("framework.tp_comm_overlap", "false"))


def test_rows_parse_and_are_independent_rows_of_one_document():
    assert len(ROWS) == 8 and len({r.id for r in ROWS}) == 8
    assert tuple(r.id for r in ROWS) == H42_HIST_IDS
    assert {r.file for r in ROWS} == {"validation/llm.csv"}
    assert all(r.kind == "llm" and r.role == "independent" for r in ROWS)
    assert all(PERFORMANCE in source_keys(r.source) for r in ROWS)
    assert sorted(COMMIT.search(r.source).group(1) for r in ROWS) == [APR24] * 6 + [AUG24] * 2


def test_estimator_validate_reads_the_rows_from_llm_csv():
    """Priced once, the 8 rows are in the default validation folder's llm.csv, each id once (not also in pending/ or a
    blind sub-folder)."""
    check_moved_once(H42_HIST_IDS, ALL)


def test_rows_are_runs_no_other_row_describes():
    """No id of llm.csv, pending/ or another blind round; no row repeats a seen run (system, shape, precision,
    GPUs, layout, async TP); and no seen row takes its value from the same revision of docs/performance.md, save the one
    405B line (Float8 + Async TP) this round leaves alone. The check can fail: a seen row is caught."""
    others = SEEN + OTHER_BLIND
    assert not {r.id for r in others} & {r.id for r in ROWS}
    seen_runs = {key(s) for s in others}
    assert not [r.id for r in ROWS if key(r) in seen_runs]
    same_doc = [s for s in others if PERFORMANCE in source_keys(s.source)]
    assert {(COMMIT.search(s.source).group(1), s.measured) for s in same_doc} == {(AUG24, 185)}
    assert key(SEEN[0]) in seen_runs


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts(row):
    ov = check_facts_only(row, ALLOWED)
    assert ov["framework"] == "fsdp" and ov["parallelism.zero"] == "3" and ov["parallelism.fp32_grads"] == "true"
    # torchtitan's attention (SDPA flash) and loss (eager cross-entropy on fp32 logits) are the fsdp preset's
    assert "framework.attention_kernel" not in ov and "framework.loss_kernel" not in ov
    # April 2024: eager RMSNorm / RoPE / SwiGLU, no compile (sdpa since the eighteenth stop; was te); August: compiled
    assert ov["model.fused_kernels"] == ("sdpa" if row.id.startswith("titan2404-") else "te")


@pytest.mark.parametrize("row", [r for r in ROWS if COMMIT.search(r.source).group(1) == APR24], ids=lambda r: r.id)
def test_april_row_is_its_table_line(row):
    lay, ov = row.layout, overrides(row)
    assert row.system == "dgx_a100" and row.precision == "bf16" and row.gpus == 64
    assert (lay["tp"], lay["pp"], lay["cp"]) == (1, 1, 1) and lay["global_batch"] == 64 * lay["micro_batch_size"]
    assert lay["seq_len"] == (8192 if row.model.startswith("llama3") else 4096)
    key = (shape(row), lay["micro_batch_size"], ov["parallelism.recompute"])
    assert row.measured == APR24_WPS[key]
    assert f"| {row.measured:g} |" in row.source


@pytest.mark.parametrize("row", [r for r in ROWS if COMMIT.search(r.source).group(1) == AUG24], ids=lambda r: r.id)
def test_august_row_is_its_table_line(row):
    lay, ov = row.layout, overrides(row)
    assert row.system == "dgx_h100" and ov["device"] == "h100_gt" and row.model == "llama3_405b" and row.gpus == 128
    assert (lay["tp"], lay["pp"], lay["micro_batch_size"], lay["global_batch"], lay["seq_len"]) == (8, 1, 2, 32, 8192)
    assert row.measured == AUG24_WPS[row.precision] and f"| {row.measured:g} |" in row.source
    assert ov["parallelism.recompute"] == "full" and ov["parallelism.sequence_parallel"] == "true"
    # compile is assumed from the toml, not stated by the table: said so
    assert "model.fused_kernels" in row.raw["unstated"].split()


def test_llama2_13b_is_torchtitans_shape():
    """torchtitan's llama2 13B: dim 5120, 40 layers, 40 heads (no GQA), SwiGLU 2/3 x 4 x 5120 rounded up to 256."""
    hidden = int(2 * 4 * 5120 / 3)
    ffn = 256 * ((hidden + 255) // 256)
    for row in [r for r in ROWS if shape(r) == "llama2_13b"]:
        ov = overrides(row)
        assert row.model == "llama2_7b" and int(ov["model.ffn_size"]) == ffn == 13824
        assert (ov["model.num_layers"], ov["model.num_heads"], ov["model.num_kv_heads"]) == ("40", "40", "40")


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_every_row_is_described_with_its_value():
    text = section(VALIDATION / "llm_rows.md", SECTION)
    for row in ROWS:
        line = table_line(text, row.id)
        assert line and f"| {row.measured:g} |" in line and line.rstrip().split("|")[-2].strip() == "runs", row.id
