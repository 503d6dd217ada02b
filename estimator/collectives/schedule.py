"""Explicit collective schedules: the ground truth every fabric prices.

An algorithm turns (collective, n, nbytes) into a :class:`Schedule`: a sequence of
:class:`Step` s; the transfers of one step run concurrently, steps run one after another.
A fabric prices a step by routing its transfers onto links/circuits/wavelengths (transfers
sharing a link share its bandwidth) and adds the reduction work at the device's memory bandwidth.
Closed-form costs are fast paths, tested equal to the priced schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Transfer:
    """``nbytes`` from endpoint ``src`` to ``dst``; ``reduce_bytes`` of it is reduced on arrival."""

    src: int
    dst: int
    nbytes: float
    reduce_bytes: float = 0.0


@dataclass(frozen=True, slots=True)
class Step:
    """Concurrent transfers. ``reconfigure`` marks a step that needs new circuits first (priced at
    the fabric's ``PricingParams.reconfig_s``); ``extra_s`` is any further fixed time this step
    costs (e.g. a slower reconfiguration of some steps only)."""

    transfers: tuple[Transfer, ...]
    reconfigure: bool = False
    extra_s: float = 0.0

    @property
    def max_bytes(self) -> float:
        return max((t.nbytes for t in self.transfers), default=0.0)


@dataclass(frozen=True)
class Schedule:
    collective: str
    algorithm: str
    nodes: int
    nbytes: float
    steps: tuple[Step, ...] = field(default_factory=tuple)

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def bytes_sent(self) -> dict[int, float]:
        """Total bytes each endpoint sends over the whole schedule."""
        out: dict[int, float] = {}
        for step in self.steps:
            for t in step.transfers:
                out[t.src] = out.get(t.src, 0.0) + t.nbytes
        return out
