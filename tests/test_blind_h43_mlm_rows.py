"""The round-h43-mlm blind held-out rows (issue #23 item 7): numbers from revisions of NVIDIA/Megatron-LM's README
performance tables that no row used -- the September 2020 tables (images/tables.tex: DGX-A100 weak scaling of tensor
model parallelism on 1-8 GPUs and 128-way data parallelism on 128-1024 GPUs) and the January 2021 model-size table
(images/cases_jan2021.png: 3.6B - 1T on 64 - 3,072 A100, before the April-2021 numbers the megatron-sc21 rows use).

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(050c649, whose predictions are acde128's), then moved into validation/llm.csv unchanged (validation/llm_rows.md,
"Blind held-out rows, round h43 (Megatron-LM README tables of Sept 2020 and Jan 2021, A100)"). These checks price no
step: every row parses with the project's loader, is an independent llm row that repeats no run or number already
described, shares no source with a calibration row, sets only facts of the run (and of the Megatron-LM code at that
commit), reproduces the published numbers it is derived from, composes into a config the hybrid model accepts and fits
in memory, and is described with its value in llm_rows.md. The Jan-2021 rows are an earlier revision of the table
whose April-2021 version gives the megatron-sc21-* rows: independent under the rule (no shared number or revision),
correlated with rows seen before.
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
    check_step_conversion,
    other_blind_rows,
    overrides,
    run_key,
    section,
    table_line,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H43_MLM_IDS = ("mlm2009-gpt-1b-a100-1gpu", "mlm2009-gpt-2b-a100-2gpu", "mlm2009-gpt-4b-a100-4gpu",
               "mlm2009-gpt-8b-a100-8gpu", "mlm2009-gpt-1b-a100-128gpu", "mlm2009-gpt-2b-a100-256gpu",
               "mlm2009-gpt-4b-a100-512gpu", "mlm2009-gpt-8b-a100-1024gpu", "mlm2101-gpt-3.6b-64gpu",
               "mlm2101-gpt-18b-256gpu", "mlm2101-gpt-39b-512gpu", "mlm2101-gpt-76b-1024gpu",
               "mlm2101-gpt-145b-1536gpu", "mlm2101-gpt-291b-2160gpu", "mlm2101-gpt-530b-2520gpu",
               "mlm2101-gpt-1t-3072gpu")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H43_MLM_IDS]
SEEN = [r for r in ALL + load_rows(VALIDATION / "pending") if r.kind == "llm" and r.id not in H43_MLM_IDS]
OTHER_BLIND = other_blind_rows()
SECTION = "## Blind held-out rows, round h43 (Megatron-LM README tables of Sept 2020 and Jan 2021, A100)"
SEP20 = "5281919420ac4eb649e6aee9652ff39bb94d462a"  # images/tables.tex, README 'Update scaling numbers'
JAN21 = "152aab304d4eabe4f992def6296156642e11c28d"  # images/cases_jan2021.png, README 'Readme update'
TABLES = "NVIDIA/Megatron-LM:images/tables.tex"
JAN_TABLE = "NVIDIA/Megatron-LM:images/cases_jan2021.png"
COMMIT = re.compile(r"NVIDIA/Megatron-LM@([0-9a-f]{40}):images/")
ALLOWED = {"parallelism.recompute", "parallelism.zero", "parallelism.dp_overlap", "model.fused_kernels",
           "parallelism.sequence_parallel",  # false: 2020-21 code, before Megatron-LM had sequence parallelism
           "device.memory_bytes", "framework.p2p_scatter_gather", "framework.p2p_grad_scatter_gather",
           "model.hidden_size", "model.num_layers", "model.num_heads", "model.ffn_size"}
ALLOWED |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED |= {"framework.tp_comm_overlap"}  # sixteenth stop: Megatron-LM before TE had no TP overlap (the megatron default is on)
ALLOWED |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
# tables.tex @5281919420, case -> (hidden, heads, layers, billions of parameters, model-parallel partitions)
CASES_2020 = {"1b": (1920, 15, 24, 1.16, 1), "2b": (2304, 18, 30, 2.03, 2), "4b": (3072, 24, 36, 4.24, 4),
              "8b": (4096, 32, 42, 8.67, 8)}
# (case, GPUs) -> iteration time (ms): 'DGX-A100 batch size 16' (1-8 GPUs) and 'DGX-A100 batch size 2048' (128-1024)
ITER_MS_2020 = {("1b", 1): 1076, ("2b", 2): 1026, ("4b", 4): 1162, ("8b", 8): 1343,
                ("1b", 128): 1153, ("2b", 256): 1101, ("4b", 512): 1242, ("8b", 1024): 1380}
# cases_jan2021.png @152aab30: GPUs -> (hidden, heads, layers, model-parallel size, batch, teraFLOP/s per GPU)
JAN21_TABLE = {64: (3072, 32, 30, 2, 512, 131), 256: (6144, 48, 40, 8, 1024, 127), 512: (8192, 64, 48, 16, 1536, 128),
               1024: (10240, 80, 60, 32, 1792, 133), 1536: (12288, 96, 80, 64, 2304, 136),
               2160: (16384, 128, 90, 144, 2430, 142), 2520: (20480, 128, 105, 280, 2520, 152),
               3072: (25600, 160, 128, 512, 3072, 154)}
SEP = [r for r in ROWS if COMMIT.search(r.source).group(1) == SEP20]
JAN = [r for r in ROWS if COMMIT.search(r.source).group(1) == JAN21]


def case(row) -> str:
    return row.id.split("-")[2]


def test_rows_parse_and_are_independent_rows_of_two_revisions():
    assert len(ROWS) == 16 and len({r.id for r in ROWS}) == 16
    assert tuple(r.id for r in ROWS) == H43_MLM_IDS
    assert {r.file for r in ROWS} == {"validation/llm.csv"}
    assert all(r.kind == "llm" and r.role == "independent" and r.system == "dgx_a100" for r in ROWS)
    assert len(SEP) == 8 and len(JAN) == 8
    assert all(TABLES in source_keys(r.source) for r in SEP) and all(JAN_TABLE in source_keys(r.source) for r in JAN)


def test_estimator_validate_reads_the_rows_from_llm_csv():
    """Priced once (none refused), the 16 rows are in the default validation folder's llm.csv, each id once (not also
    in pending/, pending/llm_refused.csv or a blind sub-folder)."""
    check_moved_once(H43_MLM_IDS, ALL)


def test_rows_are_runs_no_other_row_describes():
    """No id of llm.csv, pending/ or another blind round; no row repeats a seen run (system, shape, precision, GPUs,
    layout) with the same value; no seen row cites either revision's table. The Jan-2021 table's 1.7B line (137, as in
    the April-2021 table a megatron-sc21 row uses) is left out. The check can fail: a seen row is caught."""
    others = SEEN + OTHER_BLIND
    assert not {r.id for r in others} & {r.id for r in ROWS}
    seen = {(*run_key(s), s.measured) for s in others}
    assert not [r.id for r in ROWS if (*run_key(r), r.measured) in seen]
    assert not [s.id for s in others if {TABLES, JAN_TABLE} & set(source_keys(s.source))]
    assert not [s.id for s in others if SEP20 in s.source or JAN21 + ":images/cases_jan2021" in s.source]
    april = {(s.gpus, s.measured) for s in others if "cases_april2021.png" in s.source}
    assert (32, 137) in april and not [r.id for r in JAN if (r.gpus, r.measured) in april]
    assert (*run_key(SEEN[0]), SEEN[0].measured) in seen


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts(row):
    if row in JAN:
        assert row.metric == "tflops_per_gpu" and row.raw["flops_formula"] == "megatron_eq3"
        ov = overrides(row)
        assert set(ov) <= ALLOWED, set(ov) - ALLOWED
        # 152aab30's training.py sends whole tensors between stages and has no interleaved schedule
        assert ov["framework.p2p_scatter_gather"] == ov["framework.p2p_grad_scatter_gather"] == "false"
        assert "parallelism.virtual_stages" not in ov
    else:
        ov = check_facts_only(row, ALLOWED)
        # 2020 code: eager softmax and GeLU, and only the 40 GB A100 existed
        assert ov["model.fused_kernels"] == "none" and ov["device.memory_bytes"] == "40e9"
    assert ov["parallelism.zero"] == "0" and ov["parallelism.dp_overlap"] == "false"
    assert ov["parallelism.recompute"] == "full" and "parallelism.recompute" in row.raw["unstated"].split()
    # Megatron-LM's unfused fp32 vocabulary-parallel loss (the framework default); no TE attention in these layers
    assert "framework.loss_kernel" not in ov and "framework.attention_kernel" not in ov
    assert "framework" not in ov and row.precision == "fp16"
    assert "Chosen before any prediction was seen" in row.measured_what


@pytest.mark.parametrize("row", SEP, ids=lambda r: r.id)
def test_september_2020_row_is_its_iteration_time(row):
    h, a, layers, params, mp = CASES_2020[case(row)]
    ov, lay = overrides(row), row.layout
    assert (ov["model.hidden_size"], ov["model.num_heads"], ov["model.num_layers"]) == (str(h), str(a), str(layers))
    assert (lay["tp"], lay["pp"], lay["cp"], lay["micro_batch_size"], lay["seq_len"]) == (mp, 1, 1, 16, 1024)
    assert lay["global_batch"] == 16 * (row.gpus // mp) and lay["global_batch"] in (16, 2048)
    step = ITER_MS_2020[(case(row), row.gpus)]
    assert f"'Iteration Time (ms)' {step}" in row.measured_what and f"& {step} &" in row.source
    check_step_conversion(row)
    # the published parameter count is the shape's (within the table's rounding)
    cfg = estimator.resolve_config(base_overrides(row))["model"]
    assert abs(TransformerSpec.from_cfg(cfg).params() / 1e9 - params) < 0.01


@pytest.mark.parametrize("row", JAN, ids=lambda r: r.id)
def test_january_2021_row_is_its_table_line(row):
    h, a, layers, mp, gb, tflops = JAN21_TABLE[row.gpus]
    ov, lay = overrides(row), row.layout
    assert (ov["model.hidden_size"], ov["model.num_heads"], ov["model.num_layers"]) == (str(h), str(a), str(layers))
    assert lay["tp"] * lay["pp"] == mp and lay["tp"] == min(mp, 8) and lay["cp"] == 1
    assert lay["global_batch"] == gb and lay["seq_len"] == 2048 and row.measured == tflops
    assert f"| {mp} | {row.gpus} | {gb} | {tflops} |" in row.source
    assert layers % lay["pp"] == 0


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_every_row_is_described_with_its_value():
    text = section(VALIDATION / "llm_rows.md", SECTION)
    for row in ROWS:
        line = table_line(text, row.id)
        assert line and f"| {row.measured:g} |" in line and line.rstrip().split("|")[-2].strip() == "runs", row.id
