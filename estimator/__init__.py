"""Trace-driven, end-to-end training performance estimator for ML cluster interconnects.

Data flow: workloads (capture / import) -> compute model -> timeline simulation -> fabric
(topology + collective algorithms) -> DuckDB store -> reports.

Notebook use::

    import estimator
    from estimator.estimate import estimate
    cfg = estimator.resolve_config(["model=resnet50", "fabric=lumorph", "fabric.nodes=256"])
    result = estimate(cfg)                    # .metrics, .collectives, .config_hash
    cost = estimator.make_fabric(cfg["fabric"]).collective_cost("all_reduce", 64 * 2**20, "auto")
"""

from typing import Any

from estimator._version import __version__
from estimator.errors import EstimatorError

__all__ = ["EstimatorError", "__version__", "make_fabric", "resolve_config"]


def resolve_config(overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """The resolved config (plain dict) for Hydra ``overrides``, as the CLI composes it."""
    from estimator.config import compose, to_container

    return to_container(compose(list(overrides)))


def __getattr__(name: str) -> Any:  # lazy: `import estimator` stays light for the CLI
    if name == "make_fabric":
        from estimator.fabrics.registry import make_fabric

        return make_fabric
    raise AttributeError(f"module 'estimator' has no attribute {name!r}")
