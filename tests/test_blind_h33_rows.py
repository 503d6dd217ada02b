"""The round-h33 blind held-out rows (issue #23 item 7, "further published runs"), now in validation/llm.csv.

They were written into a sub-folder that `estimator validate` does not read, priced once when the model was frozen
(7f1c5ea), then moved into llm.csv (validation/llm_rows.md, "Blind held-out rows, round h33"). These checks price no
step: every row parses with the project's loader, is a run no other row describes, shares no source with a calibration row, sets only facts of the run,
reproduces the published numbers it is derived from, composes into a config the hybrid model accepts and fits in
memory, and is described in the folder's README.
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
    check_mpt_table,
    check_no_calibration_source,
    check_rows_in_llm_file,
    document,
    overrides,
)
from tests.test_blind_h37_fsdp_rows import H37_FSDP_IDS
from tests.test_blind_h38_foundry_rows import H38_FOUNDRY_IDS
from tests.test_blind_h41_foundry_rows import H41_FOUNDRY_IDS

VALIDATION = Path(__file__).resolve().parents[1] / "validation"
H33_IDS = ("nfl2401-gpt3-5b-fp8-64gpu", "nfl2401-gpt3-20b-fp8-64gpu", "nfl2401-llama2-7b-fp8-8gpu",
           "nfl2401-llama2-13b-fp8-16gpu", "nfl2401-llama2-70b-fp8-64gpu", "nfl240101-gpt3-5b-fp8-64gpu",
           "nfl240101-gpt3-20b-fp8-64gpu", "nfl240101-llama2-7b-fp8-8gpu", "nfl240101-llama2-70b-fp8-64gpu",
           "mpt0723-30b-a100-80gb-64gpu", "mpt0723-13b-a100-80gb-64gpu", "mpt0723-7b-a100-80gb-64gpu",
           "mpt0723-3b-a100-80gb-64gpu", "mpt0723-1b-a100-80gb-64gpu", "mpt-70b-h100-32gpu", "mpt-30b-h100-16gpu",
           "mpt-13b-h100-8gpu-s4096", "mpt-3b-h100-64gpu", "mpt-1b-h100-64gpu")
ALL = load_rows(VALIDATION)
ROWS = [r for r in ALL if r.id in H33_IDS]
# Rows written before this round: rounds h37's and h38's MPT rows are later lines of the same llm-foundry README at
# 8c8dd48 (h37: the H100 BF16 table's long-sequence lines and the H100 FP8 table, test_blind_h37_fsdp_rows.py; h38: more
# lines of the H100 BF16 / FP8 and A100 40GB tables, test_blind_h38_foundry_rows.py); round h41's are more lines of the
# H100 BF16 table and of the April-2023 A100 80GB table at c6cfb4284 (test_blind_h41_foundry_rows.py).
LATER = H37_FSDP_IDS + H38_FOUNDRY_IDS + H41_FOUNDRY_IDS
SEEN = [r for r in ALL if r.id not in H33_IDS + LATER] + load_rows(VALIDATION / "pending")
NFL = "NVIDIA/NeMo-Framework-Launcher:examples/README.md"
MPT = "mosaicml/llm-foundry:scripts/train/benchmarking/README.md"
DOCUMENTS = {NFL: 9, MPT: 10}
# The commit a row's source cites first (the table's version): NeMo launcher 24.01 / 24.01.01, llm-foundry's README
# before b2a43a147 (July 2023) and at 8c8dd48 (the version llm.csv's MPT rows cite).
RELEASES = {"fa27ba4980f67d499d4b4753cddecc2647e9d7be": 5, "81b75a7cbd0060846b1ef6b5646b28e868b1b9c3": 4,
            "c6cfb4284d280daef0e79e57b5dce82673dc565e": 5, "8c8dd48f72168c5d51e2f7b151595892a8fba43d": 5}
ALLOWED_KEYS = {"framework.loss_kernel", "framework.loss_metric_passes", "framework", "parallelism.zero", "parallelism.virtual_stages", "parallelism.sequence_parallel",
                "parallelism.dp_overlap", "parallelism.recompute", "parallelism.fp32_grads", "framework.tp_comm_overlap",
                "framework.attention_kernel", "fabric.nvls", "model.vocab_size", "model.hidden_size",
                "model.num_layers", "model.num_heads", "model.num_kv_heads", "model.ffn_size", "model.fused_kernels",
                "model.dropout"}
ALLOWED_KEYS |= {"framework.moe_shared_expert_overlap"}  # round h55: Megatron-core's shared-expert overlap, a recipe fact
ALLOWED_KEYS |= MOE_ROUTER_KEYS  # round h56: the recipe's MoE router / permutation settings
ALLOWED_KEYS |= {"framework.fp8_kernels"}  # round h59: the FP8 recipe's casts (te | torchao), a fact of the framework the run used
ALLOWED_KEYS |= {"framework.fp8_recipe"}  # round h63: TE's FP8 scaling recipe (delayed | tensorwise | blockwise), a fact of the stack the run used
ALLOWED_KEYS |= {"framework.fsdp_version"}  # twenty-second stop: the PyTorch FSDP generation (1 | 2) the run used, read from its software column
NFL_ROWS = [r for r in ROWS if document(r) == NFL]
MPT_ROWS = [r for r in ROWS if document(r) == MPT]


def _commit(row) -> str:
    return re.search(r"@([0-9a-f]{40}):", row.source).group(1)


def _run(row) -> tuple:
    """What makes a run of a table: system, shape, precision and layout (the release is compared separately)."""
    ov = overrides(row)
    lay = row.layout
    return (row.system, row.model, ov.get("model.hidden_size"), ov.get("model.num_layers"), row.precision, row.gpus,
            lay["tp"], lay["pp"], lay["cp"], lay["micro_batch_size"], lay["global_batch"], lay.get("seq_len"))


def _repeats(row, seen) -> list[str]:
    """Rows of ``seen`` from the same document that describe the same run: the same layout at the same release, or,
    for a table version no other row cites, the same layout in any version (a row unchanged between versions)."""
    same_doc = [s for s in seen if document(row) in source_keys(s.source) and _run(s) == _run(row)]
    return [s.id for s in same_doc if _commit(row) in s.source or row.measured == s.measured]


def test_rows_parse_and_come_from_two_documents_at_four_releases():
    check_rows_in_llm_file(ROWS, DOCUMENTS, 19)
    assert {c: sum(_commit(r) == c for r in ROWS) for c in RELEASES} == RELEASES
    assert {r.system for r in ROWS} == {"dgx_h100", "dgx_a100"}


def test_rows_are_runs_no_other_row_describes():
    assert not {r.id for r in SEEN} & {r.id for r in ROWS}
    for row in ROWS:
        assert not _repeats(row, SEEN), f"{row.id} repeats {_repeats(row, SEEN)}"
    # The NeMo launcher releases are new: no row of llm.csv cites these commits.
    assert not [s.id for s in SEEN if any(c in s.source for c in list(RELEASES)[:3])]


def test_the_run_check_can_fail():
    """A row of llm.csv's MPT H100 table, re-read, is caught as a repeat."""
    (seen,) = [s for s in SEEN if s.id == "mpt-13b-h100-64gpu"]
    assert _repeats(seen, [seen]) == [seen.id]
    assert not _repeats(MPT_ROWS[-1], [seen])


def test_no_row_shares_a_source_with_a_calibration_row():
    check_no_calibration_source(ROWS, SEEN)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_row_sets_only_facts_of_the_run(row):
    keys = check_facts_only(row, ALLOWED_KEYS)
    assert keys["framework"] == ("megatron" if row in NFL_ROWS else "fsdp")


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_published_layout_composes_is_accepted_and_fits(row):
    check_composes_and_fits(row)


@pytest.mark.parametrize("row", NFL_ROWS, ids=lambda r: r.id)
def test_launcher_rows_are_the_table_value(row):
    lay = row.layout
    assert (f"| {row.gpus} | GBS {lay['global_batch']} | MBS {lay['micro_batch_size']} | {lay['seq_len']} | "
            f"TP {lay['tp']} | PP {lay['pp']} | {row.measured:g} tokens/s/GPU |") in row.source
    ov = overrides(row)
    assert row.precision == "fp8" and ov["framework.attention_kernel"] == "flash2" and ov["fabric.nvls"] == "false"
    # 24.01's example scripts reduce gradients in the optimizer's default (fp32, an assumption: unstated); 24.01.01's
    # add +training.model.optim.grad_sync_dtype=bf16.
    release_2401 = _commit(row).startswith("fa27ba49")
    assert ov["parallelism.fp32_grads"] == ("true" if release_2401 else "false")
    assert ("parallelism.fp32_grads" in row.raw["unstated"].split()) == release_2401
    # Userbuffer TP overlap needs sequence parallelism.
    assert "framework.tp_comm_overlap" not in ov or ov["parallelism.sequence_parallel"] == "true"


@pytest.mark.parametrize("row", MPT_ROWS, ids=lambda r: r.id)
def test_mpt_rows_reproduce_the_published_table(row):
    pure = check_mpt_table(row)
    assert f"| {row.layout['seq_len']} | {row.gpus} | {'a100_80gb' if row.system == 'dgx_a100' else 'h100_80gb'}" \
        in row.source
    assert pure == (row.system == "dgx_a100")


def test_every_row_is_described():
    doc = (VALIDATION / "llm_rows.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Blind held-out rows, round h33"):]
    for row in ROWS:
        assert f"`{row.id}`" in section, f"{row.id} is not listed in llm_rows.md, 'Blind held-out rows, round h33'"
