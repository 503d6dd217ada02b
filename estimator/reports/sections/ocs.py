"""Reconfigurable OCS (seed 001): training speed per (model x all-reduce algorithm x topology).

Data: experiment ``ocs`` (conf/experiment/ocs.yaml), table ``estimates``. "Best topology" in a
claim is the fastest of the three the OCS wires (ring, torus2d, btree) and, where the paper compares
against it ("except the ideal network"), the fat tree; one_switch is the paper's ideal reference.
How a server attaches to the two electrical references is a reading (``readings.reference_host_link``):
one 100 Gb/s port (default, the paper's Table I) or its four ports bonded (``fabric.ports``).
"""

from __future__ import annotations

from estimator.fabrics.ocs import PAPER_NAMES
from estimator.reports.model import Figure, Section, Table
from estimator.reports.plots import bar_plot
from estimator.reports.rules import AllOf, Beats, Exclusive
from estimator.reports.sections.paper_helpers import Query, judged, readings, rows, table_with

ESTIMATES = table_with("estimates", {"fabric_topology": "VARCHAR", "fabric_inner_node_delay_s": "DOUBLE",
                                     "fabric_ports": "BIGINT"})
WIRED = ("ring", "torus2d", "btree")
PAPER_ALGO = "CASE algorithm " + " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in PAPER_NAMES.items()) + " END"
SIM_SIZES = (16, 32, 64)
READINGS = readings("ocs")
HOST = READINGS.get("reference_host_link", {})
HOST_PORTS = {"one_port": 1, "bonded": 4}  # a reference server's host link: 1 x or 4 x 100 Gb/s
HOST_DEFAULT = HOST.get("default", "one_port")
# a row of an OCS-wired topology always uses the server's four ports; a reference row counts under a reading
REFERENCE = "fabric_topology IN ('fattree', 'one_switch')"


def _ref_filter(ports: int) -> str:
    return f"(NOT {REFERENCE} OR coalesce(fabric_ports, 4) = {ports})"


SPEED_SQL = f"""
SELECT model_name, algorithm, {PAPER_ALGO} AS paper_algorithm, fabric_topology AS topology, samples_per_s,
       iter_time_s, exposed_comm_time_s
FROM {ESTIMATES} AS t
WHERE fabric_name = 'ocs' AND nodes = 32 AND device_name = 'm40' AND parallelism_bucketing = 'horovod'
  AND fabric_inner_node_delay_s = 87e-6 AND {_ref_filter(HOST_PORTS[HOST_DEFAULT])}
ORDER BY model_name, algorithm, topology
"""


def sim_sql(ports: int) -> str:
    """The simulation study (RTX 2080 Ti, every size): samples/s per topology, the references attached
    with ``ports`` ports."""
    return f"""
SELECT model_name, nodes, algorithm, {PAPER_ALGO} AS paper_algorithm,
       max(samples_per_s) FILTER (WHERE fabric_topology = 'ring') AS ring,
       max(samples_per_s) FILTER (WHERE fabric_topology = 'torus2d') AS torus2d,
       max(samples_per_s) FILTER (WHERE fabric_topology = 'btree') AS btree,
       max(samples_per_s) FILTER (WHERE fabric_topology = 'fattree') AS fattree,
       max(samples_per_s) FILTER (WHERE fabric_topology = 'one_switch') AS one_switch
FROM {ESTIMATES} AS t
WHERE fabric_name = 'ocs' AND device_name = 'rtx2080ti' AND parallelism_bucketing = 'horovod'
  AND fabric_inner_node_delay_s = 87e-6 AND {_ref_filter(ports)}
GROUP BY ALL
ORDER BY model_name, nodes, paper_algorithm
"""


SIM_SQL = sim_sql(HOST_PORTS[HOST_DEFAULT])

SIM_LONG_SQL = f"""
SELECT model_name, {PAPER_ALGO} AS paper_algorithm, fabric_topology AS topology, samples_per_s
FROM {ESTIMATES} AS t
WHERE fabric_name = 'ocs' AND device_name = 'rtx2080ti' AND nodes = 32 AND parallelism_bucketing = 'horovod'
  AND fabric_inner_node_delay_s = 87e-6 AND {_ref_filter(HOST_PORTS[HOST_DEFAULT])}
ORDER BY model_name, paper_algorithm, topology
"""

BEST_SQL = f"""
WITH s AS ({SPEED_SQL.replace("ORDER BY model_name, algorithm, topology", "")})
SELECT model_name, paper_algorithm, algorithm, arg_max(topology, samples_per_s) AS best_topology,
       max(samples_per_s) AS best_samples_per_s,
       max(samples_per_s) FILTER (WHERE topology = 'ring') AS ring,
       max(samples_per_s) FILTER (WHERE topology = 'torus2d') AS torus2d,
       max(samples_per_s) FILTER (WHERE topology = 'btree') AS btree
FROM s WHERE topology IN {WIRED}
GROUP BY ALL
ORDER BY model_name, paper_algorithm
"""

NAME = {"ring": "Ring", "torus2d": "Torus", "btree": "Binary Tree", "fattree": "Fattree", "one_switch": "One_switch"}
NON_IDEAL = ("ring", "torus2d", "btree", "fattree")  # "except the ideal network"
ALGO = {v: k for k, v in PAPER_NAMES.items()}

Q_LENET_RING = "Ring allreduce achieves the highest training speed with the Binary Tree topology (except the ideal network)."
Q_SMALL = ("For Ring and PSLike allreduce, the Ring topology has a better performance compared to others with small-size "
           "system.")
Q_LENET_TORUS = "The Torus topology has an obvious advantage over the other three network topologies under Torus allreduce."
Q_LENET_TREES = "For DBTree and RD allreduce, the Torus topology outperforms the Ring and Binary Tree topologies."
Q_RESNET_PS = ("For PSLike allreduce, the Torus topology has a performance advantage, which is different from the results "
               "of Lenet. Other allreduce algorithms show similar trends to those of Lenet.")
Q_VGG = ("For Ring, PSLike, RD, DBTree and Torus allreduce, the Torus topology outperforms the Ring and Binary Tree "
         "topologies.")
Q_VGG_BTREE = "For BTree allreduce, the Binary Tree is the optimal topology."
Q_DEPENDS = "We can conclude that the optimal topology is related to allreduce algorithm and training model."
Q_RD = ("RD algorithm (shown in Fig. 1(b)) outperforms Ring algorithm in large-size systems due to fewer steps.")
Q_PROTO = ("As we scale the system to 32 nodes, Resnet50 with Ring allreduce algorithm achieves higher training speed with "
           "the Ring topology. When RD allreduce algorithm is deployed, we reconfigure the system into the Torus topology")

# (model, paper algorithm, winner topology, topologies it must beat, sizes, where, quote, statement); the two
# statements about Ring all-reduce exclude each other at the small size (:data:`EXCLUSIVE`)
STATEMENTS = (
    ("lenet5", "Ring", "btree", NON_IDEAL, SIM_SIZES, "Fig. 3", Q_LENET_RING,
     "Ring all-reduce is fastest on the Binary Tree topology"),
    ("lenet5", "Torus", "torus2d", NON_IDEAL, SIM_SIZES, "Fig. 3", Q_LENET_TORUS,
     "under Torus all-reduce the Torus topology has an obvious advantage"),
    ("lenet5", "Ring", "ring", NON_IDEAL, SIM_SIZES[:1], "Fig. 3", Q_SMALL,
     "Ring all-reduce: the Ring topology is best with a small system"),
    ("lenet5", "PSLike", "ring", NON_IDEAL, SIM_SIZES[:1], "Fig. 3", Q_SMALL,
     "PSLike all-reduce: the Ring topology is best with a small system"),
    ("lenet5", "DBTree", "torus2d", ("ring", "btree"), SIM_SIZES, "Fig. 3", Q_LENET_TREES,
     "under DBTree all-reduce Torus beats Ring and Binary Tree"),
    ("lenet5", "RD", "torus2d", ("ring", "btree"), SIM_SIZES, "Fig. 3", Q_LENET_TREES,
     "under RD all-reduce Torus beats Ring and Binary Tree"),
    ("resnet50", "PSLike", "torus2d", NON_IDEAL, SIM_SIZES, "Fig. 4", Q_RESNET_PS,
     "under PSLike all-reduce the Torus topology has the advantage"),
    ("resnet50", "Ring", "btree", NON_IDEAL, SIM_SIZES, "Fig. 4", Q_RESNET_PS,
     "('similar trends to Lenet') Ring all-reduce is fastest on Binary Tree"),
    ("resnet50", "Ring", "ring", NON_IDEAL, SIM_SIZES[:1], "Fig. 4", Q_RESNET_PS,
     "('similar trends to Lenet') Ring all-reduce: the Ring topology is best with a small system"),
    ("resnet50", "Torus", "torus2d", NON_IDEAL, SIM_SIZES, "Fig. 4", Q_RESNET_PS,
     "('similar trends to Lenet') Torus all-reduce is fastest on Torus"),
    ("resnet50", "DBTree", "torus2d", ("ring", "btree"), SIM_SIZES, "Fig. 4", Q_RESNET_PS,
     "('similar trends to Lenet') under DBTree Torus beats Ring and Binary Tree"),
    ("resnet50", "RD", "torus2d", ("ring", "btree"), SIM_SIZES, "Fig. 4", Q_RESNET_PS,
     "('similar trends to Lenet') under RD Torus beats Ring and Binary Tree"),
    *(("vgg13", a, "torus2d", ("ring", "btree"), SIM_SIZES, "Fig. 5", Q_VGG,
       f"under {a} all-reduce Torus beats Ring and Binary Tree") for a in ("Ring", "PSLike", "RD", "DBTree", "Torus")),
    ("vgg13", "BTree", "btree", NON_IDEAL, SIM_SIZES, "Fig. 5", Q_VGG_BTREE,
     "under BTree all-reduce Binary Tree is the optimal topology"),
)
# Ring all-reduce at the small size: "fastest on Binary Tree" and "Ring topology best" cannot both hold
EXCLUSIVE = {"btree": "ring", "ring": "btree"}
CONFLICT = (f"Sec. IV says both '{Q_LENET_RING}' and '{Q_SMALL}': for Ring all-reduce on a small system they name "
            "different winners (Binary Tree, Ring), so at most one can hold")


def _rule(winner: str, rivals: tuple[str, ...], model: str, alg: str, n: int) -> Beats | Exclusive:
    base = Beats(winner, rivals, fmt=lambda v: f"{v:.1f}")
    if alg == "Ring" and n == SIM_SIZES[0] and model in ("lenet5", "resnet50") and winner in EXCLUSIVE:
        other = EXCLUSIVE[winner]
        return Exclusive(base, Beats(other, tuple(t for t in NON_IDEAL if t != other), fmt=lambda v: f"{v:.1f}"),
                         CONFLICT)
    return base


def _speeds(r: dict, names: tuple[str, ...]) -> dict[str, float]:
    return {t: r[t] for t in names}


def _claims(q: Query):
    out = []
    for reading, ports in HOST_PORTS.items():
        sim = {(r["model_name"], r["nodes"], r["paper_algorithm"]): r for r in rows(q, sim_sql(ports))}
        common = {"reading": f"host_link={reading}", "default_reading": reading == HOST_DEFAULT, "sql": sim_sql(ports)}
        for model, alg, winner, rivals, sizes, fig, quote, text in STATEMENTS:
            rivals = tuple(t for t in rivals if t != winner)
            for n in sizes:
                r = sim.get((model, n, alg))
                ok = r is not None and all(r[t] is not None for t in (winner, *rivals))
                out.append(judged(f"{model}, {n} x RTX 2080 Ti: {text}", NAME[winner],
                                  _speeds(r, (winner, *rivals)) if ok else None,
                                  f"{NAME[winner]} {r[winner]:.1f} samples/s" if ok else "",
                                  _rule(winner, rivals, model, alg, n) if ok else None, where=f"Sec. IV, {fig}",
                                  unit="samples/s", quote=quote, **common))
        out += _depends(sim, common)
    sim = {(r["model_name"], r["nodes"], r["paper_algorithm"]): r for r in rows(q, SIM_SQL)}
    for model in ("lenet5", "resnet50", "vgg13", "bert_base"):  # Fig. 1: RD vs Ring on a large system
        r_rd, r_ring = sim.get((model, SIM_SIZES[-1], "RD")), sim.get((model, SIM_SIZES[-1], "Ring"))
        v = (None if not (r_rd and r_ring and r_rd["one_switch"] and r_ring["one_switch"])
             else {"RD": r_rd["one_switch"], "Ring": r_ring["one_switch"]})
        out.append(judged(f"{model}, {SIM_SIZES[-1]} x RTX 2080 Ti on the ideal network (one switch): recursive doubling "
                          "trains faster than Ring all-reduce", "RD faster", v,
                          "" if v is None else f"RD {v['RD']:.1f} vs Ring {v['Ring']:.1f} samples/s",
                          Beats("RD", ("Ring",), fmt=lambda x: f"{x:.1f}"), where="Sec. I, Fig. 1", unit="samples/s",
                          sql=SIM_SQL, quote=Q_RD))
    r50 = {r["algorithm"]: r for r in rows(q, BEST_SQL) if r["model_name"] == "resnet50"}
    for alg, topo, other, text in (("ring", "ring", "torus2d", "Ring all-reduce -> Ring topology"),
                                   ("recursive_doubling", "torus2d", "ring", "RD -> reconfigure to Torus")):
        r = r50.get(alg)
        out.append(judged(
            f"32-node ResNet50 prototype (M40): {text} is fastest", NAME[topo], r and _speeds(r, (topo, other)),
            f"{r[topo]:.1f} samples/s" if r else "", Beats(topo, (other,), fmt=lambda v: f"{v:.1f}"),
            where="Sec. V, Fig. 7 (the OCS wires Ring or Torus)", unit="samples/s", sql=BEST_SQL, quote=Q_PROTO))
    return out


def _depends(sim: dict, common: dict) -> list:
    """'The optimal topology is related to allreduce algorithm and training model', judged on the paper's
    own instances of each dependence: for VGG13, BTree all-reduce is best on Binary Tree while Torus
    all-reduce is best on Torus (algorithm); under PSLike, ResNet50's best is Torus, "different from the
    results of Lenet" (model): LeNet's best other topology must beat Torus there, and Torus must beat it
    for ResNet50, each by more than the tie band."""
    out = []
    f = lambda v: f"{v:.1f}"  # noqa: E731
    keys = (("vgg13", "BTree"), ("vgg13", "Torus"), ("lenet5", "PSLike"), ("resnet50", "PSLike"))
    for n in SIM_SIZES:
        rs = {k: sim.get((k[0], n, k[1])) for k in keys}
        ok = all(r is not None and all(r[t] is not None for t in NON_IDEAL) for r in rs.values())
        v = rule = None
        if ok:
            lenet = rs[("lenet5", "PSLike")]
            other = max((t for t in NON_IDEAL if t != "torus2d"), key=lambda t: lenet[t])  # LeNet's best non-Torus
            rule = AllOf((("vgg13 BTree: Binary Tree over Torus", Beats("btree", ("torus2d",), fmt=f)),
                          ("vgg13 Torus: Torus over Binary Tree", Beats("torus2d", ("btree",), fmt=f)),
                          (f"lenet5 PSLike: {NAME[other]} over Torus", Beats(other, ("torus2d",), fmt=f)),
                          (f"resnet50 PSLike: Torus over {NAME[other]}", Beats("torus2d", (other,), fmt=f))))
            v = tuple(_speeds(rs[k], NON_IDEAL) for k in keys)
        out.append(judged(f"{n} x RTX 2080 Ti: the best topology depends on both the algorithm and the model (the "
                          "paper's own instances of each)", "yes", v,
                          "" if v is None else "; ".join(f"{k[0]} {k[1]}: best {NAME[max(x, key=x.get)]}"
                                                         for k, x in zip(keys, v, strict=True)),
                          rule, where="Sec. IV", unit="samples/s", quote=Q_DEPENDS, **common))
    return out


MODELS = ("lenet5", "resnet50", "vgg13", "bert_base")


def _speed_figure(name: str, title: str, sql: str, model: str, note: str) -> Figure:
    """Bars of samples/s per paper algorithm, one colour per topology, for one model."""
    return Figure(name, title, sql.replace("WHERE fabric_name", f"WHERE model_name = '{model}' AND fabric_name"),
                  bar_plot("paper_algorithm", "samples_per_s", "topology", xlabel="all-reduce algorithm",
                           ylabel="samples / s"), note)


SECTION = Section(
    key="ocs",
    title="Reconfigurable optical circuit switch (seed 001)",
    intro=(
        "32 servers with one Tesla M40 and four 100 Gb/s ports each; a MEMS OCS wires them as a ring, a 2D torus or a "
        "binary tree (one-switch and 3-level fat tree as references); seven all-reduce algorithms; Horovod tensor "
        "fusion (1 MB, 10 µs) and the paper's Table I delays; the simulation study on RTX 2080 Ti compute at 16, 32 and 64 "
        "servers, every per-model statement of Sec. IV judged per size (a topology wins only by more than the 1 % tie "
        "band). The electrical references attach a server by one 100 Gb/s link (the default reading, seed 001 Table I) "
        "or by its four ports bonded (the other reading; conf/experiment/ocs.yaml <code>readings</code>). "
        "Experiment: <code>estimator sweep experiment=ocs</code>."
    ),
    figures=tuple(
        _speed_figure(f"ocs_{m}", f"{m}: training speed per all-reduce algorithm and topology (32 x M40)",
                      SPEED_SQL, m, "Seed 001 Sec. IV. HD = halving-doubling, our seventh algorithm.")
        for m in MODELS
    ) + tuple(
        _speed_figure(f"ocs_sim_{m}", f"{m}: samples/s per algorithm and topology (simulation, 32 x RTX 2080 Ti)",
                      SIM_LONG_SQL, m,
                      "Seed 001 Figs. 3-5 (simulation; 16 and 64 servers are in the table). HD = halving-doubling.")
        for m in MODELS
    ),
    tables=(Table("ocs_simulation", "Simulation (RTX 2080 Ti): samples/s per topology, model, size and algorithm",
                  SIM_SQL),
            Table("ocs_best", "Prototype (32 x M40): best OCS-wired topology per model and algorithm", BEST_SQL)),
    claims=_claims,
    order=60,
    needs_tables=("estimates",),
)
