"""Validation kind ``llm``: published large-model training throughput (``validation/llm.csv``).

A row is one hybrid-parallel (tensor x pipeline x data) training run of a decoder-only model,
as published, and is run as

  ``estimator estimate system=<system> fabric.nodes=<gpus> model=<model> parallelism=hybrid
  precision=<precision> parallelism.tp=<tp> parallelism.pp=<pp>
  parallelism.micro_batch_size=<micro_batch_size> parallelism.global_batch=<global_batch>
  <overrides>``

(the model's shape and the rest of the run's settings — recompute, interleaving, gradient
reduction — are in ``overrides``). ``measured_tflops_per_gpu`` is the per-GPU throughput the
source reports. The Megatron-LM papers count it as the analytical FLOPs of one step divided by
the measured step time and the GPU count, with Narayanan et al. 2021 (SC21, arXiv 2104.04473)
Sec. 5.1 Eq. (3), which counts full activation recomputation (one extra forward):
``F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))`` (B global batch, s sequence, l layers,
h hidden, V vocabulary). The prediction is the same ``F`` divided by the *predicted* step
time, so the error is exactly the error of the step time (inverted). Rows whose source counts
FLOPs another way must say so in ``measured_what``; only this count is implemented.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from estimator.errors import EstimatorError

MEASURED = "measured_tflops_per_gpu"
METRIC = ("tflops_per_gpu", "TFLOP/s/GPU")
COLUMNS = ("id", "system", "model", "precision", "gpus", "tp", "pp", "micro_batch_size", "global_batch", MEASURED,
           "role", "overrides", "hardware", "software", "source", "measured_what")
LAYOUT_COLUMNS = ("tp", "pp", "micro_batch_size", "global_batch")
# Keys the columns set (a row's overrides may not set them again).
COLUMN_KEYS = ("system", "model", "fabric.nodes", "precision", "parallelism", "parallelism.tp", "parallelism.pp",
               "parallelism.dp", "parallelism.micro_batch_size", "parallelism.global_batch",
               "parallelism.microbatches", "output", "write")

# Where the report's "Against real hardware" section lists the rows.
ERRORS_SQL = """
SELECT id, role, gpus, overrides, measured, round(predicted, 1) AS predicted, unit, round(error_pct, 1) AS error_pct,
       algorithm AS layout, software, source
FROM validation WHERE kind = 'llm' ORDER BY gpus, id
"""


def parse_fields(raw: dict[str, str], bad: Callable[[str, str], EstimatorError], groups: dict[str, list[str]],
                 precisions: tuple[str, ...]) -> dict[str, Any]:
    """The llm-specific columns of a row, checked (one line per problem)."""
    if raw["model"] not in groups.get("model", []):
        raise bad("model", f"unknown model {raw['model']!r}; available: {', '.join(groups.get('model', []))}")
    if raw["precision"] not in precisions:
        raise bad("precision", f"{raw['precision']!r} is not one of {', '.join(precisions)}")
    layout = {}
    for col in LAYOUT_COLUMNS:
        text = raw[col]
        if not text.isdigit() or int(text) < 1:
            raise bad(col, f"{text!r} is not a positive integer")
        layout[col] = int(text)
    return {"model": raw["model"], "precision": raw["precision"], "layout": layout}


def overrides(row) -> list[str]:
    """The Hydra overrides of an llm row (after ``system=`` and ``fabric.nodes=``)."""
    lay = row.layout or {}
    return [f"model={row.model}", "parallelism=hybrid", f"precision={row.precision}",
            *(f"parallelism.{k}={lay[k]}" for k in LAYOUT_COLUMNS)]


def megatron_flops(model: dict[str, Any], global_batch: int) -> float:
    """Narayanan et al. 2021 Eq. (3): FLOPs of one step with full activation recomputation."""
    batch, s, layers, h = global_batch, model["seq_len"], model["num_layers"], model["hidden_size"]
    vocab = model["vocab_size"]
    return 96.0 * batch * s * layers * h * h * (1 + s / (6 * h) + vocab / (16 * layers * h))


def predict_row(row, tree: dict[str, Any]) -> tuple[float, str]:
    """(predicted TFLOP/s per GPU, the layout run) of one llm row from its composed config ``tree``."""
    from estimator.parallel.estimate import estimate_hybrid

    metrics, _ = estimate_hybrid(tree)
    gb = int(metrics["global_batch"])
    flops = megatron_flops(tree["model"], gb)
    predicted = flops / float(metrics["iter_time_s"]) / row.gpus / 1e12
    return predicted, str(metrics["layout"])
