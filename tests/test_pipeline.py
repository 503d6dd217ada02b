"""The foundation path end to end: capture -> Ray sweep -> DuckDB -> report, and the Snakemake DAG."""

import re
import subprocess
import sys

import pytest
import yaml

from estimator.store.duckdb_store import query
from tests.conftest import REPO


def cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "estimator.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=900)


@pytest.fixture(scope="module")
def foundation_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("store") / "estimates.duckdb"
    out = cli("sweep", "experiment=foundation", f"store={store}", "ray.num_cpus=2", "output=json")
    assert out.returncode == 0, out.stderr
    return store, out


def test_sweep_fills_the_store_and_resumes(foundation_store):
    store, _ = foundation_store
    df = query(store, "SELECT fabric_name, algorithm, nodes, iter_time_s, compute_time_s, exposed_comm_time_s "
                      "FROM estimates ORDER BY fabric_name, algorithm, nodes")
    assert df.height == 24  # ideal with its default (ring) and fastest algorithm, the leaf-spine with its default
    assert set(df["fabric_name"]) == {"ideal", "nvlink_leafspine"}
    assert sorted(set(df["nodes"])) == [8, 16, 32, 64, 128, 256, 512, 1024]
    assert (df["iter_time_s"] >= df["compute_time_s"]).all()
    # more GPUs on the same per-GPU batch: the all-reduce grows, so iteration time does not shrink
    ring = df.filter((df["fabric_name"] == "ideal") & (df["algorithm"] == "default"))["iter_time_s"].to_list()
    assert ring == sorted(ring)
    # the ideal switch with its fastest algorithm bounds both others at every size
    best = dict(df.filter((df["fabric_name"] == "ideal") & (df["algorithm"] == "auto")).select("nodes", "iter_time_s").iter_rows())
    for name, _, nodes, t, *_ in df.filter(df["algorithm"] == "default").iter_rows():
        assert best[nodes] <= t * (1 + 1e-9), (name, nodes)
    again = cli("sweep", "experiment=foundation", f"store={store}", "output=json")
    assert again.returncode == 0 and '"written": 0' in again.stdout and '"skipped": 24' in again.stdout


def test_report_is_a_static_page_with_the_scaling_figure(foundation_store, tmp_path):
    store, _ = foundation_store
    out = cli("report", f"store={store}", f"report_dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "index.html").read_text()
    assert "<figure class='plot' id='fig-resnet50_iter_time_vs_nodes'><svg " in page  # drawn inline, interactive
    assert (tmp_path / "figures" / "resnet50_iter_time_vs_nodes.svg").stat().st_size > 10_000
    assert not list((tmp_path / "figures").glob("*.png"))  # one image per figure: the SVG the page shows
    assert "FROM" in (tmp_path / "figures" / "resnet50_iter_time_vs_nodes.sql").read_text()
    data = (tmp_path / "figures" / "resnet50_iter_time_vs_nodes.csv").read_text().splitlines()
    assert len(data) == 1 + 24 and "ideal (lower bound)" in "\n".join(data)  # the plotted rows, beside the figure
    assert [line for line in out.stderr.splitlines() if line.startswith("report [")]  # per-section progress
    assert "figure check" not in out.stderr  # estimator.reports.figure_checks found nothing to report
    assert "http://" not in page and "https://" not in page  # no server, no remote assets


def test_bad_sweep_point_writes_nothing(tmp_path):
    store = tmp_path / "s.duckdb"
    out = cli("sweep", "experiment=foundation", f"store={store}", "fabric.alpha_s=-1")
    assert out.returncode == 2 and "alpha_s" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not store.exists()


def test_snakemake_dag_has_every_experiment_and_the_report():
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", "--cores", "2"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    counts = {}
    for line in (out.stdout + out.stderr).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    experiments = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml"))
    assert counts.get("experiment") == len(experiments) >= 2
    assert counts.get("report") == 1 and counts.get("all") == 1
    assert counts.get("capture", 0) >= 1  # the models the experiments estimate are captured first
    # every step logs its progress to results/logs/ and prints one line (summary + wall time) when done
    printed = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--forceall", "--cores", "2"],
                             capture_output=True, text=True, cwd=REPO, timeout=300).stdout
    for step in ("capture", "experiment", "validate", "report"):
        assert re.search(rf"2>&1 \| tee results/logs/{step}\S*\.log \| \{{ grep --line-buffered", printed), step
    assert re.search(r"last=\$\(tail -n 1 results/logs/experiment_\w+\.log\)", printed)
    assert re.search(r"sed -u 's\|\^\|experiment \w+: \|'", printed)  # progress lines on the terminal too
    # every capture job names a model `estimator capture` can build (a decoder-only model cannot)
    from estimator.workloads.zoo import ARCHITECTURES

    captured = re.findall(r"traces/(\w+)\.workload\.json", out.stdout + out.stderr)
    assert captured
    for model in set(captured):
        arch = yaml.safe_load((REPO / "conf" / "model" / f"{model}.yaml").read_text()).get("arch")
        assert arch in ARCHITECTURES, f"snakemake would capture {model} (arch {arch!r}), which the zoo cannot build"


def test_fabric_specific_override_applies_only_where_the_key_exists(tmp_path):
    store = tmp_path / "s.duckdb"
    out = cli("sweep", "experiment=foundation", f"store={store}", "fabric.nvlink_bandwidth_Bps=100e9", "output=json")
    assert out.returncode == 0, out.stderr
    df = query(store, "SELECT fabric_name, fabric_nvlink_bandwidth_Bps AS bw FROM estimates")
    assert set(df.filter(df["fabric_name"] == "nvlink_leafspine")["bw"]) == {100e9}
    assert df.filter(df["fabric_name"] == "ideal")["bw"].is_null().all()
    bad = cli("sweep", "experiment=foundation", f"store={tmp_path / 'b.duckdb'}", "fabric.no_such_knob=1")
    assert bad.returncode == 2 and "fabric.no_such_knob matches no point" in bad.stderr
    assert not (tmp_path / "b.duckdb").exists()
