"""Packet-level OPSquare vs NVLink leaf-spine (seed 004), from the ``packetsim`` table."""

from estimator.reports.packetsim import SECTION

__all__ = ["SECTION"]
