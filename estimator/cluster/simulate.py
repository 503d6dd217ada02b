"""The event-driven cluster simulation: jobs arrive, queue, start and finish on one fabric.

Events are arrivals and finishes. At each event time: finished jobs leave (their GPUs and links
are freed), arrivals join the queue, the scheduler (:mod:`.scheduler`) starts what it can on the
GPUs the placement policy (:mod:`.placement`) gives, and every running job whose sharing changed
is re-priced: its communication stretch from :mod:`.contention`, its iteration time from
:mod:`.pricing` at that stretch (times its placement's factor from :mod:`.views`). A job's
remaining iterations run at its current iteration time until the next change. A job that starts
on circuits of its own first pays their set-up (``setup_s``, the OCS's reconfiguration).

Per job: queueing delay, job completion time (JCT = end - submit), its iteration time alone at its
placement and as run (shared), and its slowdown = (run time - set-up) / (iterations x iteration
time alone) >= 1. Per run: makespan, JCT statistics, mean queueing delay and slowdown, GPU
utilisation (GPUs of running jobs, time-averaged) and link utilisation (bytes/s the jobs put on
the fabric's links, counting each job's traffic at its duty cycle and stretch, over the links'
total bandwidth, time-averaged).
"""

from __future__ import annotations

import hashlib
import heapq
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from estimator import __version__
from estimator.cluster.contention import MODES, Contention
from estimator.cluster.placement import POLICIES, make_placer
from estimator.cluster.pricing import Iteration, JobPricer, Spec
from estimator.cluster.scheduler import SCHEDULERS, Queue, Waiting
from estimator.cluster.trace import DURATIONS, Job, check_fits, load_trace, synthetic_trace
from estimator.cluster.views import JobLoad, View, view_for
from estimator.config import config_hash, flatten
from estimator.errors import EstimatorError
from estimator.fabrics.registry import shared_fabric

#: config keys that determine a cluster run (its ``config_hash``), with the trace file's digest
CLUSTER_KEYS = ("cluster", "fabric", "device", "parallelism", "precision", "algorithm", "traces_dir")
KNOWN = ("name", "trace", "jobs", "seed", "models", "sizes", "size_weights", "duration", "load", "arrival_rate_per_h",
         "scheduler", "backfill_depth", "placement", "phases", "progress", "packet_scenario")
SLOWED = 1.001  # a job counts as slowed by others above this slowdown (0.1 %: the stretch rounding)


@dataclass
class Run:
    job: Job
    spec: Spec
    gpus: np.ndarray  # every GPU it occupies
    load: JobLoad
    alone: Iteration  # alone at its placement
    ref_iter_s: float  # alone at the reference placement
    start: float
    setup_end: float
    iterations: float
    remaining: float
    t_ref: float
    iter_s: float
    version: int = 0
    max_stretch: float = 1.0

    def advance(self, t: float) -> None:
        begin = max(self.t_ref, self.setup_end)
        if t > begin:
            self.remaining = max(0.0, self.remaining - (t - begin) / self.iter_s)
        self.t_ref = t

    @property
    def end(self) -> float:
        return max(self.t_ref, self.setup_end) + self.remaining * self.iter_s


@dataclass
class ClusterResult:
    run: dict[str, Any]
    jobs: list[dict[str, Any]] = field(default_factory=list)


def cluster_params(cfg: dict[str, Any]) -> dict[str, Any]:
    """The ``cluster`` config, unknown keys refused."""
    params = dict(cfg.get("cluster") or {})
    unknown = sorted(set(params) - set(KNOWN))
    if unknown:
        from estimator.config_checks import did_you_mean

        raise EstimatorError(f"cluster: unknown parameter {unknown[0]!r}{did_you_mean(unknown[0], KNOWN)}; "
                             f"known: {', '.join(KNOWN)}")
    for key, choices in (("phases", MODES), ("scheduler", SCHEDULERS), ("placement", POLICIES),
                         ("duration", DURATIONS)):  # every choice checked before anything is captured
        value = params.get(key)
        if value is not None and value not in choices:
            from estimator.config_checks import did_you_mean

            raise EstimatorError(f"cluster.{key} must be one of {', '.join(choices)}, got {value!r}"
                                 f"{did_you_mean(str(value), choices)}")
    seed = params.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise EstimatorError(f"cluster.seed must be an integer >= 0 (numpy seeds are non-negative), got {seed!r}")
    return params


def known_models() -> list[str]:
    from estimator.config import config_groups

    return config_groups().get("model", [])


def trace_jobs(cfg: dict[str, Any], gpus: int) -> tuple[list[Job], str, str]:
    """(jobs, where they come from, digest of the trace file or "")."""
    p = cluster_params(cfg)
    if p.get("trace"):
        from estimator.files import read_input, resolve_input

        path = resolve_input(str(p["trace"]))
        jobs = load_trace(path, known_models())
        source, digest = str(path), hashlib.sha256(read_input(path, "job trace")).hexdigest()[:16]
    else:
        models = _checked_models(p)
        jobs = synthetic_trace(p.get("jobs"), gpus, models, list(p.get("sizes") or []),
                               list(p.get("size_weights") or []), str(p.get("duration")), p.get("load"),
                               p.get("arrival_rate_per_h"), int(p.get("seed") or 0))
        source, digest = "synthetic", ""
    check_fits(jobs, gpus, source)
    return jobs, source, digest


def run_hash(cfg: dict[str, Any], digest: str) -> str:
    return config_hash({**{k: cfg.get(k) for k in CLUSTER_KEYS}, "trace_digest": digest})


def _ranges(ids: np.ndarray) -> str:
    """GPU ids as ranges: ``0-7,16-23``."""
    if not len(ids):
        return ""
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    parts = []
    for run in np.split(ids, breaks):
        parts.append(f"{run[0]}" if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(parts)


class Simulation:
    def __init__(self, cfg: dict[str, Any], jobs: list[Job], progress: bool = False):
        p = cluster_params(cfg)
        self.cfg, self.jobs = cfg, sorted(jobs, key=lambda j: (j.submit_s, j.id))
        self.fabric = shared_fabric(cfg.get("fabric") or {})
        self.gpus = self.fabric.nodes
        self.pricer = JobPricer(cfg, self.fabric)
        self.view: View = view_for(self.fabric)
        self.contention = Contention(self.view.resources, str(p.get("phases", "independent")))
        self.placer = make_placer(str(p.get("placement", "packed")), self.gpus, self.view.blocks,
                                  int(p.get("seed") or 0), self.fabric.config, self._block_load)
        self.queue = Queue(str(p.get("scheduler", "fifo")), p.get("backfill_depth", 500))
        self.progress = progress
        self.running: dict[int, Run] = {}
        self.records: list[dict[str, Any]] = []
        self._prepared: dict[int, tuple[Spec, int, int, float, int]] = {}
        self._heap: list[tuple[float, int, int]] = []
        self._gpu_s = self._alloc_s = self._link_bytes = 0.0
        self._busy_gpus = self._busy_alloc = 0  # of the running jobs
        self._rate: dict[int, float] = {}  # bytes/s each running job puts on the links now
        self._rate_total = 0.0
        self._in_setup: dict[int, Run] = {}  # jobs still setting up their circuits (no traffic yet)

    # ---- preparation ----------------------------------------------------------------------------
    def _prepare(self, job: Job) -> tuple[Spec, int, int, float, int]:
        """(workload, fabric group, GPUs occupied, alone run time estimate, iterations)."""
        where = f"job {job.id}" + (f" (row {job.row})" if job.row else "")
        try:
            spec = self.pricer.spec(job.model, job.workload, job.batch_size)
            group = self.pricer.group(job.gpus)
            alloc = self.placer.allocation(group)
            ref = self.pricer.iteration(spec, job.gpus, 1.0)
        except EstimatorError as exc:
            raise EstimatorError(f"{where}: {exc}") from None
        if alloc > self.gpus:
            raise EstimatorError(f"{where}: occupies {alloc} GPUs under placement {self.placer.__class__.__name__}, "
                                 f"more than the cluster's {self.gpus}")
        # a duration is work: the job's iterations at its compute alone (one replica, no communication),
        # the same on every fabric, so a slower fabric takes longer for the same job
        compute = self.pricer.iteration(spec, 1, 1.0)
        iterations = job.iterations or max(1, round(job.duration_s / compute.iter_s))
        return spec, group, alloc, iterations * ref.iter_s, iterations

    def _block_load(self, level: int, blocks: np.ndarray) -> np.ndarray:
        s = self.contention.sum_u
        return np.array([float(s[self.view.block_resources(level, int(b))].sum()) for b in blocks])

    # ---- events ---------------------------------------------------------------------------------
    def _start(self, w: Waiting, now: float) -> bool:
        job = self.jobs_by_id[w.job_id]
        spec, group, alloc, _, iterations = self._prepared[job.id]
        got = self.placer.place(group)
        if got is None:
            return False
        load = self.view.job_load(got[:group]) if group > 1 else JobLoad()
        alone = self.pricer.iteration(spec, job.gpus, load.factor)
        ref = self.pricer.iteration(spec, job.gpus, 1.0)
        setup = load.setup_s if group > 1 else 0.0
        run = Run(job, spec, got, load, alone, ref.iter_s, now, now + setup, float(iterations), float(iterations), now,
                  alone.iter_s)
        self.running[job.id] = run
        self._busy_gpus += job.gpus
        self._busy_alloc += len(got)
        if setup > 0:
            self._in_setup[job.id] = run
        self._touched |= self.contention.add(job.id, load, self._duty(run))
        return True

    def _duty(self, run: Run):
        def duty(f: float) -> float:
            return self.pricer.iteration(run.spec, run.job.gpus, run.load.factor * f).duty
        return duty

    def _finish(self, run: Run) -> None:
        del self.running[run.job.id]
        self._busy_gpus -= run.job.gpus
        self._busy_alloc -= len(run.gpus)
        self._set_rate(run.job.id, 0.0)
        self.placer.release(run.gpus)
        self._touched |= self.contention.remove(run.job.id)
        self._touched.discard(run.job.id)
        end = run.end
        busy = end - run.setup_end
        slowdown = busy / (run.iterations * run.alone.iter_s)
        if abs(slowdown - 1.0) < 1e-9:  # float noise of an unshared job
            slowdown = 1.0
        job = run.job
        leaves = len(np.unique(run.gpus // self.view.blocks[0])) if self.view.blocks else None
        pods = len(np.unique(run.gpus // self.view.blocks[1])) if len(self.view.blocks) > 1 else None
        self.records.append({
            "job_id": job.id, "model": run.spec.name, "gpus": job.gpus, "group_gpus": self._prepared[job.id][1],
            "alloc_gpus": len(run.gpus), "submit_s": job.submit_s, "start_s": run.start, "end_s": end,
            "queue_s": run.start - job.submit_s, "jct_s": end - job.submit_s, "run_s": end - run.start,
            "setup_s": run.setup_end - run.start, "iterations": int(run.iterations),
            "iter_time_ref_s": run.ref_iter_s, "iter_time_alone_s": run.alone.iter_s,
            "iter_time_shared_s": busy / run.iterations, "slowdown": slowdown,
            "placement_factor": run.alone.iter_s / run.ref_iter_s, "comm_stretch_max": run.max_stretch,
            "duty_alone": run.alone.duty, "leaves": leaves, "pods": pods, "gpu_ids": _ranges(run.gpus),
        })

    def _reprice(self, now: float) -> None:
        changed = self.contention.solve(self._touched)
        for key in changed | {k for k in self._touched if k in self.running}:
            run = self.running.get(key)
            if run is None:
                continue
            f = self.contention.stretch(key)
            iter_s = self.pricer.iteration(run.spec, run.job.gpus, run.load.factor * f).iter_s
            if iter_s != run.iter_s or run.version == 0:
                run.advance(now)
                run.iter_s = iter_s
                run.max_stretch = max(run.max_stretch, f)
                run.version += 1
                heapq.heappush(self._heap, (run.end, run.version, key))
            self._set_rate(key, self.contention.duty(key) / f * run.load.traffic_Bps)
        self._touched = set()

    def _set_rate(self, key: int, rate: float) -> None:
        self._rate_total += rate - self._rate.pop(key, 0.0)
        if rate:
            self._rate[key] = rate

    def _account(self, t0: float, t1: float) -> None:
        """GPU-seconds and link bytes of the running jobs over [t0, t1) (jobs setting up their
        circuits send nothing until their set-up ends)."""
        if t1 <= t0:
            return
        self._gpu_s += self._busy_gpus * (t1 - t0)
        self._alloc_s += self._busy_alloc * (t1 - t0)
        self._link_bytes += self._rate_total * (t1 - t0)
        for key, run in list(self._in_setup.items()):
            self._link_bytes -= self._rate.get(key, 0.0) * max(0.0, min(t1, run.setup_end) - t0)
            if run.setup_end <= t1 or key not in self.running:
                del self._in_setup[key]

    def run(self) -> list[dict[str, Any]]:
        self.jobs_by_id = {j.id: j for j in self.jobs}
        for job in self.jobs:  # every job checked (and its alone price known) before any event
            self._prepared[job.id] = self._prepare(job)
        self._touched: set[int] = set()
        arrivals, i, now = self.jobs, 0, self.jobs[0].submit_s
        bar = _progress(len(self.jobs), self.progress)
        while i < len(arrivals) or self.running or len(self.queue):
            t_finish = self._next_finish()
            t_arrive = arrivals[i].submit_s if i < len(arrivals) else np.inf
            t = min(t_finish, t_arrive)
            if t == np.inf:
                raise EstimatorError(f"cluster: {len(self.queue)} queued job(s) can never start "
                                     f"(placement {self.cfg['cluster'].get('placement')} cannot place them)")
            self._account(now, t)
            now = t
            while self._heap and self._heap[0][0] <= now:
                end, version, key = heapq.heappop(self._heap)
                run = self.running.get(key)
                if run is not None and version == run.version:
                    run.advance(now)
                    run.remaining = 0.0
                    self._finish(run)
                    bar(1)
            while i < len(arrivals) and arrivals[i].submit_s <= now:
                job = arrivals[i]
                _, _, alloc, estimate_s, _ = self._prepared[job.id]
                self.queue.push(job.id, job.submit_s, alloc, estimate_s)
                i += 1
            self.queue.schedule(now, self.placer.free_count(), lambda w, now=now: self._start(w, now), self._ends)
            self._reprice(now)
        bar(0, close=True)
        return self.records

    def _next_finish(self) -> float:
        while self._heap:
            end, version, key = self._heap[0]
            run = self.running.get(key)
            if run is not None and run.version == version:
                return end
            heapq.heappop(self._heap)
        return np.inf

    def _ends(self):
        return ((r.end, len(r.gpus)) for r in self.running.values())


def _progress(total: int, enabled: bool, after_s: float = 2.0):
    """A callable advancing a progress line on stderr once a run has taken ``after_s`` seconds
    (tqdm on a terminal; a plain line every 10 % otherwise, e.g. in a Snakemake log);
    ``bar(0, close=True)`` ends it."""
    if not enabled:
        return lambda n, close=False: None
    from tqdm import tqdm

    t0, state = time.monotonic(), {"done": 0}
    tty = sys.stderr.isatty()
    bar = tqdm(total=total, desc="cluster", unit="job", file=sys.stderr, disable=not tty, mininterval=0.5,
               delay=after_s)

    def advance(n: int, close: bool = False) -> None:
        before = state["done"]
        state["done"] += n
        bar.update(n)
        late = time.monotonic() - t0 >= after_s
        if not tty and n and late and state["done"] * 10 // total > before * 10 // total:
            print(f"cluster: {state['done']}/{total} jobs done after {time.monotonic() - t0:.0f} s",
                  file=sys.stderr, flush=True)
        if close:
            bar.close()

    return advance


def _percentile(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def simulate_cluster(cfg: dict[str, Any], progress: bool | None = None) -> ClusterResult:
    """Run the cluster simulation of a resolved config (``cfg``: ``to_container(compose(...))``)."""
    t0 = time.perf_counter()
    p = cluster_params(cfg)
    fabric = shared_fabric(cfg.get("fabric") or {})
    jobs, source, digest = trace_jobs(cfg, fabric.nodes)
    sim = Simulation(cfg, jobs, bool(p.get("progress", True)) if progress is None else progress)
    records = sim.run()
    records.sort(key=lambda r: r["job_id"])
    key = run_hash(cfg, digest)
    for r in records:
        r["config_hash"] = key
    jct = np.array([r["jct_s"] for r in records])
    slow = np.array([r["slowdown"] for r in records])
    first = min(r["submit_s"] for r in records)
    makespan = max(r["end_s"] for r in records) - first
    span = makespan if makespan > 0 else 1.0
    run = {
        "config_hash": key, "version": __version__, "created_at": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        **{k.replace(".", "_"): v for k, v in flatten({k: cfg.get(k) for k in CLUSTER_KEYS}).items()},
        "trace_source": source, "trace_digest": digest, "contention_model": sim.view.kind,
        "jobs": len(records), "gpus": fabric.nodes, "makespan_s": makespan,
        "jct_mean_s": float(jct.mean()), "jct_p50_s": _percentile(jct, 50), "jct_p99_s": _percentile(jct, 99),
        "queue_mean_s": float(np.mean([r["queue_s"] for r in records])),
        "slowdown_mean": float(slow.mean()), "slowdown_p99": _percentile(slow, 99), "slowdown_max": float(slow.max()),
        "jobs_slowed": int((slow > SLOWED).sum()),
        "setup_mean_s": float(np.mean([r["setup_s"] for r in records])),
        "placement_factor_mean": float(np.mean([r["placement_factor"] for r in records])),
        "gpu_utilisation": sim._gpu_s / (fabric.nodes * span),
        "gpu_alloc_utilisation": sim._alloc_s / (fabric.nodes * span),
        "link_utilisation": sim._link_bytes / (sim.view.capacity_Bps * span) if sim.view.capacity_Bps else None,
        "timelines": sim.pricer.timelines, "price_lookups": sim.pricer.lookups,
        "wall_s": time.perf_counter() - t0,
    }
    return ClusterResult(run, records)


def trace_models(cfg: dict[str, Any]) -> list[str]:
    """The zoo models a config's trace names (so a caller can capture missing workloads first)."""
    p = cluster_params(cfg)
    if p.get("trace"):
        from estimator.files import resolve_input

        return sorted({j.model for j in load_trace(resolve_input(str(p["trace"])), known_models()) if j.model})
    return sorted({str(m) for m in _checked_models(p)})


def _checked_models(p: dict[str, Any]) -> list[str]:
    """``cluster.models``, every name a zoo model (refused naming the key, before any capture)."""
    models = list(p.get("models") or [])
    for m in models:
        if m not in known_models():
            from estimator.config_checks import did_you_mean

            raise EstimatorError(f"cluster.models: unknown model {m!r}{did_you_mean(str(m), known_models())}")
    return models



def capture_missing(cfg: dict[str, Any], announce=None) -> None:
    """Capture the zoo models the trace names whose workloads are not in ``traces_dir`` yet."""
    from omegaconf import OmegaConf

    from estimator.config import compose, to_container
    from estimator.workloads.capture import ensure_workload

    for model in trace_models(cfg):
        model_cfg = to_container(compose([f"model={model}"]))["model"]
        ensure_workload(OmegaConf.create({**cfg, "model": model_cfg, "workload": None}), announce=announce)
