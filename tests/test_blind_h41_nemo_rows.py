"""The round-h41-nemo blind held-out rows (issue #23 item 7): NVIDIA performance tables of releases no row used yet --
dgxc-benchmarking v25.02's Llama 3.1 70B table (NeMo 24.12, 256-2,048 H100), Megatron-Bridge's archive at 25.09 /
26.02 / 26.04 (Llama 3.1 405B, Qwen3-235B-A22B) and NeMo's 24.07 table as re-measured in its final version.

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(acde128), then moved into validation/llm.csv unchanged, and the one row the memory model refuses into
validation/pending/llm_refused.csv (validation/llm_rows.md, "Blind held-out rows, round h41 (NVIDIA release tables not
used before: dgxc v25.02, Megatron-Bridge 25.09-26.04, NeMo 24.07 final, H100)"). These checks price no step: every row parses with the project's loader, is an independent
llm row that repeats no run already described, shares no source with a calibration row, sets only facts of the run,
reproduces the published numbers it is derived from, composes into a config the hybrid model accepts and fits in
memory (the refused row does not), and is described with its value in llm_rows.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import estimator
from estimator.parallel.estimate import validate_hybrid
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
    section,
    table_line,
)

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H41_NEMO_IDS = ("dgxc2502-llama31-70b-bf16-256gpu", "dgxc2502-llama31-70b-bf16-512gpu",
                "dgxc2502-llama31-70b-bf16-1024gpu", "dgxc2502-llama31-70b-bf16-2048gpu",
                "dgxc2502-llama31-70b-fp8-256gpu", "dgxc2502-llama31-70b-fp8-512gpu", "dgxc2502-llama31-70b-fp8-1024gpu",
                "dgxc2502-llama31-70b-fp8-2048gpu", "mbridge2509-llama31-405b-fp8-1024gpu",
                "mbridge2509-qwen3-235b-a22b-fp8-256gpu-tokendrop", "mbridge2602-qwen3-235b-a22b-fp8-256gpu",
                "mbridge2604-qwen3-235b-a22b-fp8-256gpu", "nemo2407rm-gpt3-175b-fp8-128gpu",
                "nemo2407rm-gpt3-175b-fp8-512gpu", "nemo2407rm-llama2-70b-fp8-64gpu",
                "nemo2407rm-nemotron4-340b-fp8-128gpu", "nemo2407rm-llama3-70b-fp8-64gpu")
H41_NEMO_REFUSED_IDS = ("mbridge2509-qwen3-30b-a3b-fp8-16gpu-tokendrop",)
ALL = load_rows(VALIDATION)
PENDING = load_rows(VALIDATION / "pending")
ROWS = [r for r in ALL if r.id in H41_NEMO_IDS]
# refused on memory when written (validation/pending/llm_refused.csv); fits since round h53, in llm.csv (fifteenth stop)
REFUSED = [r for r in ALL + PENDING if r.id in H41_NEMO_REFUSED_IDS]
SEEN = [r for r in ALL + PENDING if r.kind == "llm" and r.id not in H41_NEMO_IDS + H41_NEMO_REFUSED_IDS]
OTHER_BLIND = other_blind_rows()
SECTION = ("## Blind held-out rows, round h41 (NVIDIA release tables not used before: dgxc v25.02, Megatron-Bridge "
           "25.09-26.04, NeMo 24.07 final, H100)")
DGXC = "NVIDIA/dgxc-benchmarking:llama3.1/README_70b.md"
ARCHIVE = "NVIDIA-NeMo/Megatron-Bridge:docs/performance-summary-archive.md"
NEMO = "NVIDIA/NeMo:docs/source/performance/performance_summary.md"
DOCUMENTS = {DGXC: 8, ARCHIVE: 4, NEMO: 5}
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "framework.tp_comm_overlap", "framework.attention_kernel", "framework.optimizer_state",
                "parallelism.zero", "parallelism.sequence_parallel", "parallelism.dp_overlap",
                "parallelism.virtual_stages", "parallelism.recompute", "parallelism.fp32_grads", "parallelism.ep",
                "parallelism.etp", "fabric.nvls", "model.fused_kernels"}

# round h50 / thirteenth stop: the recipe's MoE dispatcher, EP all-to-all overlap and Adam state dtype (facts)
ALLOWED_KEYS |= {"framework.moe_dispatcher", "framework.moe_a2a_overlap", "framework.optimizer_state"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
# dgxc v25.02 llama3.1/README_70b.md l.53 / l.60: GPUs -> step time (s), GBS = 2 x GPUs
DGXC_STEPS = {"bf16": {64: 14.61, 128: 14.70, 256: 14.72, 512: 14.80, 1024: 14.86, 2048: 14.84},
              "fp8": {64: 10.46, 128: 10.52, 256: 10.75, 512: 10.76, 1024: 10.83, 2048: 10.99}}
# Commit of each document's version a row takes its value from (the release the row measures).
RELEASE = re.compile(r"@([0-9a-f]{40})")


def document(row) -> str:
    return next(k for k in DOCUMENTS if k in source_keys(row.source))


def value_commit(row) -> str:
    """The commit the row's value is read from: the first one its source names."""
    return RELEASE.search(row.source).group(1)


def test_rows_parse_and_are_independent_h100_rows():
    assert len(ROWS) == 17 and len({r.id for r in ROWS}) == 17 and len(REFUSED) == 1
    assert tuple(r.id for r in ROWS) == H41_NEMO_IDS
    assert {r.file for r in ROWS} == {"validation/llm.csv"}
    assert all(r.kind == "llm" and r.role == "independent" and r.system == "dgx_h100" for r in ROWS + REFUSED)
    assert {doc: sum(document(r) == doc for r in ROWS) for doc in DOCUMENTS} == DOCUMENTS
    assert sum(r.gpus >= 256 for r in ROWS) == 13 and sum(r.gpus >= 1024 for r in ROWS) == 5


def test_estimator_validate_reads_the_rows_from_llm_csv():
    """Priced once, the 17 rows are in the default validation folder's llm.csv, and so is the refused one since it
    fits (round h53), each id once (not in pending/ and not in a blind sub-folder)."""
    check_moved_once(H41_NEMO_IDS, ALL)
    everywhere = [r.id for r in ALL + PENDING + OTHER_BLIND if r.id in H41_NEMO_REFUSED_IDS]
    assert everywhere == list(H41_NEMO_REFUSED_IDS) and {r.file for r in REFUSED} == {"validation/llm.csv"}


def test_rows_are_runs_no_other_row_describes():
    """No id of llm.csv, pending/ or another blind round; no row equals a seen row of its document in model, GPUs,
    layout, precision and value; and each row's value comes from a version of its document (a release or a
    re-measurement) that no seen row of the same model cites. The check can fail: a seen row is caught."""
    others = SEEN + OTHER_BLIND
    assert not {r.id for r in others} & {r.id for r in ROWS + REFUSED}

    def key(r):
        lay = r.layout
        return (r.model, r.precision, r.gpus, lay["tp"], lay["pp"], lay["cp"], lay["micro_batch_size"],
                lay["global_batch"], r.measured)

    seen_keys = {key(s) for s in others}
    assert not [r.id for r in ROWS + REFUSED if key(r) in seen_keys]
    for row in ROWS + REFUSED:
        same = [s for s in others if document(row) in source_keys(s.source) and s.model == row.model]
        assert not [s.id for s in same if value_commit(s) == value_commit(row) and document(row) != ARCHIVE], row.id
    # the archive holds every release in one file: a release is its section
    section = re.compile(r"section '([\d.]+) NeMo Container'")
    archive_seen = {(s.model, m.group(1)) for s in others if (m := section.search(s.source))}
    for row in [r for r in ROWS + REFUSED if document(r) == ARCHIVE]:
        assert (row.model, section.search(row.source).group(1)) not in archive_seen, row.id
    assert key(SEEN[0]) in seen_keys


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS + REFUSED, SEEN)


@pytest.mark.parametrize("row", ROWS + REFUSED, ids=lambda r: r.id)
def test_row_sets_only_facts(row):
    ov = overrides(row)
    assert set(ov) <= ALLOWED_KEYS, set(ov) - ALLOWED_KEYS
    assert row.metric == "tokens_per_s_per_gpu" and row.raw["flops_formula"] == ""
    check_layout_and_mark(row)
    assert ov["framework"] == "megatron" and ov["parallelism.fp32_grads"] == "false" and ov["fabric.nvls"] == "false"
    # every one of these recipes runs the distributed optimizer, so ZeRO-1
    assert ov["parallelism.zero"] == "1"


@pytest.mark.parametrize("row", [r for r in ROWS if document(r) == DGXC], ids=lambda r: r.id)
def test_dgxc_row_is_its_step_time(row):
    step = DGXC_STEPS[row.precision][row.gpus]
    lay = row.layout
    assert (lay["tp"], lay["pp"], lay["cp"], lay["global_batch"], lay["seq_len"]) == (4, 4, 2, 2 * row.gpus, 8192)
    assert f"step time (seconds per step)' {step}" in row.measured_what
    check_step_conversion(row)
    assert overrides(row)["parallelism.virtual_stages"] == "5" and row.gpus >= 256


@pytest.mark.parametrize("row", [r for r in ROWS + REFUSED if document(r) != DGXC], ids=lambda r: r.id)
def test_table_row_quotes_its_value(row):
    """Megatron-Bridge and NeMo rows are the table's tokens/s/GPU, quoted in the source with the row's layout."""
    lay = row.layout
    assert f"| {row.measured:g} |" in row.source or f"{row.measured:g} tokens/s/GPU" in row.source
    assert f"{lay['global_batch']} |" in row.source or f"GBS {lay['global_batch']}" in row.source
    assert "precision" not in row.raw["unstated"].split() or "25.09 NeMo Container" in row.source


def test_moe_rows_fold_the_experts():
    """The Qwen3-235B layouts put EP 32 over TP 2 x DP 16 ranks: ETP 1 (the recipes' expert_tensor_parallel_size)."""
    moe = [r for r in ROWS + REFUSED if r.model.startswith("qwen3")]
    assert len(moe) == 4
    for row in moe:
        ov, lay = overrides(row), row.layout
        dp = row.gpus // (lay["tp"] * lay["pp"] * lay["cp"])
        assert ov["parallelism.etp"] == "1" and int(ov["parallelism.ep"]) <= lay["tp"] * dp


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


def test_refused_row_fits_since_round_h53():
    """The 25.09 Qwen3-30B-A3B token-drop run fit on 16 H100; the memory model refused its layout (llm_rows.md,
    round h41's "Refused") until round h53 read what Megatron-core's MoE layer keeps (docs/research/h53-moe-memory.md):
    it fits now and moved out of llm_refused.csv into llm.csv."""
    (row,) = REFUSED
    assert row.file == "validation/llm.csv" and row.measured == 10494
    validate_hybrid(estimator.resolve_config(base_overrides(row)))


def test_every_row_is_described_with_its_value():
    text = section(VALIDATION / "llm_rows.md", SECTION)
    for row in ROWS + REFUSED:
        line = table_line(text, row.id)
        status = "refused" if row in REFUSED else "runs"
        value = f"{row.measured:.3f}".rstrip("0").rstrip(".")
        assert line and f"| {value}" in line and line.rstrip().split("|")[-2].strip().startswith(status), row.id
