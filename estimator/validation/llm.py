"""Validation kind ``llm``: published large-model training throughput (``validation/llm.csv``).

A row is one hybrid-parallel (tensor x pipeline x context x data) training run of a decoder-only
model, as published, and is run as

  ``estimator estimate system=<system> fabric.nodes=<gpus> model=<model> parallelism=hybrid
  precision=<precision> parallelism.tp=<tp> parallelism.pp=<pp>
  parallelism.micro_batch_size=<micro_batch_size> parallelism.global_batch=<global_batch>
  [parallelism.cp=<cp>] [model.seq_len=<seq_len>] <overrides>``

(``parallelism.cp`` only when cp > 1, ``model.seq_len`` only when the column is set; the model's
shape and the rest of the run's settings -- framework, ZeRO stage, recompute, interleaving -- are
in ``overrides``). One header (:data:`COLUMNS`): the measured value in ``measured`` with its
``metric``, the source's FLOP count ``flops_formula``, the ``cp`` and ``seq_len`` columns and the
``unstated`` keys.

Metrics (both are throughputs: ``error_pct > 0`` means the model is optimistic):

* ``tflops_per_gpu``: the source's FLOPs of one step, counted with the source's own formula
  (``flops_formula``), divided by the *predicted* step time and the GPU count. The error is then
  exactly the error of the step time (inverted), whatever convention the source used.
* ``tokens_per_s_per_gpu``: ``global_batch x seq_len / step time / gpus`` (no FLOP convention).
  Sources that state a step (iteration) time are converted with this formula; ``measured_what``
  quotes the step time and shows the conversion.

FLOP formulas (per step of ``B`` sequences of ``s`` tokens; ``l`` layers, ``h`` hidden, ``V``
vocabulary, ``N`` parameters):

* ``megatron_eq3``: Narayanan et al. 2021 (SC21, arXiv 2104.04473) Sec. 5.1 Eq. (3), which counts
  full activation recomputation (one extra forward): ``96 B s l h^2 (1 + s / (6 h) + V / (16 l h))``.
* ``palm_6n_12lhqt``: Chowdhery et al. 2022 (PaLM, arXiv 2204.02311) App. B, the model FLOPs of
  MFU: ``B s (6 N + 12 l H Q s)`` with ``H Q = h`` (heads x head size). ``N`` counts every
  parameter of the model, embeddings and LM head included (PaLM does not say whether to exclude
  the input embedding; for Llama 3 405B that choice moves the count by 0.5 %).

``unstated`` lists, space-separated, the config keys whose published value the source does not
give; the row then uses the estimator's default or the value named in ``measured_what``, and the
error may partly reflect that choice (validation/llm_rows.md).

:func:`source_keys` names the documents (paper + table/figure, repository file, MLPerf
benchmark of a submitter) a row's ``source`` cites; two rows that share a key are points of the
same table, curve or run (the ``same-source`` rule of validation/README.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from estimator.errors import EstimatorError

MEASURED = "measured"  # the measured column (its unit: the row's metric)
METRICS = {"tflops_per_gpu": "TFLOP/s/GPU", "tokens_per_s_per_gpu": "tokens/s/GPU"}
COLUMNS = ("id", "system", "model", "precision", "gpus", "tp", "pp", "cp", "micro_batch_size", "global_batch",
           "seq_len", "metric", MEASURED, "flops_formula", "role", "overrides", "hardware", "software", "source",
           "measured_what", "unstated")
LAYOUT_COLUMNS = ("tp", "pp", "micro_batch_size", "global_batch")
# Keys the columns set (a row's overrides may not set them again).
COLUMN_KEYS = ("system", "model", "fabric.nodes", "precision", "parallelism", "parallelism.tp", "parallelism.pp",
               "parallelism.cp", "parallelism.dp", "parallelism.micro_batch_size", "parallelism.global_batch",
               "parallelism.microbatches", "model.seq_len", "output", "write")
CONFIG_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

# Where the report's "Against real hardware" section lists the rows.
ERRORS_SQL = """
SELECT id, role, gpus, overrides, measured, round(predicted, 1) AS predicted, unit, round(error_pct, 1) AS error_pct,
       algorithm AS layout, software, source
FROM validation WHERE kind = 'llm' ORDER BY gpus, id
"""


def metric(raw: Mapping[str, str]) -> tuple[str, str]:
    """(metric, unit) of an llm row."""
    return raw["metric"], METRICS.get(raw["metric"], "")


def parse_fields(raw: dict[str, str], bad: Callable[[str, str], EstimatorError], groups: dict[str, list[str]],
                 precisions: tuple[str, ...]) -> dict[str, Any]:
    """The llm-specific columns of a row, checked (one line per problem)."""
    if raw["model"] not in groups.get("model", []):
        raise bad("model", f"unknown model {raw['model']!r}; available: {', '.join(groups.get('model', []))}")
    if raw["precision"] not in precisions:
        raise bad("precision", f"{raw['precision']!r} is not one of {', '.join(precisions)}")
    layout = {col: _positive_int(raw[col], col, bad) for col in LAYOUT_COLUMNS}
    layout["cp"] = _positive_int(raw["cp"], "cp", bad)
    if raw["seq_len"]:
        layout["seq_len"] = _positive_int(raw["seq_len"], "seq_len", bad)
    name, formula = raw["metric"], raw["flops_formula"]
    if name not in METRICS:
        raise bad("metric", f"{name!r} is not one of {', '.join(METRICS)}")
    if name == "tflops_per_gpu" and formula not in FLOP_FORMULAS:
        raise bad("flops_formula", f"{formula!r} is not one of {', '.join(FLOP_FORMULAS)} "
                                   "(a tflops_per_gpu row names the source's FLOP count)")
    if name != "tflops_per_gpu" and formula:
        raise bad("flops_formula", f"must be empty for metric {name} (it counts no FLOPs), got {formula!r}")
    for key in raw["unstated"].split():
        if not CONFIG_KEY.match(key):
            raise bad("unstated", f"{key!r} is not a config key (e.g. parallelism.micro_batch_size)")
    return {"model": raw["model"], "precision": raw["precision"], "layout": layout}


def _positive_int(text: str, column: str, bad: Callable[[str, str], EstimatorError]) -> int:
    if not text.isdigit() or int(text) < 1:
        raise bad(column, f"{text!r} is not a positive integer")
    return int(text)


def overrides(row) -> list[str]:
    """The Hydra overrides of an llm row (after ``system=`` and ``fabric.nodes=``)."""
    lay = row.layout or {}
    out = [f"model={row.model}", "parallelism=hybrid", f"precision={row.precision}",
           *(f"parallelism.{k}={lay[k]}" for k in LAYOUT_COLUMNS)]
    if lay.get("cp", 1) > 1:
        out.append(f"parallelism.cp={lay['cp']}")
    if "seq_len" in lay:
        out.append(f"model.seq_len={lay['seq_len']}")
    return out


def megatron_flops(model: Mapping[str, Any], global_batch: int) -> float:
    """Narayanan et al. 2021 Eq. (3): FLOPs of one step with full activation recomputation."""
    batch, s, layers, h = global_batch, model["seq_len"], model["num_layers"], model["hidden_size"]
    vocab = model["vocab_size"]
    return 96.0 * batch * s * layers * h * h * (1 + s / (6 * h) + vocab / (16 * layers * h))


def palm_flops(model: Mapping[str, Any], global_batch: int) -> float:
    """PaLM App. B model FLOPs of one step: ``(6 N + 12 l h s)`` per token, ``N`` all parameters."""
    from estimator.parallel.spec import TransformerSpec

    s, layers, h = model["seq_len"], model["num_layers"], model["hidden_size"]
    params = TransformerSpec.from_cfg(model).params()
    return float(global_batch) * s * (6.0 * params + 12.0 * layers * h * s)


FLOP_FORMULAS: dict[str, Callable[[Mapping[str, Any], int], float]] = {
    "megatron_eq3": megatron_flops, "palm_6n_12lhqt": palm_flops}


def predicted_value(raw: Mapping[str, str], model: Mapping[str, Any], gpus: int, global_batch: int,
                    step_s: float) -> float:
    """The row's metric for a predicted step time of ``step_s`` seconds."""
    if not step_s > 0:
        raise EstimatorError(f"predicted step time {step_s!r} s is not positive")
    name = metric(raw)[0]
    if name == "tokens_per_s_per_gpu":
        return global_batch * model["seq_len"] / step_s / gpus
    return FLOP_FORMULAS[raw["flops_formula"]](model, global_batch) / step_s / gpus / 1e12


def predict_row(row, tree: dict[str, Any]) -> tuple[float, str]:
    """(the row's predicted metric, the layout run) of one llm row from its composed config ``tree``."""
    from estimator.parallel.estimate import estimate_hybrid

    metrics, _ = estimate_hybrid(tree)
    gb = int(metrics["global_batch"])
    predicted = predicted_value(row.raw, tree["model"], row.gpus, gb, float(metrics["iter_time_s"]))
    return predicted, str(metrics["layout"])


# ---- which document a row's source cites (the same-source rule) ---------------------------------
_ARXIV = re.compile(r"arXiv[:\s]*(\d{4}\.\d{4,5})", re.IGNORECASE)
_TABLE = re.compile(r"\b(Table|Figure|Fig\.)\s*(\d+)", re.IGNORECASE)
_REPO_FILE = re.compile(r"\b([A-Za-z0-9][\w.-]*/[\w.+-]+)@[0-9a-f]{7,40}:([^\s;,()]+)")
_URL = re.compile(r"https?://([^\s;,()]+)")
_MLPERF = re.compile(r"^([^/]+)/results/[^/]+/([^/]+)/")  # <submitter>/results/<system>/<benchmark>/


def source_keys(source: str) -> frozenset[str]:
    """The documents a ``source`` cites: ``arxiv:<id>#table<n>`` (``arxiv:<id>`` when no table or
    figure is named), ``<owner>/<repo>:<path>`` (any commit: another release of the same file is
    the same table), ``<owner>/<repo>:<submitter>/results/*/<benchmark>`` for MLPerf results (one
    submitter's runs of one benchmark at different sizes are one curve) and URLs."""
    keys: set[str] = set()
    tables = {f"#{'figure' if kind.lower().startswith('fig') else 'table'}{num}"
              for kind, num in _TABLE.findall(source)}
    for paper in _ARXIV.findall(source):
        keys.update({f"arxiv:{paper}{t}" for t in tables} or {f"arxiv:{paper}"})
    for repo, path in _REPO_FILE.findall(source):
        mlperf = _MLPERF.match(path)
        keys.add(f"{repo}:{mlperf.group(1)}/results/*/{mlperf.group(2)}" if mlperf else f"{repo}:{path}")
    for url in _URL.findall(source):
        keys.add(url.rstrip("./").removeprefix("www."))
    return frozenset(keys)


def shares_source(a: str, b: str) -> bool:
    """True when sources ``a`` and ``b`` cite a common table, curve or run. A paper cited without a
    table or figure on one side matches any table of that paper on the other (conservative)."""
    ka, kb = source_keys(a), source_keys(b)

    def papers(keys: frozenset[str]) -> set[str]:
        return {k.split("#")[0] for k in keys if k.startswith("arxiv:")}

    def bare(keys: frozenset[str]) -> set[str]:
        return {k for k in keys if k.startswith("arxiv:") and "#" not in k}

    return bool(ka & kb or bare(ka) & papers(kb) or bare(kb) & papers(ka))
