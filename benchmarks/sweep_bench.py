"""Sweep throughput and memory, CLI latency and imported-DAG estimate time (issue #13).

    python benchmarks/sweep_bench.py                       # everything except the 1,000,000-point sweep
    python benchmarks/sweep_bench.py --sweeps 20000 100000 1000000 --cli --dag
    python benchmarks/sweep_bench.py --root /path/to/other/checkout   # the same on another checkout

* **Sweeps** run ``estimator sweep sweep=bench_N`` as a fresh subprocess of the given checkout (a
  temporary copy of its ``conf/`` with one extra grid: ResNet50 on the ideal switch at 1,024 GPUs,
  100 bandwidths x 100 latencies x N/10,000 DDP bucket caps, so every point is distinct and no
  result comes from a cache), into a fresh DuckDB file. Wall time includes Python start-up,
  composition, starting the workers (forked processes, or Ray with ``--extra ray.local_pool=false``)
  and writing every row. Peak RSS is sampled every 0.1 s (psutil) for the driver alone and for the
  driver with all its descendants (workers; Ray's GCS and raylet). ``--rss-log`` writes the RSS
  over time; ``--limit-s`` stops a sweep (SIGTERM) and counts the rows stored by then. Estimates/min is rows stored / wall time; "on 2 busy cores" is rows per CPU-second
  of the whole process tree x 2 (what two cores would give if nothing else ran; the machine these
  figures were taken on was shared).
* **CLI**: wall time of ``estimator estimate model=resnet50 fabric=ideal fabric.nodes=8``
  (min and median of 10 runs after one warm-up), with bytecode caching and with this environment's.
* **DAG**: the TopoOpt ``100vgg_16.fbuf`` fixture imported and replicated 64 times over disjoint
  device ranges (1,024 devices), then estimated on ``fabric=ideal fabric.nodes=1024`` in one
  process (min of 5 warm runs; the first, cold one is printed too).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

FIXTURE = Path("/work/shared/fixtures/topoopt/100vgg_16.fbuf")


def grid_yaml(points: int) -> str:
    caps = max(1, points // 10_000)
    bws = [50e9 + 1e9 * i for i in range(100)]
    alphas = [round(0.5e-6 + 0.01e-6 * i, 12) for i in range(100)]
    return (
        f"name: bench_{points}\n"
        "grid:\n"
        "  model: [resnet50]\n"
        "  fabric: [ideal]\n"
        "  fabric.nodes: [1024]\n"
        f"  fabric.bandwidth_Bps: [{', '.join(repr(b) for b in bws)}]\n"
        f"  fabric.alpha_s: [{', '.join(repr(a) for a in alphas)}]\n"
        f"  parallelism.bucket_cap_bytes: [{', '.join(str(2**20 * (5 + 5 * i)) for i in range(caps))}]\n"
    )


def _status_mib(pid: int) -> dict[str, float]:
    """RssAnon / RssFile / RssShmem of a process in MiB (``/proc/<pid>/status``; Linux only)."""
    out: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("RssAnon", "RssFile", "RssShmem")):
                    name, kib = line.split(":")
                    out[name] = int(kib.split()[0]) / 1024
    except OSError:
        pass
    return out


def run_sampled(cmd: list[str], env: dict[str, str], cwd: Path, limit_s: float | None = None,
                rss_log: Path | None = None):
    """Wall time, peak driver RSS (MiB), peak tree RSS (MiB), exit status, CPU seconds of the
    process tree (user + system of the driver and of every descendant, each sampled every 0.1 s).
    ``rss_log``: every 2 s one CSV line (seconds, the driver's peak RSS since the last line, its RSS
    and its anonymous / file / shared memory parts, the largest other process of the tree and the whole tree, MiB)."""
    t0 = time.perf_counter()
    log = rss_log.open("w") if rss_log else None
    if log:
        log.write("t_s,driver_peak_2s,driver_rss,driver_anon,driver_file,driver_shmem,largest_child,largest_child_anon,tree_rss\n")
    next_log, window_peak = 0.0, 0
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    p = psutil.Process(proc.pid)
    peak_driver = peak_tree = 0
    cpu_seen: dict[tuple[int, float], float] = {}
    status = None
    while status is None:
        pid, wstatus, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            status = proc.returncode = os.waitstatus_to_exitcode(wstatus)
            # wait4's usage includes the children the driver reaped (a process pool's workers), which
            # the samples below count already: the driver's own time is its last sample (0.1 s old)
            cpu_seen.setdefault((pid, 0.0), usage.ru_utime + usage.ru_stime)
            break
        try:
            t = p.cpu_times()
            cpu_seen[(proc.pid, 0.0)] = t.user + t.system
            for c in p.children(recursive=True):
                try:
                    t = c.cpu_times()
                    cpu_seen[(c.pid, c.create_time())] = t.user + t.system
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        if limit_s is not None and time.perf_counter() - t0 > limit_s:
            proc.terminate()  # stop a capped run (the sweep ends its Ray on SIGTERM)
            limit_s = None
        try:
            rss = p.memory_info().rss
            tree = rss
            for c in p.children(recursive=True):
                try:
                    tree += c.memory_info().rss
                except psutil.Error:
                    pass
            peak_driver, peak_tree = max(peak_driver, rss), max(peak_tree, tree)
            window_peak = max(window_peak, rss)
            if log and time.perf_counter() - t0 >= next_log:
                next_log += 2.0
                kids = [(c.memory_info().rss, c.pid) for c in p.children(recursive=True)]
                big = max(kids, default=(0, 0))
                d = _status_mib(proc.pid)
                log.write(f"{time.perf_counter() - t0:.1f},{window_peak / 2**20:.1f},{rss / 2**20:.1f},{d.get('RssAnon', 0):.1f},"
                          f"{d.get('RssFile', 0):.1f},{d.get('RssShmem', 0):.1f},{big[0] / 2**20:.1f},"
                          f"{_status_mib(big[1]).get('RssAnon', 0) if big[1] else 0:.1f},{tree / 2**20:.1f}\n")
                log.flush()
                window_peak = 0
        except psutil.Error:
            pass
        time.sleep(0.1)
    wall = time.perf_counter() - t0
    if log:
        log.close()
    cpu = sum(cpu_seen.values())
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode and proc.returncode != -15 and proc.returncode != 130:
        print(err[-2000:], file=sys.stderr)
    return wall, peak_driver / 2**20, peak_tree / 2**20, proc.returncode, cpu


def bench_sweep(root: Path, points: int, tmp: Path, extra: list[str], limit_s: float | None = None,
                rss_log: Path | None = None) -> None:
    conf = tmp / "conf"
    if not conf.exists():
        shutil.copytree(root / "conf", conf)
    (conf / "sweep" / f"bench_{points}.yaml").write_text(grid_yaml(points))
    store = tmp / f"bench_{points}.duckdb"
    store.unlink(missing_ok=True)
    env = {**os.environ, "ESTIMATOR_CONF": str(conf), "PYTHONPATH": str(root), "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = [sys.executable, "-m", "estimator.cli", "sweep", f"sweep=bench_{points}", f"store={store}",
           f"traces_dir={root / 'traces'}", *extra]
    log = rss_log.with_name(f"{rss_log.stem}_{points}{rss_log.suffix}") if rss_log else None
    wall, driver, tree, rc, cpu = run_sampled(cmd, env, root, limit_s, log)
    rows = 0
    if store.exists():
        import duckdb

        with duckdb.connect(str(store), read_only=True) as con:
            rows = con.execute("SELECT count(*) FROM estimates").fetchone()[0]
    per_cpu = f"{rows / cpu * 60 * 2:,.0f}/min on 2 busy cores (CPU {cpu:.0f} s)" if cpu else "CPU ?"
    print(f"sweep {points:>9,} points: {wall:7.1f} s = {rows / wall * 60:>9,.0f} estimates/min; {per_cpu}; "
          f"peak RSS driver {driver:6.0f} MiB, with Ray processes {tree:6.0f} MiB; rows {rows:,}; exit {rc}",
          flush=True)


def bench_cli(root: Path, runs: int = 11) -> None:
    """``estimator estimate`` wall time, warm: after one untimed call (which fills the composition
    cache). Measured twice: with bytecode caching as on an installed machine, and with this
    process's own environment (where ``PYTHONDONTWRITEBYTECODE=1``, as in this project's sandbox,
    every call compiles the package's sources again)."""
    base = {**os.environ, "PYTHONPATH": str(root), "RAY_USAGE_STATS_ENABLED": "0"}
    cached = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cmd = [sys.executable, "-m", "estimator.cli", "estimate", "model=resnet50", "fabric=ideal", "fabric.nodes=8"]
    for label, env in (("bytecode cached", cached), ("this environment", base)):
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, cwd=root, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t0)
        warm = sorted(times[1:])
        print(f"cli estimate ({label}, PYTHONDONTWRITEBYTECODE={env.get('PYTHONDONTWRITEBYTECODE', 'unset')}): "
              f"min {warm[0]:.3f} s, median {warm[len(warm) // 2]:.3f} s", flush=True)
    print(f"(python -c pass: {python_startup():.3f} s)", flush=True)


def python_startup() -> float:
    best = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        best = min(best, time.perf_counter() - t0)
    return best


DAG_CODE = r"""
import sys, time
from dataclasses import replace
from estimator.workloads.importers import import_file
from estimator.workloads.graph import Workload
from estimator.estimate import estimate
import estimator

base, _ = import_file(sys.argv[1])
copies = 1024 // base.devices
step = max(n.id for n in base.nodes) + 1
nodes = []
for k in range(copies):
    off, dev = k * step, k * base.devices
    for n in base.nodes:
        nodes.append(replace(n, id=n.id + off, deps=tuple(d + off for d in n.deps), device=n.device + dev,
                             group=tuple(g + dev for g in n.group) if n.group else tuple(range(dev, dev + base.devices)) if n.kind == "collective" else (),
                             src=n.src + dev if n.src >= 0 else -1, dst=n.dst + dev if n.dst >= 0 else -1))
w = replace(base, name="vgg_x64", devices=copies * base.devices, nodes=tuple(nodes))
from estimator.workloads import io
io.save(w, sys.argv[2])
cfg = estimator.resolve_config([f"workload={sys.argv[2]}", "fabric=ideal", "fabric.nodes=1024"])
t0 = time.perf_counter(); r = estimate(cfg); cold = time.perf_counter() - t0
warm = []
for _ in range(5):
    t0 = time.perf_counter(); r = estimate(cfg); warm.append(time.perf_counter() - t0)
print(f"dag 1,024 devices ({len(nodes):,} nodes): cold {cold:.3f} s, warm min {min(warm):.3f} s; "
      f"iter_time_s {r.metrics['iter_time_s']:.6g}")
"""


def bench_dag(root: Path, tmp: Path) -> None:
    if not FIXTURE.exists():
        print(f"dag: {FIXTURE} missing, skipped")
        return
    env = {**os.environ, "PYTHONPATH": str(root), "RAY_USAGE_STATS_ENABLED": "0"}
    out = subprocess.run([sys.executable, "-c", DAG_CODE, str(FIXTURE), str(tmp / "vgg_x64.workload.json")],
                         env=env, cwd=root, capture_output=True, text=True)
    print(out.stdout.strip() or out.stderr[-2000:], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="checkout to measure")
    ap.add_argument("--sweeps", type=int, nargs="*", default=[20_000, 100_000], help="sweep sizes (points)")
    ap.add_argument("--cli", action="store_true", help="only/also the CLI latency")
    ap.add_argument("--dag", action="store_true", help="only/also the 1,024-device DAG")
    ap.add_argument("--extra", nargs="*", default=[], help="extra overrides for the sweeps")
    ap.add_argument("--limit-s", type=float, default=None, help="stop each sweep after this long (SIGTERM)")
    ap.add_argument("--rss-log", type=Path, default=None,
                    help="write RSS over time per sweep to <stem>_<points>.csv next to this path")
    args = ap.parse_args()
    everything = not (args.cli or args.dag) and "--sweeps" not in sys.argv
    with tempfile.TemporaryDirectory(prefix="sweep_bench") as tmp:
        for n in args.sweeps if ("--sweeps" in sys.argv or everything) else []:
            bench_sweep(args.root, n, Path(tmp), args.extra, args.limit_s, args.rss_log)
        if args.cli or everything:
            bench_cli(args.root)
        if args.dag or everything:
            bench_dag(args.root, Path(tmp))


if __name__ == "__main__":
    main()
