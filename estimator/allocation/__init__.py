"""Multi-tenant GPU allocation on a rack (Lumorph's first claim, seed 000 Sec. 3).

A seeded stream of tenant requests (:mod:`.requests`) is replayed against an allocation policy
(:mod:`.policies`): Lumorph places any number of free GPUs as a direct-connect topology, while
fixed-shape architectures can only hand out TPU-style 3D-torus cuboids or SiPAC/BCube groups.
:func:`.simulate.simulate` reports utilisation and rejected / fragmented requests.
"""

from estimator.allocation.policies import (
    POLICIES,
    BCubeGroupPolicy,
    LumorphPolicy,
    Policy,
    TorusSlicePolicy,
    make_policy,
)
from estimator.allocation.requests import Request, generate_requests
from estimator.allocation.simulate import AllocationReport, simulate

__all__ = [
    "POLICIES",
    "AllocationReport",
    "BCubeGroupPolicy",
    "LumorphPolicy",
    "Policy",
    "Request",
    "TorusSlicePolicy",
    "generate_requests",
    "make_policy",
    "simulate",
]
