"""The vertex-histogram and edge-histogram graph kernels (label counts, linear kernel)."""
from __future__ import annotations


import torch

from .._threads import one_thread
from .._validation import check_bool
from ..gram import FeatureKernelMatrix, _as_index
from ._batch import GraphSet, _same_stamps, _stamps, unify_labels
from ._labels import CountFeatureKernel, _int8_product_works, histogram, initial_labels

__all__ = ["VertexHistogram", "EdgeHistogram"]


class _CountMatrix(FeatureKernelMatrix):
    """Φ_X Φ_Yᵀ for dense count features Φ (graphs × labels, few labels), float64.

    ``exact_small``: Φ holds non-negative integers and every row has ‖φ‖² < 2^24, so every
    partial sum of a product is an integer below 2^24 (Cauchy–Schwarz): dense pieces are
    then computed in int8 (counts ≤ 127, ``torch._int_mm``'s int32 sums) or float32, both
    exact, and converted once."""

    def __init__(self, phi_x, phi_y=None, exact_small: bool = False):
        super().__init__(phi_x, phi_y)
        self.exact_small = exact_small
        self._low = None

    def _transpose(self):
        return _CountMatrix(self.phi_y, self.phi_x, self.exact_small)

    def _lowp(self):
        """Φ_X and Φ_Y in the narrowest exact dtype (see the class notes)."""
        if self._low is None:
            px, py = self.phi_x, self.phi_y
            dt = torch.float64
            if self.exact_small and px.device.type == "cpu":
                top = max(float(p.max()) if p.numel() else 0.0
                          for p in ((px,) if py is px else (px, py)))
                dt = torch.int8 if top <= 127 and _int8_product_works() else torch.float32
            elif self.exact_small:
                dt = torch.float32
            lx = px.to(dt)
            self._low = (lx, lx if py is px else py.to(dt))
        return self._low

    def rows(self, idx):
        idx = _as_index(idx, self.shape[0], self.device)
        lx, ly = self._lowp()
        lx = lx.index_select(0, idx)
        with one_thread(_small(lx, ly)):
            return _product(lx, ly, self.dtype)

    def to_dense(self):
        lx, ly = self._lowp()
        with one_thread(_small(lx, ly)):
            return _product(lx, ly, self.dtype)


# multiply-adds of a count product run on one torch thread up to this many (~30 ms)
_ONE_THREAD_FLOPS = 2 ** 27


def _small(lx: torch.Tensor, ly: torch.Tensor) -> bool:
    """Whether lx lyᵀ is small enough for one thread on the CPU: at 1,000 graphs (0.5 ms)
    a second thread gained nothing, and beside a busy process its OpenMP regions waited
    for a descheduled thread (EdgeHistogram's Gram: up to 126 ms against 4.5 ms on one
    thread, 30 calls, load 1.7)."""
    return lx.device.type == "cpu" and \
        lx.shape[0] * ly.shape[0] * max(lx.shape[1], 1) <= _ONE_THREAD_FLOPS


# keys below this are kept as int32 (_DenseHistogram._count_key)
_INT32_KEYS = 2 ** 31

# cells of one block of the int8 product (_product): a 512 KB int32 buffer, reused
_BLOCK_CELLS = 2 ** 17


def _product(lx: torch.Tensor, ly: torch.Tensor, dtype) -> torch.Tensor:
    """lx lyᵀ as ``dtype``, computed in the dtype of ``lx`` and ``ly`` (see
    :meth:`_CountMatrix._lowp`). The int8 product (``torch._int_mm``: int32 sums) is
    made by blocks of rows into one reused int32 buffer of ``_BLOCK_CELLS`` cells, each
    block converted into the output: no n × m int32 intermediate (4 MB at 1,000
    graphs, fresh memory to fault in on every call where the allocator has returned
    it to the system)."""
    if lx.dtype != torch.int8:
        return (lx @ ly.T).to(dtype)
    n, m = lx.shape[0], ly.shape[0]
    if n == 0 or m == 0 or lx.shape[1] == 0:
        return torch.zeros(n, m, dtype=dtype, device=lx.device)
    if lx.shape[1] == 1:  # torch 2.13's CPU _int_mm returns garbage for an inner size of 1
        lx, ly = (torch.nn.functional.pad(d, (0, 1)) for d in (lx, ly))
    lyt = ly.T.contiguous()
    step = max(1, _BLOCK_CELLS // m)
    buf = torch.empty(min(step, n), m, dtype=torch.int32, device=lx.device)
    out = torch.empty(n, m, dtype=dtype, device=lx.device)
    for i in range(0, n, step):
        a = lx[i:i + step]
        block = buf[:a.shape[0]]
        torch._int_mm(a, lyt, out=block)
        out[i:i + step].copy_(block)
    return out


class _DenseHistogram:
    """The Gram of a histogram kernel from its dense count matrix C (graphs × labels) by one
    ``bincount`` of the (graph, label) keys, when C is small (at most 4 entries per counted
    item, or 2^16): no sort, no sparse format. Larger label sets take the sparse path of
    :class:`CountFeatureKernel`. X and Y are counted apart, their label dictionaries
    merged (no concatenation of the two sets)."""

    _counted = "node labels (x)"

    def _keys(self, G: GraphSet):
        """``(graph of each counted item, its label id, label rows)``; by each kernel."""
        raise NotImplementedError

    def _key_source(self, G: GraphSet) -> tuple:
        """The objects :meth:`_keys` derives its answer from (their identity tells
        whether a cached count key is still G's); by each kernel."""
        raise NotImplementedError

    def _count_key(self, G: GraphSet):
        """``(key, L)``: the bincount key ``label + L · graph`` of every counted item of G
        and the number L of label rows, kept with G (``G._count_key_<kernel class>``)
        while the tensors it comes from (:meth:`_key_source`) are G's and unchanged in
        place (their identity and ``_version``, which every in-place write bumps): a set
        used again (a fitted model's, a grid search's) is counted by one ``bincount``.
        Costs one int32 per counted item (int64 past 2^31 keys), held with the set."""
        name = "_count_key_" + type(self).__name__  # not shared by a copy GraphSet(G)
        hit = G.__dict__.get(name)
        if hit is not None and _same_stamps(hit[0], _stamps(self._key_source(G))):
            return hit[1], hit[2]
        g, label, values = self._keys(G)
        L = max(int(values.shape[0]), 1)
        if len(G) * L > max(4 * label.numel(), 2 ** 16):
            return None, L  # a large count matrix: the sparse path
        key = torch.add(label, g, alpha=L)
        if len(G) * L < _INT32_KEYS:  # half the memory kept, and bincount is faster on it
            key = key.to(torch.int32)
        G.__dict__[name] = (_stamps(self._key_source(G)), key, L)
        return key, L

    def _gram(self, X: GraphSet, Y: GraphSet | None, unit_rows: bool = False):
        self._check_pair(X, Y)
        if Y is None:
            key, L = self._count_key(X)
            if key is None:
                return super()._gram(X, Y, unit_rows)
            return self._count_matrix(
                [torch.bincount(key, minlength=len(X) * L).view(len(X), L).to(X.dtype)],
                unit_rows)
        gx, lx, vx = self._keys(X)
        gy, ly, vy = self._keys(Y)
        if vx.shape[1] != vy.shape[1]:
            raise ValueError(f"the {self._counted} of X (rows of width {vx.shape[1]}) "
                             f"and Y (width {vy.shape[1]}) are not comparable: each "
                             f"distinct row is one label, so X and Y need the same "
                             f"number of columns")
        (lx, ly), values = unify_labels([(lx, vx), (ly, vy)])
        n, L = len(X) + len(Y), max(int(values.shape[0]), 1)
        if n * L > max(4 * (lx.numel() + ly.numel()), 2 ** 16):
            return super()._gram(X, Y, unit_rows)
        C = [torch.bincount(torch.add(lab, g, alpha=L), minlength=len(S) * L)  # one pass
             .view(len(S), L).to(X.dtype) for g, lab, S in ((gx, lx, X), (gy, ly, Y))]
        return self._count_matrix(C, unit_rows)

    @staticmethod
    def _count_matrix(C, unit_rows: bool):
        """The KernelMatrix of the count matrices C (X's; Y's), rows scaled to unit norm
        with ``unit_rows``."""
        sq = [(c * c).sum(1) for c in C]
        small = not unit_rows and all(not s.numel() or float(s.max()) < 2 ** 24 for s in sq)
        if unit_rows:
            C = [c * torch.where(s > 0, s.rsqrt(), 0.0)[:, None] for c, s in zip(C, sq)]
        return _CountMatrix(C[0], None if len(C) == 1 else C[1], small)


class VertexHistogram(_DenseHistogram, CountFeatureKernel):
    r"""Vertex-histogram graph kernel: the linear kernel on node-label counts.

    .. math:: k(G, G') = \sum_{\ell} c_\ell(G)\, c_\ell(G'),

    c_ℓ(G) the number of nodes of G with label ℓ — the WL subtree kernel with no
    relabelling round (:class:`WeisfeilerLehman` with ``n_iter=0``), and GraKeL's
    ``VertexHistogram`` (Sugiyama and Borgwardt, 2015, use it as the baseline of
    graph kernels).

    **Reads** the node labels (``x``, each distinct row one label; see
    :class:`GraphSet`); no edge, no attribute.

    Parameters
    ----------
    normalize : bool
        Cosine normalization k(G, G')/√(k(G, G) k(G', G')), applied lazily.

    Notes
    -----
    With few labels (at most 4 count cells per node, or 2^16 cells: the usual case), the
    count matrix C (graphs × labels) comes from one ``bincount`` of the (graph, label)
    keys and K = C Cᵀ from one product, exact in int8 (counts ≤ 127) or float32 (squared
    norms below 2^24); measured 2.6 to 3 times the sparse path at 1,000 graphs of 20 and
    200 nodes. With many labels, sparse features (:class:`CountFeatureKernel`).

    References
    ----------
    M. Sugiyama and K. M. Borgwardt, "Halting in random walk kernels", NeurIPS (2015).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import VertexHistogram
    >>> g = Data(x=torch.tensor([[0], [0], [1]]), edge_index=torch.zeros(2, 0, dtype=torch.long))
    >>> VertexHistogram()([g]).to_dense()  # 2·2 + 1·1
    tensor([[5.]], dtype=torch.float64)
    """

    _graph_fields = ("labelled_nodes",)  # x and num_nodes only, read for counting

    def __init__(self, normalize: bool = False):
        super().__init__()
        self.normalize = check_bool(normalize, "normalize")

    def extra_repr(self) -> str:
        return f"normalize={self.normalize}"

    def _entries(self, G: GraphSet):
        labels, L = initial_labels(G)
        rows, cols, counts = histogram(G.graph_of_node, labels, len(G), max(L, 1))
        return rows, cols, counts, max(L, 1)

    def _keys(self, G: GraphSet):
        # the label ids of G (rows of the label rows): a label that no graph holds is a
        # zero column, which adds nothing
        return (G.graph_of_node,) + tuple(G.labelled_nodes())

    def _key_source(self, G: GraphSet) -> tuple:
        return (G.ptr,) + tuple(G.labelled_nodes())


class EdgeHistogram(_DenseHistogram, CountFeatureKernel):
    r"""Edge-histogram graph kernel: the linear kernel on edge-label counts.

    .. math:: k(G, G') = \sum_{e} c_e(G)\, c_e(G'),

    c_e(G) the number of entries of G's ``edge_index`` with edge label e — an undirected
    edge, stored both ways, counts twice, as in GraKeL's ``EdgeHistogram`` given the
    edge-label dictionary of both directions.

    **Reads** the edge labels (``edge_attr``, each distinct row one label); every graph
    needs ``edge_attr``.

    Counted as :class:`VertexHistogram` counts nodes, over the distinct edges: when the
    edges as given hold no duplicate (one scatter checks it), they are counted in their
    given order, without the sort that merges duplicates
    (:meth:`GraphSet.labelled_edges`).

    Parameters
    ----------
    normalize : bool
        Cosine normalization, applied lazily. A graph without edges has k(G, G) = 0 and
        gets a zero row; GraKeL 0.1.11 gives NaN there (0/0).

    References
    ----------
    M. Sugiyama and K. M. Borgwardt, "Halting in random walk kernels", NeurIPS (2015).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import EdgeHistogram
    >>> g = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), edge_attr=torch.tensor([[1], [1]]),
    ...          num_nodes=2)
    >>> EdgeHistogram()([g]).to_dense()
    tensor([[4.]], dtype=torch.float64)
    """

    _graph_fields = ("labelled_edges",)  # edge_index, edge_attr, num_nodes, for counting
    _counted = "edge labels (edge_attr)"

    def __init__(self, normalize: bool = False):
        super().__init__()
        self.normalize = check_bool(normalize, "normalize")

    def extra_repr(self) -> str:
        return f"normalize={self.normalize}"

    def _entries(self, G: GraphSet):
        if G.edge_label is None:
            raise ValueError("EdgeHistogram needs edge labels: give every graph edge_attr "
                             "(one row per edge; each distinct row is one label)")
        values, labels = torch.unique(G.edge_label, return_inverse=True)
        L = max(values.numel(), 1)
        graph_of_edge = G.graph_of_node.index_select(0, G.edge_index[0])
        rows, cols, counts = histogram(graph_of_edge, labels, len(G), L)
        return rows, cols, counts, L

    def _check_pair(self, X: GraphSet, Y: GraphSet | None) -> None:
        """No node labels are read (the edge labels' widths are compared in ``_gram``)."""

    def _keys(self, G: GraphSet):
        keys = G.labelled_edges()  # distinct edges, in any order: no sort when distinct
        if keys is None:
            raise ValueError("EdgeHistogram needs edge labels: give every graph edge_attr "
                             "(one row per edge; each distinct row is one label)")
        return keys

    def _key_source(self, G: GraphSet) -> tuple:
        return (G.labelled_edges(),)  # made again by G when its edges change
