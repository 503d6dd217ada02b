# Packet-level OPSquare vs NVLink leaf-spine (seed 004 Figs. 2-3): sweep on Ray into DuckDB, then
# the figure from SQL over the `packetsim` table. Included by workflow/Snakefile.
#   snakemake --cores 2 reports/figures/packetsim.png
import sys as _sys
from pathlib import Path

PACKETSIM_STORE = globals().get("STORE", "results/estimates.duckdb")
PACKETSIM_PY = f'"{_sys.executable}"'


rule packetsim_sweep:
    """Run every point of conf/experiment/opsquare_packet.yaml (resumable: stored points are skipped)."""
    input:
        "conf/packetsim.yaml",
        "conf/experiment/opsquare_packet.yaml",
    output:
        touch("results/packetsim/opsquare_packet.done"),
    threads: workflow.cores
    log:
        "results/logs/packetsim_opsquare_packet.log",
    shell:
        "{PACKETSIM_PY} -m estimator.cli packetsim experiment=opsquare_packet ray.num_cpus={threads} "
        "store={PACKETSIM_STORE} > {log} 2>&1"


rule packetsim_figure:
    """Throughput, loss and latency vs load for both networks, from SQL over the store."""
    input:
        "results/packetsim/opsquare_packet.done",
    output:
        "reports/figures/packetsim.png",
    shell:
        "{PACKETSIM_PY} -m estimator.reports.packetsim {PACKETSIM_STORE} {output}"


# The main Snakefile makes every conf/experiment/*.yaml a target through `estimator sweep
# experiment=...`, which knows the estimate/collective kinds only; the packet-level experiment is
# produced here instead (this rule wins over the generic `experiment` rule for this one file).
rule packetsim_experiment:
    input:
        "results/packetsim/opsquare_packet.done",
        "reports/figures/packetsim.png",
    output:
        touch("results/experiments/opsquare_packet.done"),


if Path(workflow.main_snakefile).name != "packetsim.smk":  # included by the main Snakefile

    ruleorder: packetsim_experiment > experiment
