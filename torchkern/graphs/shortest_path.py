"""The shortest-path graph kernel: all-pairs hop distances by batched BFS."""
from __future__ import annotations

import numpy as np
import torch

from .._validation import check_bool
from ._batch import GraphSet, check_memory, compact, count_rows
from ._labels import CountFeatureKernel, initial_labels

__all__ = ["ShortestPath"]

# Node pairs per BFS group: a few (B, n, n) float32 / int16 tables of this size at once.
_PAIRS_BUDGET = 2 ** 21


def hop_distances(G: GraphSet, budget: int = _PAIRS_BUDGET, max_depth: int | None = None):
    """All-pairs hop distances, by groups of graphs of similar size.

    Yields ``(graph_ids, nodes, dist)``: ``nodes`` (B, n) the global node indices of the
    group's graphs (-1 padding), ``dist`` (B, n, n) the number of edges of a shortest
    path u → v (0 on the diagonal, -1 when v is unreachable from u or padding, or —
    with ``max_depth`` — farther than ``max_depth``: the BFS stops there).

    BFS from every node at once: the frontier F_k (nodes first reached in k steps, one row
    per source) gives F_{k+1} = (F_k A > 0) ∧ ¬reached, a batched matrix product per
    step; O(B n³ D) for diameter D, no loop over nodes or graphs.
    """
    for gids, n in G.size_chunks(budget):
        if n == 0:
            continue
        A = G.dense_adjacency(gids, n, torch.float32)  # exact for 0/1 sums below 2^24
        nodes = G.padded_nodes(gids, n)
        eye = torch.eye(n, dtype=torch.bool, device=G.device) & (nodes >= 0)[:, :, None]
        dist = torch.full(A.shape, -1, dtype=torch.int16 if n < 2 ** 15 else torch.int32,
                          device=G.device)
        dist.masked_fill_(eye, 0)
        reached, frontier = eye.clone(), eye.to(A.dtype)
        for k in range(1, n if max_depth is None else min(n, max_depth + 1)):
            new = (torch.bmm(frontier, A) > 0).logical_and_(reached.logical_not())
            if not bool(new.any()):
                break
            dist.masked_fill_(new, k)
            reached.logical_or_(new)
            frontier = new.to(A.dtype)
        yield gids, nodes, dist


# Node pairs (Σ n_g²) up to which all pairs' distances are listed at once (hop_pairs).
_LIST_BUDGET = 2 ** 22


def _bitset_pairs(G: GraphSet):
    """:func:`hop_pairs` for graphs of at most 64 nodes, on the CPU: BFS from every node at
    once on bit sets — R_k(v), the nodes within k steps of v as the bits of one uint64
    (bit j: node j of v's graph), is R_{k−1}(v) OR the R_{k−1}(u) of its out-neighbours
    u, one gather and one segment OR over the edges per step, O((N + E) D) for diameter
    D. The distance of each pair is written in binary across the steps: bit j of d(v, u)
    is set in plane j at the step d(v, u) that first reaches u."""
    N = int(G.ptr[-1])
    ptr = G.ptr.numpy()
    gon = G.graph_of_node.numpy()
    local = np.arange(N) - ptr[:-1][gon]
    src, dst = G.edge_index.numpy()
    R = np.left_shift(np.uint64(1), local.astype(np.uint64))
    own = R.copy()
    deg = np.bincount(src, minlength=N)
    has = np.flatnonzero(deg)
    starts = (np.cumsum(deg) - deg)[has]
    planes, k = [], 1
    while has.size:
        nxt = R.copy()
        nxt[has] |= np.bitwise_or.reduceat(R[dst], starts)
        new = nxt ^ R
        if not new.any():
            break
        planes += [np.zeros(N, np.uint64) for _ in range(k.bit_length() - len(planes))]
        for j in range(k.bit_length()):
            if k >> j & 1:
                planes[j] |= new
        R, k = nxt, k + 1
    n = int(np.diff(ptr).max()) if N else 0

    def bits(words):  # (N,) uint64 -> (N, n) 0/1, column j = bit j
        return np.unpackbits(words.view(np.uint8).reshape(N, 8), axis=1,
                             bitorder="little")[:, :n]
    v, j = np.nonzero(bits(R ^ own))  # pairs v ≠ u at finite distance, by row
    d = np.zeros(v.size, np.int64)
    for b, plane in enumerate(planes):
        d |= bits(plane)[v, j].astype(np.int64) << b
    u = ptr[:-1][gon[v]] + j
    return (torch.from_numpy(v.astype(np.int64)), torch.from_numpy(u.astype(np.int64)),
            torch.from_numpy(d))


def hop_pairs(G: GraphSet):
    """Every ordered pair (v, u), v ≠ u, of nodes of one graph with u reachable from v, and
    the number of edges d of a shortest path v → u: ``(v, u, d)`` (global node indices),
    or None when the set has more than ``_LIST_BUDGET`` node pairs (then stream
    :func:`hop_distances`). By bit-set BFS (:func:`_bitset_pairs`) on the CPU for
    graphs of at most 64 nodes, else from the tables of :func:`hop_distances`."""
    if not hop_pairs_fit(G):
        return None
    if G.device.type == "cpu" and int(G.num_nodes.max()) <= 64:
        return _bitset_pairs(G)
    parts = []
    for _, nodes, dist in hop_distances(G):
        b, i, j = (dist > 0).nonzero().unbind(1)
        parts.append((nodes[b, i], nodes[b, j], dist[b, i, j].long()))
    if not parts:
        z = torch.zeros(0, dtype=torch.long, device=G.device)
        return z, z, z
    return tuple(torch.cat(c) for c in zip(*parts))


def hop_pairs_fit(G: GraphSet) -> bool:
    """Whether :func:`hop_pairs` lists the pairs of G (at most ``_LIST_BUDGET`` node
    pairs)."""
    sizes = G.num_nodes
    return bool(sizes.numel()) and int((sizes * sizes).sum()) <= _LIST_BUDGET


def check_hop_distances(G: GraphSet, name: str, kernel: str) -> None:
    """Refuse up front (ValueError) a set whose largest graph's dense BFS tables of
    :func:`hop_distances` cannot fit in memory: n² node pairs × (4 bytes of adjacency,
    2 or 4 of distance, 4 of frontier, 2 of masks)."""
    if len(G) == 0:
        return
    n = int(G.num_nodes.max())
    per_pair = 12 if n < 2 ** 15 else 14
    check_memory(n * n * per_pair, f"{name}: {kernel} on a graph of {n:,} nodes computes all "
                 f"hop distances by BFS on dense (n, n) tables ({per_pair} bytes per node "
                 f"pair), which", G.device)


def shortest_path_entries(distances, labels: torch.Tensor | None, n_labels: int):
    """Counts of (label(u), label(v), d(u, v)) over ordered pairs u ≠ v at finite
    distance, per graph: ``(graph, feature, count, n_features)`` (labels None: counts of
    d(u, v) only). ``distances`` is what :func:`hop_distances` yields."""
    parts = []
    max_d = 0
    for gids, nodes, dist in distances:
        B, n = dist.shape[:2]
        max_d = max(max_d, n)
        b = torch.arange(B, device=dist.device)[:, None, None]
        if labels is None:
            cols, sizes = [b, dist.long()], [B, n]
        else:
            lab = labels[nodes.clamp_min(0)]
            cols = [b, lab[:, :, None], lab[:, None, :], dist.long()]
            sizes = [B, n_labels, n_labels, n]
        # pairs u ≠ v at finite distance (dist > 0) of each graph, counted at once
        (b, *keys), cnt = count_rows(cols, sizes, mask=dist > 0)
        parts.append([gids[b]] + keys + [cnt])
    if not parts:
        z = torch.zeros(0, dtype=torch.long, device=labels.device if labels is not None else None)
        return z, z, z, 0
    g, *keys, cnt = (torch.cat(c) for c in zip(*parts))
    sizes = [max_d] if labels is None else [n_labels, n_labels, max_d]
    col, ncol, _ = compact(keys, sizes)
    return g, col, cnt, ncol.numel()


class ShortestPath(CountFeatureKernel):
    r"""Shortest-path graph kernel (Borgwardt & Kriegel, 2005).

    Counts, in every graph, the ordered node pairs (u, v), u ≠ v, joined by a path, by
    the triple (ℓ(u), ℓ(v), d(u, v)) — d the number of edges of a shortest path — and
    compares the counts with the linear kernel:

    .. math:: k(G, G') = \sum_{u \ne v} \sum_{u' \ne v'} [\ell(u) = \ell(u')]\,
              [\ell(v) = \ell(v')]\, [d(u, v) = d(u', v')],

    pairs at infinite distance left out. ``with_labels=False`` counts pairs by their
    distance alone. This is GraKeL's ``ShortestPath(with_labels=...)`` (ordered pairs,
    hop counts).

    Parameters
    ----------
    with_labels : bool
        Whether the endpoint labels are part of the feature.
    normalize : bool
        Cosine normalization, applied lazily. A graph with no pair at finite distance
        (one node, no edge) has k(G, G) = 0 and gets a zero row; GraKeL 0.1.11 gives
        NaN there (0/0).

    Notes
    -----
    All-pairs BFS from every node at once: on the CPU, for graphs of at most 64 nodes,
    on bit sets (one uint64 per node; one gather and one segment OR over the edges per
    step: O((N + E) D) for diameter D, :func:`hop_pairs`); otherwise on groups of graphs
    of similar size as batched boolean matrix products, O(Σ_g n_g³ D_g). Up to 2^22 node
    pairs in the set, every pair is one counted item (one column per (ℓ(u), ℓ(v), d)),
    counted into a dense count matrix when few graphs and triples, else sparse; larger
    sets count the pairs group by group by one sort each, sparse features. Isolated
    nodes and empty graphs are fine (GraKeL 0.1.11 fails on graphs with isolated nodes).
    Directed graphs (edges given one way) use directed distances. The BFS tables take
    12 bytes per node pair of the largest graph (14 from 2^15 nodes): a graph whose
    tables exceed the device's memory is refused up front (ValueError giving the bytes).

    References
    ----------
    K. M. Borgwardt and H.-P. Kriegel, "Shortest-path kernels on graphs", Proc. IEEE
    ICDM (2005).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import ShortestPath
    >>> path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3)
    >>> ShortestPath(with_labels=False)([path]).to_dense()  # four pairs at 1, two at 2
    tensor([[20.]], dtype=torch.float64)
    """

    _graph_fields = ("nodes", "edges")  # a list of Data: no node attributes read

    def __init__(self, with_labels: bool = True, normalize: bool = False):
        super().__init__()
        with_labels = check_bool(with_labels, "with_labels")
        self.with_labels, self.normalize = bool(with_labels), check_bool(normalize, "normalize")

    _per_graph_features = True  # φ(G) depends on G only (the set numbers the features)

    def extra_repr(self) -> str:
        return f"with_labels={self.with_labels}, normalize={self.normalize}"

    def _check_size(self, X: GraphSet, name: str) -> None:
        check_hop_distances(X, name, "ShortestPath")

    def _items(self, G: GraphSet):
        pairs = hop_pairs(G)
        if pairs is None:
            return None
        v, u, d = pairs
        depth = int(d.max()) + 1 if d.numel() else 1
        if not self.with_labels:
            return G.graph_of_node.index_select(0, v), d, depth
        labels, L = initial_labels(G)
        L = max(L, 1)
        cols = [labels.index_select(0, v), labels.index_select(0, u), d]
        if L * L * depth <= 2 ** 26:
            feature, p = (cols[0] * L + cols[1]) * depth + cols[2], L * L * depth
        else:  # many labels: number the triples that occur
            feature, cnt, _ = compact(cols, [L, L, depth])
            p = cnt.numel()
        return G.graph_of_node.index_select(0, v), feature, p

    def _entries(self, G: GraphSet):
        if hop_pairs_fit(G):
            return super()._entries(G)
        labels, L = initial_labels(G) if self.with_labels else (None, 1)
        return shortest_path_entries(hop_distances(G), labels, L)
