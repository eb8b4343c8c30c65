"""The Weisfeiler–Lehman subtree kernel and WL shortest-path kernel."""
from __future__ import annotations

import torch

from .._validation import check_bool, is_int
from ._batch import GraphSet
from ._labels import CountFeatureKernel, label_items, wl_label_sequence
from .shortest_path import check_hop_distances, hop_distances, shortest_path_entries

__all__ = ["WeisfeilerLehman"]


class WeisfeilerLehman(CountFeatureKernel):
    r"""Weisfeiler–Lehman graph kernel (Shervashidze et al., 2011).

    Relabels every node ``n_iter`` times by the WL rule — the new label of v is a
    compressed id of (ℓ(v), sorted multiset {ℓ(u) : u a neighbour of v}) — and compares
    graphs round by round with a base kernel, rounds summed with equal weights:

    .. math:: k(G, G') = \sum_{i=0}^{h} k_{\text{base}}(G_i, G'_i),

    G_i the graph with the labels of round i (G_0: the initial labels), h = ``n_iter``.

    - ``base="subtree"`` (WL subtree kernel): k_base counts common labels,
      k_base(G_i, G'_i) = Σ_ℓ c_ℓ(G_i) c_ℓ(G'_i), c_ℓ the number of nodes with label ℓ —
      GraKeL's ``WeisfeilerLehman(n_iter=h, base_graph_kernel=VertexHistogram)``
      (h + 1 histograms, as here).
    - ``base="shortest_path"`` (WL shortest-path kernel): k_base is
      :class:`ShortestPath` on the labels of round i (hop distances computed once) —
      GraKeL's ``WeisfeilerLehman(n_iter=h, base_graph_kernel=ShortestPath)``.

    ``k(X, Y)`` relabels X ∪ Y at once, so a label that occurs only in Y is a new label
    that matches nothing in X: the same values as relabelling Y with the dictionary
    built on X.

    ``edge_labels=True`` uses the edge labels (each distinct row of ``edge_attr`` is one
    label, e.g. bond types): the multiset of a node becomes that of the pairs
    (label of the edge v → u, ℓ(u)) over its out-neighbours u — the usual extension of
    the WL relabelling to graphs with labelled edges (GraKeL's WL ignores edge labels,
    as ``edge_labels=False`` does).

    Parameters
    ----------
    n_iter : int
        Number of relabelling rounds h ≥ 0.
    normalize : bool
        Cosine normalization k(G, G')/√(k(G, G) k(G', G')), applied lazily.
    base : {"subtree", "shortest_path"}
    edge_labels : bool
        Fold the edge labels (``edge_attr``) into the relabelling; every graph then needs
        ``edge_attr``.

    Notes
    -----
    Node labels, edges and directions follow :class:`GraphSet`. The relabelling runs on
    the whole set at once on tensors: each node's signature gets an int64 key — a
    segment sum of codes of its neighbours' labels over the edges, exact (the signature
    in base max-degree + 1) when it fits, else a 64-bit hash whose grouping is checked
    entry by entry, so the labels are exact either way — and all nodes are grouped by
    one sort per round: O(h (N + E) + h N log N) for N nodes and E edges in all. As the
    rounds refine the partition of the nodes, a round only regroups the nodes whose
    label another node shares (most late labels are held by one node), and once a round
    splits no class the later rounds repeat its labels. The
    features (one column per label and round) are a features KernelMatrix: for few
    graphs and labels a dense count matrix filled by one ``bincount`` of the nodes'
    (graph, column) keys, its products exact in int8 or float32; otherwise sparse — ``K @ V``
    costs O(h N r) and the Gram is never stored; its dense K(X, X) adds the labels held
    by few graphs pair by pair, in int32. ``base="shortest_path"`` adds the cost
    of :class:`ShortestPath` per round (one BFS).

    References
    ----------
    N. Shervashidze, P. Schweitzer, E. J. van Leeuwen, K. Mehlhorn and K. M. Borgwardt,
    "Weisfeiler–Lehman graph kernels", JMLR 12:2539–2561 (2011).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import WeisfeilerLehman
    >>> path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3)
    >>> WeisfeilerLehman(n_iter=1)([path, path]).to_dense()
    tensor([[14., 14.],
            [14., 14.]], dtype=torch.float64)
    """

    _graph_fields = ("nodes", "edges")  # a list of Data: no node attributes read

    def __init__(self, n_iter: int = 3, normalize: bool = False, base: str = "subtree",
                 edge_labels: bool = False):
        super().__init__()
        if not is_int(n_iter) or n_iter < 0:
            raise ValueError(f"n_iter must be a non-negative int, got {n_iter!r}")
        if base not in ("subtree", "shortest_path"):
            raise ValueError(f"base must be 'subtree' or 'shortest_path', got {base!r}")
        edge_labels = check_bool(edge_labels, "edge_labels")
        self.n_iter, self.normalize, self.base = n_iter, check_bool(normalize, "normalize"), base
        self.edge_labels = edge_labels

    _per_graph_features = True  # φ(G) depends on G only (the set numbers the features)

    def extra_repr(self) -> str:
        return (f"n_iter={self.n_iter}, base={self.base!r}, edge_labels={self.edge_labels}, "
                f"normalize={self.normalize}")

    def _check_size(self, X: GraphSet, name: str) -> None:
        if self.base == "shortest_path":
            check_hop_distances(X, name, "WeisfeilerLehman(base='shortest_path')")

    def _items(self, G: GraphSet):
        if self.base != "subtree":
            return None
        seq = wl_label_sequence(G, self.n_iter, self.edge_labels)
        return label_items(G.graph_of_node, seq)

    def _entries(self, G: GraphSet):
        if self.base == "subtree":
            return super()._entries(G)
        seq = wl_label_sequence(G, self.n_iter, self.edge_labels)
        rows, cols, vals, offset = [], [], [], 0
        dist = list(hop_distances(G))
        for labels, L in seq:
            r, c, v, p = shortest_path_entries(dist, labels, L)
            rows.append(r), cols.append(c + offset), vals.append(v)
            offset += p
        return torch.cat(rows), torch.cat(cols), torch.cat(vals), offset
