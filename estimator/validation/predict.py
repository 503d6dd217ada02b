"""Run validation rows through the model: the same code paths as the CLI commands a user would type.

* an ``nccl`` row is ``estimator collective system=<system> fabric.nodes=<gpus>
  collective=<collective> algorithm=auto bytes=<bytes> <overrides>``; the prediction is the
  nccl-tests bus bandwidth of the predicted time: ``algbw = bytes / time`` and ``busbw = algbw x
  factor`` with nccl-tests' factors (doc/PERFORMANCE.md in NVIDIA/nccl-tests): all_reduce
  2(n-1)/n; all_gather, reduce_scatter and all_to_all (n-1)/n; broadcast and reduce 1;
* a ``training`` row is ``estimator estimate model=<model> system=<system> fabric.nodes=<gpus>
  precision=<precision> batch_size=<batch_per_gpu> <overrides>``; the prediction is
  ``samples_per_s`` (all GPUs).

``error_pct = 100 (predicted - measured) / measured`` (signed: positive = the model is optimistic
for bandwidth/throughput). A row the model cannot run (e.g. a precision the device lacks) raises
one line naming the row.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from estimator.errors import EstimatorError
from estimator.validation import llm as _llm
from estimator.validation.rows import Row


@dataclass(frozen=True)
class Result:
    row: Row
    predicted: float  # same unit as row.measured
    algorithm: str  # nccl: the algorithm (/protocol) the model chose; training: the all-reduce algorithm used

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted - self.row.measured) / self.row.measured


def nccl_bus_factor(collective: str, n: int) -> float:
    """nccl-tests' busbw factor for ``n`` ranks (doc/PERFORMANCE.md)."""
    if n < 1:
        raise EstimatorError(f"a collective needs at least one rank, got {n}")
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if collective in ("broadcast", "reduce"):
        return 1.0
    raise EstimatorError(f"no nccl-tests bus-bandwidth factor for collective {collective!r}")


def base_overrides(row: Row) -> list[str]:
    """The Hydra overrides that reproduce the row's setup (without the per-size keys of nccl rows)."""
    out = [f"system={row.system}"] if row.system else []
    out.append(f"fabric.nodes={row.gpus}")
    if row.kind == "nccl":
        if not any(o.lstrip("+").startswith("algorithm=") for o in row.overrides):
            out.append("algorithm=auto")
    elif row.kind == "llm":
        out += _llm.overrides(row)
    else:
        out += [f"model={row.model}", f"precision={row.precision}", f"batch_size={row.batch_per_gpu}"]
    out += row.overrides
    return out


def command_line(row: Row) -> str:
    """The CLI command a user runs to reproduce the row's prediction."""
    if row.kind == "nccl":
        return " ".join(["estimator collective", *base_overrides(row), f"collective={row.collective}",
                         f"bytes={row.bytes:.0f}"])
    return " ".join(["estimator estimate", *base_overrides(row)])


@lru_cache(maxsize=256)
def _composed(overrides: tuple[str, ...]) -> dict[str, Any]:
    from estimator.config import compose, to_container

    return to_container(compose(list(overrides)))


def composed_config(row: Row) -> dict[str, Any]:
    """The resolved config a row is priced with (shared cache: do not modify it)."""
    return _composed(tuple(base_overrides(row)))


def row_class(row: Row) -> str | None:
    """The class of run of an llm row (:func:`estimator.validation.envelope.run_class`); None otherwise."""
    from estimator.validation.envelope import run_class

    return run_class(_composed(tuple(base_overrides(row)))) if row.kind == "llm" else None


def predict(row: Row) -> Result:
    try:
        if row.kind == "llm":
            return Result(row, *_llm.predict_row(row, copy.deepcopy(_composed(tuple(base_overrides(row))))))
        return _predict_nccl(row) if row.kind == "nccl" else _predict_training(row)
    except EstimatorError as exc:
        raise EstimatorError(f"{row.where}: row {row.id}: {exc}") from None


def _predict_nccl(row: Row) -> Result:
    from estimator.commands import collective

    tree = copy.deepcopy(_composed(tuple(base_overrides(row))))  # one composition per setup, not per size
    tree["collective"], tree["bytes"] = row.collective, row.bytes
    out = collective.run(tree)
    time_s = float(out["time_s"])
    if not time_s > 0:
        raise EstimatorError(f"predicted time {time_s!r} s is not positive")
    busbw = row.bytes / time_s * nccl_bus_factor(row.collective, int(out["nodes"]))
    protocol = out.get("protocol")  # NCCL protocol (LL/LL128/Simple) where the fabric reports one
    algorithm = str(out.get("algorithm", "")) + (f"/{protocol}" if protocol else "")
    return Result(row, busbw / 1e9, algorithm)


def _predict_training(row: Row) -> Result:
    from omegaconf import OmegaConf

    from estimator.commands import estimate

    cfg = OmegaConf.create(copy.deepcopy(_composed(tuple(base_overrides(row)))))
    out = estimate.run(cfg)
    return Result(row, float(out["samples_per_s"]), str(out.get("algorithm_used", "")))


def predict_all(rows: list[Row]) -> list[Result]:
    return [predict(r) for r in rows]
