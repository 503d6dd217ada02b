"""``custom``: a user-defined topology from a YAML file (``fabric.topology=topologies/xyz.yaml``).

Assumes what the file says (see :mod:`estimator.topology.loader`); the ``nodes`` ranks use the
file's first endpoints (``nodes`` may not exceed the file's endpoint count). Every algorithm is priced from its schedule.
A relative path is looked up in the working directory, then in the repository root.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.errors import EstimatorError, non_negative
from estimator.fabrics.base import FabricConfig
from estimator.fabrics.electrical import LinkFabric
from estimator.files import resolve_input
from estimator.topology.graph import Topology
from estimator.topology.loader import load_topology


@dataclass
class CustomConfig(FabricConfig):
    name: str = "custom"
    nodes: int = 8
    topology: str = "topologies/two_leaves.yaml"
    alpha_s: float = 0.0
    memory_bandwidth_Bps: float = 0.0

    def validate(self) -> None:
        super().validate()
        non_negative(self.alpha_s, "fabric.alpha_s")
        non_negative(self.memory_bandwidth_Bps, "fabric.memory_bandwidth_Bps")


class CustomTopologyFabric(LinkFabric):
    name = "custom"
    Config = CustomConfig

    def __init__(self, config: CustomConfig):
        super().__init__(config)
        topo = load_topology(resolve_input(config.topology))
        if config.nodes > topo.num_endpoints:
            raise EstimatorError(
                f"fabric.nodes={config.nodes} but {config.topology} has {topo.num_endpoints} endpoints"
            )
        self._topos[""] = topo

    def build_topology(self, algorithm: str) -> Topology:
        return load_topology(resolve_input(self.config.topology))

    def port_bandwidth(self) -> float:
        return self.topology().max_port_bandwidth()
