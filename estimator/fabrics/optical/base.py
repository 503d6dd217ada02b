"""Shared machinery of the optical fabrics: affine cost models, memoisation, ``auto``.

Every optical algorithm here has a cost that is affine in the buffer size for a fixed group:
``time = fixed_s + per_byte_s * nbytes`` (the fixed part counts per-round latency and circuit
reconfiguration, the per-byte part the serialisation of every round on its circuits). A fabric
subclass implements :meth:`OpticalFabric.model` once per (collective, algorithm, group size); the
result is memoised, so :meth:`collective_cost` is two multiply-adds after the first call — the
timeline calls it for every gradient bucket of every estimate. ``algorithm="auto"`` evaluates every
offered algorithm (including each circuit configuration a fabric lists as a separate name) at the
requested size and keeps the fastest, reconfiguration included.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.errors import EstimatorError
from estimator.fabrics.base import CollectiveCost, Fabric


@dataclass(frozen=True)
class Affine:
    """Cost of one (collective, algorithm, group) independent of the buffer size."""

    fixed_s: float
    per_byte_s: float
    steps: int
    reconfig_s: float = 0.0  # part of fixed_s spent reconfiguring circuits

    def time(self, nbytes: float) -> float:
        return self.fixed_s + self.per_byte_s * nbytes

    def __add__(self, other: Affine) -> Affine:
        return Affine(
            self.fixed_s + other.fixed_s,
            self.per_byte_s + other.per_byte_s,
            self.steps + other.steps,
            self.reconfig_s + other.reconfig_s,
        )

    def scaled(self, byte_factor: float) -> Affine:
        """The same rounds moving ``byte_factor`` times the bytes."""
        return Affine(self.fixed_s, self.per_byte_s * byte_factor, self.steps, self.reconfig_s)


ZERO = Affine(0.0, 0.0, 0, 0.0)


def rounds_cost(alpha_s: float, reconfig_s: float, rounds: list[tuple[float, bool]]) -> Affine:
    """Rounds of ``(seconds per byte of the buffer, reconfigures?)``: each pays ``alpha_s``,
    plus ``reconfig_s`` when it sets up new circuits."""
    n_reconf = sum(1 for _, r in rounds if r)
    return Affine(
        fixed_s=alpha_s * len(rounds) + reconfig_s * n_reconf,
        per_byte_s=sum(b for b, _ in rounds),
        steps=len(rounds),
        reconfig_s=reconfig_s * n_reconf,
    )


def equal_rounds_cost(alpha_s: float, reconfig_s: float, seconds_per_byte: float, count: int) -> Affine:
    """:func:`rounds_cost` of ``count`` equal rounds, the first reconfiguring (a ring's rounds),
    without a list of rounds: the same sequential float sum (tested bit-identical)."""
    import numpy as np

    per_byte = float(np.cumsum(np.full(count, seconds_per_byte))[-1]) if count else 0
    reconf = 1 if count else 0
    return Affine(alpha_s * count + reconfig_s * reconf, per_byte, count, reconfig_s * reconf)


class OpticalFabric(Fabric):
    """A fabric whose collectives are memoised :class:`Affine` models."""

    COLLECTIVES: tuple[str, ...] = ()

    def __init__(self, config):
        super().__init__(config)
        self._models: dict[tuple[str, str, int], Affine] = {}  # a dict (not lru_cache): picklable

    def _model_cached(self, collective: str, algorithm: str, n: int) -> Affine:
        key = (collective, algorithm, n)
        hit = self._models.get(key)
        if hit is None:
            hit = self._models[key] = self._checked_model(collective, algorithm, n)
        return hit

    # subclasses -----------------------------------------------------------------------------
    def valid_algorithms(self, collective: str, n: int) -> tuple[str, ...]:
        """Algorithms usable for ``collective`` on a group of ``n`` (default: all offered)."""
        return self.algorithms(collective)

    def model(self, collective: str, algorithm: str, n: int) -> Affine:  # pragma: no cover
        raise NotImplementedError

    # shared -------------------------------------------------------------------------------
    def _checked_model(self, collective: str, algorithm: str, n: int) -> Affine:
        if n == 1:
            return ZERO
        if algorithm not in self.valid_algorithms(collective, n):
            offered = self.algorithms(collective)
            if algorithm in offered:
                raise EstimatorError(
                    f"fabric {self.name!r}: algorithm {algorithm!r} cannot run {collective} on {n} nodes; "
                    f"valid: {', '.join(self.valid_algorithms(collective, n))}"
                )
            raise EstimatorError(
                f"fabric {self.name!r}: unknown algorithm {algorithm!r} for {collective}; "
                f"offered: {', '.join(offered)}, default, auto"
            )
        return self.model(collective, algorithm, n)

    def check_endpoints(self, src: int, dst: int) -> None:
        for ep in (src, dst):
            if not 0 <= ep < self.nodes:
                raise EstimatorError(f"fabric {self.name!r}: endpoint {ep} outside 0..{self.nodes - 1}")

    def _group(self, collective: str, group_size: int | None) -> int:
        if collective not in self.COLLECTIVES:
            raise EstimatorError(
                f"fabric {self.name!r} does not model collective {collective!r}; it models {', '.join(self.COLLECTIVES)}"
            )
        n = self.nodes if group_size is None else int(group_size)
        self.check_size(n)
        return n

    def explicit_cost(self, collective: str, algorithm: str, n: int, nbytes: float) -> float:
        """Seconds of the explicit schedule priced step by step (fabrics that have one override)."""
        raise EstimatorError(f"fabric {self.name!r} has no explicit schedules (closed forms only)")

    def collective_cost(
        self, collective: str, nbytes: float, algorithm: str = "default", group_size: int | None = None,
        explicit: bool = False,
    ) -> CollectiveCost:
        """``explicit=True`` prices the explicit schedule instead of the closed form (slow)."""
        n = self._group(collective, group_size)
        if nbytes < 0:
            raise EstimatorError(f"collective bytes must be >= 0, got {nbytes!r}")
        if algorithm == "auto":
            options = self.valid_algorithms(collective, n)
            if not options:
                raise EstimatorError(f"fabric {self.name!r}: no algorithm can run {collective} on {n} nodes")
            algorithm = min(options, key=lambda a: (self._model_cached(collective, a, n).time(nbytes), a))
        elif algorithm == "default":
            valid = self.valid_algorithms(collective, n)
            if not valid:
                raise EstimatorError(f"fabric {self.name!r}: no algorithm can run {collective} on {n} nodes")
            algorithm = valid[0]
        m = self._model_cached(collective, algorithm, n)
        t = self.explicit_cost(collective, algorithm, n, nbytes) if explicit and n > 1 else m.time(nbytes)
        return CollectiveCost(collective, algorithm, n, float(nbytes), t, m.steps, m.reconfig_s)
