"""Packet-level model of the NVLink leaf-spine reference (seed 004 §2, FABRICS.md §1/§5).

Topology: pods of ``gpus_per_pod`` (8) GPUs. Each pod has ``planes`` (4) NVLink leaf switches;
every GPU has one 900 Gb/s link to each of them (4 × 900 Gb/s = 3.6 Tb/s). Leaf switch s of
every pod has one 800 Gb/s uplink to spine switch s, which has one port per pod (32 ports at 256
GPUs, 128 at 1024 as the paper notes). The four planes are independent: a GPU sprays its
packets uniformly over them (each plane sees a Bernoulli(load) stream per 900 Gb/s packet time).

Switches are output-queued with one shared buffer per switch (16 MB leaf, 64 MB spine): a packet
arriving when the buffer is full is lost; otherwise it waits ``switch_latency_s`` (1 µs) and then
joins the FIFO of its output port (GPU downlink 900 Gb/s, uplink / spine port 800 Gb/s), leaving
the buffer when its transmission ends. Intra-pod: GPU → leaf → GPU. Inter-pod: GPU → leaf →
spine → leaf → GPU. Times are continuous (ns); arrivals are processed in slots of one 900 Gb/s
packet time (13.3 ns), and buffer space freed by departures is returned at slot boundaries.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

import numpy as np

from estimator.errors import EstimatorError
from estimator.packetsim.metrics import Recorder
from estimator.packetsim.params import SimSpec
from estimator.packetsim.results import PacketSimResult
from estimator.packetsim.traffic import uniform_destinations
from estimator.packetsim.vector import fifo_departures, group_rank

NS = 1e-9
KEYS = ("src", "dst", "plane", "stage", "birth", "arrive")


class LeafSpineSim:
    def __init__(self, spec: SimSpec):
        self.spec = spec
        p = spec.leafspine
        self.g = p.gpus_per_pod
        self.pods = p.pods(spec.nodes)
        self.planes = p.planes
        self.nodes = spec.nodes
        self.slot_ns = spec.packet_bits / p.gpu_link_bps / NS
        self.gen_prob = spec.load * spec.node_bps / (p.planes * p.gpu_link_bps)
        if self.gen_prob > 1.0:
            raise EstimatorError(f"load={spec.load}: offered load exceeds the GPU's {p.planes} × "
                                 f"{p.gpu_link_bps:.3g} b/s links")
        self.latency_ns = p.switch_latency_s / NS
        self.prop_ns = p.propagation_s / NS
        n_leaf = self.planes * self.pods
        # switches: leaves [0, n_leaf), spines [n_leaf, n_leaf + planes)
        self.cap = np.concatenate([
            np.full(n_leaf, p.leaf_buffer_bytes // spec.packet_bytes),
            np.full(self.planes, p.spine_buffer_bytes // spec.packet_bytes),
        ])
        self.occ = np.zeros(n_leaf + self.planes, dtype=np.int64)
        # ports: leaf l has g downlinks (l·(g+1) + i) and one uplink (l·(g+1) + g); spine s has
        # one port per pod (n_leaf·(g+1) + s·pods + pod)
        self.spine_port0 = n_leaf * (self.g + 1)
        n_ports = self.spine_port0 + self.planes * self.pods
        down_ns = spec.packet_bits / p.gpu_link_bps / NS
        up_ns = spec.packet_bits / p.uplink_bps / NS
        self.service = np.full(n_ports, up_ns)
        leaf_port = np.arange(self.spine_port0)
        self.service[leaf_port[leaf_port % (self.g + 1) < self.g]] = down_ns
        self.free = np.zeros(n_ports)
        self.rng = np.random.default_rng(spec.seed)

    def run(self) -> PacketSimResult:
        spec = self.spec
        start = time.perf_counter()
        end_ns = (spec.warmup_s + spec.measure_s) / NS
        total = int(math.ceil(end_ns / self.slot_ns - 1e-9))
        rec = Recorder(self.nodes, self.g, spec.warmup_s, spec.warmup_s + spec.measure_s)
        calendar: dict[int, list[dict[str, np.ndarray]]] = defaultdict(list)
        releases = np.zeros((self.occ.shape[0], total + 1), dtype=np.int64)
        generated = 0
        gpu = np.repeat(np.arange(self.nodes), self.planes)
        plane = np.tile(np.arange(self.planes), self.nodes)
        for t in range(total):
            self.occ -= releases[:, t]
            new = np.nonzero(self.rng.random(gpu.shape[0]) < self.gen_prob)[0]
            if new.shape[0]:
                src = gpu[new]
                generated += src.shape[0]
                rec.generated(t * self.slot_ns * NS, src)
                birth = np.full(src.shape[0], t * self.slot_ns)
                calendar[t + 1].append({
                    "src": src,
                    "dst": uniform_destinations(self.rng, src, self.g, self.pods, spec.locality),
                    "plane": plane[new], "stage": np.zeros(src.shape[0], dtype=np.int64),
                    "birth": birth, "arrive": birth + self.slot_ns + self.prop_ns,
                })
            chunks = calendar.pop(t, None)
            if chunks:
                batch = {k: np.concatenate([c[k] for c in chunks]) for k in KEYS}
                self._switch(batch, t, total, rec, releases, calendar)
        return PacketSimResult.build(
            spec, rec, window_s=spec.measure_s, slots=total, slot_s=self.slot_ns * NS,
            packets=generated, wall_s=time.perf_counter() - start,
        )

    def _switch(self, b, t, total, rec, releases, calendar) -> None:
        """Admit a slot's arrivals to their switches' buffers, queue them, schedule what follows."""
        g, pods = self.g, self.pods
        n_leaf = self.planes * pods
        stage, dst, src, plane = b["stage"], b["dst"], b["src"], b["plane"]
        dst_pod, dst_idx = np.divmod(dst, g)
        src_pod = src // g
        switch = np.where(stage == 0, plane * pods + src_pod,
                          np.where(stage == 1, n_leaf + plane, plane * pods + dst_pod))
        order = np.lexsort((b["arrive"], switch))
        b = {k: v[order] for k, v in b.items()}
        switch, stage, dst, src, plane = switch[order], stage[order], dst[order], src[order], plane[order]
        dst_pod, dst_idx, src_pod = dst_pod[order], dst_idx[order], src_pod[order]
        ok = self.occ[switch] + group_rank(switch) < self.cap[switch]
        if not ok.all():
            rec.dropped(b["arrive"][~ok] * NS, dst[~ok], src[~ok], stage[~ok] == 1)
        keep = np.nonzero(ok)[0]
        if keep.shape[0] == 0:
            return
        self.occ += np.bincount(switch[keep], minlength=self.occ.shape[0])
        local = src_pod == dst_pod
        leaf_out = np.where((stage == 2) | ((stage == 0) & local), dst_idx, g)
        port = np.where(stage == 1, self.spine_port0 + plane * pods + dst_pod,
                        (plane * pods + np.where(stage == 2, dst_pod, src_pod)) * (g + 1) + leaf_out)
        done = fifo_departures(port[keep], b["arrive"][keep] + self.latency_ns, self.service, self.free)
        rel_slot = np.minimum((done / self.slot_ns).astype(np.int64), total)
        np.add.at(releases, (switch[keep], rel_slot), 1)
        final = (stage[keep] == 2) | ((stage[keep] == 0) & local[keep])
        if final.any():
            k = keep[final]
            t_ns = done[final]
            rec.delivered(t_ns * NS, src[k], dst[k], (t_ns - b["birth"][k]) * NS)
        onward = ~final
        if onward.any():
            k = keep[onward]
            arrive = done[onward] + self.prop_ns
            nxt = {"src": src[k], "dst": dst[k], "plane": plane[k], "stage": stage[k] + 1,
                   "birth": b["birth"][k], "arrive": arrive}
            slot = (arrive / self.slot_ns).astype(np.int64)
            for s in np.unique(slot[slot < total]):
                sel = slot == s
                calendar[int(s)].append({key: v[sel] for key, v in nxt.items()})
