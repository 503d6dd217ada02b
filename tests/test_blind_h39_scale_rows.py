"""The round-h39-scale blind held-out rows (issue #23 item 7): MegaScale's Megatron-LM baseline (Jiang et al. 2024,
arXiv 2402.15627) at 256 - 12,288 A100 -- Table 2's iteration times (175B), Figure 9's MFU bars (530B) and Table 3's
baseline line.

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(7a16001), then moved into validation/llm.csv unchanged (validation/llm_rows.md, "Blind held-out rows, round h39
(MegaScale's Megatron-LM baseline, A100 at 256-12,288 GPUs)"). These checks price no step: every row parses with the
project's loader, is an independent llm row that repeats no run already described, shares no source with a
calibration row, sets only facts of the run, reproduces the published numbers it is derived from, composes into a
config the hybrid model accepts and fits in memory, and is described with its value in llm_rows.md.
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
    check_layout_and_mark,
    check_moved_once,
    check_no_calibration_source,
    check_step_conversion,
    other_blind_rows,
    overrides,
    run_key,
    section,
    table_line,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H39_SCALE_IDS = ("megascale-mlm-175b-256gpu", "megascale-mlm-175b-512gpu", "megascale-mlm-175b-768gpu",
                 "megascale-mlm-175b-1024gpu", "megascale-mlm-175b-3072gpu", "megascale-mlm-175b-6144gpu",
                 "megascale-mlm-175b-8192gpu", "megascale-mlm-175b-12288gpu", "megascale-mlm-530b-2240gpu",
                 "megascale-mlm-530b-4480gpu", "megascale-mlm-530b-11200gpu", "megascale-mlm-175b-256gpu-gbs256")
ALL = load_rows(VALIDATION)
PENDING = load_rows(VALIDATION / "pending")
ROWS = [r for r in ALL if r.id in H39_SCALE_IDS]
SEEN = [r for r in ALL + PENDING if r.kind == "llm" and r.id not in H39_SCALE_IDS]
SECTION = "## Blind held-out rows, round h39 (MegaScale's Megatron-LM baseline, A100 at 256-12,288 GPUs)"
OTHER_BLIND = other_blind_rows()
PAPER = "arxiv:2402.15627"
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "framework.tp_comm_overlap", "parallelism.zero", "parallelism.sequence_parallel",
                "parallelism.dp_overlap", "parallelism.virtual_stages", "model.hidden_size", "model.num_layers",
                "model.num_heads", "model.ffn_size", "model.vocab_size"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"parallelism.recompute"}  # seventeenth stop: the old default (selective) stated, listed unstated
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
# Table 1: size -> (heads, hidden, layers, TP, PP); Sec. 6.1: interleaving stages per size.
TABLE1 = {"175b": (128, 12288, 96, 8, 8), "530b": (160, 20480, 105, 8, 35)}
INTERLEAVING = {"175b": 6, "530b": 3}
# Table 2, Megatron-LM lines: GPUs -> (batch, iteration time s); Figure 9 / Table 3: (size, GPUs, batch) -> MFU %.
TABLE2 = {256: (768, 40.0), 512: (768, 21.2), 768: (768, 15.2), 1024: (768, 11.9), 3072: (6144, 29.02),
          6144: (6144, 14.78), 8192: (6144, 12.24), 12288: (6144, 8.57)}
MFU = {("530b", 2240, 2240): 49.2, ("530b", 4480, 4480): 48.8, ("530b", 11200, 11200): 48.2,
       ("175b", 256, 256): 47.7}
A100_PEAK_TFLOPS = 312.0  # dense BF16 / FP16, NVIDIA A100 datasheet
UNSTATED = {"precision", "parallelism.micro_batch_size", "parallelism.recompute", "parallelism.zero",
            "parallelism.sequence_parallel", "model.fused_kernels", "model.dropout", "device.memory_bytes"}


def size(row) -> str:
    return re.match(r"megascale-mlm-(\d+b)-", row.id).group(1)


def test_rows_parse_and_cite_megascale():
    assert len(ROWS) == 12 and len({r.id for r in ROWS}) == 12
    assert tuple(r.id for r in ROWS) == H39_SCALE_IDS
    assert {r.file for r in ROWS} == {"validation/llm.csv"}
    assert all(r.kind == "llm" and r.role == "independent" for r in ROWS)
    assert all(PAPER + "#table1" in source_keys(r.source) for r in ROWS)
    assert all(r.gpus >= 256 and r.system == "dgx_a100" and r.model == "megatron_gpt" for r in ROWS)
    assert sum(r.metric == "tokens_per_s_per_gpu" for r in ROWS) == len(TABLE2)


def test_estimator_validate_reads_the_rows_from_llm_csv():
    """Priced once, the rows are in the default validation folder's llm.csv, each id once (not also in pending/ or a
    blind sub-folder)."""
    check_moved_once(H39_SCALE_IDS, ALL)


def test_rows_are_runs_no_other_row_describes():
    """No id of llm.csv, pending/ or another blind round, no run (system, shape, precision, GPUs, layout) of them, and
    no other row cites MegaScale. The run check can fail: a row of llm.csv is found by its key."""
    others = SEEN + OTHER_BLIND
    assert not {r.id for r in others} & {r.id for r in ROWS}
    seen_runs = {run_key(s) for s in others}
    assert not [r.id for r in ROWS if run_key(r) in seen_runs]
    assert len({run_key(r) for r in ROWS}) == len(ROWS)
    assert not [s.id for s in others if any(k.startswith(PAPER) for k in source_keys(s.source))]
    assert run_key(SEEN[0]) in seen_runs


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_and_the_published_shape(row):
    ov = overrides(row)
    assert set(ov) <= ALLOWED_KEYS, set(ov) - ALLOWED_KEYS
    check_layout_and_mark(row)
    heads, hidden, layers, tp, pp = TABLE1[size(row)]
    lay = row.layout
    assert (lay["tp"], lay["pp"], lay["cp"], lay["seq_len"]) == (tp, pp, 1, 2048)
    assert (ov["model.num_heads"], ov["model.hidden_size"], ov["model.num_layers"]) == tuple(map(str, TABLE1[size(row)][:3]))
    assert ov["model.ffn_size"] == str(4 * hidden) and ov["parallelism.virtual_stages"] == str(INTERLEAVING[size(row)])
    assert layers % (pp * INTERLEAVING[size(row)]) == 0
    # vocabulary 64,000 padded to a multiple of 128 x TP (Megatron-LM --make-vocab-size-divisible-by 128)
    assert int(ov["model.vocab_size"]) == -(-64000 // (128 * tp)) * 128 * tp == 64512
    # the baseline's overlaps are MegaScale's additions (Table 3 lines 4 and 6)
    assert ov["parallelism.dp_overlap"] == "false" and ov["framework.tp_comm_overlap"] == "false"
    assert set(row.raw["unstated"].split()) == UNSTATED


@pytest.mark.parametrize("row", [r for r in ROWS if r.metric == "tokens_per_s_per_gpu"], ids=lambda r: r.id)
def test_table2_row_is_its_iteration_time(row):
    batch, step = TABLE2[row.gpus]
    assert size(row) == "175b" and row.layout["global_batch"] == batch
    assert f"iteration time {step:g}" in row.measured_what or f"iteration time {step}" in row.measured_what
    check_step_conversion(row)
    assert row.measured == round(batch * 2048 / (step * row.gpus), 3)


@pytest.mark.parametrize("row", [r for r in ROWS if r.metric == "tflops_per_gpu"], ids=lambda r: r.id)
def test_mfu_row_is_its_bar_times_the_a100_peak(row):
    mfu = MFU[(size(row), row.gpus, row.layout["global_batch"])]
    assert row.raw["flops_formula"] == "palm_6n_12lhqt"
    assert row.measured == round(mfu * A100_PEAK_TFLOPS / 100, 3)


def test_palm_count_reproduces_table2_mfu_from_its_throughput():
    """The conversion's FLOP count is the paper's: Table 2's throughput column with 6N + 12 l h s per token over the
    312 TFLOP/s peak gives its MFU column (53.0 % at 256 GPUs, 41.2 % at 12,288); a count without the attention term
    misses the 256-GPU value by more than the table's rounding."""
    row = next(r for r in ROWS if r.id == "megascale-mlm-175b-256gpu")
    model = estimator.resolve_config(base_overrides(row))["model"]
    n, layers, h = TransformerSpec.from_cfg(model).params(), model["num_layers"], model["hidden_size"]
    assert abs(n / 174.77e9 - 1) < 0.005  # the padded vocabulary adds 0.3 %
    per_token = 6 * n + 12 * layers * h * 2048
    for tokens_per_s, gpus, mfu in ((39.3e3, 256, 53.0), (1466.8e3, 12288, 41.2)):
        assert abs(100 * tokens_per_s * per_token / gpus / 312e12 - mfu) < 0.15
    assert abs(100 * 39.3e3 * 6 * n / 256 / 312e12 - 53.0) > 0.5


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_every_row_is_described_with_its_value():
    text = section(VALIDATION / "llm_rows.md", SECTION)
    for row in ROWS:
        line = table_line(text, row.id)
        assert line and f"| {row.measured:g} |" in line and line.rstrip().endswith("| runs |"), row.id
