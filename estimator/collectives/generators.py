"""Explicit step schedules of every algorithm (ranks 0..n-1, sizes in bytes, fractional chunks).

Conventions (nccl-tests'): ``M`` is the per-rank buffer: the all-reduce / reduce-scatter input,
the all-gather output, the broadcast/reduce message; in gather each rank contributes ``M/n``;
in all-to-all each rank sends ``M/n`` to every rank (itself included, which costs nothing);
p2p moves ``M`` from rank 0 to rank ``n-1``. Chunks are not rounded to whole elements.

Identical steps are emitted as the *same* :class:`Step` object, which lets the pricing engine
price a 2(n-1)-step ring once per distinct step.
"""

from __future__ import annotations

from collections.abc import Callable

from estimator.collectives.params import AlgoParams, local_size, need_power, torus_dims
from estimator.collectives.schedule import Step, Transfer
from estimator.collectives.trees import inorder_parents, second_tree_rank, tree_height, tz
from estimator.errors import EstimatorError

Steps = list[Step]
Generator = Callable[[int, float, AlgoParams], Steps]


def _step(transfers: list[Transfer] | tuple[Transfer, ...]) -> Step:
    return Step(tuple(transfers))


# ---- rings ----------------------------------------------------------------------------------
def ring_phase(ranks: list[int], chunk: float, reduce: bool, bidirectional: bool = False) -> Steps:
    """len(ranks)-1 identical steps: each rank sends ``chunk`` to its ring successor (and, if
    bidirectional, half to each neighbour)."""
    k = len(ranks)
    if k < 2:
        return []
    transfers = []
    for i, r in enumerate(ranks):
        nxt = ranks[(i + 1) % k]
        if bidirectional:
            prv = ranks[(i - 1) % k]
            transfers.append(Transfer(r, nxt, chunk / 2, chunk / 2 if reduce else 0.0))
            transfers.append(Transfer(r, prv, chunk / 2, chunk / 2 if reduce else 0.0))
        else:
            transfers.append(Transfer(r, nxt, chunk, chunk if reduce else 0.0))
    step = _step(transfers)
    return [step] * (k - 1)


def parallel_rings(rings: list[list[int]], chunk: float, reduce: bool) -> Steps:
    """Several equal-length rings run concurrently, step by step."""
    phases = [ring_phase(r, chunk, reduce) for r in rings]
    if not phases or not phases[0]:
        return []
    merged = _step([t for ph in phases for t in ph[0].transfers])
    return [merged] * len(phases[0])


def ring(coll: str) -> Generator:
    def gen(n: int, m: float, p: AlgoParams, bidir: bool = False) -> Steps:
        ranks = list(range(n))
        rs = ring_phase(ranks, m / n, True, bidir) if coll in ("all_reduce", "reduce_scatter") else []
        ag = ring_phase(ranks, m / n, False, bidir) if coll in ("all_reduce", "all_gather") else []
        return rs + ag

    return gen


def bidir_ring(coll: str) -> Generator:
    base = ring(coll)
    return lambda n, m, p: base(n, m, p, True)


# ---- recursive doubling / halving, radix k ---------------------------------------------------
def recursive_doubling_all_reduce(n: int, m: float, p: AlgoParams) -> Steps:
    steps = need_power("recursive_doubling", n, 2)
    return [_step([Transfer(r, r ^ (1 << s), m, m) for r in range(n)]) for s in range(steps)]


def radix_reduce_scatter(n: int, m: float, k: int, name: str, digits: list[int] | None = None) -> Steps:
    """Radix-k recursive halving: in step s ranks differing only in digit ``digits[s]`` exchange
    1/k of what they hold with each of their k-1 peers and reduce it."""
    levels = need_power(name, n, k)
    digits = list(range(levels)) if digits is None else digits
    out = []
    held = m
    for d in digits:
        stride = k**d
        part = held / k
        out.append(_step([Transfer(r, q, part, part) for r in range(n) for q in _peers(r, stride, k)]))
        held = part
    return out


def radix_all_gather(n: int, m: float, k: int, name: str, digits: list[int] | None = None) -> Steps:
    """Radix-k recursive doubling (reverse digit order): each rank sends all it holds to its
    k-1 peers, so the held block grows k-fold per step."""
    levels = need_power(name, n, k)
    digits = list(reversed(range(levels))) if digits is None else digits
    out = []
    held = m / n
    for d in digits:
        stride = k**d
        out.append(_step([Transfer(r, q, held, 0.0) for r in range(n) for q in _peers(r, stride, k)]))
        held *= k
    return out


def _peers(r: int, stride: int, k: int) -> list[int]:
    digit = (r // stride) % k
    base = r - digit * stride
    return [base + j * stride for j in range(k) if j != digit]


def radix(coll: str, fixed_k: int | None = None, name: str = "radix") -> Generator:
    def gen(n: int, m: float, p: AlgoParams) -> Steps:
        k = fixed_k or p.radix
        rs = radix_reduce_scatter(n, m, k, name) if coll in ("all_reduce", "reduce_scatter") else []
        ag = radix_all_gather(n, m, k, name) if coll in ("all_reduce", "all_gather") else []
        return rs + ag

    return gen


def dimwise(coll: str) -> Generator:
    """Dimension-wise (BCube / SiPAC): the buffer is split into L = log_r(n) parts; part j walks
    the digits in the order j, j+1, ... so that every step uses all L dimensions at once."""

    def gen(n: int, m: float, p: AlgoParams) -> Steps:
        k = p.radix
        levels = need_power("dimwise", n, k)
        if levels == 0:
            return []
        parts = []
        for j in range(levels):
            order = [(j + s) % levels for s in range(levels)]
            rs = radix_reduce_scatter(n, m / levels, k, "dimwise", order) if coll != "all_gather" else []
            ag = (
                radix_all_gather(n, m / levels, k, "dimwise", list(reversed(order)))
                if coll != "reduce_scatter"
                else []
            )
            parts.append(rs + ag)
        return [_step([t for part in parts for t in part[s].transfers]) for s in range(len(parts[0]))]

    return gen


def neighbor_exchange(coll: str) -> Generator:
    """Neighbour exchange all-gather (Chen et al., 2005): n/2 steps for even n; step 0 swaps one
    block with the right/left neighbour, later steps swap the two newest blocks, alternating side.
    As all-reduce: ring reduce-scatter followed by neighbour-exchange all-gather."""

    def gen(n: int, m: float, p: AlgoParams) -> Steps:
        if n % 2:
            raise EstimatorError(f"algorithm 'neighbor_exchange' needs an even group size, got {n}")
        rs = ring_phase(list(range(n)), m / n, True) if coll == "all_reduce" else []
        ag = []
        for s in range(n // 2):
            size = m / n if s == 0 else 2 * m / n
            right = s % 2 == 0
            tr = []
            for r in range(n):
                even = r % 2 == 0
                peer = (r + 1) % n if even == right else (r - 1) % n
                tr.append(Transfer(r, peer, size, 0.0))
            ag.append(_step(tr))
        return rs + ag

    return gen


# ---- direct, one-shot, parameter server, all-to-all, p2p ---------------------------------------
def _all_pairs(n: int, size: float, reduce: float) -> Step:
    return _step([Transfer(r, q, size, reduce) for r in range(n) for q in range(n) if q != r])


def direct(coll: str) -> Generator:
    def gen(n: int, m: float, p: AlgoParams) -> Steps:
        if n < 2:
            return []
        if coll == "all_reduce":
            return [_all_pairs(n, m / n, m / n), _all_pairs(n, m / n, 0.0)]
        if coll == "reduce_scatter":
            return [_all_pairs(n, m / n, m / n)]
        if coll in ("all_gather", "all_to_all"):
            return [_all_pairs(n, m / n, 0.0)]
        if coll == "broadcast":
            return [_step([Transfer(0, q, m) for q in range(1, n)])]
        if coll == "reduce":
            return [_step([Transfer(q, 0, m, m) for q in range(1, n)])]
        if coll == "gather":
            return [_step([Transfer(q, 0, m / n) for q in range(1, n)])]
        if coll == "p2p":
            return [_step([Transfer(0, n - 1, m)])]
        raise AssertionError(coll)

    return gen


def one_shot_all_reduce(n: int, m: float, p: AlgoParams) -> Steps:
    return [_all_pairs(n, m, m)] if n > 1 else []


def ps_all_reduce(n: int, m: float, p: AlgoParams) -> Steps:
    """Parameter-server-like: everyone pushes its gradient to rank 0, which reduces and sends the
    result back (the OCS paper's PSLike, seed 001)."""
    if n < 2:
        return []
    return [_step([Transfer(q, 0, m, m) for q in range(1, n)]), _step([Transfer(0, q, m) for q in range(1, n)])]


def pairwise_all_to_all(n: int, m: float, p: AlgoParams) -> Steps:
    return [_step([Transfer(r, (r + s) % n, m / n) for r in range(n)]) for s in range(1, n)]


# ---- trees ----------------------------------------------------------------------------------
def _tree_phases(n: int, size: float, trees: list[Callable[[int], int]]) -> tuple[Steps, Steps]:
    """(reduce steps, broadcast steps) of in-order trees, each carrying ``size`` bytes."""
    parents = inorder_parents(n)
    h = tree_height(n)
    up: list[list[Transfer]] = [[] for _ in range(h)]
    down: list[list[Transfer]] = [[] for _ in range(h)]
    for rank_of in trees:
        for b in range(1, n):
            s = tz(b)
            src, dst = rank_of(b), rank_of(parents[b])
            up[s].append(Transfer(src, dst, size, size))
            down[s].append(Transfer(dst, src, size, 0.0))
    return [_step(t) for t in up], [_step(t) for t in reversed(down)]


def binary_tree(coll: str) -> Generator:
    def gen(n: int, m: float, p: AlgoParams) -> Steps:
        up, down = _tree_phases(n, m, [lambda b: b])
        return {"all_reduce": up + down, "reduce": up, "broadcast": down}[coll]

    return gen


def double_binary_tree_all_reduce(n: int, m: float, p: AlgoParams) -> Steps:
    """Two complementary in-order trees (see :mod:`.trees`), each reducing then broadcasting M/2,
    level by level, both trees in lock-step (no pipelining)."""
    up, down = _tree_phases(n, m / 2, [lambda b: b, lambda b: second_tree_rank(b, n)])
    return up + down


def binomial(coll: str) -> Generator:
    """Binomial tree rooted at 0: in broadcast step s ranks r < 2**s send to r + 2**s."""

    def gen(n: int, m: float, p: AlgoParams) -> Steps:
        rounds = (n - 1).bit_length()
        bcast = [
            _step([Transfer(r, r + (1 << s), m) for r in range(1 << s) if r + (1 << s) < n]) for s in range(rounds)
        ]
        if coll == "broadcast":
            return bcast
        if coll == "reduce":
            return [_step([Transfer(t.dst, t.src, m, m) for t in st.transfers]) for st in reversed(bcast)]
        # gather: the sender forwards its whole subtree, min(2**s, n - r) blocks of M/n
        out = []
        for s in reversed(range(rounds)):
            w = 1 << s
            out.append(_step([Transfer(r + w, r, min(w, n - r - w) * m / n) for r in range(0, n, 2 * w) if r + w < n]))
        return out

    return gen


# ---- multi-dimensional ------------------------------------------------------------------------
def torus2d(coll: str) -> Generator:
    """Ring per dimension on a rows x cols grid (rank = row*cols + col): reduce-scatter along
    rows (chunks M/cols), then along columns (M/(rows*cols)); all-gather in reverse order."""

    def gen(n: int, m: float, p: AlgoParams) -> Steps:
        rows, cols = torus_dims(n, p)
        row_rings = [[r * cols + c for c in range(cols)] for r in range(rows)]
        col_rings = [[r * cols + c for r in range(rows)] for c in range(cols)]
        out: Steps = []
        if coll in ("all_reduce", "reduce_scatter"):
            out += parallel_rings(row_rings, m / cols, True) + parallel_rings(col_rings, m / n, True)
        if coll in ("all_reduce", "all_gather"):
            out += parallel_rings(col_rings, m / n, False) + parallel_rings(row_rings, m / cols, False)
        return out

    return gen


def hierarchical(coll: str) -> Generator:
    """Intra-node ring reduce-scatter (chunks M/g), inter-node ring all-reduce of each shard among
    the P = n/g nodes (g rings, one per local rank, concurrently), intra-node ring all-gather."""

    def gen(n: int, m: float, p: AlgoParams) -> Steps:
        g = local_size(n, p)
        nodes = n // g
        intra = [[x * g + i for i in range(g)] for x in range(nodes)]
        inter = [[x * g + i for x in range(nodes)] for i in range(g)]
        return (
            parallel_rings(intra, m / g, True)
            + parallel_rings(inter, m / n, True)
            + parallel_rings(inter, m / n, False)
            + parallel_rings(intra, m / g, False)
        )

    return gen


def hierarchical_tree_all_reduce(n: int, m: float, p: AlgoParams) -> Steps:
    """NCCL-style tree across nodes: intra-node ring reduce-scatter, then for every local rank a
    double binary tree all-reduce of its shard M/g among the nodes (all g trees at once), then an
    intra-node ring all-gather."""
    g = local_size(n, p)
    nodes = n // g
    intra = [[x * g + i for i in range(g)] for x in range(nodes)]
    inter = []
    for st in double_binary_tree_all_reduce(nodes, m / g, p):
        inter.append(_step([Transfer(t.src * g + i, t.dst * g + i, t.nbytes, t.reduce_bytes)
                            for i in range(g) for t in st.transfers]))
    return parallel_rings(intra, m / g, True) + inter + parallel_rings(intra, m / g, False)


def pipelined_dbt_all_reduce(n: int, m: float, p: AlgoParams) -> Steps:
    """Double binary tree, each tree's half cut into C = ``p.chunks`` chunks and pipelined: in
    reduce step t a rank with send step h (see :mod:`.trees`) sends chunk t - h to its parent;
    H + C - 1 steps; the broadcast phase is its mirror image. (NCCL's tree is pipelined the same
    way, with reduce and broadcast overlapped; here they run one after the other.)"""
    c = p.chunks
    if c < 1:
        raise EstimatorError(f"algorithm 'pipelined_dbt' needs chunks >= 1, got {c}")
    parents = inorder_parents(n)
    h = tree_height(n)
    size = m / (2 * c)
    maps = (lambda b: b, lambda b: second_tree_rank(b, n))
    up: list[list[Transfer]] = [[] for _ in range(h + c - 1)]
    for rank_of in maps:
        for b in range(1, n):
            src, dst = rank_of(b), rank_of(parents[b])
            for k in range(c):
                up[tz(b) + k].append(Transfer(src, dst, size, size))
    down = [[Transfer(t.dst, t.src, t.nbytes, 0.0) for t in step] for step in reversed(up)]
    return [_step(t) for t in up] + [_step(t) for t in down]


def scatter_allgather_broadcast(n: int, m: float, p: AlgoParams) -> Steps:
    """Large-message broadcast (van de Geijn): the root scatters M/n to every rank in one step,
    then a ring all-gather."""
    if n < 2:
        return []
    scatter = _step([Transfer(0, q, m / n) for q in range(1, n)])
    return [scatter] + ring_phase(list(range(n)), m / n, False)


def reducescatter_gather_reduce(n: int, m: float, p: AlgoParams) -> Steps:
    """Large-message reduce (Rabenseifner): a ring reduce-scatter, then every rank sends its
    reduced M/n block to the root in one step."""
    if n < 2:
        return []
    gather = _step([Transfer(q, 0, m / n) for q in range(1, n)])
    return ring_phase(list(range(n)), m / n, True) + [gather]
