"""Canonical on-disk form of a :class:`~estimator.workloads.graph.Workload`.

One JSON document per workload (``traces/<name>.workload.json``), keys sorted, written
atomically (temporary file + rename) so a failed write never leaves a partial trace behind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from estimator.errors import EstimatorError
from estimator.files import write_atomic
from estimator.workloads.graph import Workload

SUFFIX = ".workload.json"


def dumps(workload: Workload) -> str:
    return json.dumps(workload.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)


def save(workload: Workload, path: str | os.PathLike[str]) -> Path:
    """Validate and write ``workload`` atomically to ``path``."""
    workload.validate()
    path = Path(path)
    write_atomic(path, dumps(workload))
    return path


def load(path: str | os.PathLike[str]) -> Workload:
    """Read and validate a canonical workload; any problem is an :class:`EstimatorError`."""
    path = Path(path)
    from estimator.files import parse_json, read_input
    from estimator.workloads.importers.canonical import check_workload_doc

    data = parse_json(read_input(path, "workload"), path, "workload JSON")  # regular file, size-limited, strict
    try:
        check_workload_doc(data)
        return Workload.from_dict(data).validate()
    except EstimatorError as exc:
        raise EstimatorError(f"{path}: {exc}") from None
