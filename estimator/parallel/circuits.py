"""Circuit plan of a step on a fabric whose parallel groups get their own circuits (the OCS).

A fabric with circuits exposes ``circuit_ports()`` (optical ports per endpoint), ``group_ports(size,
shape)`` (ports per endpoint one group's circuits take; ``shape="chain"`` for a pipeline's
stage-to-stage circuits) and ``reconfiguration_s(current, target)`` (seconds to rewire). Every
rank belongs to one group of each parallel dimension, so the circuits of all dimensions it uses
compete for its ports. Our plan (simple and stated, not an optimum):

* the dimensions are taken in order of how often a step switches to them (``phases`` per step,
  most first; ties in the order tp, cp, ep, pp, dp, edp); each keeps its circuits wired for the whole
  job while the ports still hold them (``resident``, wired once at job start, not charged per step);
* a dimension that does not fit is ``rewired``: each of its phases pays two reconfigurations, to
  its circuits and back to the resident ones (a MEMS switch carries no traffic on the ports it
  switches, and the step waits for it: the time is exposed).

Phases per step (1F1B, :mod:`~estimator.parallel.step`): TP one per collective (they sit between
the layer's GEMMs); CP one per ring step (each K/V exchange); EP one per dispatch + combine pair (the expert MLP in between needs no circuits);
PP one per send (forward activations and backward gradients of each microbatch and virtual stage);
DP one (the gradient reduction and the updated-weight all-gather after the flush), plus one per
ZeRO-3 weight all-gather; expert-DP one.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.fabrics.base import Fabric

ORDER = ("tp", "cp", "ep", "pp", "dp", "edp")


@dataclass(frozen=True)
class CircuitPlan:
    resident: tuple[str, ...] = ()
    rewired: tuple[str, ...] = ()
    reconfigs_per_step: float = 0.0
    reconfig_s: float = 0.0  # seconds per step spent rewiring

    def label(self) -> str:
        if not self.resident and not self.rewired:
            return ""
        return f"resident {','.join(self.resident) or '-'}; rewired {','.join(self.rewired) or '-'}"


def has_circuits(fabric: Fabric) -> bool:
    return all(callable(getattr(fabric, h, None)) for h in ("circuit_ports", "group_ports", "reconfiguration_s"))


def plan(fabric: Fabric, groups: dict[str, tuple[int, float]]) -> CircuitPlan:
    """The plan for ``groups``: dimension -> (group size, phases per step); groups of one rank or
    with no phases need no circuits."""
    if not has_circuits(fabric):
        return CircuitPlan()
    active = [(d, size, phases) for d, (size, phases) in groups.items() if size > 1 and phases > 0]
    active.sort(key=lambda g: (-g[2], ORDER.index(g[0])))
    budget, resident, rewired, changes = fabric.circuit_ports(), [], [], 0.0
    for dim, size, phases in active:
        need = fabric.group_ports(size, "chain" if dim == "pp" else None)
        if need <= budget:
            budget -= need
            resident.append(dim)
        else:
            rewired.append(dim)
            changes += 2 * phases
    per_change = fabric.reconfiguration_s(None, "group circuits")
    return CircuitPlan(tuple(resident), tuple(rewired), changes, changes * per_change)
