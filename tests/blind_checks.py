"""Checks shared by the blind held-out row tests (tests/test_blind_h*_rows.py): a row's layout is whole, its command
composes into a config the hybrid model accepts and fits, a step-time row reproduces its published conversion, no
row cites a calibration row's document, and no row repeats a run already described."""

from __future__ import annotations

import re
from pathlib import Path

import estimator
from estimator.parallel.estimate import validate_hybrid
from estimator.parallel.spec import TransformerSpec
from estimator.validation import load_rows
from estimator.validation.llm import shares_source, source_keys
from estimator.validation.predict import base_overrides

VALIDATION = Path(__file__).resolve().parents[1] / "validation"

# "tokens/s per GPU = <global batch> x <seq> / (<step> s x <gpus>) = <value>" in a row's measured_what.
STEP = re.compile(r"tokens/s per GPU = ([\d,]+) x (\d+) / \(([\d.]+) s x ([\d,]+)\) = (\d+(?:\.\d+)?)")
BLIND_MARK = "Chosen before any prediction was seen"
# A MoE run's router / permutation settings where its recipe sets them (round h56; estimator/parallel/spec.py
# MoeRouter): facts of the run's code path, not measurements.
MOE_ROUTER_KEYS = frozenset({
    "model.moe_router_fusion", "model.moe_permute_fusion", "model.moe_aux_loss_coeff", "model.moe_router_dtype",
    "model.moe_router_pre_softmax", "model.moe_router_score_function", "model.moe_router_enable_expert_bias"})


def check_layout_and_mark(row) -> None:
    """tp x pp x cp divides the GPUs, the global batch is whole microbatches, and the row says it was blind."""
    lay = row.layout
    dp = row.gpus // (lay["tp"] * lay["pp"] * lay["cp"])
    assert row.gpus == dp * lay["tp"] * lay["pp"] * lay["cp"]
    assert lay["global_batch"] % (dp * lay["micro_batch_size"]) == 0
    assert BLIND_MARK in row.measured_what


def check_facts_only(row, allowed: set[str]) -> dict[str, str]:
    """The row's overrides set only ``allowed`` keys, it is a tokens/s row with no FLOP formula, and its layout is
    whole and marked blind (check_layout_and_mark). Returns the overrides as ``{key: value}``."""
    keys = overrides(row)
    assert set(keys) <= allowed, set(keys) - allowed
    assert row.metric == "tokens_per_s_per_gpu" and row.raw["flops_formula"] == ""
    check_layout_and_mark(row)
    return keys


def stated_layer(row) -> str:
    """The model.fused_kernels the eager-stack rule gives a PyTorch row (eighteenth / nineteenth stop): a stack that ran
    its norms and activations eager, without torch.compile, is ``sdpa``; FP8 runs (Transformer Engine layers) and
    compiled stacks are ``te``."""
    return "sdpa" if "no torch.compile" in row.raw["software"] and row.precision != "fp8" else "te"


def check_composes_and_fits(row) -> None:
    cfg = estimator.resolve_config(base_overrides(row))
    validate_hybrid(cfg)
    assert cfg["model"]["seq_len"] == row.layout["seq_len"]
    assert cfg["parallelism"]["cp"] == row.layout["cp"]


def check_step_conversion(row) -> None:
    gb, seq, step, gpus, value = STEP.search(row.measured_what).groups()
    gb, gpus = int(gb.replace(",", "")), int(gpus.replace(",", ""))
    assert (gb, int(seq), gpus) == (row.layout["global_batch"], row.layout["seq_len"], row.gpus)
    assert row.measured == float(value) == round(gb * int(seq) / (float(step) * gpus), 3)


def check_no_calibration_source(rows, seen) -> None:
    """No row shares a source with a calibration row of ``seen``; and the check can fail: a row that cites a
    calibration row's document is caught."""
    calibration = [r for r in seen if r.role == "calibration"]
    assert calibration
    for row in rows:
        assert not [c.id for c in calibration if shares_source(row.source, c.source)], row.id
    cal = calibration[0]
    assert shares_source(cal.source, rows[0].source + "; " + cal.source)


def overrides(row) -> dict[str, str]:
    """A row's overrides as ``{key: value}``."""
    return dict(ov.split("=", 1) for ov in row.overrides)


def run_key(row) -> tuple:
    """What makes a run of a document: system, shape, precision, GPUs and layout."""
    ov = overrides(row)
    lay = row.layout
    return (row.system, row.model, ov.get("model.hidden_size"), ov.get("model.num_layers"), row.precision, row.gpus,
            lay["tp"], lay["pp"], lay["cp"], lay["micro_batch_size"], lay["global_batch"], lay.get("seq_len"))


def document(row) -> str:
    """The measurement's document: the repository-file key the source cites first (settings files follow it)."""
    def position(key: str) -> tuple[int, int]:
        repo, path = key.split(":", 1)
        return row.source.find(repo), row.source.find(path.split("*")[0])

    return min((k for k in source_keys(row.source) if ":" in k and not k.startswith("arxiv:")), key=position)


def check_new_runs(rows, seen, release) -> None:
    """No row repeats an id of ``seen``, and none is a run ``seen`` already describes: a document already used counts
    only at another software release (``release(row)``), or for a model no row of that release has."""
    assert not {r.id for r in seen} & {r.id for r in rows}
    for row in rows:
        same_document = [s for s in seen if document(row) in source_keys(s.source)]
        clashes = [s.id for s in same_document if release(s) == release(row) and s.model == row.model]
        assert not clashes, f"{row.id} repeats {clashes}"


def check_rows_in_llm_file(rows, documents: dict[str, int], count: int) -> None:
    """A round's rows: ``count`` of them, all in validation/llm.csv with unique ids, independent llm rows,
    ``documents[doc]`` from each source document."""
    assert len(rows) == sum(documents.values()) == count
    assert {r.file for r in rows} == {"validation/llm.csv"}
    assert len({r.id for r in rows}) == len(rows)
    assert all(r.kind == "llm" and r.role == "independent" for r in rows)
    assert {doc: sum(document(r) == doc for r in rows) for doc in documents} == documents


def check_mpt_table(row) -> bool:
    """A MosaicML (llm-foundry) row: its model has the README table's parameter count, its measured value is the
    table's total throughput over its GPUs, and its gradient dtype follows the run's mixed-precision mode (PURE:
    bf16 reductions). Returns whether the run was PURE."""
    cfg = estimator.resolve_config(base_overrides(row))["model"]
    published = int(re.search(r"MPT-\w+ \((\d+) parameters", row.measured_what).group(1))
    assert TransformerSpec.from_cfg(cfg).params() == published
    total = int(re.search(r"'Throughput \(T/s\)' ([\d,]+) over (\d+) GPUs", row.measured_what).group(1).replace(",", ""))
    assert row.measured == round(total / row.gpus, 1)
    pure = "MP Mode PURE" in row.measured_what
    assert overrides(row)["parallelism.fp32_grads"] == ("false" if pure else "true")
    # llm-foundry's submit_benchmarks.py defaulted to --attn_impl triton until v0.7.0 (Mar 2024), after every table used
    assert overrides(row)["framework.attention_kernel"] == "triton" and "triton" in row.measured_what + row.raw["software"]
    return pure


def section(path, heading: str) -> str:
    """The text of the Markdown section of ``path`` that starts with the line ``heading`` ("## ..."), up to the next
    "## " heading."""
    text = path.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n") + 1
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end + 1]


def check_described(rows, heading: str, measured: bool = False) -> None:
    """Every row's id (and with ``measured`` its value to 3 decimals) is in its round's section of llm_rows.md."""
    doc = section(Path(__file__).resolve().parents[1] / "validation" / "llm_rows.md", heading)
    for row in rows:
        assert f"`{row.id}`" in doc, f"{row.id} is not listed in llm_rows.md, '{heading[3:]}'"
        assert not measured or f"{row.measured:.3f}" in doc, f"{row.id}'s measured value is not in the section's table"


def table_line(text: str, row_id: str) -> str:
    """The line of a round's error table (in ``text``) that describes ``row_id``; "" when there is none."""
    return next((ln for ln in text.splitlines() if ln.startswith(f"| `{row_id}` |")), "")


def round_rows(ids: tuple) -> tuple[list, list, list]:
    """(every row of validation/, a moved round's rows ``ids``, the llm rows seen before it: llm.csv and pending/
    without the round's own)."""
    all_rows = load_rows(VALIDATION)
    seen = [r for r in all_rows + load_rows(VALIDATION / "pending") if r.kind == "llm" and r.id not in ids]
    return all_rows, [r for r in all_rows if r.id in ids], seen


def other_blind_rows() -> list:
    """Rows of blind sub-folders not moved yet (``validation/blind_*/`` and their ``refused/``)."""
    folders = [p for p in VALIDATION.glob("blind_*") if p.is_dir()]
    return [r for p in folders for sub in (p, p / "refused") if sub.is_dir() for r in load_rows(sub)]


def check_moved_once(ids: tuple, all_rows) -> None:
    """Priced once, a round's rows are in the default validation folder's llm.csv (``all_rows``), each id once (not
    also in pending/ or a blind sub-folder)."""
    rows = [r for r in all_rows if r.id in ids]
    assert set(ids) <= {r.id for r in all_rows} and {r.file for r in rows} == {"validation/llm.csv"}
    everywhere = [r.id for r in all_rows + load_rows(VALIDATION / "pending") + other_blind_rows() if r.id in ids]
    assert sorted(everywhere) == sorted(ids)
