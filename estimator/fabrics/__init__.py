"""Fabric backends (plugins) and the registry that finds them."""

from estimator.fabrics.base import CollectiveCost, Fabric, FabricConfig
from estimator.fabrics.registry import available, fabric_class, make_fabric, shared_fabric

__all__ = ["CollectiveCost", "Fabric", "FabricConfig", "available", "fabric_class", "make_fabric", "shared_fabric"]
