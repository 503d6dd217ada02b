"""Sweep kind ``llm``: hybrid-parallel estimates (``parallelism=hybrid``, :mod:`estimator.parallel`).

Like ``estimate`` (same keys, rows in ``estimates`` and ``collectives``), but a point needs no
captured workload file: the layer shards are captured on the meta device inside the worker.
"""

from __future__ import annotations

from typing import Any

from estimator.sweep.kinds import Kind, _estimate_keys, _validate_estimate, _write_estimates, register


def _llm_batch(items: list[tuple[dict[str, Any], str]]) -> list[Any]:
    from estimator.estimate import estimate

    return [estimate(cfg) for cfg, _ in items]


register(Kind("llm", (*_estimate_keys(), "framework"), "estimates", _llm_batch, _write_estimates, _validate_estimate))
