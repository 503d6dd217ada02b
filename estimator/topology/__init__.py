"""Topologies: endpoints, switches and directed links with routing (see :mod:`.graph`), standard
builders (:mod:`.builders`) and user-defined YAML topologies (:mod:`.loader`)."""

from estimator.topology.graph import ROUTINGS, Route, Topology

__all__ = ["ROUTINGS", "Route", "Topology"]
