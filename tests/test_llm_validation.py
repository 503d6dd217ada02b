"""validation/llm.csv (Megatron-LM's published runs) and the interleaved 1F1B schedule it needs.

Accuracy per row is pinned by tests/test_validation_suite.py (validation/pinned_errors.csv); here:
the rows' shapes reproduce the published parameter counts, the prediction is the source's FLOP
count over the predicted step time, bad llm rows are one-line errors, and the interleaved
schedule behaves as Narayanan et al. 2021 Sec. 2.2.2 describes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.layout import Layout
from estimator.parallel.memory import memory, recomputed_bytes
from estimator.parallel.spec import TransformerSpec
from estimator.validation import load_rows, predict
from estimator.validation.llm import COLUMNS, megatron_flops
from estimator.validation.predict import base_overrides, command_line

FOLDER = Path(__file__).resolve().parents[1] / "validation"
LLM_ROWS = [r for r in load_rows(FOLDER) if r.kind == "llm"]
TABLE1 = [r for r in LLM_ROWS if r.id.startswith("megatron-sc21-")]


def test_llm_rows_are_loaded_with_sources():
    assert len(TABLE1) == 10 and len(LLM_ROWS) >= 11
    for r in LLM_ROWS:
        # a source someone can open: repo@commit:path, an arXiv paper or a URL
        assert re.search(r"[\w.-]+/[\w.+-]+@[0-9a-f]{40}:|arXiv \d{4}\.\d{4,5}|https://", r.source), r.id
        assert r.layout["tp"] * r.layout["pp"] <= r.gpus and r.gpus % (r.layout["tp"] * r.layout["pp"]) == 0


@pytest.mark.parametrize("row", TABLE1, ids=[r.id for r in TABLE1])
def test_table1_shapes_give_the_published_parameter_counts(row):
    published = float(re.search(r"([0-9.]+)B params", row.measured_what).group(1)) * 1e9
    cfg = estimator.resolve_config(base_overrides(row))
    params = TransformerSpec.from_cfg(cfg["model"]).params()
    # Table 1 rounds to 0.1 B; the smallest model (1.7 B) allows 0.05 / 1.7 = 3 %
    assert abs(params - published) <= 0.051e9 + 0.002 * published, (params, published)


def test_prediction_is_megatron_flops_over_predicted_step_time():
    row = next(r for r in LLM_ROWS if r.id == "megatron-sc21-gpt-1t-3072gpu")
    res = predict(row)
    cfg = estimator.resolve_config(base_overrides(row))
    m = estimate(cfg).metrics
    assert m["layout"] == res.algorithm and m["tp"] == 8 and m["pp"] == 64 and m["dp"] == 6
    flops = megatron_flops(cfg["model"], 3072)
    assert res.predicted == pytest.approx(flops / m["iter_time_s"] / 3072 / 1e12)
    # Table 1: 163 TFLOP/s per GPU x 3072 GPUs = 500.7 PFLOP/s vs the table's 502.0 aggregate (rounding)
    assert 163 * 3072 / 1e3 == pytest.approx(502.0, rel=0.005)
    assert "estimator estimate" in command_line(row) and "parallelism.pp=64" in command_line(row)


def _csv(tmp_path, **change):
    src = (FOLDER / "llm.csv").read_text().splitlines()
    header = src[0].split(",")
    assert tuple(header) == COLUMNS
    import csv
    import io

    row = next(csv.reader(io.StringIO(src[1])))
    for k, v in change.items():
        row[header.index(k)] = v
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(row)
    folder = tmp_path / "v"
    folder.mkdir()
    (folder / "llm.csv").write_text(src[0] + "\n" + buf.getvalue())
    return folder


@pytest.mark.parametrize("change, needle", [
    ({"tp": "eight"}, "column tp: 'eight' is not a positive integer"),
    ({"global_batch": "0"}, "column global_batch"),
    ({"model": "gpt5"}, "column model: unknown model 'gpt5'"),
    ({"overrides": "parallelism.pp=4"}, "column overrides"),
    ({"measured": "-3"}, "column measured: '-3' is not a positive number"),
])
def test_bad_llm_rows_are_one_line_errors(tmp_path, change, needle):
    with pytest.raises(EstimatorError) as err:
        load_rows(_csv(tmp_path, **change))
    assert "llm.csv:2:" in str(err.value) and needle in str(err.value) and "\n" not in str(err.value)


def _cfg(*extra):
    return estimator.resolve_config(["model=megatron_gpt", "parallelism=hybrid", "system=dgx_a100", "precision=fp16",
                                     "model.hidden_size=10240", "model.num_layers=60", "model.num_heads=80",
                                     "model.ffn_size=40960", "fabric.nodes=1024", "parallelism.tp=8", "parallelism.pp=4",
                                     "parallelism.micro_batch_size=2", "parallelism.global_batch=1792",
                                     "parallelism.recompute=full", "parallelism.zero=0", *extra])


def test_interleaved_schedule_shrinks_the_bubble_and_multiplies_p2p():
    one = estimate(_cfg()).metrics
    three = estimate(_cfg("parallelism.virtual_stages=3")).metrics
    m = one["microbatches"]
    assert m == 28 and three["virtual_stages"] == 3
    # each rank sends v times as many activations per microbatch; the bubble of (pp - 1) slots becomes
    # (pp - 1) / v slots, each longer by the extra 2 (v - 1) sends of t_p2p
    assert three["pp_p2p_time_s"] / (m + 1) == pytest.approx(3 * one["pp_p2p_time_s"] / (m + 3))
    t_p2p = one["pp_p2p_time_s"] / (2 * (m + 3))
    assert three["bubble_time_s"] == pytest.approx(one["bubble_time_s"] / 3 + 4 * t_p2p)
    assert three["iter_time_s"] < one["iter_time_s"]
    spec = TransformerSpec.from_cfg(_cfg()["model"])
    base = Layout(8, 4, 32, 1, 2, 28, 0, False, "full")
    inter = Layout(8, 4, 32, 1, 2, 28, 0, False, "full", virtual_stages=3)
    # Korthikanti et al. 2022 Sec. 4.2.3: 1 + (pp - 1) / (pp v) times the activations of 1F1B
    # (of the layers held; the one layer recomputed in its backward is held once by either schedule)
    held = {k: memory(spec, L)["activations"] - recomputed_bytes(spec, L, memory(spec, L)["stage"])
            for k, L in (("base", base), ("inter", inter))}
    assert held["inter"] == pytest.approx(held["base"] * (1 + 3 / 12))


@pytest.mark.parametrize("extra, needle", [
    (("parallelism.virtual_stages=16",), "leave a chunk other than the embedding's"),
    (("parallelism.virtual_stages=3", "parallelism.global_batch=1856"), "multiple of pp=4"),
    (("parallelism.virtual_stages=2", "parallelism.pp=1"), "needs pipeline parallelism"),
])
def test_bad_virtual_stages_are_errors(extra, needle):
    from estimator.parallel.estimate import validate_hybrid

    with pytest.raises(EstimatorError, match=needle):
        validate_hybrid(_cfg(*extra))
