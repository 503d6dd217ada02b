"""Job traces: read from a file (CSV, Parquet, JSON) or drawn from published distributions.

A job is one data-parallel training run: it arrives at ``submit_s``, asks for ``gpus`` GPUs, trains
a zoo ``model`` (or the canonical ``workload`` file) for ``iterations`` iterations or for
``duration_s`` seconds of work: the iterations one replica computes in that time without any
communication (its compute is the same on every fabric, so the same trace asks every fabric for
the same work and a slower network shows as longer runs), at the model's per-GPU batch unless
``batch_size`` is given. ``layout`` is the parallel layout: ``data``
(the only one the cluster simulation prices).

File columns (one row per job; CSV with a header, Parquet, or JSON: a list of objects or
``{"jobs": [...]}``): ``id`` (integer, unique and increasing), ``submit_s`` (>= 0), ``gpus``
(>= 1), ``model`` or ``workload``, ``iterations`` or ``duration_s``, optional ``layout`` and
``batch_size``. Every problem is one line naming the file, the row and the job.

Synthetic traces (:func:`synthetic_trace`) draw sizes, run times and Poisson arrivals from the
distributions in ``conf/cluster/default.yaml`` (Philly / Helios, cited there), seeded.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from estimator.errors import EstimatorError
from estimator.files import excerpt, parse_json, read_input

COLUMNS = ("id", "submit_s", "gpus", "model", "workload", "layout", "iterations", "duration_s", "batch_size")
LAYOUTS = ("data",)
DURATIONS = ("philly", "helios")
# Helios GPU jobs (Hu et al. SC'21, artifact helios_cluster_summary.csv, all clusters): median and
# mean run time, seconds -> a lognormal through both
HELIOS_MEDIAN_S = 206.0
HELIOS_MEAN_S = 6651.681


@dataclass(frozen=True)
class Job:
    id: int
    submit_s: float
    gpus: int
    model: str = ""  # zoo model name ("" when ``workload`` names the file)
    workload: str = ""  # canonical workload file
    iterations: int | None = None
    duration_s: float | None = None  # run time alone; the simulation derives the iterations
    layout: str = "data"
    batch_size: int | None = None
    row: int = 0  # 1-based row of the source (0: synthetic)

    @property
    def label(self) -> str:
        return self.model or Path(self.workload).stem.removesuffix(".workload")


# ---- reading a file -------------------------------------------------------------------------------
def load_trace(path: str | Path, known_models: Iterable[str]) -> list[Job]:
    """Read and check a trace file; every problem is one :class:`EstimatorError` line."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".json"):
        raise EstimatorError(f"{path}: a job trace must be .csv, .parquet or .json")
    data = read_input(path, "job trace")
    rows = _json_rows(data, path) if suffix == ".json" else _table_rows(data, path, suffix)
    if not rows:
        raise EstimatorError(f"{path}: the job trace has no jobs")
    jobs = [_job(r, i + 1, path, set(known_models)) for i, r in enumerate(rows)]
    check_ids(jobs, path)
    return jobs


def _table_rows(data: bytes, path: Path, suffix: str) -> list[dict[str, Any]]:
    import polars as pl

    try:
        if suffix == ".csv":  # every cell as text: values are checked (and named) row by row below
            frame = pl.read_csv(io.BytesIO(data), infer_schema=False)
        else:
            frame = pl.read_parquet(io.BytesIO(data))
    except Exception as exc:  # polars raises many types for a malformed file
        raise EstimatorError(f"{path}: not a readable {suffix[1:]} job trace ({str(exc).splitlines()[0][:120]})") from None
    # "id, submit_s, gpus" as typed by hand: names stripped (cells are stripped below); polars renames a
    # repeated name to <name>_duplicated_<n>
    names = [re.sub(r"_duplicated_\d+$", "", c.strip()) if suffix == ".csv" else c.strip() for c in frame.columns]
    if len(set(names)) < len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise EstimatorError(f"{path}: column {excerpt(dup, 30)} appears twice")
    frame = frame.rename(dict(zip(frame.columns, names, strict=True)))
    _check_columns(frame.columns, path)
    return frame.to_dicts()


def _json_rows(data: bytes, path: Path) -> list[dict[str, Any]]:
    doc = parse_json(data, path, "job trace")
    if isinstance(doc, dict) and set(doc) == {"jobs"}:
        doc = doc["jobs"]
    if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
        raise EstimatorError(f"{path}: a JSON job trace is a list of job objects (or {{\"jobs\": [...]}})")
    for r in doc:
        _check_columns(list(r), path)
    return doc


def _check_columns(columns: list[str], path: Path) -> None:
    from estimator.config_checks import did_you_mean

    for c in columns:
        if c not in COLUMNS:
            raise EstimatorError(f"{path}: unknown column {excerpt(c, 30)}{did_you_mean(c, COLUMNS)}; "
                                 f"columns: {', '.join(COLUMNS)}")
    missing = [c for c in ("id", "submit_s", "gpus") if c not in columns]
    if missing:
        raise EstimatorError(f"{path}: the job trace lacks column(s) {', '.join(missing)}")


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _number(value: Any, where: str, key: str, integer: bool) -> float | int | None:
    if _blank(value):
        return None
    if isinstance(value, bool):
        raise EstimatorError(f"{where}: {key} must be a number, got {value!r}")
    try:
        number = float(value) if not isinstance(value, int) else value
    except (TypeError, ValueError):
        raise EstimatorError(f"{where}: {key} must be a number, got {excerpt(str(value), 30)}") from None
    if isinstance(number, float) and not math.isfinite(number):
        raise EstimatorError(f"{where}: {key} must be finite, got {value!r}")
    if integer:
        if float(number) != int(number):
            raise EstimatorError(f"{where}: {key} must be a whole number, got {value!r}")
        return int(number)
    return float(number)


def _job(raw: dict[str, Any], row: int, path: Path, models: set[str]) -> Job:
    where = f"{path}: row {row}"
    job_id = _number(raw.get("id"), where, "id", True)
    if job_id is None or job_id < 0:
        raise EstimatorError(f"{where}: id must be a non-negative integer, got {raw.get('id')!r}")
    where = f"{path}: row {row} (job {job_id})"
    submit = _number(raw.get("submit_s"), where, "submit_s", False)
    if submit is None or submit < 0:
        raise EstimatorError(f"{where}: submit_s must be a time >= 0 s, got {raw.get('submit_s')!r}")
    gpus = _number(raw.get("gpus"), where, "gpus", True)
    if gpus is None or gpus < 1:
        raise EstimatorError(f"{where}: gpus must be an integer >= 1, got {raw.get('gpus')!r}")
    model = "" if _blank(raw.get("model")) else str(raw["model"]).strip()
    workload = "" if _blank(raw.get("workload")) else str(raw["workload"]).strip()
    if bool(model) == bool(workload):
        raise EstimatorError(f"{where}: give exactly one of model and workload")
    if model and model not in models:
        from estimator.config_checks import did_you_mean

        raise EstimatorError(f"{where}: unknown model {excerpt(model, 30)}{did_you_mean(model, models)}; "
                             f"available: {', '.join(sorted(models))}")
    iterations = _number(raw.get("iterations"), where, "iterations", True)
    duration = _number(raw.get("duration_s"), where, "duration_s", False)
    if (iterations is None) == (duration is None):
        raise EstimatorError(f"{where}: give exactly one of iterations and duration_s")
    if iterations is not None and iterations < 1:
        raise EstimatorError(f"{where}: iterations must be >= 1, got {iterations}")
    if duration is not None and duration <= 0:
        raise EstimatorError(f"{where}: duration_s must be > 0 s, got {duration!r}")
    layout = "data" if _blank(raw.get("layout")) else str(raw["layout"]).strip()
    if layout not in LAYOUTS:
        raise EstimatorError(f"{where}: layout {excerpt(layout, 30)} is not supported (the cluster simulation "
                             f"prices data-parallel jobs: layout {', '.join(LAYOUTS)})")
    batch = _number(raw.get("batch_size"), where, "batch_size", True)
    if batch is not None and batch < 1:
        raise EstimatorError(f"{where}: batch_size must be >= 1, got {batch}")
    return Job(int(job_id), float(submit), int(gpus), model, workload, iterations, duration, layout, batch, row)


def check_ids(jobs: list[Job], source: str | Path) -> None:
    """Job ids must be unique and listed in increasing order."""
    for prev, job in zip(jobs, jobs[1:], strict=False):
        if job.id == prev.id:
            raise EstimatorError(f"{source}: row {job.row}: duplicate job id {job.id} (also row {prev.row})")
        if job.id < prev.id:
            raise EstimatorError(f"{source}: row {job.row}: job ids must increase; id {job.id} comes after {prev.id}")


def check_fits(jobs: list[Job], gpus: int, source: str) -> None:
    """Every job must fit the cluster."""
    for job in jobs:
        if job.gpus > gpus:
            where = f"{source}: row {job.row} (job {job.id})" if job.row else f"job {job.id}"
            raise EstimatorError(f"{where}: asks for {job.gpus} GPUs, more than the cluster's {gpus}")


# ---- synthetic traces -----------------------------------------------------------------------------
def mean_duration_s(kind: str) -> float:
    """Mean alone run time of a duration distribution (:data:`DURATIONS`)."""
    if kind == "philly":  # E[10^U(a, b)] minutes = (10^b - 10^a) / ((b - a) ln 10)
        def mean_pow(a: float, b: float) -> float:
            return (10**b - 10**a) / ((b - a) * math.log(10))
        return 60.0 * (0.8 * mean_pow(1.5, 3.0) + 0.2 * mean_pow(3.0, 4.0))
    if kind == "helios":
        return HELIOS_MEAN_S
    raise EstimatorError(f"cluster.duration must be one of {', '.join(DURATIONS)}, got {kind!r}")


def _durations(rng: np.random.Generator, kind: str, count: int) -> np.ndarray:
    if kind == "philly":
        long = rng.random(count) >= 0.8
        exponent = np.where(long, rng.uniform(3.0, 4.0, count), rng.uniform(1.5, 3.0, count))
        return 60.0 * 10.0**exponent
    sigma = math.sqrt(2.0 * math.log(HELIOS_MEAN_S / HELIOS_MEDIAN_S))
    return rng.lognormal(math.log(HELIOS_MEDIAN_S), sigma, count)


def size_mix(sizes: list[int], weights: list[float], gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """The job-size distribution restricted to sizes the cluster holds (weights renormalised)."""
    if not sizes or len(sizes) != len(weights):
        raise EstimatorError("cluster.sizes and cluster.size_weights must be non-empty lists of the same length")
    s = np.asarray(sizes, dtype=np.int64)
    w = np.asarray(weights, dtype=float)
    if (s < 1).any() or not np.isfinite(w).all() or (w < 0).any():
        raise EstimatorError("cluster.sizes must be >= 1 and cluster.size_weights >= 0")
    keep = s <= gpus
    if not keep.any() or w[keep].sum() <= 0:
        raise EstimatorError(f"cluster.sizes: no job size with a positive weight fits the cluster's {gpus} GPUs")
    return s[keep], w[keep] / w[keep].sum()


def synthetic_trace(count: int, gpus: int, models: list[str], sizes: list[int], weights: list[float],
                    duration: str, load: float | None, rate_per_h: float | None, seed: int) -> list[Job]:
    """``count`` jobs: sizes from the mix, alone run times from ``duration``, Poisson arrivals at
    ``rate_per_h`` or at the rate that offers ``load`` x ``gpus`` GPUs of work; reproducible per seed."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise EstimatorError(f"cluster.jobs must be a positive integer, got {count!r}")
    if not models:
        raise EstimatorError("cluster.models must name at least one model")
    s, w = size_mix(sizes, weights, gpus)
    mean_dur = mean_duration_s(duration)
    if rate_per_h is not None:
        if not (isinstance(rate_per_h, int | float) and 0 < rate_per_h < math.inf):
            raise EstimatorError(f"cluster.arrival_rate_per_h must be a positive number, got {rate_per_h!r}")
        rate = float(rate_per_h) / 3600.0
    else:
        if not (isinstance(load, int | float) and not isinstance(load, bool) and 0 < load < math.inf):
            raise EstimatorError(f"cluster.load must be a positive number, got {load!r}")
        rate = float(load) * gpus / (float(s @ w) * mean_dur)
    rng = np.random.default_rng(seed)
    size = rng.choice(s, size=count, p=w)
    dur = _durations(rng, duration, count)
    gaps = rng.exponential(1.0 / rate, count)
    submit = np.cumsum(gaps) - gaps[0]  # the first job arrives at t = 0
    which = rng.integers(0, len(models), count)
    return [Job(i, float(submit[i]), int(size[i]), str(models[which[i]]), "", None, float(dur[i]))
            for i in range(count)]


def with_iterations(job: Job, iterations: int) -> Job:
    return replace(job, iterations=max(1, int(iterations)))
