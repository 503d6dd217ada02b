"""Stored ASTRA-sim runs and the estimator's live price of the same collective.

``validation/astrasim/collectives.csv`` holds ring all-reduces (and some all-gathers and
reduce-scatters) that ASTRA-sim's analytical backends actually ran -- on the Chakra ET files and
``network.yml`` / ``system.json`` that ``estimator export`` wrote for the row's ``overrides`` --
next to the estimator's time for the same overrides (``estimator collective ...
collective=<row's> algorithm=ring``). ``benchmarks/astrasim_compare.py`` reruns ASTRA-sim (``ASTRASIM_BIN``) and
rewrites the file; the test suite reprices every row live and compares it with the stored ASTRA-sim
time (no ASTRA-sim needed). It sits in a subfolder because ``validation/*.csv`` are measurements of
real hardware loaded by ``estimator validate``; these rows are simulator outputs.

Tolerances are the project's targets (issue 10): 5 % with one chunk, 10 % when the collective is
cut into several chunks (``fabric.chunks`` = ASTRA-sim ``preferred-dataset-splits``).

Rows of the ``congestion_aware`` backend on a Switch are not expected to agree: that backend moves a
message as one unit hop by hop (astra-network-analytical ``congestion_aware/network/Link.cpp``: a
link is busy ``size / bw`` and the message reaches the next device after ``latency + size / bw``,
only then is it sent on), so a Switch message is serialized twice, on NPU -> switch and on switch
-> NPU. The estimator's ``ideal`` switch (and the congestion-unaware backend) is cut-through and
serializes it once -- a deliberate choice (a real switch forwards packets, not whole messages).
:func:`store_and_forward_us` is that second serialization; those rows must agree once it is added.
"""

from __future__ import annotations

import csv
import shlex
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError

CSV_PATH = Path(__file__).resolve().parents[2] / "validation" / "astrasim" / "collectives.csv"
COLUMNS = ("backend", "setup", "collective", "topology", "npus", "chunks", "bytes", "overrides", "astrasim_us", "ours_us", "error",
           "astrasim_commit", "network_backend_commit", "how")
ONE_CHUNK_TOLERANCE = 0.05
MULTI_CHUNK_TOLERANCE = 0.10


def tolerance(chunks: int) -> float:
    return ONE_CHUNK_TOLERANCE if chunks == 1 else MULTI_CHUNK_TOLERANCE


def load(path: str | Path = CSV_PATH) -> list[dict[str, Any]]:
    """The rows of ``path`` with numeric columns converted; a malformed file is one error line."""
    path = Path(path)
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            if tuple(reader.fieldnames or ()) != COLUMNS:
                raise EstimatorError(f"{path}: header must be {','.join(COLUMNS)}")
            rows = list(reader)
    except OSError as exc:
        raise EstimatorError(f"{path}: cannot read ({exc.strerror or exc})") from None
    out = []
    for line, row in enumerate(rows, start=2):
        try:
            out.append({**row, "npus": int(row["npus"]), "chunks": int(row["chunks"]), "bytes": int(row["bytes"]),
                        "astrasim_us": float(row["astrasim_us"]), "ours_us": float(row["ours_us"]),
                        "error": float(row["error"])})
        except (TypeError, ValueError):
            raise EstimatorError(f"{path}:{line}: npus/chunks/bytes must be integers and times numbers") from None
    return out


def query(overrides: list[str], collective: str) -> list[str]:
    """The ``estimator collective`` overrides (all but ``bytes``) pricing a row."""
    return [*overrides, f"collective={collective}", "algorithm=ring"]


def ours_us(overrides: list[str], nbytes: int, collective: str = "all_reduce") -> float:
    """The estimator's ring ``collective`` time (us) for ``overrides`` (as ``estimator collective
    ... bytes=nbytes``; the composed config is cached per overrides, the size set on a copy)."""
    from omegaconf import open_dict

    from estimator.commands.collective import run
    from estimator.config import compose

    cfg = compose(query(overrides, collective))
    with open_dict(cfg):
        cfg.bytes = nbytes
    return run(cfg)["time_s"] * 1e6


def relative_error(ours: float, theirs: float) -> float:
    return (ours - theirs) / theirs


def store_and_forward_us(row: dict[str, Any]) -> float:
    """The congestion-aware backend's second serialization of every message of a ring all-reduce on a
    Switch (us; 0 for other rows): k chunks x 2(n-1) messages x M / (n k) bytes, once more at the
    switch's bandwidth."""
    if row["backend"] != "congestion_aware" or row["topology"] != "Switch" or row["collective"] != "all_reduce":
        return 0.0
    from estimator.config import compose

    bandwidth = float(compose(shlex.split(row["overrides"])).fabric.bandwidth_Bps)
    return 2 * (row["npus"] - 1) * row["bytes"] / row["npus"] / bandwidth * 1e6
