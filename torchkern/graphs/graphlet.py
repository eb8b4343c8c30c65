"""The graphlet kernel: frequencies of k-node induced subgraphs, sampled or enumerated."""
from __future__ import annotations

import functools
import itertools
import math

import torch

from .._validation import as_generator, check_bool, check_random_state, is_int
from ..gram import FeatureKernelMatrix
from ._batch import GraphKernel, GraphSet, check_memory

__all__ = ["GraphletSampling"]

_SUBSETS_BUDGET = 2 ** 20  # k-node subsets examined at once


_K_MAX = 7  # graphlet_classes' table has 2^C(k, 2) entries: 2^21 at k = 7, 2^28 past it


@functools.lru_cache(maxsize=None)
def graphlet_classes(k: int):
    """The isomorphism classes of graphs on k nodes (3 ≤ k ≤ 7), by adjacency pattern.

    Returns ``(table, n_classes)``: ``table[code]`` is the class of the graph whose edges
    are the pairs b (the C(k, 2) pairs i < j in lexicographic order, as
    ``itertools.combinations``) of the bits set in ``code`` = Σ_b 2^b. Classes are the
    orbits of the codes under the k! node permutations (4, 11, 34, 156 and 1044 for k = 3
    to 7), found by propagating the smallest code of an orbit along the adjacent
    transpositions (i, i+1), which generate the permutations; they are numbered by the
    base-k code Σ_i d_i k^i of their sorted degree sequence d_1 ≤ … ≤ d_k, then by their
    smallest code (for k ≤ 4 the degree sequence alone separates the classes). Built once
    per k on int32 codes: O(k · 2^C(k, 2)) per sweep of the propagation (7 sweeps at
    k = 7, a 16 MB int64 table).
    """
    pairs = list(itertools.combinations(range(k), 2))
    bit = {p: b for b, p in enumerate(pairs)}
    codes = torch.arange(2 ** len(pairs), dtype=torch.int32)  # int32: 8 MB at k = 7
    moves = []  # the code of the graph with nodes i and i+1 swapped
    for i in range(k - 1):
        swap = list(range(k))
        swap[i], swap[i + 1] = i + 1, i
        masks = {}  # bits moving by the same shift, moved at once (≤ 5 shifts, not C(k, 2))
        for b, (u, v) in enumerate(pairs):
            s = bit[tuple(sorted((swap[u], swap[v])))] - b
            masks[s] = masks.get(s, 0) | 1 << b
        moved = torch.zeros_like(codes)
        for s, mask in masks.items():
            moved |= (codes & mask) << s if s >= 0 else (codes & mask) >> -s
        moves.append(moved)
    del codes
    rep = torch.arange(2 ** len(pairs), dtype=torch.int32)  # ends as each orbit's minimum
    while True:
        new = rep
        for moved in moves:
            new = torch.minimum(new, new[moved])
        if torch.equal(new, rep):
            break
        rep = new
    del moves, new
    reps = torch.unique(rep)  # sorted: the classes' smallest codes
    # the degree-sequence key of the class minima only (not of all 2^C(k, 2) codes)
    deg = torch.zeros(reps.numel(), k, dtype=torch.long)
    for b, (u, v) in enumerate(pairs):
        deg[:, u] += reps >> b & 1
        deg[:, v] += reps >> b & 1
    deg_code = (deg.sort(1).values * k ** torch.arange(k)).sum(1)
    order = sorted(range(reps.numel()), key=lambda c: (int(deg_code[c]), int(reps[c])))
    class_of = torch.empty(reps.numel(), dtype=torch.long)
    class_of[order] = torch.arange(reps.numel())
    return class_of[torch.searchsorted(reps, rep)], reps.numel()


@functools.lru_cache(maxsize=None)
def _class_table(k: int, device: torch.device) -> torch.Tensor:
    """:func:`graphlet_classes`' table on ``device``, copied there once (16 MB at k = 7)."""
    return graphlet_classes(k)[0].to(device)


def _combinations(n: int, k: int, device=None) -> torch.Tensor:
    """The k-subsets of range(n) as int32 rows (C(n, k), k), in lexicographic order, built
    one column at a time (each row extended by every larger node) into a preallocated
    table: O(Σ_i i·C(n, i)) work, a peak of about (4k + 24)·C(n, k) bytes for k ≪ n
    (``torch.combinations`` first builds all n^k tuples: 7.3·10⁸ rows for k = 6 of 30
    nodes)."""
    comb = torch.arange(n, dtype=torch.int32, device=device)[:, None]
    for c in range(1, k):
        last = comb[:, -1].long()
        reps = n - 1 - last  # the larger nodes of each row
        rows = torch.repeat_interleave(torch.arange(comb.shape[0], device=device), reps)
        out = torch.empty(rows.numel(), c + 1, dtype=torch.int32, device=device)
        for j in range(c):
            out[:, j] = comb[:, j][rows]
        nxt = torch.arange(rows.numel(), device=device)  # row r: last + 1 + r − its first
        nxt -= (torch.cumsum(reps, 0) - reps)[rows]
        nxt += last[rows]
        nxt += 1
        out[:, c] = nxt
        comb = out
    return comb


def _triple_counts(G: GraphSet, keys: torch.Tensor, N: int, table: torch.Tensor):
    """The number of 3-node subsets of every graph of G in each class (no edge, one edge,
    an induced path, a triangle), in closed form: with m edges, t triangles and
    w = Σ_v C(deg v, 2) paths of two edges (each triangle holds three),
    triangles t, paths w − 3t, one-edge subsets m(n − 2) − 2(w − 3t) − 3t (every edge
    lies in n − 2 subsets) and the rest of the C(n, 3) empty. ``keys`` are the distinct
    undirected edges u·N + v, u < v (no self-loop). t is trace(A³)/6 from batched dense
    products (O(n³) per graph, float64: exact integers). Returns (G, 4) int64 counts,
    columns the classes of ``table`` (:func:`graphlet_classes`)."""
    dev, n_graphs = G.device, len(G)
    u, v = torch.div(keys, N, rounding_mode="floor"), keys % N
    gon = G.graph_of_node
    total = gon.numel()
    deg = torch.bincount(u, minlength=total) + torch.bincount(v, minlength=total)
    m = torch.bincount(gon[u], minlength=n_graphs)
    w = torch.zeros(n_graphs, dtype=torch.long, device=dev)
    w.index_add_(0, gon, deg * (deg - 1) // 2)
    tri = torch.zeros(n_graphs, dtype=torch.long, device=dev)
    for gids, n in G.size_chunks(_SUBSETS_BUDGET):
        if n < 3:
            continue
        A = G.dense_adjacency(gids, n, torch.float64)
        A = ((A + A.transpose(1, 2)) > 0).to(torch.float64)
        A.diagonal(dim1=1, dim2=2).zero_()
        tri[gids] = (torch.bmm(A, A) * A).sum((1, 2)).round().long() // 6
    n = G.num_nodes
    path = w - 3 * tri
    one = m * (n - 2).clamp_min(0) - 2 * path - 3 * tri
    none = n * (n - 1) * (n - 2) // 6 - one - path - tri
    out = torch.zeros(n_graphs, 4, dtype=torch.long, device=dev)
    # adjacency codes (pairs 01, 02, 12): no edge, one edge, a path (01, 02), a triangle
    for cnt, code in ((none, 0), (one, 1), (path, 3), (tri, 7)):
        out[:, int(table[code])] = cnt
    return out


class GraphletSampling(GraphKernel):
    r"""Graphlet kernel (Shervashidze et al., 2009): compares the frequencies of the
    isomorphism classes of k-node induced subgraphs (graphlets, k = 3 to 7).

    φ(G) is the distribution of the class of G[S] for S a uniformly random k-subset of
    G's nodes (4 classes for k = 3, 11 for k = 4, 34 for k = 5 — GraKeL's default —,
    156 for k = 6 and 1044 for k = 7, connected or not; :func:`graphlet_classes`), and
    k(G, G') = ⟨φ(G), φ(G')⟩. ``n_samples=None`` enumerates every k-subset (the exact
    frequencies; Σ_g C(n_g, k) subsets); an int estimates φ(G) from that many samples
    per graph.

    Sampling uses one table of uniform numbers per call, shared by all graphs: sample s
    of a graph with n nodes picks its k-subset by Floyd's algorithm from row s. So a
    graph's features depend on the graph and ``random_state`` only — not on its position
    or the other graphs in the call — and the Gram of training and test sets stay
    consistent: every call of one kernel object draws the same table (``random_state``
    None: a seed drawn once for the object from torch's global generator; a Generator:
    its state at the first call, replayed).

    Parameters
    ----------
    k : int
        Nodes of a graphlet, 3 ≤ k ≤ 7.
    n_samples : int or None
        Sampled subsets per graph (None: all subsets).
    random_state : int, torch.Generator or None
    normalize : bool
        Cosine normalization, applied lazily.

    Notes
    -----
    The class of a subset is looked up from the adjacency code of its induced subgraph
    (C(k, 2) bits, a table of the isomorphism classes built once per k); edges are looked
    up in the sorted edge keys by binary search. For k = 3 and ``n_samples=None`` the
    class counts have a closed form (edges, triangles trace(A³)/6, two-edge paths
    Σ_v C(deg v, 2) − 3t; Shervashidze et al., 2009, Sec. 4.1, count 3-node graphlets the
    same way): no subset is enumerated, O(n³) per graph. An edge counts when either
    direction is present (graphlets are undirected); self-loops are ignored. Graphs with
    fewer than k nodes get φ = 0. Cost: O(G·s·k² log E) for s samples per graph; features
    are dense (G, classes).
    ``n_samples=None`` with k ≥ 4 holds the C(n, k) subsets of a graph at once (int32,
    4k bytes each, about 4k + 48 while they are built) and looks up at most 2^20 of them
    at once (16k + 160 bytes each, measured with the allocator's slack), with k = 3 three
    dense (n, n) float64 tables: a graph for which that exceeds the device's memory is
    refused up front (ValueError giving the bytes); sampling has no such limit.
    By Hoeffding's inequality each estimated frequency is within ε of the truth with
    probability 1 − δ for s ≥ log(2/δ)/(2ε²) (Shervashidze et al., 2009, Sec. 3.1, give a
    bound on the whole vector).

    References
    ----------
    N. Shervashidze, S. V. N. Vishwanathan, T. Petri, K. Mehlhorn and K. M. Borgwardt,
    "Efficient graphlet kernels for large graph comparison", AISTATS (2009).
    R. W. Floyd and J. Bentley, "Programming pearls: a sample of brilliance", CACM 30(9)
    (1987) (random k-subsets).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import GraphletSampling
    >>> tri = Data(edge_index=torch.tensor([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]]), num_nodes=3)
    >>> GraphletSampling(k=3, n_samples=None).features([tri])  # the one subset is a triangle
    tensor([[0., 0., 0., 1.]], dtype=torch.float64)
    """

    _graph_fields = ("edges",)  # a list of Data: no node label nor attribute read

    def __init__(self, k: int = 3, n_samples: int | None = 1000, random_state=None,
                 normalize: bool = False):
        super().__init__()
        if isinstance(k, bool) or not is_int(k) or not 3 <= k <= _K_MAX:
            raise ValueError(f"k must be an int from 3 to {_K_MAX} (the nodes of a graphlet), "
                             f"got {k!r}")
        if n_samples is not None and (isinstance(n_samples, bool) or
                                      not is_int(n_samples) or n_samples < 1):
            raise ValueError(f"n_samples must be a positive int or None, got {n_samples!r}")
        check_random_state(random_state)  # validate now, drawing nothing
        self.k, self.n_samples, self.random_state = int(k), n_samples, random_state
        self.normalize = check_bool(normalize, "normalize")

    def extra_repr(self) -> str:
        return f"k={self.k}, n_samples={self.n_samples}, normalize={self.normalize}"

    def features(self, X) -> torch.Tensor:
        """φ of every graph of X: class frequencies, shape (n_graphs, classes), whatever
        ``normalize`` (with ``normalize=True`` the kernel is the cosine of these rows)."""
        X = self.check_input(X, "X")
        return self._features(X, self._uniforms(X.device))

    def _check_size(self, X: GraphSet, name: str) -> None:
        if self.n_samples is not None:
            check_memory(self.n_samples * self.k * 8, f"{name}: GraphletSampling(n_samples="
                         f"{self.n_samples:,}) draws {self.k} float64 uniforms per sample, "
                         f"which", X.device)
            return
        if len(X) == 0:
            return
        n, k = int(X.num_nodes.max()), self.k
        if k == 3:  # closed form (_triple_counts): three dense float64 (n, n) tables
            check_memory(n * n * 24, f"{name}: GraphletSampling(k=3, n_samples=None) on a "
                         f"graph of {n:,} nodes counts its triangles on dense (n, n) tables "
                         f"(24 bytes per node pair), which", X.device)
            return
        subsets = math.comb(n, k)
        rows = min(subsets * len(X), _SUBSETS_BUDGET)  # examined at once
        # measured peaks (resident memory): _combinations ~(4k + 24)·C(n, k) bytes plus
        # allocator slack, the adjacency lookups ~(8k + 100) bytes a row examined
        nbytes = (4 * k + 48) * subsets + (16 * k + 160) * rows
        check_memory(nbytes, f"{name}: GraphletSampling(n_samples=None) on a graph of {n:,} "
                     f"nodes enumerates its C(n, {k}) = {subsets:,} node subsets ({4 * k + 48} "
                     f"bytes each, and {16 * k + 160} per subset looked up at once), which",
                     X.device)

    def _uniforms(self, device):
        if self.n_samples is None:
            return None
        gen = as_generator(self._fixed_draws(torch_seed=True))
        gdev = gen.device if gen is not None else device
        return torch.rand(self.n_samples, self.k, generator=gen, device=gdev,
                          dtype=torch.float64).to(device)

    def _gram(self, X: GraphSet, Y: GraphSet | None):
        U = self._uniforms(X.device)
        phi_x = self._features(X, U)
        return FeatureKernelMatrix(phi_x, None if Y is None else self._features(Y, U))

    def _diag(self, X: GraphSet) -> torch.Tensor:
        phi = self._features(X, self._uniforms(X.device))
        return (phi * phi).sum(1)

    def _features(self, G: GraphSet, U) -> torch.Tensor:
        k, dev = self.k, G.device
        table, n_classes = _class_table(k, dev), graphlet_classes(k)[1]
        counts = torch.zeros(len(G), n_classes, dtype=G.dtype, device=dev)
        sizes = G.num_nodes
        ok = torch.nonzero(sizes >= k).reshape(-1)
        if ok.numel() == 0:
            return counts
        N = max(int(G.ptr[-1]), 1)
        s, t = G.edge_index
        keep = s != t
        keys = torch.unique(torch.minimum(s, t)[keep] * N + torch.maximum(s, t)[keep])
        if U is None and k == 3:
            counts = _triple_counts(G, keys, N, table).to(G.dtype)
            per_graph = counts.sum(1, keepdim=True)
            return torch.where(per_graph > 0, counts / per_graph.clamp_min(1), counts)
        for graph, nodes in self._subsets(G, ok, U):
            code = torch.zeros_like(graph)  # the induced subgraph's adjacency code
            for bit, (i, j) in enumerate(itertools.combinations(range(k), 2)):
                a, b = nodes[:, i], nodes[:, j]
                q = torch.minimum(a, b) * N + torch.maximum(a, b)
                pos = torch.searchsorted(keys, q).clamp_max(max(keys.numel() - 1, 0))
                if keys.numel():
                    code |= (keys[pos] == q).long() << bit
            counts.index_put_((graph, table[code]), torch.ones_like(graph, dtype=G.dtype),
                              accumulate=True)
        per_graph = counts.sum(1, keepdim=True)
        return torch.where(per_graph > 0, counts / per_graph.clamp_min(1), counts)

    def _subsets(self, G: GraphSet, graphs: torch.Tensor, U):
        """Yields ``(graph, nodes)``: k-subsets of the nodes of ``graphs`` as global node
        indices (rows of ``nodes``), all of them or ``n_samples`` per graph."""
        k, dev = self.k, G.device
        if U is None:  # every subset: one _combinations per distinct graph size
            sizes = G.num_nodes[graphs]
            for n in torch.unique(sizes).tolist():
                gs = graphs[sizes == n]
                comb = _combinations(n, k, dev)
                step = max(1, _SUBSETS_BUDGET // max(comb.shape[0], 1))
                for c in range(0, gs.numel(), step):
                    g = gs[c:c + step]
                    # a graph of more subsets than the budget: in parts of the budget
                    for r in range(0, comb.shape[0], _SUBSETS_BUDGET):
                        part = comb[r:r + _SUBSETS_BUDGET]
                        yield (g.repeat_interleave(part.shape[0]),
                               (G.ptr[g][:, None, None] + part).reshape(-1, k))
            return
        S = U.shape[0]
        step = max(1, _SUBSETS_BUDGET // S)
        for c in range(0, graphs.numel(), step):
            g = graphs[c:c + step]
            n = G.num_nodes[g][:, None].expand(-1, S).reshape(-1)
            chosen = torch.empty(n.numel(), k, dtype=torch.long, device=dev)
            u = U.repeat(g.numel(), 1)
            for i in range(k):  # Floyd: j = n − k + i; pick t in [0, j], or j if t taken
                j = n - k + i
                t = torch.minimum((u[:, i] * (j + 1)).long(), j)
                taken = (chosen[:, :i] == t[:, None]).any(1)
                chosen[:, i] = torch.where(taken, j, t)
            yield g.repeat_interleave(S), G.ptr[g].repeat_interleave(S)[:, None] + chosen
