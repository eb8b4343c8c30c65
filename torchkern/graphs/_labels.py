"""The relabel / aggregate core the graph kernels share.

- :func:`compact` (in ``_batch``) — distinct rows of integer columns, by packed keys;
- :func:`wl_edges`, :func:`wl_relabel` — one Weisfeiler–Lehman round on a whole
  :class:`GraphSet` at once;
- :class:`CountFeatureKernel` — a kernel whose features are sparse counts per graph
  (WL, shortest path): it builds them once on X ∪ Y so that both share one dictionary,
  and returns Φ_X Φ_Yᵀ lazily.
"""
from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import torch

from .._threads import one_thread
from ..gram import DenseKernelMatrix, FeatureKernelMatrix, KernelMatrix, _as_index
from ._batch import (_RADIX_FROM, GraphKernel, GraphSet, _lsd_order, compact, count_rows,
                     segment_ranges, sort_int64, sorted_unique)


def int64_label_values(values: torch.Tensor, kernel: str) -> torch.Tensor:
    """The distinct label rows ``values`` (L, d) as int64, for the kernels that number
    labels by their values (:class:`NeighborhoodHash`, :class:`Propagation`). Float
    rows hold integers (checked when the set was read), but one of magnitude 2^63 or
    more has no int64: its cast would wrap (distinct labels becoming one), so it is a
    ValueError naming ``x``."""
    if values.is_floating_point() and values.numel():
        lo, hi = (float(v) for v in torch.aminmax(values))
        if hi >= 2.0 ** 63 or lo < -2.0 ** 63:
            big = hi if hi >= -lo else lo
            raise ValueError(f"x: {kernel} numbers node labels by their values as 64-bit "
                             f"integers, and x holds the label value {big:g}, outside the "
                             f"int64 range: renumber the labels (0, 1, ...)")
    return values.long()


class WLEdges(NamedTuple):
    """The edges a WL round reads, built once per set (:func:`wl_edges`): sources ``src``
    (sorted) and targets ``dst``, out-degrees ``deg`` and the first edge of every node
    ``start`` (N,), edge label ids ``edge_label`` in [0, ``n_edge_labels``) or None.

    ``nodes`` (m,): the edges are those of these nodes only (:func:`_restricted`), their
    sources renumbered 0..m−1 in this order (``deg`` and ``start`` (m,)); the targets
    keep their ids in the whole set. None: every node, in order."""
    src: torch.Tensor
    dst: torch.Tensor
    deg: torch.Tensor
    start: torch.Tensor
    edge_label: torch.Tensor | None
    n_edge_labels: int
    nodes: torch.Tensor | None = None


def _own(labels: torch.Tensor, edges: WLEdges) -> torch.Tensor:
    """The labels of the nodes whose signatures ``edges`` give (all, or ``edges.nodes``)."""
    return labels if edges.nodes is None else labels.index_select(0, edges.nodes)


def _restricted(edges: WLEdges, nodes: torch.Tensor) -> WLEdges:
    """The :class:`WLEdges` of the out-edges of ``nodes`` (ids in the whole set, edges of
    all nodes in ``edges``)."""
    deg = edges.deg.index_select(0, nodes)
    sel = segment_ranges(edges.start.index_select(0, nodes), deg)
    src = torch.repeat_interleave(torch.arange(nodes.numel(), device=nodes.device), deg,
                                  output_size=sel.numel())
    el = None if edges.edge_label is None else edges.edge_label.index_select(0, sel)
    return WLEdges(src, edges.dst.index_select(0, sel), deg, torch.cumsum(deg, 0) - deg, el,
                   edges.n_edge_labels, nodes)


def wl_edges(G: GraphSet, edge_labels: bool = False) -> WLEdges:
    """The :class:`WLEdges` of G; ``edge_labels`` folds the edge labels (rows of
    ``edge_attr``) into the neighbour signatures."""
    src, dst = G.edge_index  # sorted by source
    deg = torch.bincount(src, minlength=int(G.ptr[-1]))
    start = torch.cumsum(deg, 0) - deg
    if not edge_labels:
        return WLEdges(src, dst, deg, start, None, 1)
    if G.edge_label is None:
        raise ValueError("edge_labels=True needs edge labels: give every graph edge_attr "
                         "(one row per edge; each distinct row is one label)")
    values, ids, _, _ = sorted_unique(G.edge_label)
    return WLEdges(src, dst, deg, start, ids, max(values.numel(), 1))


# odd 64-bit multipliers (golden ratio; SplitMix64's two), as signed int64
_MIX = tuple(m - 2 ** 64 for m in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _mix(h: torch.Tensor) -> torch.Tensor:
    """SplitMix64's finalizer on int64 (arithmetic wraps around; the shifts are logical)."""
    h = (h ^ ((h >> 30) & ((1 << 34) - 1))) * _MIX[1]
    h = (h ^ ((h >> 27) & ((1 << 37) - 1))) * _MIX[2]
    return h ^ ((h >> 31) & ((1 << 33) - 1))


_CODES: dict = {}  # (salt, device) -> the first codes of that family, computed once


def _random_codes(n: int, salt: int, device) -> torch.Tensor:
    """n pseudo-random int64 codes (SplitMix64 of 1..n times ``salt``). Up to 2^20 codes
    of a family are kept once computed (a prefix is returned: do not write into it)."""
    if n > 2 ** 20:
        return _mix(torch.arange(1, n + 1, device=device) * salt)
    key = (salt, str(device))
    codes = _CODES.get(key)
    if codes is None or codes.numel() < n:
        m = min(max(n, 2 * (0 if codes is None else codes.numel()), 1024), 2 ** 20)
        codes = _CODES[key] = _mix(torch.arange(1, m + 1, device=device) * salt)
    return codes[:n]


def neighbour_tokens(labels: torch.Tensor, edges: WLEdges, sel=None):
    """What an edge s → t adds to the signature of s: ℓ(t), or the pair (edge label, ℓ(t))
    as one id ℓ(t)·C + edge label, for all edges or the edges ``sel``."""
    dst = edges.dst if sel is None else edges.dst.index_select(0, sel)
    tokens = labels.index_select(0, dst)
    if edges.edge_label is None:
        return tokens
    el = edges.edge_label if sel is None else edges.edge_label.index_select(0, sel)
    return tokens * edges.n_edge_labels + el


def wl_hash(labels: torch.Tensor, n_labels: int, edges: WLEdges, radix: int | None = None):
    """An int64 key of every node's signature (own label, multiset of its tokens): the own
    label's code plus the sum of its tokens' codes — one segment sum over all edges, no
    sort (a sum does not depend on the order).

    ``radix=None``: pseudo-random 64-bit codes (two independent families), a hash.
    ``radix=B`` (B > every out-degree): code(token t) = Bᵗ and code(own ℓ) = ℓ·B^T, so the
    key is the signature written in base B — injective, when it fits in 63 bits."""
    n_tokens = n_labels * edges.n_edge_labels
    dev = labels.device
    if radix is None:
        token_code = _random_codes(n_tokens, _MIX[0], dev)
        h = _random_codes(n_labels, _MIX[1], dev).index_select(0, _own(labels, edges))
    else:
        token_code = radix ** torch.arange(n_tokens, device=dev)
        h = _own(labels, edges) * radix ** n_tokens
    if edges.edge_label is None:  # codes per node, then one gather over the edges
        codes = token_code.index_select(0, labels).index_select(0, edges.dst)
    else:
        codes = token_code.index_select(0, neighbour_tokens(labels, edges))
    return h.index_add_(0, edges.src, codes)


def _sort(key: torch.Tensor) -> torch.Tensor:
    """A 1-D integer tensor sorted (on the CPU by :func:`sort_int64`; an int32 one by
    NumPy's sort below 2^15 entries, by torch's radix sort from there, twice as fast
    as on int64 there)."""
    if key.device.type == "cpu" and key.dtype == torch.int64:
        return torch.from_numpy(sort_int64(key.numpy()))
    if key.device.type == "cpu" and key.dtype == torch.int32 and key.numel() < _RADIX_FROM:
        return torch.from_numpy(np.sort(key.numpy()))
    return torch.sort(key).values


def _sorted_in_segments(src: torch.Tensor, tokens: torch.Tensor, n_tokens: int, n_nodes: int):
    """``tokens`` sorted within each run of equal ``src`` (``src`` non-decreasing), runs in
    place: one sort of the packed keys src·T + token when they fit in int64, else two
    stable sorts."""
    if n_nodes * max(n_tokens, 1) < 2 ** 62:
        return _sort(src * n_tokens + tokens) - src * n_tokens
    order = torch.argsort(tokens, stable=True)
    order = order.index_select(0, torch.argsort(src.index_select(0, order), stable=True))
    return tokens.index_select(0, order)


def _digit_rows(labels, n_labels, edges: WLEdges, budget: int):
    """Every node's token counts written in base B = max out-degree + 1, c tokens to an
    int64 (c a power of two, B^c ≤ 2^62; a count is at most the degree, a digit below B,
    so no carry): an exact (N, ⌈T/c⌉) code of the token multisets, by one segment sum
    over the edges. None when it has more than ``budget`` entries."""
    N, n_tokens = edges.deg.numel(), n_labels * edges.n_edge_labels
    radix = int(edges.deg.max()) + 1 if edges.deg.numel() else 1
    shift = 6  # c = 2^shift tokens to an int64: the largest power of two with B^c ≤ 2^62
    while radix > 1 and radix ** (1 << shift) > 2 ** 62:
        shift -= 1
    width = -(-n_tokens >> shift)
    if N * width > budget:
        return None
    tok = neighbour_tokens(labels, edges)
    place = radix ** torch.arange(1 << shift, device=labels.device)
    rows = torch.zeros(N * width, dtype=torch.long, device=labels.device)
    rows.index_add_(0, edges.src * width + (tok >> shift),
                    place.index_select(0, tok & ((1 << shift) - 1)))
    return rows.view(N, width)


def _grouping_is_exact(labels, n_labels, edges: WLEdges, inv, counts, first) -> bool:
    """Whether every node has the own label and the token multiset of its group's first
    node. With few digit rows (:func:`_digit_rows`: N·⌈T/c⌉ entries at most 4(N + E) or
    2^18) by comparing every node's row with its group's first node's, without a sort;
    else on the nodes of groups of two or more only: by token counts per node when the
    tokens are few (N·T small), else entry by entry on the sorted tokens of those nodes'
    edges."""
    N, own = edges.deg.numel(), _own(labels, edges)
    digits = _digit_rows(labels, n_labels, edges, max(4 * (N + edges.src.numel()), 2 ** 18))
    if digits is not None:
        rep = first.index_select(0, inv)
        return (torch.equal(own.index_select(0, rep), own)
                and torch.equal(digits.index_select(0, rep), digits))
    shared = counts.index_select(0, inv) > 1
    nodes = shared.nonzero().reshape(-1)
    if not nodes.numel():
        return True
    rep = first.index_select(0, inv)
    r = rep.index_select(0, nodes)
    for t in (own, edges.deg):
        if not torch.equal(t.index_select(0, r), t.index_select(0, nodes)):
            return False
    n_tokens = n_labels * edges.n_edge_labels
    # the edges of the shared nodes, in order (sources sorted)
    sel = segment_ranges(edges.start.index_select(0, nodes), edges.deg.index_select(0, nodes))
    s, tok = edges.src.index_select(0, sel), neighbour_tokens(labels, edges, sel)
    if N * n_tokens <= max(4 * sel.numel(), 2 ** 16):  # few tokens: token counts per node
        cnt = torch.bincount(s * n_tokens + tok, minlength=N * n_tokens).view(N, n_tokens)
        return torch.equal(cnt.index_select(0, r), cnt.index_select(0, nodes))
    srt = _sorted_in_segments(s, tok, n_tokens, N)
    d = edges.deg * shared
    start = torch.cumsum(d, 0) - d  # where each shared node's block starts in srt
    shift = start.index_select(0, rep) - start  # from v's block to its rep's (same length)
    partner = torch.arange(s.numel(), device=s.device) + shift.index_select(0, s)
    return torch.equal(srt, srt.index_select(0, partner))


def _exact_relabel(labels, n_labels, edges: WLEdges):
    """Signature ids by exact grouping, without hashing: each node's tokens sorted, then the
    rows (own label, d sorted tokens) of the nodes of each degree d grouped by one sort."""
    N, n_tokens, own = edges.deg.numel(), n_labels * edges.n_edge_labels, _own(labels, edges)
    srt = _sorted_in_segments(edges.src, neighbour_tokens(labels, edges), n_tokens, N)
    by_deg = torch.argsort(edges.deg, stable=True)
    degrees, counts = torch.unique_consecutive(edges.deg[by_deg], return_counts=True)
    new, n_new = torch.empty_like(own), 0
    for d, nodes in zip(degrees.tolist(), torch.split(by_deg, counts.tolist())):
        rows = srt[edges.start[nodes, None] + torch.arange(d, device=labels.device)]
        inv, cnt, _ = compact([own[nodes], *rows.unbind(1)], [n_labels] + [n_tokens] * d)
        new[nodes] = inv + n_new
        n_new += cnt.numel()
    return new, n_new


def _exact_radix(n_labels: int, edges: WLEdges, bits: int) -> int | None:
    """B = max out-degree + 1 when every signature written in base B (:func:`wl_hash`)
    is below 2^bits, else None."""
    radix = int(edges.deg.max()) + 1 if edges.deg.numel() else 1
    n_tokens = n_labels * edges.n_edge_labels
    if n_tokens * math.log2(radix) + math.log2(max(n_labels, 1)) < bits:
        return radix
    return None


def wl_relabel(labels: torch.Tensor, n_labels: int, edges: WLEdges):
    """One Weisfeiler–Lehman round: every node's new label is the id of its signature (own
    label, multiset of its out-neighbours' labels — with ``edges.edge_label``, of the
    (edge label, neighbour label) pairs), over all graphs at once.

    Returns ``(new_labels, n_new)``, new labels in [0, n_new). Every signature gets an
    int64 key (:func:`wl_hash`: a segment sum of token codes over the edges) and all N
    nodes are grouped by one sort of the keys. When the signature written in base
    (max degree + 1) fits in the key, the key is that number and the grouping is exact by
    construction. Otherwise the key is a 64-bit hash and the grouping is *checked*: every
    node of a group of two or more has the own label and token multiset of the group's
    first node — compared on exact digit rows of the token counts (:func:`_digit_rows`,
    one segment sum, no sort) when those are few, else entry by entry on the sorted
    tokens — so the ids are exact. Should two different signatures share a hash, the
    round is regrouped exactly (:func:`_exact_relabel`). O(N + E) work plus a sort of
    the N keys (and of the checked nodes' edges without digit rows), no loop over nodes
    or graphs.

    With ``edges.nodes`` (:func:`_restricted`) the signatures are those of these nodes
    only (own label ``labels[nodes]``, neighbours' labels read in ``labels``): their ids,
    (m,).
    """
    N = edges.deg.numel()
    if N == 0:
        return _own(labels, edges).clone(), 0
    b = max(int(N - 1).bit_length(), 1)  # sorted_unique packs positions into b bits
    radix = _exact_radix(n_labels, edges, 61 - b)
    key = wl_hash(labels, n_labels, edges, radix)
    if radix is None:
        key = (key >> (b + 1)) & ((1 << (62 - b)) - 1)
    _, inv, counts, first = sorted_unique(key)
    if radix is not None or _grouping_is_exact(labels, n_labels, edges, inv, counts, first):
        return inv, counts.numel()
    return _exact_relabel(labels, n_labels, edges)


def initial_labels(G: GraphSet):
    """The node labels of G renumbered to [0, L) (only labels that occur)."""
    if not G.node_label.numel():
        return G.node_label, 0
    values, labels, _, _ = sorted_unique(G.node_label)
    return labels, values.numel()


def wl_label_sequence(G: GraphSet, n_iter: int, edge_labels: bool = False):
    """Labels of the initial round and of ``n_iter`` WL rounds: a list of (labels, L).

    Every round refines the partition of the nodes by labels (the own label is part of
    the signature), so a round only groups the nodes whose label is shared
    (:func:`_refine`: most late WL labels are held by one node), and once a round splits
    no class (L unchanged) the partition is stable: the later rounds have the same
    labels (Shervashidze et al., 2011, Sec. 2.2; the stable colouring of colour
    refinement)."""
    seq = [initial_labels(G)]
    edges = wl_edges(G, edge_labels) if n_iter else None
    for i in range(n_iter):
        labels, L = seq[-1]
        if i and L == seq[-2][1]:  # stable: every later round the same
            seq.extend([seq[-1]] * (n_iter - i))
            break
        seq.append(_refine(labels, L, edges))
    return seq


def _refine(labels: torch.Tensor, n_labels: int, edges: WLEdges):
    """:func:`wl_relabel`, hashing only the nodes whose label is held by another node too
    when at most half of the nodes are such (at least N/2 labels): a node alone with its
    label is alone with its new one (its signature holds its own label), so it gets a
    fresh id unseen."""
    N = labels.numel()
    if 2 * n_labels < N:  # fewer than N/2 labels: fewer than N/2 nodes alone
        return wl_relabel(labels, n_labels, edges)
    shared = torch.bincount(labels, minlength=n_labels).index_select(0, labels) > 1
    nodes = shared.nonzero().reshape(-1)
    if 2 * nodes.numel() > N:
        return wl_relabel(labels, n_labels, edges)
    ids, n_ids = wl_relabel(labels, n_labels, _restricted(edges, nodes)) if nodes.numel() \
        else (labels.new_zeros(0), 0)
    alone = (~shared).nonzero().reshape(-1)
    new = torch.empty_like(labels).scatter_(0, nodes, ids).scatter_(
        0, alone, torch.arange(n_ids, n_ids + alone.numel(), device=labels.device))
    return new, n_ids + alone.numel()


def histogram(graph_of_node: torch.Tensor, labels: torch.Tensor, n_graphs: int,
              n_labels: int):
    """Counts of every (graph, label): ``(rows, cols, counts)`` of a sparse (G, L) matrix."""
    (rows, cols), counts = count_rows([graph_of_node, labels], [n_graphs, n_labels])
    return rows, cols, counts


def label_items(graph_of_node: torch.Tensor, seq):
    """The nodes of every round ``seq`` (a list of (labels, L)) as counted items of
    :meth:`CountFeatureKernel._items`: ``(graph, feature, p)``, round i's labels numbered
    after those of the rounds before it (p = Σ L_i)."""
    offsets = np.cumsum([0] + [L for _, L in seq]).tolist()
    feature = torch.cat([labels + off for (labels, _), off in zip(seq, offsets)])
    return graph_of_node.repeat(len(seq)), feature, offsets[-1]


def round_histograms(graph_of_node: torch.Tensor, seq, n_graphs: int):
    """Counts of every (graph, label of round i) over all rounds ``seq`` (a list of
    (labels, L)), round i's labels numbered after those of the rounds before it:
    ``(rows, cols, counts, n_columns)``, sorted by (row, column) — one sort of all
    (graph, column) keys."""
    offsets = np.cumsum([0] + [L for _, L in seq]).tolist()
    p = offsets[-1]
    n = graph_of_node.numel() * len(seq)
    if n_graphs * p <= max(4 * n, 2 ** 21):  # few cells: counted by one bincount, no sort
        base = graph_of_node * p
        cnt = torch.bincount(torch.cat([base + (labels + off)
                                        for (labels, _), off in zip(seq, offsets)]),
                             minlength=n_graphs * p)
        key = cnt.nonzero().reshape(-1)
        return key // p, key % p, cnt.index_select(0, key), p
    if n_graphs * max(p, 1) >= 2 ** (62 - max(int(n - 1).bit_length(), 1)):
        parts = [histogram(graph_of_node, labels, n_graphs, L) for labels, L in seq]
        rows, cols, counts = (torch.cat(c) for c in zip(*parts))
        cols = cols + torch.repeat_interleave(
            torch.tensor(offsets[:-1], device=cols.device),
            torch.tensor([c.numel() for _, c, _ in parts], device=cols.device))
        return rows, cols, counts, p
    base = graph_of_node * p
    key = torch.cat([base + (labels + off) for (labels, _), off in zip(seq, offsets)])
    uniq, _, counts, _ = sorted_unique(key, inverse=False)
    return uniq // max(p, 1), uniq % max(p, 1), counts, p


def count_items(graph: torch.Tensor, feature: torch.Tensor, p: int, n_graphs: int):
    """The counts of items ``(graph, feature)`` (features in [0, p)) as sparse entries
    ``(rows, cols, counts, p)``, sorted by (row, column): see :func:`count_rows`."""
    (rows, cols), counts = count_rows([graph, feature], [n_graphs, p])
    return rows, cols, counts, p


def _count_pairs(graph: torch.Tensor, feature: torch.Tensor, p: int, n_graphs: int):
    """:func:`count_items` ``[:3]``; a large key space by one sort of the packed keys
    graph·2^b + feature (b the bits of p − 1), int32 when they fit — torch's CPU radix
    sort is twice as fast on int32 as on int64 — decoded by shifts, not divisions."""
    bits = max(int(p - 1).bit_length(), 1)
    if n_graphs * p <= max(4 * feature.numel(), 2 ** 16) or n_graphs << bits >= 2 ** 62:
        return count_items(graph, feature, p, n_graphs)[:3]
    key = (graph << bits) | feature
    if n_graphs << bits <= 2 ** 31:
        key = key.int()
    key, counts = torch.unique_consecutive(_sort(key), return_counts=True)
    key = key.long()
    return key >> bits, key & ((1 << bits) - 1), counts


def _count_with_singletons(graph: torch.Tensor, feature: torch.Tensor, p: int, n_graphs: int):
    """:func:`count_items`, with the features that occur once in all items (most WL labels
    of the late rounds) left out of the sort: each is one entry (graph, 1) of its own
    column. Returns the same matrix up to a renumbering of the columns — the features
    occurring more than once first (in their order), then the single ones — its entries
    sorted by (row, column): the sort (:func:`_count_pairs`) runs on the repeated items
    only, the single ones are put in place by :func:`_merge_rows`."""
    n_items = feature.numel()
    if n_items < 2 ** 12:
        return count_items(graph, feature, p, n_graphs)
    fc = torch.bincount(feature, minlength=p)
    keep = (fc.index_select(0, feature) > 1).nonzero().reshape(-1)
    n_once = n_items - keep.numel()
    if n_once < n_items // 4:
        return count_items(graph, feature, p, n_graphs)
    repeated = fc > 1
    p_r = int(repeated.sum())
    g = graph.index_select(0, keep)
    counted = _count_pairs(
        g, (torch.cumsum(repeated, 0) - 1).index_select(0, feature.index_select(0, keep)),
        p_r, n_graphs)
    dev = graph.device
    single_rows = torch.repeat_interleave(  # the single ones' graphs, in order
        torch.arange(n_graphs, device=dev),
        torch.bincount(graph, minlength=n_graphs) - torch.bincount(g, minlength=n_graphs),
        output_size=n_once)
    single = (single_rows, torch.arange(p_r, p_r + n_once, device=dev),
              torch.ones(n_once, dtype=counted[2].dtype, device=dev))
    return (*_merge_rows(counted, single, n_graphs), p_r + n_once)


def _squares(D: torch.Tensor):
    """Every graph's D (n,) as a sum of squares a_1² + a_2² + …, greedily:
    a_k = min(⌊√(D − a_1² − … − a_{k−1}²)⌋, 127), the value of column k·n + g of row g.
    Returns ``(rows, cols, values, K)``, sorted by (row, column), K columns per row at
    most (K·n columns)."""
    n = D.numel()
    cpu = D.device.type == "cpu"  # NumPy there: a few µs less per operation, K rounds
    terms, left = [], D.numpy() if cpu else D
    while True:
        a = _isqrt(left)
        a = np.minimum(a, 127) if cpu else a.clamp_(max=127)
        if not a.any():
            break
        terms.append(a)
        left = left - a * a
    k = len(terms)
    if not k:
        empty = D.new_zeros(0)
        return empty, empty, empty, 0
    # (n, K): a row's nonzero terms come first; its nonzero entries by (row, k)
    A = torch.from_numpy(np.stack(terms, 1)) if cpu else torch.stack(terms, 1)
    rows, j = A.nonzero().unbind(1)
    return rows, j * n + rows, A.view(-1).index_select(0, rows * k + j), k


def _isqrt(x):
    """⌊√x⌋ of non-negative int64 values below 2^52 (a float square root, corrected), of a
    tensor or a NumPy array."""
    if isinstance(x, np.ndarray):
        a = np.sqrt(x.astype(np.float64)).astype(np.int64)
        a -= a * a > x
        a += (a + 1) * (a + 1) <= x
        return a
    a = x.double().sqrt_().floor_().long()
    a -= (a * a > x).long()
    a += ((a + 1) * (a + 1) <= x).long()
    return a


def _merge_rows(a, b, n_rows: int):
    """The union of two lists of entries ``(rows, cols, vals)``, each sorted by (row,
    column), every column of ``b`` above those of ``a``: sorted by (row, column), each
    entry put in place by counting (no sort)."""
    (ra, ca, va), (rb, cb, vb) = a, b
    na, nb = torch.bincount(ra, minlength=n_rows), torch.bincount(rb, minlength=n_rows)
    start = torch.cumsum(na + nb, 0) - (na + nb)  # where each row's entries begin
    dev = ra.device
    pos_a = (start - (torch.cumsum(na, 0) - na)).index_select(0, ra) + torch.arange(
        ra.numel(), device=dev)
    pos_b = (start + na - (torch.cumsum(nb, 0) - nb)).index_select(0, rb) + torch.arange(
        rb.numel(), device=dev)
    total = ra.numel() + rb.numel()
    out = [torch.empty(total, dtype=t.dtype, device=dev) for t in (ra, ca, va)]
    for o, x, y in zip(out, (ra, ca, va), (rb, cb, vb.to(va.dtype))):
        o.scatter_(0, pos_a, x).scatter_(0, pos_b, y)  # ~3 times index_copy_'s speed
    return out


_FOLD_MAX = 127 ** 2 * 64  # the largest private square sum folded into integer columns


def _fold_private(rows, cols, vals, p: int, n_rows: int, is_sorted: bool | None = None):
    """The entries of Φ with the columns that only one row holds folded into a few
    columns per row of the same sum of squares (:func:`_squares`; a square root for
    real values): Φ Φᵀ is unchanged — a private column adds only to its row's diagonal
    entry — and the entries are far fewer when most substructures are seen in one graph
    (late WL labels, their shortest-path triples). Returns ``(rows, cols, vals, p)``,
    sorted by (row, column) when the input was (``is_sorted``: whether it is, if known;
    else checked); the shared columns keep their order."""
    held = torch.bincount(cols, minlength=p)
    private = held.index_select(0, cols) == 1
    keep = (~private).nonzero().reshape(-1)
    if cols.numel() - keep.numel() < max(rows.numel() // 4, 2 ** 12):
        return rows, cols, vals, p
    D = torch.zeros(n_rows, dtype=vals.dtype, device=vals.device).index_add_(
        0, rows, vals * vals * private)
    if vals.is_floating_point():
        sr = D.nonzero().reshape(-1)
        sc, sv, K = sr, D.index_select(0, sr).sqrt(), 1
    elif int(D.max()) <= _FOLD_MAX:
        sr, sc, sv, K = _squares(D)
    else:
        return rows, cols, vals, p
    shared = held > 1
    p_shared = int(shared.sum())
    a = (rows.index_select(0, keep),
         (torch.cumsum(shared, 0) - 1).index_select(0, cols.index_select(0, keep)),
         vals.index_select(0, keep))
    b = (sr, sc + p_shared, sv)
    if is_sorted is None:
        key = rows * max(p, 1) + cols
        is_sorted = key.numel() < 2 or bool((key[1:] > key[:-1]).all())
    if is_sorted:
        return (*_merge_rows(a, b, n_rows), p_shared + K * n_rows)
    return (*(torch.cat([x, y.to(x.dtype)]) for x, y in zip(a, b)), p_shared + K * n_rows)


def _add_sparse_gram(out, a, b):
    """out += a bᵀ (dense out), for sparse COO a and b with the same columns. On
    the CPU by SciPy's sparse product (about twice torch's speed there), its nonzeros
    added in place; elsewhere by torch's."""
    if not a._nnz() or not b._nnz():  # nothing to add (all columns dense, or none shared)
        return out
    a, b = a.coalesce(), b.coalesce()  # no-ops on coalesced tensors (row blocks are not)
    if a.device.type == "cpu":
        c = (_csr(a) @ _csr(b).T).tocoo()  # distinct (row, col) entries
        flat = torch.from_numpy(c.row.astype(np.int64) * out.shape[1] + c.col)
        out.view(-1).index_add_(0, flat, torch.from_numpy(c.data).to(out.dtype))
        return out
    with warnings.catch_warnings():  # torch routes it through CSR and warns that CSR is beta
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return out.add_(torch.sparse.mm(a, b.t()).to_dense())


_PAIR_BUDGET = 2 ** 20  # the most pairs :func:`_add_self_pairs` enumerates at once


def _add_self_pairs(out: torch.Tensor, a) -> bool:
    """out += a aᵀ in place, for an integer ``out`` (n, n) on the CPU and a sparse COO
    ``a`` (n, p) of non-negative integer values ≤ 127 whose columns hold few rows each:
    every pair of entries (i, c), (j, c) of a column adds a_ic a_jc to out_ij and out_ji,
    the pairs i < j enumerated once, ``_PAIR_BUDGET`` pairs at a time, each batch by one
    ``scatter_add_`` (no sparse product, no float conversion; about 4 times cheaper per
    multiply-add than SciPy's product for WL's late labels). The entries (sorted by
    (row, column): coalesced) are put in column order by a stable radix sort of their
    columns (:func:`~torchkern.graphs._batch._lsd_order`). Returns False, adding
    nothing, off the CPU (the caller adds a aᵀ another way)."""
    if not a._nnz():
        return True
    if out.device.type != "cpu":
        return False
    (r, c), v = a.indices(), a.values()
    n, p = out.shape[0], a.shape[1]
    order = torch.from_numpy(_lsd_order(c.numpy(), p - 1))  # by column, rows in order
    r, c, v = r.index_select(0, order), c.index_select(0, order), v.index_select(0, order)
    v = v.to(out.dtype)
    nnz = c.numel()
    _, col, cnt = torch.unique_consecutive(c, return_inverse=True, return_counts=True)
    k = torch.cumsum(cnt, 0).index_select(0, col) - 1 - torch.arange(nnz)  # later partners
    cum = torch.cumsum(k, 0)
    before = cum - k  # pairs of the entries before each
    shift = before - torch.arange(nnz)  # pair number − partner position, less one
    flat, lo = out.view(-1), 0
    while lo < nnz:  # entries lo..hi-1 and their partners: about _PAIR_BUDGET pairs
        hi = max(int(torch.searchsorted(cum, int(before[lo]) + _PAIR_BUDGET, right=True)),
                 lo + 1)
        kk = k[lo:hi]
        n_pairs = int(kk.sum())
        if n_pairs:
            left = torch.repeat_interleave(torch.arange(lo, hi), kk, output_size=n_pairs)
            right = torch.arange(int(before[lo]) + 1, int(before[lo]) + n_pairs + 1) - \
                shift.index_select(0, left)
            ri, rj = r.index_select(0, left), r.index_select(0, right)
            val = v.index_select(0, left) * v.index_select(0, right)
            flat.scatter_add_(0, ri * n + rj, val).scatter_add_(0, rj * n + ri, val)
        lo = hi
    out.diagonal().index_add_(0, r, v * v)
    return True


def _dense_dtype(phi_x, phi_y):
    """int8 for the dense columns of small non-negative integer counts (all ≤ 127) on the
    CPU when torch's int8 product works here, else float32 (see
    :class:`SparseFeatureKernelMatrix`)."""
    if phi_x.device.type != "cpu" or not _int8_product_works():
        return torch.float32
    top = max(float(p.values().max()) if p._nnz() else 0.0 for p in (phi_x, phi_y))
    return torch.int8 if top <= 127 else torch.float32


_INT8_OK = []


def _int8_product_works() -> bool:
    """Whether ``torch._int_mm`` (int8 × int8 → int32) runs on the CPU here; probed once."""
    if not _INT8_OK:
        try:
            a = torch.ones(17, 8, dtype=torch.int8)
            _INT8_OK.append(bool((torch._int_mm(a, a.T.contiguous()) == 8).all()))
        except (AttributeError, RuntimeError, NotImplementedError):
            _INT8_OK.append(False)
    return _INT8_OK[0]


def _int8_product(dx: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """dx dyᵀ (int32) of int8 blocks: exact integer sums below 2^31."""
    if dx.shape[0] == 0 or dy.shape[0] == 0 or dx.shape[1] == 0:
        return torch.zeros(dx.shape[0], dy.shape[0], dtype=torch.int32)
    if dx.shape[1] == 1:  # torch 2.13's CPU _int_mm returns garbage for an inner size of 1
        dx, dy = (torch.nn.functional.pad(d, (0, 1)) for d in (dx, dy))
    return torch._int_mm(dx.contiguous(), dy.T.contiguous())


def _symmetric_product(D: torch.Tensor, dtype, block: int = 500) -> torch.Tensor:
    """D Dᵀ in ``dtype``: blocks of rows on and above the diagonal only, each computed in
    D's dtype and written twice (itself, and transposed below the diagonal) — about
    (B + 1)/(2B) of the flops of one product for B blocks, and no separate conversion."""
    n = D.shape[0]
    B = max(1, round(n / block))
    if B == 1:
        return (D @ D.T).to(dtype)
    out = torch.empty(n, n, dtype=dtype, device=D.device)
    cuts = [round(i * n / B) for i in range(B + 1)]
    for i in range(B):
        rows = slice(cuts[i], cuts[i + 1])
        for j in range(i, B):
            cols = slice(cuts[j], cuts[j + 1])
            part = D[rows] @ D[cols].T
            out[rows, cols] = part
            if j > i:
                out[cols, rows] = part.T
    return out


def _csr(t):
    """A coalesced sparse COO tensor (CPU) as a SciPy CSR matrix, without a conversion."""
    import scipy.sparse as sp
    r, c = t.indices()
    indptr = torch.searchsorted(r, torch.arange(t.shape[0] + 1))
    return sp.csr_matrix((t.values().numpy(), c.numpy(), indptr.numpy()), shape=tuple(t.shape))


class SparseFeatureKernelMatrix(FeatureKernelMatrix):
    """Φ_X Φ_Yᵀ for sparse count features, never densifying Φ (p, the number of distinct
    substructures, can be far larger than n).

    Dense pieces (rows, the whole matrix) split the columns of Φ by how many graphs hold
    them: columns shared by many graphs (shortest-path triples, WL's early labels) go
    through one dense matrix product, the rest through a sparse × sparse product — a
    column held by c_x and c_y graphs costs c_x·c_y sparse multiply-adds against n·m
    dense flops, about 2000 times cheaper each (measured on CPU, float32); columns held by one
    side only add nothing, and in K(X, X) a column held by one graph adds only to the
    diagonal.

    ``small_counts``: Φ holds non-negative integers and every row has ‖φ‖² < 2^24. Then
    the dense part runs in float32 (about twice float64's speed) and is still exact:
    every partial sum of non-negative integer products is at most the final value
    ⟨φ, φ'⟩ ≤ max ‖φ‖² < 2^24, an integer float32 holds exactly. When moreover every
    count is ≤ 127 and torch has an int8 product on the CPU (``torch._int_mm``: int8
    inputs, int32 sums — exact by the same bound), the dense part runs in int8, two to
    three times float32's speed on CPUs with int8 matrix units.
    """

    _dense_ratio = 2048  # cost of a sparse multiply-add / a dense (float32) flop, CPU;
    # int8 flops (torch._int_mm) measured about 4 times cheaper again, and so are the
    # multiply-adds of K(X, X)'s pairs (ER 1000x20 WL: 54 dense columns instead of 413,
    # the product 4.9 -> 3.5 ms)

    def __init__(self, phi_x, phi_y=None, small_counts: bool = False):
        super().__init__(phi_x, phi_y)
        self._split = None
        self.small_counts = small_counts

    def _transpose(self):
        return SparseFeatureKernelMatrix(self.phi_y, self.phi_x, self.small_counts)

    def _parts(self):
        if self._split is None:
            n, m = self.shape
            p = self.phi_x.shape[1]
            cx = torch.bincount(self.phi_x.indices()[1], minlength=p).double()
            same = self.phi_y is self.phi_x
            cy = cx if same else torch.bincount(self.phi_y.indices()[1], minlength=p).double()
            alone = (cx == 1) if same else torch.zeros(p, dtype=torch.bool, device=cx.device)
            wide = _dense_dtype(self.phi_x, self.phi_y) if self.small_counts else None
            # int8: 4× cheaper; but K(X, X)'s sparse part in int8 is added by pairs
            # (_add_self_pairs), about 4× cheaper per multiply-add than SciPy's product
            ratio = self._dense_ratio * (4 if wide == torch.int8 and not same else 1)
            dense = (cx * cy > n * m / ratio) & ~alone
            sparse = (cx * cy > 0) & ~dense & ~alone
            (r, c), v = self.phi_x.indices(), self.phi_x.values()
            diag = torch.zeros(n, dtype=self.dtype, device=self.device).index_add_(
                0, r, v * v * alone.index_select(0, c))
            px = (_dense_columns(self.phi_x, dense, wide), _keep_columns(self.phi_x, sparse))
            py = px if same else (_dense_columns(self.phi_y, dense, wide),
                                  _keep_columns(self.phi_y, sparse))
            self._split = [px, py, diag]
        return self._split

    # dense flops (int8 counted at a quarter) below which a product runs on one thread
    _one_thread_flops = 2e10

    def _product(self, idx=None):
        """Rows ``idx`` of Φ_X Φ_Yᵀ (all rows if None): on the CPU on one torch thread
        when the dense part is small (see :class:`CountFeatureKernel`)."""
        with one_thread(self.device.type == "cpu"):
            (dx, lx), (dy, ly), diag = self._parts()
        rows = self.shape[0] if idx is None else idx.numel()
        flops = rows * dy.shape[0] * dy.shape[1] * (0.25 if dy.dtype == torch.int8 else 1.0)
        with one_thread(self.device.type == "cpu" and flops < self._one_thread_flops):
            return self._product_(dx, lx, dy, ly, diag, idx)

    def _product_(self, dx, lx, dy, ly, diag, idx):
        if idx is not None:
            dx, lx = dx[idx], lx.index_select(0, idx)
        if dx.dtype == torch.int8:
            out = _int8_product(dx, dy)
            if idx is None and ly is lx and _add_self_pairs(out, lx):
                lx = ly = None  # added in int32 (exact: entries below 2^24)
            out = out.to(self.dtype)
        elif idx is None and dy is dx:
            out = _symmetric_product(dx, self.dtype)
        else:
            out = (dx @ dy.T).to(self.dtype)
        if lx is not None:
            out = _add_sparse_gram(out, lx, ly)
        if self.phi_y is self.phi_x:
            if idx is None:
                out.diagonal().add_(diag)
            else:
                out[torch.arange(idx.numel(), device=idx.device), idx] += diag[idx]
        return out

    def rows(self, idx):
        return self._product(_as_index(idx, self.shape[0], self.device))

    def to_dense(self):
        return self._product()

    def diag(self):
        k = min(self.shape)
        idx = torch.arange(k, device=self.device)
        px, py = self.phi_x.index_select(0, idx), self.phi_y.index_select(0, idx)
        return torch.sparse.sum(px * py, 1).to_dense() if k else torch.zeros(0, dtype=self.dtype)


def _dense_columns(phi, keep, dtype=None):
    """The columns ``keep`` (a boolean mask) of a sparse COO Φ, as a dense matrix (of
    ``dtype``, default Φ's). The other entries land in a scratch last column (one
    scatter, no selection), dropped at the end."""
    (r, c), v = phi.indices(), phi.values()
    n_keep = int(keep.sum())
    pos = torch.where(keep, torch.cumsum(keep, 0) - 1, n_keep)
    out = torch.zeros(phi.shape[0], n_keep + 1, dtype=dtype or phi.dtype, device=phi.device)
    out.view(-1).index_add_(0, r * (n_keep + 1) + pos.index_select(0, c), v.to(out.dtype))
    return out[:, :n_keep]


def _keep_columns(phi, keep):
    """Φ with only the entries of the columns ``keep`` (sparse COO, same shape)."""
    (r, c), v = phi.indices(), phi.values()
    sel = keep.index_select(0, c).nonzero().reshape(-1)
    return torch.sparse_coo_tensor(phi.indices().index_select(1, sel), v.index_select(0, sel),
                                   phi.shape, is_coalesced=True, check_invariants=False)


def _coo(rows, cols, vals, shape, is_sorted: bool = False):
    """Sparse COO (rows, cols, vals) with duplicates summed, built coalesced: one stable
    sort of the packed (row, col) keys instead of ``coalesce``. ``is_sorted``: the
    entries are known distinct and sorted by (row, column) (not checked)."""
    if is_sorted:
        return torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, shape,
                                       is_coalesced=True, check_invariants=False)
    cols_ = max(int(shape[1]), 1)
    key = rows * cols_ + cols
    if key.numel() < 2 or bool((key[1:] > key[:-1]).all()):  # coalesced already
        return torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, shape,
                                       is_coalesced=True, check_invariants=False)
    uniq, perm = torch.sort(key, stable=True)  # a radix sort on the CPU
    v = vals.index_select(0, perm)
    new = torch.ones_like(uniq, dtype=torch.bool)
    torch.ne(uniq[1:], uniq[:-1], out=new[1:])
    if not bool(new.all()):  # duplicates: summed
        v = v.new_zeros(int(new.sum())).index_add_(0, torch.cumsum(new, 0) - 1, v)
        uniq = uniq[new]
    return torch.sparse_coo_tensor(torch.stack([uniq // cols_, uniq % cols_]), v, shape,
                                   is_coalesced=True, check_invariants=False)


class CountFeatureKernel(GraphKernel):
    r"""Base of graph kernels k(G, G') = ⟨φ(G), φ(G')⟩ with φ(G) a sparse vector of
    substructure counts.

    A subclass writes :meth:`_entries` — the nonzero counts of every graph of one
    :class:`GraphSet` as ``(graph, feature, count)`` triples, features numbered in a
    dictionary built on that set — or :meth:`_items`, the counted items themselves.
    ``k(X, Y)`` evaluates it once on X ∪ Y (so both share the dictionary, and a
    substructure seen only in Y matches nothing in X) and returns a lazy features
    KernelMatrix: Φ dense when it is small (few graphs and features: one product, no
    sparse format), else torch sparse COO.
    """

    def _items(self, G: GraphSet):
        """φ of G as counted items, or None (the default: :meth:`_entries` gives φ):
        ``(graph, feature, p)`` — every item adds one to φ(G_graph)[feature], features in
        [0, p). Counted by one ``bincount`` into a dense Φ when Φ is small, with no
        sort of the items."""
        return None

    def _entries(self, G: GraphSet):
        items = self._items(G)
        if items is None:
            raise NotImplementedError(
                f"{type(self).__name__} must define _entries or _items (its count features)")
        return count_items(*items, len(G))

    def _counts(self, G: GraphSet):
        """φ of G once: the items of :meth:`_items` (a 3-tuple) when the kernel gives them,
        else the entries of :meth:`_entries` (a 4-tuple)."""
        items = self._items(G)
        return self._entries(G) if items is None else items

    def features(self, X) -> torch.Tensor:
        """φ of every graph of X as a sparse COO tensor (n_graphs, n_features); the
        feature numbering is that of this set's dictionary. The counts themselves,
        whatever ``normalize``: with ``normalize=True`` the kernel is the cosine of these
        rows, ⟨φ, φ'⟩ / (‖φ‖ ‖φ'‖) (0 for a zero row), not their dot product."""
        X = self.check_input(X, "X")
        rows, cols, vals, p = self._entries(X)
        return _coo(rows, cols, vals.to(X.dtype), (len(X), p))

    def forward(self, X, Y=None, *, backend: str | None = None) -> KernelMatrix:
        """As :meth:`StructuredKernel.forward`; with ``normalize`` the rows of Φ are scaled
        to unit norm in the one pass that builds them (cosine normalization in feature
        space) rather than in two more passes for the diagonals.

        Runs on one torch thread (the caller's setting is restored on return): the
        conversion, relabelling and counting are many short element-wise passes, each
        a parallel region of a few microseconds of work; two threads gain little there
        on a quiet machine, and when another process holds a core every region waits
        for the descheduled thread (measured 10 to 20 times slower with 2 threads than
        with 1 at load 10 on 2 cores, WL and SP on 1,000 graphs)."""
        with one_thread():
            return self._forward(X, Y, backend)

    def _forward(self, X, Y, backend):
        if not self.normalize:
            return super().forward(X, Y, backend=backend)
        X, Y = self._checked_sets(X, Y, backend)
        K = self._gram(X, Y, unit_rows=True)
        return DenseKernelMatrix(K.to_dense()) if backend == "dense" else K

    # a dense Φ (n × p) below these: n·p cells, n²·p multiply-adds of K(U, U)
    _dense_cells, _dense_flops = 2 ** 21, 2 ** 29

    def _gram(self, X: GraphSet, Y: GraphSet | None, unit_rows: bool = False):
        self._check_pair(X, Y)
        U = X if Y is None else GraphSet.concat([X, Y], attributes=self._reads_attributes,
                                                labels=self._reads_node_labels)
        nx, n = len(X), len(U)
        counted = self._counts(U)
        if len(counted) == 3 and counted[2] > 4 * n:  # number the features that occur
            graph, feature, p = counted
            present = torch.bincount(feature, minlength=p) > 0
            if not bool(present.all()):  # (WL's labels all occur)
                counted = (graph, (torch.cumsum(present, 0) - 1).index_select(0, feature),
                           int(present.sum()))
        if len(counted) == 3 and self._dense(n, counted[2]):
            graph, feature, p = counted
            phi = torch.bincount(graph * p + feature, minlength=n * p).view(n, p)
            total = torch.bincount(graph, minlength=n)
            return self._dense_gram(phi, total, nx, Y is None, unit_rows, X.dtype)
        srt = len(counted) == 3  # counted items: entries distinct, sorted by (row, column)
        rows, cols, vals, p = _fold_private(
            *(counted if len(counted) == 4 else _count_with_singletons(*counted, n)), n,
            is_sorted=srt or None)
        if self._dense(n, p):
            phi = torch.zeros(n * p, dtype=vals.dtype, device=vals.device)
            phi.index_put_((rows * p + cols,), vals, accumulate=True)
            total = torch.zeros(n, dtype=vals.dtype, device=vals.device).index_add_(
                0, rows, vals)
            return self._dense_gram(phi.view(n, p), total, nx, Y is None, unit_rows, X.dtype)
        counts = not vals.is_floating_point()  # integer values are counts (≥ 0)
        vals = vals.to(X.dtype)
        sq = torch.zeros(len(U), dtype=vals.dtype, device=vals.device)
        sq.index_add_(0, rows, vals * vals)
        small = not unit_rows and counts and float(sq.max()) < 2 ** 24
        if unit_rows:
            vals = vals * sq.rsqrt().index_select(0, rows)  # rows with entries have sq > 0
        if Y is None:
            return SparseFeatureKernelMatrix(_coo(rows, cols, vals, (nx, p), srt),
                                             small_counts=small)
        inx = rows < nx
        phi_x = _coo(rows[inx], cols[inx], vals[inx], (nx, p), srt)
        phi_y = _coo(rows[~inx] - nx, cols[~inx], vals[~inx], (len(Y), p), srt)
        return SparseFeatureKernelMatrix(phi_x, phi_y, small)

    def _dense(self, n: int, p: int) -> bool:
        """Whether Φ (n × p) is small enough to be dense: at most ``_dense_cells`` cells and
        ``_dense_flops`` multiply-adds for Φ Φᵀ."""
        return n * p <= self._dense_cells and n * n * p <= self._dense_flops

    @staticmethod
    def _dense_gram(phi, total, nx: int, square: bool, unit_rows: bool, dtype):
        """The features KernelMatrix of a dense Φ (rows of X, then of Y): products exact in
        int8 or float32 when Φ holds counts with squared row norms below 2^24 (see
        :class:`~torchkern.graphs.histogram._CountMatrix`) — known without a pass over Φ
        when the row sums ``total`` are below 2^12 (‖φ‖² ≤ (Σ φ)² for counts);
        ``unit_rows`` scales the rows to unit norm (cosine normalization)."""
        from .histogram import _CountMatrix
        counts = not phi.is_floating_point()
        phi = phi.to(dtype)
        small = False
        if counts and not unit_rows:
            small = not total.numel() or int(total.max()) < 2 ** 12
            if not small:
                small = float((phi * phi).sum(1).max()) < 2 ** 24
        if unit_rows:
            sq = (phi * phi).sum(1)
            phi = phi * torch.where(sq > 0, sq.rsqrt(), 0.0)[:, None]
        return _CountMatrix(phi, None, small) if square else \
            _CountMatrix(phi[:nx], phi[nx:], small)

    def _diag(self, X: GraphSet) -> torch.Tensor:
        rows, _, vals, _ = self._entries(X)
        vals = vals.to(X.dtype)
        return torch.zeros(len(X), dtype=X.dtype, device=X.device).index_add_(0, rows, vals * vals)
