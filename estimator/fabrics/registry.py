"""Find fabric backends by name through the ``estimator.fabrics`` entry-point group.

A third-party package adds a fabric by declaring, in its own ``pyproject.toml``::

    [project.entry-points."estimator.fabrics"]
    myfabric = "mypkg.fabric:MyFabric"

where ``MyFabric`` subclasses :class:`estimator.fabrics.base.Fabric`.
"""

from __future__ import annotations

import json
from functools import cache, lru_cache
from importlib.metadata import entry_points
from typing import Any

from estimator.errors import EstimatorError
from estimator.fabrics.base import Fabric

GROUP = "estimator.fabrics"


@cache
def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def available() -> list[str]:
    """Names of all registered fabrics whose module imports."""
    names = []
    for name in sorted(_entry_points()):
        try:
            fabric_class(name)
        except EstimatorError:
            continue
        names.append(name)
    return names


@cache
def fabric_class(name: str) -> type[Fabric]:
    eps = _entry_points()
    if name not in eps:
        raise EstimatorError(f"unknown fabric {name!r}; registered: {', '.join(sorted(eps)) or 'none'}")
    try:
        cls = eps[name].load()
    except (ImportError, AttributeError) as exc:
        raise EstimatorError(f"fabric {name!r} is registered but cannot be loaded ({exc})") from None
    if not (isinstance(cls, type) and issubclass(cls, Fabric)):
        raise EstimatorError(f"fabric {name!r}: entry point does not name a Fabric subclass")
    return cls


def shared_fabric(params: dict[str, Any]) -> Fabric:
    """Like :func:`make_fabric`, but one instance per distinct config in this process, so priced
    collectives and compiled schedules are reused across the points of a sweep (same fabric, other
    models, batches, sizes). Fabrics are treated as immutable once built."""
    return _shared(json.dumps(params, sort_keys=True, default=str))


def shared_fabric_json(params_json: str) -> Fabric:
    """:func:`shared_fabric` of a config already encoded as ``json.dumps(params, sort_keys=True,
    default=str)`` (a sweep batch encodes each point's fabric once for its row and its fabric)."""
    return _shared(params_json)


@lru_cache(maxsize=128)
def _shared(params_json: str) -> Fabric:
    return make_fabric(json.loads(params_json))


def make_fabric(params: dict[str, Any]) -> Fabric:
    """Build a fabric from its config mapping; ``params['name']`` selects the backend."""
    params = dict(params)
    name = params.get("name")
    if not name:
        raise EstimatorError("fabric config has no name")
    return fabric_class(str(name)).from_dict(params)
