"""Measurement as in seed 004 §2: warm-up, then a measured window.

Counted in the window ``[warmup, warmup + measure)``: packets *generated* per source node (sent),
packets *delivered* per destination node (received) with every delivered packet's end-to-end
latency and whether it stayed in its pod, and packets *discarded* (buffer overflow), recorded at
their destination node as the paper does, with how many of them were intra-pod (``lost_intra``) and
how many were dropped by a spine switch (``lost_spine``, leaf-spine only). Latency is from
generation to the end of reception.
"""

from __future__ import annotations

import numpy as np


class Recorder:
    def __init__(self, nodes: int, pod_size: int, start_s: float, end_s: float):
        self.pod_size = pod_size
        self.start_s, self.end_s = start_s, end_s
        self.sent = np.zeros(nodes, dtype=np.int64)
        self.received = np.zeros(nodes, dtype=np.int64)
        self.lost = np.zeros(nodes, dtype=np.int64)
        self.lost_intra = 0
        self.lost_spine = 0
        self._lat: list[np.ndarray] = []
        self._local: list[np.ndarray] = []

    def _window(self, t_s: np.ndarray) -> np.ndarray:
        return (t_s >= self.start_s) & (t_s < self.end_s)

    def generated(self, t_s: float, src: np.ndarray) -> None:
        if self.start_s <= t_s < self.end_s:
            self.sent += np.bincount(src, minlength=self.sent.shape[0])

    def delivered(self, t_s: np.ndarray, src: np.ndarray, dst: np.ndarray, latency_s: np.ndarray) -> None:
        w = self._window(t_s)
        if not w.any():
            return
        self.received += np.bincount(dst[w], minlength=self.received.shape[0])
        self._lat.append(latency_s[w])
        self._local.append(src[w] // self.pod_size == dst[w] // self.pod_size)

    def dropped(self, t_s: np.ndarray, dst: np.ndarray, src: np.ndarray | None = None,
                at_spine: np.ndarray | None = None) -> None:
        w = self._window(t_s)
        if w.any():
            self.lost += np.bincount(dst[w], minlength=self.lost.shape[0])
            if src is not None:
                self.lost_intra += int((src[w] // self.pod_size == dst[w] // self.pod_size).sum())
            if at_spine is not None:
                self.lost_spine += int(at_spine[w].sum())

    def latencies(self) -> tuple[np.ndarray, np.ndarray]:
        """(latency_s, is_intra_pod) of every packet delivered in the window."""
        if not self._lat:
            return np.zeros(0), np.zeros(0, dtype=bool)
        return np.concatenate(self._lat), np.concatenate(self._local)
