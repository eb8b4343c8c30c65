"""The subgraph matching kernel (Kriege and Mutzel, 2012), on labelled graphs."""
from __future__ import annotations

import itertools
import math
import numbers

import torch

from .._validation import check_bool, is_int, is_real
from ..gram import DenseKernelMatrix
from ._batch import (GraphSet, check_memory, check_range, compact, count_rows, pair_sqdist,
                     segment_ranges, sorted_unique, sqdist_fits)
from ._labels import CountFeatureKernel, SparseFeatureKernelMatrix, _coo

__all__ = ["SubgraphMatching", "connected_subgraphs", "canonical_codes"]

_WEIGHTS = ("uniform", "increasing", "decreasing", "strong_decreasing")
_TINY = torch.finfo(torch.float64).tiny  # the smallest normal float64


def _simple_undirected(G: GraphSet, name: str):
    """``(src, dst, edge_label_or_None)`` of G without self-loops, checked undirected
    (every edge in both directions, with one label both ways)."""
    src, dst = G.edge_index
    keep = src != dst
    N = max(int(G.ptr[-1]), 1)
    s, t = src[keep], dst[keep]
    fwd = s * N + t  # sorted (edge_index is sorted by (source, target))
    bwd = t * N + s
    order = torch.argsort(bwd)
    if not torch.equal(fwd, bwd.index_select(0, order)):
        raise ValueError(f"{name}: SubgraphMatching needs undirected graphs (every edge given "
                         f"in both directions); call torch_geometric.utils.to_undirected")
    return s, t, keep, order


class _OverBudget(Exception):
    """A level of :func:`connected_subgraphs` would take more than its byte budget."""


def connected_subgraphs(G: GraphSet, k: int, src, dst, name: str = "X",
                        budget: int | None = None):
    """The node sets of all connected induced subgraphs of the graphs of G with 1 to k
    nodes: a list whose entry s − 1 is an (M_s, s) tensor of global node ids, each row
    sorted increasingly, each set once.

    Level by level: every set of size s is extended by every neighbour of its members
    outside it (one segment gather over the edges ``src → dst``, sorted by source), rows
    sorted and duplicates removed by one grouping of the rows (:func:`compact`). A
    connected set of size s + 1 has a node whose removal leaves it connected (a leaf of
    a spanning tree), so every one is reached. ``budget``: raise ``_OverBudget`` when a
    level needs more bytes than that (the caller then splits the set)."""
    N = int(G.ptr[-1])
    dev = G.device
    deg = torch.bincount(src, minlength=N)
    start = torch.cumsum(deg, 0) - deg
    sets = torch.arange(N, device=dev).unsqueeze(1)
    n_max = max(int(G.num_nodes.max()) if len(G) else 1, 1)
    out = [sets]
    for s in range(1, k):
        M = sets.shape[0]
        if M == 0:
            break
        d = deg.index_select(0, sets.reshape(-1)).view(M, s)
        total = int(d.sum())
        if budget is not None and len(G) > 1 and total * (s + 1) * 8 * 4 > budget:
            raise _OverBudget
        check_memory(total * (s + 1) * 8 * 4, f"{name}: SubgraphMatching(k={k}) extends the "
                     f"{M:,} connected subgraphs of {s} nodes by {total:,} neighbours, which",
                     dev)
        pos = segment_ranges(start.index_select(0, sets.reshape(-1)), d.reshape(-1))
        owner = torch.repeat_interleave(torch.arange(M, device=dev), d.sum(1), output_size=total)
        nbr = dst.index_select(0, pos)
        rows = sets.index_select(0, owner)
        fresh = (rows != nbr.unsqueeze(1)).all(1)
        rows = torch.cat([rows[fresh], nbr[fresh].unsqueeze(1)], 1).sort(1).values
        if rows.shape[0] == 0:
            break
        span = n_max ** s  # the offsets from the first (smallest) node, base n_max
        if N * span < 2 ** 62:  # one int64 key per row
            key = rows[:, 0] * span
            for j in range(1, s + 1):
                key += (rows[:, j] - rows[:, 0]) * n_max ** (j - 1)
            first = sorted_unique(key)[3]
        else:
            first = compact(list(rows.T), [N] * (s + 1))[2]
        sets = rows.index_select(0, first)
        out.append(sets)
    return out


def _refined_colors(labels: torch.Tensor, adj: torch.Tensor, rounds: int = 1):
    """Node colours inside each small graph, an isomorphism invariant: first (label,
    degree in the graph), then ``rounds`` rounds of colour
    refinement (1-dimensional Weisfeiler–Lehman on the complete pair structure: a node's
    new colour is the id of its colour and the sorted multiset of (edge code, colour) of
    the other nodes). Ids are shared by all M graphs, so isomorphic graphs get the same
    colours on corresponding nodes."""
    M, s = labels.shape
    if s == 1:
        return labels
    codes = int(adj.max()) + 1 if adj.numel() else 1
    _, color, cnt, _ = sorted_unique((labels * s + (adj > 0).sum(2)).reshape(-1))
    color, C = color.view(M, s), cnt.numel()
    off = ~torch.eye(s, dtype=torch.bool, device=labels.device)
    for _ in range(rounds):
        tok = (adj * C + color.unsqueeze(1))[:, off].view(M, s, s - 1).sort(2).values
        ids, cnt, _ = compact([color.reshape(-1), *tok.reshape(M * s, s - 1).T],
                              [C] + [codes * C] * (s - 1))
        color, C = ids.view(M, s), cnt.numel()
    return color


def _block_perms(blocks, device):
    """All permutations of positions 0..s−1 that map every block (a run of positions of
    the given sizes) onto itself, as a (P, s) tensor."""
    parts, start = [], 0
    for b in blocks:
        parts.append(list(itertools.permutations(range(start, start + b))))
        start += b
    rows = [sum(combo, ()) for combo in itertools.product(*parts)]
    return torch.tensor(rows, dtype=torch.long, device=device)


def _smallest_code(labels, adj, perms):
    """The lexicographically smallest (labels[π], upper triangle of adj[π][:, π]) over the
    permutations ``perms`` (P, s), and how many permutations reach it: column by column,
    every permutation not reaching the column's minimum is dropped."""
    M, s = labels.shape
    alive = torch.ones(M, perms.shape[0], dtype=torch.bool, device=labels.device)
    cols = []
    big = torch.iinfo(torch.long).max
    for what in list(range(s)) + list(itertools.combinations(range(s), 2)):
        if isinstance(what, int):
            v = labels[:, perms[:, what]]
        else:
            v = adj[:, perms[:, what[0]], perms[:, what[1]]]
        low = torch.where(alive, v, big).min(1).values
        alive &= v == low.unsqueeze(1)
        cols.append(low)
    return torch.stack(cols, 1), alive


def canonical_codes(labels: torch.Tensor, adj: torch.Tensor, orders: bool = False):
    """Canonical forms of small labelled graphs, all of one size s: ``(codes, n_aut)``.

    ``labels`` (M, s) node label ids, ``adj`` (M, s, s) symmetric edge codes (0: no edge,
    else 1 + the edge label id). The nodes of every graph are first ordered by colour
    (:func:`_refined_colors`, an isomorphism invariant); the code of the graph under an
    order is the tuple (labels, upper triangle of adj) read in that order, and its
    canonical code the smallest such tuple (lexicographic) over the orders that keep the
    colours sorted — the permutations within runs of equal colour, s! at most, usually
    a few. An isomorphism maps colour-sorted orders to colour-sorted orders, so
    isomorphic graphs get the same code, and a code describes its graph, so only
    isomorphic graphs do. The orders that reach the smallest code differ by an
    automorphism (which keeps colours), so their number ``n_aut`` is the number of
    label-preserving automorphisms. O(M P s²) for P orders per graph, graphs grouped by
    the sizes of their colour runs.

    ``orders=True`` also returns ``(owner, order)``: every order that reaches the
    canonical code, as positions (rows of ``order``, (Q, s), Q = Σ n_aut) of graph
    ``owner`` — reading graph ``owner[q]``'s nodes at ``order[q]`` gives its canonical
    code; the first order of each graph comes first."""
    M, s = labels.shape
    dev = labels.device
    if M == 0:
        empty = labels.new_zeros(0, s + s * (s - 1) // 2), labels.new_zeros(0)
        return empty + ((labels.new_zeros(0), labels.new_zeros(0, s)),) if orders else empty
    color = _refined_colors(labels, adj)
    order = torch.sort(color, dim=1, stable=True).indices
    labels = labels.gather(1, order)
    adj = adj.gather(1, order.unsqueeze(2).expand(M, s, s)).gather(
        2, order.unsqueeze(1).expand(M, s, s))
    color = color.gather(1, order)
    # the pattern of colour runs, one bit per boundary between positions i − 1 and i
    bits = (color[:, 1:] != color[:, :-1]).long()
    pattern = (bits * 2 ** torch.arange(s - 1, device=dev)).sum(1)
    codes = labels.new_empty(M, s + s * (s - 1) // 2)
    n_aut = labels.new_empty(M)
    owners, found = [], []
    for pat in torch.unique(pattern).tolist():
        rows = (pattern == pat).nonzero().reshape(-1)
        cuts = [0] + [i for i in range(1, s) if pat >> (i - 1) & 1] + [s]
        perms = _block_perms([b - a for a, b in zip(cuts[:-1], cuts[1:])], dev)
        c, alive = _smallest_code(labels.index_select(0, rows), adj.index_select(0, rows),
                                  perms)
        codes[rows], n_aut[rows] = c, alive.sum(1)
        if orders:
            r, q = alive.nonzero(as_tuple=True)  # row-major: each row's orders together
            owners.append(rows.index_select(0, r))
            found.append(order.index_select(0, owners[-1]).gather(1, perms.index_select(0, q)))
    if not orders:
        return codes, n_aut
    owner, order = torch.cat(owners), torch.cat(found)
    srt = torch.sort(owner, stable=True).indices  # graphs in order, their first order first
    return codes, n_aut, (owner.index_select(0, srt), order.index_select(0, srt))


def _gaussian_(sq_dist: torch.Tensor, ell: float) -> torch.Tensor:
    """exp(−d / (2ℓ²)) of squared distances d, in place: one multiply by γ = 1/(2ℓ²) where
    γ is a normal float64, else exp(−(d/ℓ)/ℓ/2) (two more passes over d). γ is inf for
    ℓ < 1e-154 (then inf · 0 = NaN on equal attributes; ℓ² a ZeroDivisionError) and
    subnormal or 0 for ℓ > 1e154 (ℓ² an OverflowError); the divisions give the limits, 1
    where d = 0 and 0 elsewhere for tiny ℓ, 1 everywhere for huge ℓ."""
    gamma = 0.5 / ell / ell
    if _TINY <= gamma < math.inf:
        return sq_dist.mul_(-gamma).exp_()
    return sq_dist.div_(ell).div_(ell).mul_(-0.5).exp_()


class SubgraphMatching(CountFeatureKernel):
    r"""Subgraph matching kernel (Kriege and Mutzel, 2012) on node- and edge-labelled
    graphs, optionally with continuous node attributes: weighted counts of the
    isomorphisms between connected induced subgraphs of up to k nodes,

    .. math::

        k(G, G') = \sum_{s=1}^{k} \lambda_s \sum_{\substack{S \subseteq V(G),\,
        T \subseteq V(G') \\ |S| = |T| = s,\ G[S] \text{ connected}}}
        \sum_{\varphi : G[S] \to G'[T] \text{ isomorphism}} \prod_{v \in S}
        k_V(v, \varphi(v)),

    an isomorphism φ preserving edges, non-edges, node labels (``node_labels``) and edge
    labels (``edge_labels``); k_V = 1 (a count), or with ``node_kernel="gaussian"``
    k_V(v, w) = exp(−‖a_v − a_w‖² / (2ℓ²)) on the node attributes a (the field
    ``node_attr``), ℓ = ``lengthscale``. Kriege and Mutzel count the cliques of the weighted
    association (product) graph of G and G' (pairs of nodes with equal labels, joined
    when both pairs are edges with equal labels — c-edges — or both are non-edges —
    d-edges); a clique is such a bijection φ, and one connected by its c-edges, as the
    implementation of GraKeL 0.1.11 counts, is one of a connected G[S]. This is GraKeL's
    ``SubgraphMatching(k=k, lw=...)`` with its default node and edge kernels (label
    equality): ``node_labels=False`` is its ``kv=None``, ``edge_labels=False`` its
    ``ke=None``; ``node_kernel="gaussian"`` is its ``kv`` = label equality times the
    Gaussian of the attributes (``node_labels=False``: the Gaussian alone).

    **Reads** the node labels (``x``, each distinct row one label), with
    ``edge_labels=True`` the edge labels (``edge_attr``), with ``node_kernel`` the node
    attributes (``node_attr``, default ``"node_attributes"``, see :class:`GraphSet`);
    undirected graphs (every edge both ways), self-loops ignored.

    Parameters
    ----------
    k : int
        Largest subgraph size, k ≥ 1.
    lw : {"uniform", "increasing", "decreasing", "strong_decreasing"} or sequence
        The weights λ_s of the sizes s = 1..k: 1, s, 1/s, 1/s² (GraKeL's names), or k
        non-negative numbers λ_1..λ_k. GraKeL 0.1.11 fails on a sequence (it accepts k
        numbers, then reshapes them to k + 1); its callable ``lw(i)``, i = 0..k, is the
        same weighting with λ_s = lw(s − 1) (its value at i = k is never used).
    node_labels : bool
        Match node labels (``x``); False compares structure only.
    edge_labels : bool
        Match edge labels (``edge_attr``, each distinct row one label); every graph then
        needs ``edge_attr``.
    normalize : bool
        Cosine normalization k(G, G')/√(k(G, G) k(G', G')).
    node_kernel : {None, "gaussian"}
        None: nodes match by label only. "gaussian": matched nodes also weigh
        exp(−‖a_v − a_w‖² / (2ℓ²)), a their continuous attributes.
    lengthscale : float
        ℓ of the Gaussian node kernel.
    node_attr : str
        The Data field that holds the node attributes.

    Notes
    -----
    Two isomorphic subgraphs have as many isomorphisms between them as each has
    automorphisms, so the kernel is a weighted linear kernel on subgraph counts,

    .. math:: k(G, G') = \sum_c \lambda_{|c|}\, |\mathrm{Aut}(c)|\, n_c(G)\, n_c(G'),

    n_c(G) the number of connected induced subgraphs of G of isomorphism class c. Each
    graph is visited once, not each pair: the connected node sets of every size are
    grown on the whole set at once (:func:`connected_subgraphs`), each is coded by its
    labels and edge codes in node order, and only the distinct codes are brought to a
    canonical form (:func:`canonical_codes`, s! permutations each). The Gram is a
    sparse features KernelMatrix Φ diag(λ|Aut|) Φ'ᵀ — exact integers for integer
    weights. The number of connected subgraphs grows like N d^(k−1) for N nodes of
    degree d: a set whose enumeration would take more than 2 GB at one size is
    enumerated in parts (halves of its graphs, recursively), and a single graph whose
    subgraphs would not fit in memory is refused up front.
    GraKeL's product graph has ``|V|·|V'|`` nodes per pair, O(n²) pairs.

    With ``node_kernel="gaussian"`` the weight of an isomorphism is the Gaussian of the
    attribute rows of S and of T stacked in the order the isomorphism matches them; the
    isomorphisms between S and T of class c are the canonical order of S against the
    ``|Aut(c)|`` orders of T that give the canonical code. The Gram is then dense, summed
    over the pairs of same-class subgraphs of all graphs: O(Σ_c n_c² ``|Aut(c)|`` s d)
    for n_c subgraphs of class c in the whole set, in blocks of bounded memory (the
    subgraphs of the whole set are enumerated at once, not in parts); ``diag`` sums the
    pairs within each graph only. It has no finite feature map (``features`` raises).

    References
    ----------
    N. Kriege and P. Mutzel, "Subgraph matching kernels for attributed graphs",
    Proc. 29th International Conference on Machine Learning (ICML), 1015–1022 (2012).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import SubgraphMatching
    >>> path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3)
    >>> SubgraphMatching(k=3, node_labels=False)([path]).to_dense()  # 3·3 + 2·2·2 + 1·2
    tensor([[19.]], dtype=torch.float64)
    """

    @property
    def _graph_fields(self):  # a list of Data: node attributes only for node_kernel
        return ("nodes", "edges") if self.node_kernel is None else None

    _pair_local = True  # k(G, G') depends on G and G' only (pairs: in batches)

    def __init__(self, k: int = 5, lw="uniform", node_labels: bool = True,
                 edge_labels: bool = False, normalize: bool = False,
                 node_kernel: str | None = None, lengthscale: float = 1.0,
                 node_attr: str = "node_attributes"):
        super().__init__()
        if not is_int(k) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        for arg, v in (("node_labels", node_labels), ("edge_labels", edge_labels)):
            if not isinstance(v, bool):
                raise TypeError(f"{arg} must be a bool, got {v!r}")
        if node_kernel not in (None, "gaussian"):
            raise ValueError(f"node_kernel must be None or 'gaussian', got {node_kernel!r}")
        if not is_real(lengthscale) or not math.isfinite(lengthscale) or lengthscale <= 0:
            raise ValueError(f"lengthscale must be a positive number, got {lengthscale!r}")
        if not isinstance(node_attr, str):
            raise TypeError(f"node_attr must be the name of a Data field (a str), got "
                            f"{node_attr!r}")
        self.k, self.lw = int(k), lw
        self.node_labels, self.edge_labels = node_labels, edge_labels
        self.normalize = check_bool(normalize, "normalize")
        self.node_kernel, self.lengthscale = node_kernel, float(lengthscale)
        self.node_attr = node_attr
        self._lambdas = self._weights()

    def _weights(self) -> list:
        k, lw = self.k, self.lw
        if isinstance(lw, str):
            if lw not in _WEIGHTS:
                raise ValueError(f"lw must be one of {_WEIGHTS} or a sequence of k={k} "
                                 f"weights, got {lw!r}")
            s = range(1, k + 1)
            return {"uniform": [1] * k, "increasing": list(s),
                    "decreasing": [1.0 / i for i in s],
                    "strong_decreasing": [1.0 / (i * i) for i in s]}[lw]
        try:  # a tensor's items are 0-d tensors, not numbers: read its values
            w = list(lw.tolist() if isinstance(lw, torch.Tensor) else lw)
        except TypeError:
            raise TypeError(f"lw must be one of {_WEIGHTS} or a sequence of k={k} weights, "
                            f"got {lw!r}") from None
        if len(w) != k or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                  and math.isfinite(v) and v >= 0 for v in w):
            raise ValueError(f"lw as a sequence must hold k={k} finite non-negative numbers "
                             f"(the weights of sizes 1..k), got {lw!r}")
        return [int(v) if float(v).is_integer() and abs(v) < 2 ** 53 else float(v) for v in w]

    def extra_repr(self) -> str:
        extra = "" if self.node_kernel is None else (
            f", node_kernel={self.node_kernel!r}, lengthscale={self.lengthscale}, "
            f"node_attr={self.node_attr!r}")
        return (f"k={self.k}, lw={self.lw!r}, node_labels={self.node_labels}, "
                f"edge_labels={self.edge_labels}, normalize={self.normalize}{extra}")

    def _check_size(self, X: GraphSet, name: str) -> None:
        if self.node_kernel is not None and X.node_attributes is None:
            raise ValueError(f"{name}: node_kernel={self.node_kernel!r} compares continuous "
                             f"node attributes: give every graph the Data field "
                             f"{self.node_attr!r} (or set node_attr= to the field that holds "
                             f"them)")
        if self.edge_labels and X.edge_label is None:
            raise ValueError(f"{name}: edge_labels=True needs edge labels: give every graph "
                             f"edge_attr (one row per edge; each distinct row is one label)")
        _simple_undirected(X, name)

    # -- the counts ------------------------------------------------------------------
    def _levels(self, G: GraphSet, orders: bool = False, budget: int | None = None,
                name: str = "X"):
        """Per subgraph size s: ``(s, sets, cls, n_cls, aut, found)`` — the connected node
        sets (M, s), the class id of each, the number of classes, each class's |Aut|,
        and with ``orders`` the node lists in every canonical order, ``(owner set,
        nodes)`` (:func:`canonical_codes`)."""
        N, dev = int(G.ptr[-1]), G.device
        s_, t_, keep, order = _simple_undirected(G, "X")
        # the set's own label ids (rows of label_values, kept by GraphSet.take): codes of
        # parts of a set are comparable
        if self.node_labels:
            labels, L = G.node_label, max(int(G.label_values.shape[0]), 1)
        else:
            labels, L = torch.zeros(N, dtype=torch.long, device=dev), 1
        ecode = torch.ones(s_.numel(), dtype=torch.long, device=dev)
        n_codes = 2
        if self.edge_labels:
            el = G.edge_label[keep]
            if not torch.equal(el, el.index_select(0, order)):
                raise ValueError("SubgraphMatching: an undirected edge has different labels "
                                 "(rows of edge_attr) in its two directions")
            ecode = el + 1
            n_codes = int(G.edge_label_values.shape[0]) + 1
        edge_code = self._edge_codes(G, s_, t_, ecode, n_codes)
        for sets in connected_subgraphs(G, self.k, s_, t_, name, budget):
            M, s = sets.shape
            lab = labels.index_select(0, sets.reshape(-1)).view(M, s)
            adj = torch.zeros(M, s, s, dtype=torch.long, device=dev)
            for a, b in itertools.combinations(range(s), 2) if s_.numel() else ():
                adj[:, a, b] = adj[:, b, a] = edge_code(sets[:, a], sets[:, b])
            # the distinct codes in node order, then their canonical forms
            iu = torch.triu_indices(s, s, 1, device=dev)
            raw = [*lab.T, *adj[:, iu[0], iu[1]].T]
            inv, _, first = compact(raw, [L] * s + [n_codes] * (len(raw) - s))
            out = canonical_codes(lab.index_select(0, first), adj.index_select(0, first),
                                  orders)
            cls, _, cfirst = compact(list(out[0].T), [L] * s + [n_codes] * (len(raw) - s))
            found = None
            if orders:  # every set's orders: those of its distinct code
                owner, pos = out[2]
                per = torch.bincount(owner, minlength=first.numel())
                start = torch.cumsum(per, 0) - per
                cnt = per.index_select(0, inv)
                q = segment_ranges(start.index_select(0, inv), cnt)
                set_of = torch.repeat_interleave(torch.arange(M, device=dev), cnt,
                                                 output_size=q.numel())
                found = (set_of, sets.index_select(0, set_of).gather(1, pos.index_select(0, q)))
            yield (s, sets, cls.index_select(0, inv), cfirst.numel(),
                   out[1].index_select(0, cfirst), found, out[0].index_select(0, cfirst))

    _budget = 2 ** 31  # bytes for one level of the subgraph enumeration of one part

    def _counts(self, G: GraphSet, nx: int | None = None):
        """``(rows, cols, counts, weights)``: the number of connected induced subgraphs
        of each class (column) in each graph (row), and each class's λ_s |Aut|.

        The graphs are enumerated in parts when the whole set would take more than
        ``_budget`` bytes at some level (halves, recursively); classes are matched
        across parts by their canonical codes. ``nx``: G is X ∪ Y with X its first ``nx``
        graphs (a refusal then names the graph as X[i] or Y[j])."""
        if self.edge_labels:
            G.edge_label  # read once, so that every part shares the edge label ids
        parts = []  # (graph offset, [(s, graph, class, count, class codes, aut), ...])

        def where(first, last):  # the argument (and graph) a part holds, for errors
            if nx is None or last <= nx:
                side, lo = "X", 0
            elif first >= nx:
                side, lo = "Y", nx
            else:
                return "X and Y"
            return f"{side}[{first - lo}]" if last - first == 1 else side

        def run(first, last):
            P = G if (first, last) == (0, len(G)) else G.take(
                torch.arange(first, last, device=G.device))
            try:
                levels = []
                each = self._levels(P, budget=self._budget, name=where(first, last))
                for s, sets, cls, n_cls, aut, _, codes in each:
                    (g, c), cnt = count_rows([P.graph_of_node.index_select(0, sets[:, 0]),
                                              cls], [len(P), n_cls])
                    levels.append((s, g + first, c, cnt, codes, aut))
                parts.append(levels)
            except _OverBudget:
                mid = (first + last) // 2
                run(first, mid), run(mid, last)
        run(0, len(G))
        rows, cols, vals, weights, offset = [], [], [], [], 0
        for s in range(1, self.k + 1):
            here = [lv for levels in parts for lv in levels if lv[0] == s]
            if not here:
                continue
            codes = torch.cat([lv[4] for lv in here])
            ids, _, cfirst = compact(list(codes.T), [int(codes.max()) + 1] * codes.shape[1])
            shift = torch.cumsum(torch.tensor([0] + [lv[4].shape[0] for lv in here[:-1]],
                                              device=G.device), 0).tolist()
            for lv, sh in zip(here, shift):
                rows.append(lv[1]), vals.append(lv[3])
                cols.append(ids.index_select(0, lv[2] + sh) + offset)
            aut = torch.cat([lv[5] for lv in here]).index_select(0, cfirst)
            lam = self._lambdas[s - 1]  # an int, or a float: weights then in float64
            if isinstance(lam, int) and lam * int(aut.max()) < 2 ** 63:
                weights.append(aut * lam)
            else:  # in int64, λ = 2^62 wrapped around (K(G, G) read 3.2e19 for 5.1e19)
                weights.append(aut.double() * float(lam))
            offset += cfirst.numel()
        rows, cols, vals = torch.cat(rows), torch.cat(cols), torch.cat(vals)
        if len(parts) > 1:  # a graph's class counted in one part only: no duplicates
            order = torch.argsort(rows * max(offset, 1) + cols)
            rows, cols, vals = (t.index_select(0, order) for t in (rows, cols, vals))
        return rows, cols, vals, torch.cat(weights), offset

    _table_bytes = 2 ** 26  # the largest pair-code table of _edge_codes

    @staticmethod
    def _edge_codes(G: GraphSet, src, dst, ecode, n_codes):
        """A function (u, v) ↦ the code of the pair of nodes u, v of one graph (0: no
        edge, else 1 + edge label): a table of every node's row of codes to the nodes of
        its graph (N × n_max, of the smallest integer type that holds the codes) when it
        takes at most ``_table_bytes``, else a binary search in the sorted edge keys."""
        N = int(G.ptr[-1])
        n_max = max(int(G.num_nodes.max()) if len(G) else 1, 1)
        base = G.ptr.index_select(0, G.graph_of_node)  # each node's graph's first node
        dtype = (torch.uint8 if n_codes <= 2 ** 8 else torch.int16 if n_codes <= 2 ** 15
                 else torch.int32)
        if N * n_max * dtype.itemsize <= SubgraphMatching._table_bytes:
            table = torch.zeros(N * n_max, dtype=dtype, device=G.device)
            table[src * n_max + dst - base.index_select(0, src)] = ecode.to(dtype)
            return lambda u, v: table.index_select(
                0, u * n_max + v - base.index_select(0, u)).long()
        ekey = src * N + dst

        def lookup(u, v):
            key = u * N + v
            pos = torch.searchsorted(ekey, key).clamp_max(ekey.numel() - 1)
            return torch.where(ekey.index_select(0, pos) == key, ecode.index_select(0, pos), 0)
        return lookup

    def _entries(self, G: GraphSet):
        """φ with K = φφᵀ: counts scaled by √(λ_s |Aut|) (floats)."""
        if self.node_kernel is not None:
            raise TypeError("SubgraphMatching with a node_kernel has no finite feature map: "
                            "use the Gram matrix k(X, Y)")
        rows, cols, vals, w, p = self._counts(G)
        return rows, cols, vals * w.double().sqrt().index_select(0, cols), p

    # -- continuous node attributes --------------------------------------------------
    _block = 2 ** 22  # entries of one block of pair weights

    def _attribute_gram(self, U: GraphSet, name: str = "X") -> torch.Tensor:
        """The dense Gram of all graphs of U with the Gaussian node kernel: for every
        class, every pair (S, T) of its subgraphs and every canonical order of T (one
        per automorphism), exp(−‖x_S − x_T‖² / (2ℓ²)) on the attribute rows of the
        nodes stacked in canonical order (the product of the node kernels of the
        isomorphism), times λ_s, summed into the (graph of S, graph of T) entry."""
        n, dev = len(U), U.device
        X = U.node_attributes
        K = torch.zeros(n, n, dtype=torch.float64, device=dev)
        ell = self.lengthscale
        each = self._levels(U, orders=True, name=name)
        for s, sets, cls, n_cls, aut, (set_of, nodes), _ in each:
            M = sets.shape[0]
            g_set = U.graph_of_node.index_select(0, sets[:, 0])
            per = torch.bincount(set_of, minlength=M)
            canon = nodes.index_select(0, torch.cumsum(per, 0) - per)  # first order of each
            a_vec = X.index_select(0, canon.reshape(-1)).view(M, -1)
            b_vec = X.index_select(0, nodes.reshape(-1)).view(nodes.shape[0], -1)
            b_cls, b_graph = cls.index_select(0, set_of), g_set.index_select(0, set_of)
            a_ord = torch.sort(cls, stable=True).indices
            b_ord = torch.sort(b_cls, stable=True).indices
            a_cnt = torch.bincount(cls, minlength=n_cls).tolist()
            b_cnt = torch.bincount(b_cls, minlength=n_cls).tolist()
            lam = float(self._lambdas[s - 1])
            fits = sqdist_fits(a_vec.square().sum(1))  # the rows of b_vec: their orders
            for ai, bi in zip(torch.split(a_ord, a_cnt), torch.split(b_ord, b_cnt)):
                b, gb = b_vec.index_select(0, bi), b_graph.index_select(0, bi)
                step = max(1, self._block // max(bi.numel(), 1))
                for rows in torch.split(ai, step):
                    # ‖a − b‖² = ‖a‖² + ‖b‖² − 2 aᵀb: one matrix product per block
                    w = _gaussian_(pair_sqdist(a_vec.index_select(0, rows), b, fits), ell)
                    part = torch.zeros(rows.numel(), n, dtype=K.dtype, device=dev)
                    part.index_add_(1, gb, w)
                    K.index_add_(0, g_set.index_select(0, rows), part, alpha=lam)
        return K

    def _attribute_diag(self, U: GraphSet) -> torch.Tensor:
        """k(G, G) for every graph of U with the Gaussian node kernel: the sum of
        :meth:`_attribute_gram` restricted to pairs (S, T) of subgraphs of one graph —
        O(Σ_G Σ_c n_c(G)² ``|Aut(c)|``), no n × n Gram. The pairs are those of equal
        (class, graph) key, expanded in chunks of at most ``_block`` pairs."""
        n, dev = len(U), U.device
        X = U.node_attributes
        out = torch.zeros(n, dtype=torch.float64, device=dev)
        ell = self.lengthscale
        for s, sets, cls, n_cls, aut, (set_of, nodes), _ in self._levels(U, orders=True):
            M = sets.shape[0]
            g_set = U.graph_of_node.index_select(0, sets[:, 0])
            per = torch.bincount(set_of, minlength=M)
            canon = nodes.index_select(0, torch.cumsum(per, 0) - per)
            a_vec = X.index_select(0, canon.reshape(-1)).view(M, -1).double()
            b_vec = X.index_select(0, nodes.reshape(-1)).view(nodes.shape[0], -1).double()
            key = cls * n + g_set  # < n_cls · n ≤ M · n
            b_key, b_ord = torch.sort(key.index_select(0, set_of), stable=True)
            start = torch.searchsorted(b_key, key)
            cnt = torch.searchsorted(b_key, key, right=True) - start
            ends = torch.cumsum(cnt, 0)
            lam, lo = float(self._lambdas[s - 1]), 0
            while lo < M:  # rows lo..hi − 1: at most _block pairs (one row at least)
                hi = max(int(torch.searchsorted(ends, int(ends[lo] - cnt[lo]) + self._block,
                                                right=True)), lo + 1)
                rows = torch.arange(lo, hi, device=dev)
                c = cnt.index_select(0, rows)
                b = b_ord.index_select(0, segment_ranges(start.index_select(0, rows), c))
                a = torch.repeat_interleave(rows, c, output_size=b.numel())
                w = (a_vec.index_select(0, a) - b_vec.index_select(0, b)).square().sum(1)
                out.index_add_(0, g_set.index_select(0, a), _gaussian_(w, ell), alpha=lam)
                lo = hi
        return out

    def _gram(self, X: GraphSet, Y: GraphSet | None, unit_rows: bool = False):
        self._check_pair(X, Y)
        U = X if Y is None else GraphSet.concat([X, Y], attributes=self._reads_attributes)
        if self.node_kernel is not None:
            K = self._finite(self._attribute_gram(U, "X" if Y is None else "X and Y")
                             .to(X.dtype))
            if unit_rows:
                d = K.diagonal()
                inv = torch.where(d > 0, d.clamp_min(1e-300).rsqrt(), 0)
                K = K * inv.unsqueeze(1) * inv.unsqueeze(0)
            nx = len(X)
            return DenseKernelMatrix(K if Y is None else K[:nx, nx:].contiguous())
        rows, cols, vals, w, p = self._counts(U, None if Y is None else len(X))
        exact = not w.is_floating_point()
        vals = vals.to(X.dtype)
        wv = vals * w.to(X.dtype).index_select(0, cols)  # rows of Φ diag(w)
        sq = self._finite(torch.zeros(len(U), dtype=vals.dtype, device=vals.device)
                          .index_add_(0, rows, vals * wv))    # k(G, G) ≥ |k(G, G')|
        small = not unit_rows and exact and (not sq.numel() or float(sq.max()) < 2 ** 24)
        if unit_rows:
            scale = torch.where(sq > 0, sq.clamp_min(1e-300).rsqrt(), 0)
            vals = vals * scale.index_select(0, rows)
            wv = wv * scale.index_select(0, rows)
        nx = len(X)
        inx = rows < nx
        phi_w = _coo(rows[inx], cols[inx], wv[inx], (nx, p))
        if Y is None:
            return SparseFeatureKernelMatrix(phi_w, _coo(rows, cols, vals, (nx, p)), small)
        phi_y = _coo(rows[~inx] - nx, cols[~inx], vals[~inx], (len(Y), p))
        return SparseFeatureKernelMatrix(phi_w, phi_y, small)

    def _diag(self, X: GraphSet) -> torch.Tensor:
        if self.node_kernel is not None:
            return self._finite(self._attribute_diag(X).to(X.dtype))
        rows, cols, vals, w, _ = self._counts(X)
        vals = vals.to(X.dtype)
        return self._finite(torch.zeros(len(X), dtype=X.dtype, device=X.device).index_add_(
            0, rows, vals * vals * w.to(X.dtype).index_select(0, cols)))

    def _finite(self, K: torch.Tensor) -> torch.Tensor:
        """K, or a ValueError where weights lw this large overflow it (a Gram of inf and
        NaN, NaN normalized)."""
        return check_range(K, K.dtype, lambda _: (
            f"SubgraphMatching: the kernel values overflow {K.dtype} with the weights "
            f"lw={self.lw!r}; take smaller weights"))
