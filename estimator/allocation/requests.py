"""Tenant requests: how many GPUs, when they arrive, how long they stay.

:func:`generate_requests` draws a reproducible stream (``random.Random(seed)``): Poisson
arrivals (exponential inter-arrival times), exponential holding times, sizes uniform over a
given list (default: 1..max_size, so most sizes are not powers of two or cuboids — the case the
Lumorph paper's Fig. 2a illustrates).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from estimator.errors import EstimatorError, positive


@dataclass(frozen=True)
class Request:
    id: int
    size: int          # GPUs asked for
    arrival_s: float
    duration_s: float

    @property
    def departure_s(self) -> float:
        return self.arrival_s + self.duration_s


def generate_requests(
    count: int,
    seed: int = 0,
    sizes: Sequence[int] | None = None,
    max_size: int = 32,
    mean_interarrival_s: float = 1.0,
    mean_duration_s: float = 10.0,
) -> list[Request]:
    """``count`` requests, reproducible for a given ``seed``."""
    if count < 0:
        raise EstimatorError(f"allocation.requests must be >= 0, got {count}")
    positive(mean_interarrival_s, "allocation.mean_interarrival_s")
    positive(mean_duration_s, "allocation.mean_duration_s")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        # random.Random seeds with |seed|: -1 silently repeated seed 1's stream
        raise EstimatorError(f"allocation.seed must be an integer >= 0, got {seed!r}")
    if not sizes and max_size < 1:
        raise EstimatorError(f"allocation.max_size must be >= 1 (sizes are uniform over 1..max_size), got {max_size}")
    choices = list(sizes) if sizes else list(range(1, max_size + 1))
    if not choices or any(int(s) < 1 for s in choices):
        raise EstimatorError(f"allocation.sizes must be positive GPU counts, got {choices}")
    rng = random.Random(seed)
    t = 0.0
    out = []
    for i in range(count):
        t += rng.expovariate(1.0 / mean_interarrival_s)
        out.append(Request(i, int(rng.choice(choices)), t, rng.expovariate(1.0 / mean_duration_s)))
    return out


def fixed_requests(sizes: Sequence[int], duration_s: float = 1e9) -> list[Request]:
    """Requests that all arrive at t = 0, 1, 2, ... and stay (a static mix)."""
    return [Request(i, int(s), float(i), duration_s) for i, s in enumerate(sizes)]
