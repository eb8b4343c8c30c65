"""The relabel / aggregate core the graph kernels share.

- :func:`compact` — distinct rows of integer columns (a packed key when it fits int64);
- :func:`wl_relabel` — one Weisfeiler–Lehman round on a whole :class:`GraphSet` at once;
- :class:`CountFeatureKernel` — a kernel whose features are sparse counts per graph
  (WL, shortest path): it builds them once on X ∪ Y so that both share one dictionary,
  and returns Φ_X Φ_Yᵀ lazily.
"""
from __future__ import annotations

import warnings

import torch

from ..gram import FeatureKernelMatrix, _as_index
from ._batch import GraphKernel, GraphSet, _offsets

_KEY_LIMIT = 2 ** 62


def compact(columns, sizes):
    """The distinct rows of the integer columns ``columns`` (values of column c in
    [0, sizes[c])), sorted lexicographically.

    Returns ``(inverse, counts, first)``: the distinct-row id of every row, the number of
    rows with each id, and the position of one row with each id. Rows are packed into one
    int64 key when the product of ``sizes`` fits, else compared column-wise.
    """
    n = columns[0].numel()
    device = columns[0].device
    prod = 1
    for s in sizes:
        prod *= max(int(s), 1)
    if prod < _KEY_LIMIT:
        key = torch.zeros(n, dtype=torch.long, device=device)
        for col, s in zip(columns, sizes):
            key = key * max(int(s), 1) + col
        _, inv, counts = torch.unique(key, return_inverse=True, return_counts=True)
    else:
        _, inv, counts = torch.unique(torch.stack(list(columns), 1), dim=0,
                                      return_inverse=True, return_counts=True)
    first = torch.empty(counts.numel(), dtype=torch.long, device=device)
    first.scatter_(0, inv, torch.arange(n, device=device))
    return inv, counts, first


def wl_relabel(labels: torch.Tensor, n_labels: int, G: GraphSet):
    """One Weisfeiler–Lehman round: every node's new label is the id of the pair
    (own label, sorted multiset of its out-neighbours' labels), over all graphs at once.

    Returns ``(new_labels, n_new)`` with new labels in [0, n_new). Nodes are grouped by
    degree (two nodes of different degrees never share a multiset), so each group is a
    rectangular (n_d, 1 + d) table whose distinct rows are found by one sort — no loop
    over nodes or graphs, O((N + E) log N) per round.
    """
    N = labels.numel()
    src, dst = G.edge_index
    nb = labels[dst]
    nb = nb[torch.argsort(src * max(n_labels, 1) + nb)]  # edges stay grouped by source
    deg = torch.bincount(src, minlength=N)
    start = _offsets(deg)[:-1]
    nodes_by_deg = torch.argsort(deg, stable=True)
    degrees, counts = torch.unique_consecutive(deg[nodes_by_deg], return_counts=True)
    new = torch.empty_like(labels)
    n_new = 0
    for d, nodes in zip(degrees.tolist(), torch.split(nodes_by_deg, counts.tolist())):
        cols = [labels[nodes]]
        if d:
            table = nb[start[nodes, None] + torch.arange(d, device=labels.device)]
            cols += list(table.unbind(1))
        inv, cnt, _ = compact(cols, [n_labels] * (d + 1))
        new[nodes] = inv + n_new
        n_new += cnt.numel()
    return new, n_new


def initial_labels(G: GraphSet):
    """The node labels of G renumbered to [0, L) (only labels that occur)."""
    _, labels = torch.unique(G.node_label, return_inverse=True)
    return labels, int(labels.max()) + 1 if labels.numel() else 0


def wl_label_sequence(G: GraphSet, n_iter: int):
    """Labels of the initial round and of ``n_iter`` WL rounds: a list of (labels, L)."""
    seq = [initial_labels(G)]
    for _ in range(n_iter):
        seq.append(wl_relabel(*seq[-1], G))
    return seq


def histogram(graph_of_node: torch.Tensor, labels: torch.Tensor, n_graphs: int,
              n_labels: int):
    """Counts of every (graph, label): ``(rows, cols, counts)`` of a sparse (G, L) matrix."""
    _, counts, first = compact([graph_of_node, labels], [n_graphs, n_labels])
    return graph_of_node[first], labels[first], counts


def _sparse_mm(a, b):
    """a @ b for sparse COO a and b (torch routes it through CSR and warns that CSR is beta)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse.mm(a, b)


class SparseFeatureKernelMatrix(FeatureKernelMatrix):
    """Φ_X Φ_Yᵀ for sparse count features: rows and the diagonal are read sparse × sparse,
    never as dense (n, p) blocks (p, the number of distinct substructures, can be far
    larger than n)."""

    def _transpose(self):
        return SparseFeatureKernelMatrix(self.phi_y, self.phi_x)

    def rows(self, idx):
        idx = _as_index(idx, self.shape[0], self.device)
        return _sparse_mm(self.phi_x.index_select(0, idx), self.phi_y.t()).to_dense()

    def diag(self):
        k = min(self.shape)
        idx = torch.arange(k, device=self.device)
        px, py = self.phi_x.index_select(0, idx), self.phi_y.index_select(0, idx)
        return torch.sparse.sum(px * py, 1).to_dense() if k else torch.zeros(0, dtype=self.dtype)

    def to_dense(self):
        return _sparse_mm(self.phi_x, self.phi_y.t()).to_dense()


def _coo(rows, cols, vals, shape):
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, shape,
                                   check_invariants=False).coalesce()


class CountFeatureKernel(GraphKernel):
    r"""Base of graph kernels k(G, G') = ⟨φ(G), φ(G')⟩ with φ(G) a sparse vector of
    substructure counts.

    A subclass writes :meth:`_entries` — the nonzero counts of every graph of one
    :class:`GraphSet` as ``(graph, feature, count)`` triples, features numbered in a
    dictionary built on that set. ``k(X, Y)`` evaluates it once on X ∪ Y (so both share
    the dictionary, and a substructure seen only in Y matches nothing in X) and returns
    a lazy features KernelMatrix (torch sparse COO Φ).
    """

    def _entries(self, G: GraphSet):
        raise NotImplementedError

    def features(self, X) -> torch.Tensor:
        """φ of every graph of X as a sparse COO tensor (n_graphs, n_features); the
        feature numbering is that of this set's dictionary."""
        X = self.check_input(X, "X")
        rows, cols, vals, p = self._entries(X)
        return _coo(rows, cols, vals.to(X.dtype), (len(X), p))

    def _gram(self, X: GraphSet, Y: GraphSet | None):
        self._check_pair(X, Y)
        U = X if Y is None else GraphSet.concat([X, Y])
        rows, cols, vals, p = self._entries(U)
        vals = vals.to(X.dtype)
        nx = len(X)
        inx = rows < nx
        phi_x = _coo(rows[inx], cols[inx], vals[inx], (nx, p))
        if Y is None:
            return SparseFeatureKernelMatrix(phi_x)
        phi_y = _coo(rows[~inx] - nx, cols[~inx], vals[~inx], (len(Y), p))
        return SparseFeatureKernelMatrix(phi_x, phi_y)

    def _diag(self, X: GraphSet) -> torch.Tensor:
        rows, _, vals, _ = self._entries(X)
        vals = vals.to(X.dtype)
        return torch.zeros(len(X), dtype=X.dtype, device=X.device).index_add_(0, rows, vals * vals)
