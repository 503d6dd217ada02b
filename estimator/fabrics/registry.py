"""Find fabric backends by name through the ``estimator.fabrics`` entry-point group.

A third-party package adds a fabric by declaring, in its own ``pyproject.toml``::

    [project.entry-points."estimator.fabrics"]
    myfabric = "mypkg.fabric:MyFabric"

where ``MyFabric`` subclasses :class:`estimator.fabrics.base.Fabric`.
"""

from __future__ import annotations

import json
from functools import cache, lru_cache
from typing import Any

from estimator.errors import EstimatorError
from estimator.fabrics.base import Fabric

GROUP = "estimator.fabrics"

#: The fabrics this package declares in its own ``pyproject.toml`` entry points (a test checks the
#: two agree), loaded without scanning every installed distribution's metadata (~60 ms per CLI call).
BUILTIN = {
    "ideal": "estimator.fabrics.ideal:IdealFabric",
    "nvlink_leafspine": "estimator.fabrics.nvlink_leafspine:NvlinkLeafSpineFabric",
    "superpod": "estimator.fabrics.superpod:SuperPodFabric",
    "torus2d": "estimator.fabrics.torus2d:Torus2dFabric",
    "bcube": "estimator.fabrics.bcube:BCubeFabric",
    "fattree": "estimator.fabrics.fattree:FatTreeFabric",
    "ring": "estimator.fabrics.ring:RingFabric",
    "custom": "estimator.fabrics.custom:CustomTopologyFabric",
    "lumorph": "estimator.fabrics.lumorph:LumorphFabric",
    "sipac": "estimator.fabrics.sipac:SipacFabric",
    "terarack": "estimator.fabrics.terarack:TeraRackFabric",
    "opsquare": "estimator.fabrics.opsquare:OpsquareFabric",
    "ocs": "estimator.fabrics.ocs:OcsFabric",
}


@cache
def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=GROUP)}


def _load_builtin(target: str) -> Any:
    from importlib import import_module

    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


def available() -> list[str]:
    """Names of all registered fabrics whose module imports."""
    names = []
    for name in sorted(set(_entry_points()) | set(BUILTIN)):
        try:
            fabric_class(name)
        except EstimatorError:
            continue
        names.append(name)
    return names


@cache
def fabric_class(name: str) -> type[Fabric]:
    try:
        if name in BUILTIN:
            cls = _load_builtin(BUILTIN[name])
        else:
            eps = _entry_points()
            if name not in eps:
                raise EstimatorError(f"unknown fabric {name!r}; registered: {', '.join(sorted(eps)) or 'none'}")
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
