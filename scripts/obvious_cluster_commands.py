"""Robustness audit of the obvious ``cluster`` / ``allocate`` commands (docs/research/h106-cluster-audit.md).

Runs the commands a newcomer types in the first hour after reading docs/cluster.md: every fabric the
docs name (fat tree, the custom topologies under topologies/, the OCS wirings, the optical fabrics of
conf/fabric/), small and large GPU counts, synthetic traces of several sizes, a trace file in each
format (CSV, Parquet, JSON, written to a temp dir) and the malformed ones (a missing column,
negative GPUs, a job larger than the cluster, an unknown model, an empty file), every scheduler,
placement and phases option, ``-m`` sweeps, ``write=true`` into a temp DuckDB store and
``output=json``. Each runs through the CLI in a fresh process (``python -m estimator.cli``,
``CI=true``) and the script prints one markdown table: exit code, wall seconds, whether stderr holds a
traceback, the one-line error of a refusal, and the sanity of the result. Every command runs with
``write=true`` into a store of its own so its per-job rows (``cluster_jobs``) can be checked:

* makespan >= every job's end - the first arrival; no NaN or negative time; end >= start >= submit;
* gpu_utilisation and gpu_alloc_utilisation in [0, 1], link_utilisation in [0, 1] (or null);
* slowdown >= 1 for every job (docs/cluster.md defines it so), slowdown_max >= slowdown_mean >= 1;
* the run's job count = the trace's (the file's rows, or ``cluster.jobs``) = the rows stored;
* a refused command leaves nothing in its store (no table, or empty tables).

``allocate`` rows: placed + rejected = requests, utilisation in [0, 1], stranded GPU-s >= 0.

    python scripts/obvious_cluster_commands.py                  # every command (~10 min on 2 cores)
    python scripts/obvious_cluster_commands.py --only bad,csv   # commands whose id contains bad or csv
    python scripts/obvious_cluster_commands.py --json out.json  # also the raw records
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # the shared harness beside this script, also when a test loads it by path
from cli_audit import TRACEBACK, error_line, finish, note, outcome_flags, parse_args, run_cli  # noqa: E402

LS = "topologies/leafspine_4to1.yaml"

#: trace files written to the temp dir: name -> (format, rows or raw text)
GOOD_ROWS = [
    {"id": 1, "submit_s": 0, "gpus": 8, "model": "resnet50", "iterations": 1000},
    {"id": 2, "submit_s": 60, "gpus": 16, "model": "bert_base", "iterations": 500},
    {"id": 3, "submit_s": 90, "gpus": 4, "model": "vgg13", "duration_s": 600},
    {"id": 4, "submit_s": 120, "gpus": 32, "model": "mobilenet_v2", "iterations": 200, "batch_size": 64},
    {"id": 5, "submit_s": 120, "gpus": 1, "model": "resnet50", "iterations": 100, "layout": "data"},
]
CSV_COLUMNS = ("id", "submit_s", "gpus", "model", "iterations", "duration_s", "batch_size", "layout")


def _csv(rows: list[dict], columns: tuple[str, ...] = CSV_COLUMNS) -> str:
    lines = [",".join(columns)]
    for r in rows:
        lines.append(",".join("" if r.get(c) is None else str(r[c]) for c in columns))
    return "\n".join(lines) + "\n"


def write_traces(tmp: Path) -> None:
    (tmp / "jobs.csv").write_text(_csv(GOOD_ROWS))
    (tmp / "jobs.json").write_text(json.dumps(GOOD_ROWS))
    (tmp / "jobs_wrapped.json").write_text(json.dumps({"jobs": GOOD_ROWS}))
    import polars as pl

    pl.DataFrame([{c: r.get(c) for c in CSV_COLUMNS} for r in GOOD_ROWS],
                 schema={"id": pl.Int64, "submit_s": pl.Float64, "gpus": pl.Int64, "model": pl.Utf8,
                         "iterations": pl.Int64, "duration_s": pl.Float64, "batch_size": pl.Int64,
                         "layout": pl.Utf8}).write_parquet(tmp / "jobs.parquet")
    (tmp / "docs_example.csv").write_text("id,submit_s,gpus,model,iterations\n1,0,8,resnet50,1000\n2,60,16,bert_base,500\n")
    (tmp / "missing_col.csv").write_text("id,gpus,model,iterations\n1,8,resnet50,1000\n")
    (tmp / "neg_gpus.csv").write_text("id,submit_s,gpus,model,iterations\n1,0,8,resnet50,1000\n2,10,-4,resnet50,100\n")
    (tmp / "too_big.csv").write_text("id,submit_s,gpus,model,iterations\n1,0,8,resnet50,1000\n2,10,512,resnet50,100\n")
    (tmp / "unknown_model.csv").write_text("id,submit_s,gpus,model,iterations\n1,0,8,resnet5O,1000\n")
    (tmp / "empty.csv").write_text("")
    (tmp / "header_only.csv").write_text("id,submit_s,gpus,model,iterations\n")
    (tmp / "empty.json").write_text("")
    (tmp / "empty_list.json").write_text("[]")
    (tmp / "empty.parquet").write_bytes(b"")
    (tmp / "garbage.parquet").write_bytes(b"not a parquet file\n")
    (tmp / "bad.json").write_text('[{"id": 1, "submit_s": 0, ')
    (tmp / "dup_ids.json").write_text(json.dumps([GOOD_ROWS[0], GOOD_ROWS[0]]))
    (tmp / "neg_submit.json").write_text(json.dumps([{**GOOD_ROWS[0], "submit_s": -5}]))
    (tmp / "nan_iter.csv").write_text("id,submit_s,gpus,model,iterations\n1,0,8,resnet50,nan\n")
    (tmp / "missing_workload.json").write_text(json.dumps([{"id": 1, "submit_s": 0, "gpus": 2,
                                                            "workload": str(tmp / "nope.workload.json"),
                                                            "iterations": 10}]))
    (tmp / "both.json").write_text(json.dumps([{**GOOD_ROWS[0], "workload": "x.workload.json"}]))
    (tmp / "extra_col.csv").write_text("id,submit_s,gpus,model,iterations,priority\n1,0,8,resnet50,1000,3\n")
    (tmp / "spaces.csv").write_text("id, submit_s, gpus, model, iterations\n1, 0, 8, resnet50, 1000\n2, 60, 16, bert_base, 500\n")
    (tmp / "dup_col.csv").write_text("id,submit_s,gpus,model,iterations,id\n1,0,8,resnet50,1000,1\n")
    (tmp / "jobs.txt").write_text(_csv(GOOD_ROWS))
    (tmp / "hybrid.csv").write_text("id,submit_s,gpus,model,iterations,layout\n1,0,8,resnet50,10,tensor\n")


def trace_rows(name: str) -> int | None:
    """Jobs a good trace file holds (for the job-count check)."""
    return {"jobs.csv": 5, "jobs.json": 5, "jobs_wrapped.json": 5, "jobs.parquet": 5, "docs_example.csv": 2,
            "spaces.csv": 2}.get(name)


F = ["fabric=fattree"]
#: (id, args (``{tmp}`` = the temp dir), expect: ok / err / any, expected job count or None)
COMMANDS: list[tuple[str, list[str], str, int | None]] = [
    # --- the docs' first commands, scaled to a few minutes on 2 cores
    ("fattree-64-j20", [*F, "fabric.nodes=64", "cluster.jobs=20"], "ok", 20),
    ("fattree-1024-j2000", [*F, "fabric.nodes=1024", "cluster.jobs=2000"], "ok", 2000),
    ("fattree-16-j1", [*F, "fabric.nodes=16", "cluster.jobs=1"], "ok", 1),
    ("fattree-4096-j500", [*F, "fabric.nodes=4096", "cluster.jobs=500"], "ok", 500),
    ("default-fabric", ["cluster.jobs=30"], "ok", 30),
    ("ls4to1-1024-random-aligned", ["fabric=custom", f"fabric.topology={LS}", "fabric.nodes=1024", "cluster.jobs=300",
                                    "cluster.placement=random", "cluster.phases=aligned"], "ok", 300),
    ("ls4to1-1024-random-indep", ["fabric=custom", f"fabric.topology={LS}", "fabric.nodes=1024", "cluster.jobs=400",
                                  "cluster.placement=random", "cluster.load=0.9"], "ok", 400),
    ("ls24-cassini", ["fabric=custom", "fabric.topology=topologies/leafspine_24.yaml", "fabric.nodes=24",
                      "cluster.jobs=100", "cluster.sizes=[2,4,8]", "cluster.size_weights=[0.7,0.2,0.1]",
                      "cluster.duration=helios", "cluster.load=0.6", "cluster.placement=random",
                      "cluster.phases=interleaved"], "ok", 100),
    ("custom-torus4x4", ["fabric=custom", "fabric.topology=topologies/torus_4x4.yaml", "fabric.nodes=16",
                         "cluster.jobs=40"], "ok", 40),
    ("custom-two-leaves", ["fabric=custom", "cluster.jobs=40"], "ok", 40),
    ("ocs-1024-auto", ["fabric=ocs", "fabric.nodes=1024", "fabric.topology=auto", "cluster.jobs=300"], "ok", 300),
    ("ocs-ring", ["fabric=ocs", "fabric.nodes=64", "fabric.topology=ring", "cluster.jobs=40"], "ok", 40),
    ("ocs-btree", ["fabric=ocs", "fabric.nodes=64", "fabric.topology=btree", "cluster.jobs=40"], "ok", 40),
    ("ocs-torus2d-default", ["fabric=ocs", "cluster.jobs=40"], "ok", 40),
    ("lumorph-256", ["fabric=lumorph", "fabric.nodes=256", "cluster.jobs=60", "cluster.placement=lumorph"], "ok", 60),
    ("terarack-1024", ["fabric=terarack", "cluster.jobs=60"], "ok", 60),
    ("opsquare-256", ["fabric=opsquare", "cluster.jobs=60"], "ok", 60),
    ("sipac-512-bcube", ["fabric=sipac", "cluster.jobs=60", "cluster.placement=bcube_groups"], "ok", 60),
    ("bcube-512", ["fabric=bcube", "cluster.jobs=60"], "ok", 60),
    ("ring-32", ["fabric=ring", "cluster.jobs=40"], "ok", 40),
    ("torus2d-64-torus-slices", ["fabric=torus2d", "fabric.nodes=64", "cluster.jobs=40",
                                 "cluster.placement=torus_slices"], "any", 40),
    ("superpod-256", ["fabric=superpod", "fabric.nodes=256", "cluster.jobs=60"], "ok", 60),
    ("nvlink-ls-256-spread", ["fabric=nvlink_leafspine", "fabric.nodes=256", "cluster.jobs=60",
                              "cluster.placement=spread"], "ok", 60),
    # --- schedulers, placements, phases
    ("ls-256-sjf-topology", ["fabric=custom", f"fabric.topology={LS}", "fabric.nodes=256", "cluster.jobs=150",
                             "cluster.scheduler=sjf", "cluster.placement=topology"], "ok", 150),
    ("ls-256-backfill-helios", ["fabric=custom", f"fabric.topology={LS}", "fabric.nodes=256", "cluster.jobs=150",
                                "cluster.scheduler=backfill", "cluster.duration=helios", "cluster.load=1.2"], "ok", 150),
    ("fattree-rate", [*F, "fabric.nodes=64", "cluster.jobs=50", "cluster.arrival_rate_per_h=30"], "ok", 50),
    ("fattree-one-model", [*F, "fabric.nodes=64", "cluster.jobs=20", "cluster.models=[bert_base]"], "ok", 20),
    ("sweep-phases-placement", ["fabric=custom", f"fabric.topology={LS}", "fabric.nodes=128", "cluster.jobs=40", "-m",
                                "cluster.phases=aligned,independent,interleaved", "cluster.placement=packed,random"],
     "ok", 40),
    ("sweep-schedulers-trace", [*F, "fabric.nodes=32", "cluster.trace={tmp}/jobs.csv", "-m",
                                "cluster.scheduler=fifo,sjf,backfill"], "ok", 5),
    ("sweep-fabrics", ["-m", "fabric=fattree,ocs", "fabric.nodes=64", "cluster.jobs=20"], "ok", 20),
    # --- trace files
    ("trace-csv", [*F, "fabric.nodes=64", "cluster.trace={tmp}/jobs.csv"], "ok", 5),
    ("trace-json", [*F, "fabric.nodes=64", "cluster.trace={tmp}/jobs.json"], "ok", 5),
    ("trace-json-wrapped", ["fabric=ocs", "fabric.nodes=64", "cluster.trace={tmp}/jobs_wrapped.json"], "ok", 5),
    ("trace-parquet", [*F, "fabric.nodes=64", "cluster.trace={tmp}/jobs.parquet", "cluster.scheduler=backfill"], "ok", 5),
    ("trace-docs-example", ["cluster.trace={tmp}/docs_example.csv", "cluster.scheduler=backfill", *F,
                            "fabric.nodes=256"], "ok", 2),
    ("trace-csv-spaces", [*F, "fabric.nodes=64", "cluster.trace={tmp}/spaces.csv"], "ok", 2),
    # --- malformed traces and bad parameters
    ("bad-dup-column", [*F, "fabric.nodes=64", "cluster.trace={tmp}/dup_col.csv"], "err", None),
    ("bad-missing-column", [*F, "fabric.nodes=64", "cluster.trace={tmp}/missing_col.csv"], "err", None),
    ("bad-neg-gpus", [*F, "fabric.nodes=64", "cluster.trace={tmp}/neg_gpus.csv"], "err", None),
    ("bad-too-big", [*F, "fabric.nodes=64", "cluster.trace={tmp}/too_big.csv"], "err", None),
    ("bad-unknown-model", [*F, "fabric.nodes=64", "cluster.trace={tmp}/unknown_model.csv"], "err", None),
    ("bad-empty-csv", [*F, "fabric.nodes=64", "cluster.trace={tmp}/empty.csv"], "err", None),
    ("bad-header-only-csv", [*F, "fabric.nodes=64", "cluster.trace={tmp}/header_only.csv"], "err", None),
    ("bad-empty-json", [*F, "fabric.nodes=64", "cluster.trace={tmp}/empty.json"], "err", None),
    ("bad-empty-list-json", [*F, "fabric.nodes=64", "cluster.trace={tmp}/empty_list.json"], "err", None),
    ("bad-empty-parquet", [*F, "fabric.nodes=64", "cluster.trace={tmp}/empty.parquet"], "err", None),
    ("bad-garbage-parquet", [*F, "fabric.nodes=64", "cluster.trace={tmp}/garbage.parquet"], "err", None),
    ("bad-truncated-json", [*F, "fabric.nodes=64", "cluster.trace={tmp}/bad.json"], "err", None),
    ("bad-dup-ids", [*F, "fabric.nodes=64", "cluster.trace={tmp}/dup_ids.json"], "err", None),
    ("bad-neg-submit", [*F, "fabric.nodes=64", "cluster.trace={tmp}/neg_submit.json"], "err", None),
    ("bad-nan-iterations", [*F, "fabric.nodes=64", "cluster.trace={tmp}/nan_iter.csv"], "err", None),
    ("bad-txt-suffix", [*F, "fabric.nodes=64", "cluster.trace={tmp}/jobs.txt"], "err", None),
    ("bad-layout-tensor", [*F, "fabric.nodes=64", "cluster.trace={tmp}/hybrid.csv"], "err", None),
    ("bad-no-such-file", [*F, "fabric.nodes=64", "cluster.trace={tmp}/nope.csv"], "err", None),
    ("bad-workload-missing", [*F, "fabric.nodes=64", "cluster.trace={tmp}/missing_workload.json"], "err", None),
    ("bad-model-and-workload", [*F, "fabric.nodes=64", "cluster.trace={tmp}/both.json"], "err", None),
    ("bad-unknown-column", [*F, "fabric.nodes=64", "cluster.trace={tmp}/extra_col.csv"], "err", None),
    ("bad-store-is-the-trace", [*F, "fabric.nodes=64", "cluster.trace={tmp}/jobs.csv", "write=true",
                                "store={tmp}/jobs.csv"], "err", None),
    ("bad-store-is-a-folder", [*F, "fabric.nodes=64", "cluster.jobs=5", "write=true", "store={tmp}"], "err", None),
    ("bad-output-xml", [*F, "fabric.nodes=64", "cluster.jobs=5", "output=xml"], "err", None),
    ("bad-jobs-0", [*F, "fabric.nodes=64", "cluster.jobs=0"], "err", None),
    ("bad-jobs-neg", [*F, "fabric.nodes=64", "cluster.jobs=-5"], "err", None),
    ("bad-nodes-0", [*F, "fabric.nodes=0", "cluster.jobs=5"], "err", None),
    ("bad-scheduler", [*F, "fabric.nodes=64", "cluster.scheduler=lifo"], "err", None),
    ("bad-placement", [*F, "fabric.nodes=64", "cluster.placement=packd"], "err", None),
    ("bad-phases", [*F, "fabric.nodes=64", "cluster.phases=random"], "err", None),
    ("bad-key", [*F, "fabric.nodes=64", "cluster.job=5"], "err", None),
    ("bad-load-0", [*F, "fabric.nodes=64", "cluster.load=0"], "err", None),
    ("bad-model-list", [*F, "fabric.nodes=64", "cluster.models=[resnet5O]"], "err", None),
    ("bad-seed-neg", [*F, "fabric.nodes=64", "cluster.seed=-1"], "err", None),
    ("bad-backfill-depth-0", [*F, "fabric.nodes=64", "cluster.jobs=20", "cluster.scheduler=backfill",
                              "cluster.backfill_depth=0"], "any", 20),
    ("bad-sizes-mismatch", [*F, "fabric.nodes=64", "cluster.sizes=[1,2]", "cluster.size_weights=[1]"], "err", None),
    ("lumorph-placement-on-fattree", [*F, "fabric.nodes=64", "cluster.jobs=20", "cluster.placement=lumorph"], "any", 20),
    ("bad-ls-nodes-over", ["fabric=custom", f"fabric.topology={LS}", "fabric.nodes=8192", "cluster.jobs=5"], "err", None),
]

#: allocate commands (its own table shape)
ALLOCATE: list[tuple[str, list[str], str]] = [
    ("alloc-default", [], "ok"),
    ("alloc-docstring", ["allocation.gpus=256", "allocation.requests=500", "allocation.seed=1"], "ok"),
    ("alloc-64", ["allocation.gpus=64", "allocation.max_size=16"], "ok"),
    ("alloc-sizes", ["allocation.sizes=[1,2,4,8,16,32]", "allocation.requests=200"], "ok"),
    ("alloc-one-policy", ["allocation.policies=lumorph"], "ok"),
    ("alloc-bad-gpus", ["allocation.gpus=100"], "err"),
    ("alloc-bad-key", ["allocation.request=5"], "err"),
    ("alloc-bad-policy", ["allocation.policies=[packed]"], "err"),
    ("alloc-requests-0", ["allocation.requests=0"], "err"),
    ("alloc-max-size-over", ["allocation.max_size=1024"], "any"),
    ("alloc-neg-duration", ["allocation.mean_duration_s=-1"], "err"),
    ("alloc-tiles-0", ["allocation.tiles=0"], "err"),
    ("alloc-r-1", ["allocation.r=1"], "err"),
    ("alloc-seed-neg", ["allocation.seed=-1"], "err"),
    ("alloc-no-policies", ["allocation.policies=[]"], "err"),
    ("alloc-max-size-0", ["allocation.max_size=0"], "err"),
    ("alloc-r3-81", ["allocation.r=3", "allocation.gpus=81", "allocation.policies=bcube_groups"], "ok"),
    ("alloc-4096", ["allocation.gpus=4096", "allocation.requests=2000"], "ok"),
]


def _stored(store: Path) -> dict[str, list[dict]]:
    """Rows of cluster_runs / cluster_jobs in a store ({} if the file or the tables do not exist)."""
    if not store.exists():
        return {}
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        out = {}
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        for t in ("cluster_runs", "cluster_jobs"):
            if t in tables:
                cur = con.execute(f"SELECT * FROM {t}")
                cols = [d[0] for d in cur.description]
                out[t] = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
        return out
    finally:
        con.close()


def _bad(x: object, allow_zero: bool = True) -> bool:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return True
    return not math.isfinite(x) or (x < 0 if allow_zero else x <= 0)


def sanity(run: dict, jobs: list[dict] | None, expect_jobs: int | None) -> list[str]:
    """What is wrong with one run's summary (and its stored job rows, when given)."""
    out = []
    for k in ("makespan_s", "jct_mean_s", "jct_p50_s", "jct_p99_s", "queue_mean_s", "setup_mean_s", "wall_s"):
        if _bad(run.get(k)):
            out.append(f"{k}={run.get(k)}")
    for k in ("gpu_utilisation", "gpu_alloc_utilisation", "link_utilisation"):
        v = run.get(k)
        if v is None and k == "link_utilisation":
            continue
        if _bad(v) or v > 1 + 1e-9:
            out.append(f"{k}={v}")
    for k in ("slowdown_mean", "slowdown_p99", "slowdown_max", "placement_factor_mean"):
        v = run.get(k)
        if _bad(v) or v < 1 - 1e-9:
            out.append(f"{k}={v}")
    if not _bad(run.get("slowdown_max")) and not _bad(run.get("slowdown_mean")) and \
            run["slowdown_max"] < run["slowdown_mean"] - 1e-9:
        out.append("slowdown_max < mean")
    if expect_jobs is not None and run.get("jobs") != expect_jobs:
        out.append(f"jobs {run.get('jobs')} != trace {expect_jobs}")
    if jobs is None:
        return out
    if len(jobs) != run.get("jobs"):
        out.append(f"stored {len(jobs)} job rows, run says {run.get('jobs')}")
    if not jobs:
        return out
    first = min(j["submit_s"] for j in jobs)
    bad_t, late, order, slow = 0, 0, 0, 0
    for j in jobs:
        if any(_bad(j.get(k)) for k in ("submit_s", "start_s", "end_s", "queue_s", "jct_s", "run_s", "setup_s",
                                          "iter_time_alone_s", "iter_time_shared_s")):
            bad_t += 1
        if j["end_s"] - first > run["makespan_s"] * (1 + 1e-12) + 1e-9:
            late += 1
        if not (j["submit_s"] <= j["start_s"] + 1e-9 and j["start_s"] <= j["end_s"] + 1e-9):
            order += 1
        if _bad(j.get("slowdown")) or j["slowdown"] < 1 - 1e-9:
            slow += 1
    if bad_t:
        out.append(f"{bad_t} jobs with NaN/negative times")
    if late:
        out.append(f"{late} jobs end after the makespan")
    if order:
        out.append(f"{order} jobs not submit <= start <= end")
    if slow:
        out.append(f"{slow} jobs slowdown < 1 or NaN")
    return out


def run_cluster(cid: str, args: list[str], expect: str, njobs: int | None, tmp: Path, timeout: float) -> dict:
    args = [a.replace("{tmp}", str(tmp)) for a in args]
    store = tmp / f"{cid}.duckdb"
    if any(a.startswith("store=") for a in args):  # the command's own store (a bad one): nothing to read back
        store = tmp / "none.duckdb"
        extra = []
    else:
        extra = ["write=true", f"store={store}"]
    out_arg = [] if any(a.startswith("output=") for a in args) else ["output=json"]
    argv = [sys.executable, "-m", "estimator.cli", "cluster", *args, *extra, *out_arg, "cluster.progress=false"]
    rc, out, err, secs = run_cli(argv, timeout, ci=True)
    rec: dict = {"id": cid, "cmd": "cluster", "args": args, "expect": expect, "rc": rc, "secs": secs,
                 "traceback": TRACEBACK in err, "error": error_line(rc, err), "sanity": []}
    if rc == 0:
        runs = []
        for line in out.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    runs.append(json.loads(line))
                except json.JSONDecodeError:
                    rec["sanity"].append("unparsable JSON line")
        if not runs:
            rec["sanity"].append("no JSON result")
        stored = _stored(store)
        if len(stored.get("cluster_runs", [])) != len(runs):
            rec["sanity"].append(f"{len(stored.get('cluster_runs', []))} cluster_runs rows stored for {len(runs)} runs")
        by_run: dict[str, list[dict]] = {}
        for j in stored.get("cluster_jobs", []):
            by_run.setdefault(j["config_hash"], []).append(j)
        for r in runs:
            jobs = by_run.get(r.get("config_hash"), [])
            if r.get("cluster_jobs_written") != len(jobs):
                rec["sanity"].append(f"cluster_jobs_written {r.get('cluster_jobs_written')} != {len(jobs)} rows stored")
            rec["sanity"] += sanity(r, jobs, njobs)
        rec["runs"] = len(runs)
        rec["summary"] = "; ".join(
            f"{r.get('fabric_name')} {r.get('jobs')} jobs mk {r.get('makespan_s', 0) / 3600:.3g} h "
            f"sd {r.get('slowdown_mean') or 0:.3f}/{r.get('slowdown_max') or 0:.3f} gpu {r.get('gpu_utilisation') or 0:.3f}"
            for r in runs[:2]) + (f" (+{len(runs) - 2} runs)" if len(runs) > 2 else "")
    else:
        left = _stored(store)
        if any(left.values()):
            rec["sanity"].append("refused but rows were written to the store")
    rec["flags"] = flags(rec)
    return rec


def run_allocate(cid: str, args: list[str], expect: str, timeout: float) -> dict:
    argv = [sys.executable, "-m", "estimator.cli", "allocate", *args, "output=json"]
    rc, out, err, secs = run_cli(argv, timeout, ci=True)
    rec: dict = {"id": cid, "cmd": "allocate", "args": args, "expect": expect, "rc": rc, "secs": secs,
                 "traceback": TRACEBACK in err, "error": error_line(rc, err), "sanity": []}
    if rc == 0:
        try:
            rows = json.loads(out)
        except json.JSONDecodeError:
            rows = []
            rec["sanity"].append("unparsable JSON")
        for r in rows:
            if r.get("placed", 0) + r.get("rejected", 0) != r.get("requests"):
                rec["sanity"].append(f"{r.get('policy')}: placed + rejected != requests")
            u = r.get("utilisation")
            if _bad(u) or u > 1 + 1e-9:
                rec["sanity"].append(f"{r.get('policy')}: utilisation {u}")
            if _bad(r.get("stranded_gpu_s")):
                rec["sanity"].append(f"{r.get('policy')}: stranded {r.get('stranded_gpu_s')}")
        rec["summary"] = "; ".join(f"{r.get('policy')} placed {r.get('placed')}/{r.get('requests')} "
                                   f"u {r.get('utilisation') or 0:.3f}" for r in rows)
    rec["flags"] = flags(rec)
    return rec


def flags(rec: dict) -> list[str]:
    return outcome_flags(rec, 120) + [f"SANITY: {s}" for s in rec["sanity"]]


def table(records: list[dict]) -> str:
    rows = ["| id | command | rc | s | tb | result | flags |", "|---|---|---|---|---|---|---|"]
    for r in records:
        res = r.get("summary", "") if r["rc"] == 0 else r["error"]
        args = " ".join(a.replace("cluster.", "").replace("fabric.", "f.").replace("allocation.", "") for a in r["args"])
        args = args.replace("topologies/", "").replace(str(Path(tempfile.gettempdir())), "")
        rows.append(f"| {r['id']} | `{r['cmd']} {args}` | {r['rc']} | {r['secs']:.1f} | {'Y' if r['traceback'] else ''} "
                    f"| {res.replace('|', '/')[:260]} | {', '.join(r['flags'])} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args, wanted = parse_args(__doc__, argv)

    def chosen(cid: str) -> bool:
        return not wanted or any(w in cid for w in wanted)

    records = []
    with tempfile.TemporaryDirectory(prefix="obvious_cluster_") as d:
        tmp = Path(d)
        write_traces(tmp)
        for cid, a, expect, njobs in COMMANDS:
            if chosen(cid):
                records.append(run_cluster(cid, a, expect, njobs, tmp, args.timeout))
                note(records[-1])
        for cid, a, expect in ALLOCATE:
            if chosen(cid):
                records.append(run_allocate(cid, a, expect, args.timeout))
                note(records[-1])
    for r in records:  # the temp dir's name is not part of the command
        r["args"] = [a.replace(str(tmp), "{tmp}") for a in r["args"]]
        r["error"] = r["error"].replace(str(tmp), "{tmp}")
    return finish(records, table(records), args.json)


if __name__ == "__main__":
    sys.exit(main())
