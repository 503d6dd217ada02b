"""The fabric plugin interface.

A fabric is a network cost backend: a topology plus technology parameters plus the collective
algorithms it offers. It registers under a name in the ``estimator.fabrics`` entry-point group
(see :mod:`.registry`), declares its parameters as a dataclass (``Config``, validated in
``__post_init__`` / :meth:`FabricConfig.validate`), and answers:

* which group sizes it supports (:meth:`Fabric.check_size`),
* which algorithms it offers per collective (:meth:`Fabric.algorithms`),
* what a collective costs (:meth:`Fabric.collective_cost`) and what a point-to-point transfer
  costs (:meth:`Fabric.p2p_time`).

Optional hooks for hybrid parallelism (:mod:`estimator.parallel.placement`, used when defined):
``group_cost(collective, nbytes, size, stride, algorithm) -> CollectiveCost`` prices one parallel
group of ``size`` endpoints ``stride`` apart where it sits, ``group_p2p_time(nbytes, stride)`` a
pipeline send; a fabric whose groups get their own circuits adds ``circuit_ports()``,
``group_ports(size, shape)`` and ``reconfiguration_s(current, target)``
(:mod:`estimator.parallel.circuits`).

Costs are in seconds; sizes in bytes. A collective's ``nbytes`` is the per-participant buffer
size as NCCL counts it (e.g. the all-reduce input size on every rank).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from estimator.errors import EstimatorError


@dataclass
class FabricConfig:
    """Parameters every fabric has. Subclasses add their own typed fields."""

    name: str = ""
    nodes: int = 8

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`EstimatorError` naming the bad parameter. Subclasses extend this."""
        if not isinstance(self.nodes, int) or isinstance(self.nodes, bool) or self.nodes < 1:
            raise EstimatorError(f"fabric.nodes must be a positive integer, got {self.nodes!r}")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise EstimatorError(f"fabric.{f.name} must be finite, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CollectiveCost:
    """The price of one collective on a fabric."""

    collective: str
    algorithm: str
    nodes: int
    nbytes: float
    time_s: float
    steps: int
    reconfig_s: float = 0.0  # part of time_s spent reconfiguring circuits
    protocol: str = ""       # NCCL protocol (LL, LL128, Simple) where the fabric models NCCL; "" otherwise

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Fabric(ABC):
    """Base class of every fabric backend."""

    name: ClassVar[str] = ""
    Config: ClassVar[type[FabricConfig]] = FabricConfig

    def __init__(self, config: FabricConfig):
        self.config = config

    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> Fabric:
        """Build from a plain mapping (e.g. a Hydra ``fabric`` node), with type checks."""
        allowed = {f.name: f for f in fields(cls.Config)}
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise EstimatorError(f"fabric {cls.name!r}: unknown parameter(s) {unknown}; known: {sorted(allowed)}")
        kwargs = {}
        for key, value in params.items():
            kwargs[key] = _coerce(cls.name, key, allowed[key].type, value)
        return cls(cls.Config(**kwargs))

    @property
    def nodes(self) -> int:
        return self.config.nodes

    # ---- what the fabric offers --------------------------------------------------------------
    def check_size(self, n: int) -> None:
        """Raise :class:`EstimatorError` if a group of ``n`` endpoints cannot exist here."""
        if n < 1 or n > self.nodes:
            raise EstimatorError(f"fabric {self.name!r}: group of {n} endpoints on a {self.nodes}-node fabric")

    @abstractmethod
    def algorithms(self, collective: str) -> tuple[str, ...]:
        """Algorithm names offered for ``collective`` (first = default)."""

    def default_algorithm(self, collective: str) -> str:
        algos = self.algorithms(collective)
        if not algos:
            raise EstimatorError(f"fabric {self.name!r} offers no algorithm for {collective!r}")
        return algos[0]

    # ---- costs ----------------------------------------------------------------------------
    @abstractmethod
    def collective_cost(
        self, collective: str, nbytes: float, algorithm: str = "default", group_size: int | None = None
    ) -> CollectiveCost:
        """Price ``collective`` of ``nbytes`` per participant over ``group_size`` endpoints
        (default: all). ``algorithm`` is a name from :meth:`algorithms`, ``"default"`` or ``"auto"``
        (the fastest valid one)."""

    @abstractmethod
    def p2p_time(self, src: int, dst: int, nbytes: float) -> float:
        """Seconds to move ``nbytes`` from endpoint ``src`` to ``dst`` on an idle fabric."""


_TYPE_NAMES = {"int": int, "float": float, "str": str, "bool": bool}


def _coerce(fabric: str, key: str, annotation: Any, value: Any) -> Any:
    """Convert YAML/CLI values to the declared field type, or raise a one-line error."""
    type_name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    target = _TYPE_NAMES.get(type_name.split("|")[0].strip())
    if target is None or value is None:
        return value
    if target is bool:
        if isinstance(value, bool):
            return value
        raise EstimatorError(f"fabric.{key} must be true or false, got {value!r}")
    if target is int:
        if isinstance(value, bool) or not (
            isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        ):
            raise EstimatorError(f"fabric.{key} must be an integer, got {value!r}")
        return int(value)
    if target is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            try:
                return float(value)
            except (TypeError, ValueError):
                raise EstimatorError(f"fabric.{key} must be a number, got {value!r}") from None
        return float(value)
    return str(value)
