"""Many training jobs sharing one fabric: the cluster simulation (``estimator cluster``).

A layer above one estimate: a job trace (:mod:`.trace`: a file or published distributions) is
queued by a scheduler (:mod:`.scheduler`), placed on the fabric's GPUs (:mod:`.placement`) and
simulated event by event (:mod:`.simulate`); each running job is priced as one data-parallel
estimate (:mod:`.pricing`) whose communication is slowed by what it shares with the other jobs
(:mod:`.views`: what a job occupies on each fabric family; :mod:`.contention`: how shared
resources slow it, under three phase models). Fabrics never import this package.

    from estimator.cluster import simulate_cluster
    result = simulate_cluster(to_container(compose(["fabric=fattree", "fabric.nodes=256"])))
    result.run["jct_mean_s"], result.jobs[0]["slowdown"]
"""

from estimator.cluster.simulate import ClusterResult, simulate_cluster

__all__ = ["ClusterResult", "simulate_cluster"]
