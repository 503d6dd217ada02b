"""Communication hidden behind compute, and what hiding it costs.

A collective of ``comm`` seconds that runs while ``window`` seconds of compute run is exposed beyond
that window; the part it hides is not free: NCCL's kernels hold SMs and HBM bandwidth, so the
compute it overlaps runs slower by ``interference`` of the overlapped time
(``parallelism.comm_interference``; the data-parallel timeline charges the same, see
``estimator/timeline/dataparallel.py``).
"""

from __future__ import annotations


def behind(comm: float, window: float, interference: float = 0.0) -> tuple[float, float]:
    """(seconds the step grows by, of which the interference charge) for ``comm`` behind ``window``."""
    slowed = interference * min(comm, window)
    return max(0.0, comm - window) + slowed, slowed
