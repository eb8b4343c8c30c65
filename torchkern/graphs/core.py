"""The core framework for graph kernels (Nikolentzos et al., 2018)."""
from __future__ import annotations

import copy

import torch

from .._validation import check_bool, is_int
from ..gram import DenseKernelMatrix, KernelMatrix
from ..kernels.structured import _inv_sqrt
from ._batch import (GraphKernel, GraphSet, _with_base_fields, check_memory, is_undirected,
                     segment_ranges)
from ._labels import CountFeatureKernel, _squares, count_items

__all__ = ["CoreFramework", "core_numbers", "induced_subgraphs"]


def core_numbers(G: GraphSet) -> torch.Tensor:
    """The core number of every node (N,): the largest k such that the node belongs to
    the k-core of its graph, the largest subgraph whose nodes all have degree ≥ k in it.

    Peeling on the whole set at once: at level k every node of degree ≤ k in what
    remains is removed (core number k), repeatedly, and k moves up to the smallest
    remaining degree when none is left to remove; each step lowers the degrees of the
    neighbours of the removed nodes by one segment sum over the removed nodes' edges
    only. The degree of v is its number of neighbours u (edges v → u), a self-loop
    counting once, as in GraKeL."""
    N = int(G.ptr[-1])
    src, dst = G.edge_index
    dev = G.device
    loop = src == dst  # a self-loop: v is its own neighbour, removed with v
    out = torch.bincount(src, minlength=N)
    start = torch.cumsum(out, 0) - out
    deg = out.clone()
    core = torch.zeros(N, dtype=torch.long, device=dev)
    alive = torch.ones(N, dtype=torch.bool, device=dev)
    left, k = N, 0
    never = torch.iinfo(torch.long).max
    while left:
        peel = (alive & (deg <= k)).nonzero().reshape(-1)
        if not peel.numel():
            k = int(torch.where(alive, deg, never).min())
            continue
        core[peel] = k
        alive[peel] = False
        left -= peel.numel()
        # the edges v → u of the removed nodes v: u loses the neighbour v (graphs are
        # undirected: u → v is an edge too)
        e = segment_ranges(start.index_select(0, peel), out.index_select(0, peel))
        u = dst.index_select(0, e)
        deg.index_add_(0, u, torch.where(loop.index_select(0, e), 0, -1))
    return core


def induced_subgraphs(G: GraphSet, keep: torch.Tensor, edge_labels: bool = True,
                      attributes: bool = False) -> GraphSet:
    """The subgraph of every graph of G induced by the nodes ``keep`` (a boolean (N,)
    mask), as a GraphSet with as many graphs as G (some possibly empty); node labels
    kept, edge labels unless ``edge_labels=False``, node attributes with
    ``attributes=True``. ``keep`` of shape (m, N): m
    copies of G, copy j induced by ``keep[j]``, as one GraphSet of m·len(G) graphs
    (graph j·len(G) + g: copy j of graph g).

    O(m N) boolean work and O(kept nodes + kept edges) index work, plus the edges of
    the graphs copy j keeps nodes of: copy j's kept nodes are numbered by one cumulative
    sum, and an edge is kept in copy j when both its ends are."""
    N = int(G.ptr[-1])
    keep = keep.reshape(-1, N)
    m = keep.shape[0]
    dev = G.device
    src, dst = G.edge_index
    E = src.numel()
    n_edges = G.eptr[1:] - G.eptr[:-1]
    ptr, kept = [], []
    offset = 0
    for j in range(m):
        k = keep[j]
        csum = torch.cumsum(k, 0)
        # copy j of graph g starts after the nodes of copy j kept before ptr[g]
        before = torch.cat([csum.new_zeros(1), csum]).index_select(0, G.ptr)
        ptr.append(before[:-1] + offset)
        size = int(before[-1])
        if not size:
            continue
        some = before[1:] > before[:-1]  # the graphs copy j keeps nodes of
        if 2 * int(n_edges[some].sum()) < E:  # few: the edges of those graphs only
            g = some.nonzero().reshape(-1)
            e = segment_ranges(G.eptr.index_select(0, g), n_edges.index_select(0, g))
            e = e[k.index_select(0, src.index_select(0, e)) &
                  k.index_select(0, dst.index_select(0, e))]
        else:
            e = (k.index_select(0, src) & k.index_select(0, dst)).nonzero().reshape(-1)
        kept.append((e, csum.sub_(1).add_(offset)))  # the kept edges, the new node ids
        offset += size
    ptr = torch.cat(ptr + [torch.full((1,), offset, dtype=torch.long, device=dev)])
    # both ends renumbered straight into one (2, E') edge_index
    edge_index = torch.empty(2, sum(e.numel() for e, _ in kept), dtype=torch.long, device=dev)
    at = 0
    for e, new_id in kept:
        for row, ends in enumerate((src, dst)):
            torch.index_select(new_id, 0, ends.index_select(0, e),
                               out=edge_index[row, at:at + e.numel()])
        at += e.numel()
    eptr = torch.searchsorted(edge_index[0], ptr)
    rows = keep.reshape(-1).nonzero().squeeze(1) % keep.shape[-1]  # the kept nodes' ids
    labels = G.node_label.index_select(0, rows)
    parts = dict(edge_label=None, edge_label_values=None)
    if edge_labels:
        parts = G._edge_label_parts(torch.cat([e for e, _ in kept] or [src[:0]]))
    if attributes and G.node_attributes is not None:
        parts["node_attributes"] = G.node_attributes.index_select(0, rows)
    return GraphSet._from_parts(ptr, edge_index, eptr, labels, G.label_values, dtype=G.dtype,
                                **parts)


class CoreFramework(CountFeatureKernel):
    r"""Core framework (Nikolentzos, Meladianos, Limnios and Vazirgiannis, 2018): a base
    graph kernel summed over the k-cores of the graphs,

    .. math:: k(G, G') = \sum_{i = c_0 + 1}^{\delta} k_{\text{base}}(C_i(G), C_i(G')),

    C_i(G) the i-core of G (the subgraph induced by the nodes of core number ≥ i,
    :func:`core_numbers`), δ the largest core number in the set, c₀ = ``min_core``
    (−1: from the 0-core, the whole graph, up); a graph without an i-core adds nothing
    at level i. This is GraKeL 0.1.11's ``CoreFramework(base_graph_kernel=...,
    min_core=...)`` — except that GraKeL 0.1.11's constructor discards its ``min_core``
    argument (it stores −1 whatever is passed), so GraKeL's values are always those of
    ``min_core=-1``; setting the attribute after construction (``k.min_core = c``)
    gives GraKeL's values for c, which are these.

    Parameters
    ----------
    base_kernel : GraphKernel
        A graph kernel of torchkern: a feature-map one (:class:`WeisfeilerLehman`,
        :class:`ShortestPath`, :class:`PyramidMatch`, ...), whose features are
        concatenated over the levels, or one whose Gram is computed directly
        (:class:`RandomWalk`, :class:`GraphHopper`, :class:`NeighborhoodHash`,
        :class:`MultiscaleLaplacian`, :class:`GraphletSampling`, the θ kernels,
        :class:`SubgraphMatching` with a ``node_kernel``, ...),
        summed level by level. Its own ``normalize`` is not used (GraKeL too sets it
        False); normalize here instead. Its arguments are reached as
        ``base_kernel__n_iter``.
    min_core : int
        Levels i > ``min_core`` are summed, ``min_core`` ≥ −1.
    normalize : bool
        Cosine normalization of the sum.

    Notes
    -----
    φ(G) is the concatenation of φ_base(C_i(G)) over the levels, so the Gram is a
    features KernelMatrix like the base kernel's. The cores of all graphs come from one
    peeling on the whole set (:func:`core_numbers`). With :class:`WeisfeilerLehman` or
    :class:`ShortestPath` as base (φ_base of a graph depends on that graph alone), the
    base kernel runs once, on the *distinct* cores of all graphs as one GraphSet
    (:func:`induced_subgraphs`): the i-core of G equals its (i − 1)-core unless G has a
    node of core number i − 1, and such a level reuses the features of the level below
    (it still counts in the sum, as in GraKeL); level i's features are numbered apart.
    In the Gram's Φ the columns held by one graph only (most of WL's late labels) are
    summed into a few columns of that graph with the same sum of squares, so Φ Φᵀ is
    unchanged (and exact) with far fewer entries; for few items every level's items are
    counted into a dense Φ by one ``bincount``. Other bases get one call per level, as
    does a set above ``levels × (nodes + edges)`` = 2^25. Cost: the peeling, O(N + E)
    per peeling round; the base kernel on the distinct cores, at most levels × (N + E)
    nodes and edges (2.8 × (N + E) on 1,000 random graphs of 200 nodes, 6 levels); one
    sort of their counted items. Cores are defined for undirected graphs (edges in both
    directions): a graph with an edge given one way only is a ValueError.

    A base kernel without a feature map runs once per level i on the i-cores of the
    graphs that have one (C_i(X) and C_i(Y)), and its (n_i × m_i) Gram is added into
    the dense (n × m) sum; the others add 0 at that level. This is GraKeL's evaluation,
    which fits a fresh base kernel on the i-cores of the fitted set at every level: at
    level i the value is the base's own ``k(C_i(X), C_i(Y))``. A seeded base draws with
    its own ``random_state`` at every level (GraKeL's fresh bases get the same
    parameters), fixed across calls as the base kernel's draws are. Of the bases only
    :class:`MultiscaleLaplacian` depends on the set it is given (its fitted basis):
    ``k(X)`` fits one basis per level on C_i(X) and keeps them, and ``k(A, B)``,
    ``pairs`` and the diagonal map both sides' i-cores with the kept basis of level i
    (GraKeL's ``fit(X).transform(Y)``), so a fitted estimator's ``k(X_test, X_fit)``
    does not depend on the test batch. A level with no kept basis (no ``k(X)`` yet, a
    level above X's cores, or the base kernel or ``min_core`` changed since) is fitted
    on C_i of the first argument (of the second where the first has no i-core). The θ
    kernels with ``draws="grakel"`` draw one stream for the whole set they are given,
    so over them ``k(X_test, X_fit)`` too depends on the test batch (as GraKeL's).
    Normalization divides by √(k(x, x) k(y, y)), each the sum over x's levels of the
    base's diagonal. Values equal GraKeL's for :class:`RandomWalk` (``labeled=False``),
    :class:`GraphHopper` and :class:`MultiscaleLaplacian`; torchkern's
    :class:`NeighborhoodHash` codes a label whatever other labels a set holds, where
    GraKeL's per-level base codes the labels present in that level's cores.
    ``pairs(X, Y)`` forms no (n, m) matrix: by batches of pairs over a base whose
    k(G, G') depends on G and G' only, over :class:`MultiscaleLaplacian` by its paired
    covariances in each level's basis, else level by level from row blocks of the
    base's lazy Gram of the level's cores.

    References
    ----------
    G. Nikolentzos, P. Meladianos, S. Limnios and M. Vazirgiannis, "A degeneracy
    framework for graph similarity", Proc. IJCAI (2018).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import CoreFramework, ShortestPath
    >>> tri = Data(edge_index=torch.tensor([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]]),
    ...            num_nodes=3)
    >>> CoreFramework(ShortestPath(with_labels=False))([tri]).to_dense()  # 3 levels, 36 each
    tensor([[108.]], dtype=torch.float64)
    """

    def __init__(self, base_kernel, min_core: int = -1, normalize: bool = False):
        super().__init__()
        if not isinstance(base_kernel, GraphKernel):
            raise TypeError(f"base_kernel must be a graph kernel of torchkern "
                            f"(WeisfeilerLehman, ShortestPath, RandomWalk, GraphHopper, ...), "
                            f"got {type(base_kernel).__name__}")
        if not is_int(min_core) or min_core < -1:
            raise ValueError(f"min_core must be an int >= -1, got {min_core!r}")
        self.base_kernel = base_kernel
        self.min_core, self.normalize = int(min_core), check_bool(normalize, "normalize")

    def _structural_args(self) -> dict:
        out = super()._structural_args()
        out["base_kernel"] = self.base_kernel
        return out

    @property
    def _graph_fields(self):  # a list of Data: the edges, node labels, and the base's
        return _with_base_fields(("nodes", "edges"), self.base_kernel)

    def extra_repr(self) -> str:
        return f"min_core={self.min_core}, normalize={self.normalize}"

    def _check_size(self, X: GraphSet, name: str) -> None:
        if not is_undirected(X):
            raise ValueError(f"{name}: CoreFramework needs undirected graphs (every edge given "
                             f"in both directions: k-cores are defined on undirected graphs); "
                             f"call torch_geometric.utils.to_undirected")
        self.base_kernel._check_size(X, name)

    # levels × (nodes + edges) up to which one GraphSet holds every level's cores
    _levels_budget = 2 ** 25
    # items up to which the levels' items are listed for a dense Φ (one bincount, no sort)
    _items_budget = 2 ** 18

    @property
    def _features_base(self) -> bool:  # a base with a finite feature map
        base = self.base_kernel
        return (isinstance(base, CountFeatureKernel)
                and getattr(base, "node_kernel", None) is None)  # SubgraphMatching's

    def features(self, X) -> torch.Tensor:
        """φ of every graph of X (see :meth:`CountFeatureKernel.features`): the base
        kernel's features concatenated over the levels; a TypeError for a base kernel
        without a feature map."""
        if not self._features_base:
            raise TypeError(f"CoreFramework.features: the base_kernel "
                            f"{type(self.base_kernel).__name__} has no feature map (its Gram "
                            f"is computed directly); call the kernel for the Gram")
        return super().features(X)

    @property
    def _pair_local(self) -> bool:  # a Gram-only base whose k(G, G') depends on G, G' only
        return not self._features_base and self.base_kernel._pair_local

    def forward(self, X, Y=None, *, backend: str | None = None) -> KernelMatrix:
        if self._features_base:
            return super().forward(X, Y, backend=backend)
        X, Y = self._checked_sets(X, Y, backend)
        self._check_pair(X, Y)
        if Y is not None and Y.dtype != X.dtype:
            Y = Y.to(dtype=X.dtype)
        check_memory(8 * len(X) * len(X if Y is None else Y),
                     f"CoreFramework over {type(self.base_kernel).__name__}: the dense Gram",
                     X.device)
        K, dx, dy = self._level_grams(X, Y, diag=self.normalize)
        if self.normalize:
            K = K * _inv_sqrt(dx)[:, None] * _inv_sqrt(dx if Y is None else dy)[None, :]
        return DenseKernelMatrix(K)

    def _diag(self, X: GraphSet) -> torch.Tensor:
        if self._features_base:
            return super()._diag(X)
        return self._level_grams(X, None, diag=True, gram=False)[1]

    def _levels(self, G: GraphSet):
        """The core numbers of G's nodes and the largest core number of each graph (−1: a
        graph without nodes)."""
        core = core_numbers(G)
        top = torch.full((len(G),), -1, dtype=torch.long, device=G.device).scatter_reduce_(
            0, G.graph_of_node, core, "amax")
        return core, top

    def _cores(self, G: GraphSet, core, top, i: int):
        """The graphs of G that have an i-core, and those i-cores as a GraphSet."""
        g = (top >= i).nonzero().reshape(-1)
        if not g.numel():
            return g, None
        base = self.base_kernel
        return g, induced_subgraphs(G, core >= i, _reads_edge_labels(base),
                                    base._reads_attributes).take(g)

    def _level_grams(self, X: GraphSet, Y: GraphSet | None, diag: bool, gram: bool = True):
        """Σ_i k_base(C_i(X), C_i(Y)) (dense, n × m; None unless ``gram``) and, with
        ``diag``, Σ_i k_base(C_i(x), C_i(x)) for X and for Y: at every level the base
        kernel on the i-cores of the graphs that have one (GraKeL's set at that level)."""
        cx, tx = self._levels(X)
        cy, ty = (cx, tx) if Y is None else self._levels(Y)
        top = self._top(tx, ty)
        n, m = len(X), len(X) if Y is None else len(Y)
        zeros = dict(dtype=X.dtype, device=X.device)
        K = torch.zeros(n, m, **zeros) if gram else None
        dx = torch.zeros(n, **zeros) if diag else None
        dy = torch.zeros(m, **zeros) if diag and Y is not None else None
        fit = gram and Y is None  # k(X): fit and keep every level's base (if it is fitted)
        kept = {}
        for i in range(top, self.min_core, -1):
            gx, Xi = self._cores(X, cx, tx, i)
            gy, Yi = (gx, Xi) if Y is None else self._cores(Y, cy, ty, i)
            base = self._level_base(i, Xi, Yi, fit)
            if fit and base is not self.base_kernel and Xi is not None:
                kept[i] = base
            if gram and Xi is not None and Yi is not None:
                Ki = base._gram(Xi, None if Y is None else Yi).to_dense()
                K.index_put_((gx[:, None], gy[None, :]), Ki.to(K.dtype), accumulate=True)
                if diag and Y is None:
                    dx.index_add_(0, gx, Ki.diagonal().to(dx.dtype))
                    continue
            if diag and Xi is not None:
                dx.index_add_(0, gx, base._diag(Xi).to(dx.dtype))
            if diag and Y is not None and Yi is not None:
                dy.index_add_(0, gy, base._diag(Yi).to(dy.dtype))
        if kept:
            self.__dict__["_level_bases"] = (self.base_kernel, self._bases_key(), kept)
        return K, dx, dy

    def _top(self, tx: torch.Tensor, ty: torch.Tensor) -> int:
        """The largest core number of two sets, checked against ``min_core``."""
        top = max(int(tx.max()) if tx.numel() else 0, int(ty.max()) if ty.numel() else 0)
        if top <= self.min_core:
            raise ValueError(f"min_core={self.min_core} is not below the largest core number "
                             f"{top} of the graphs: no level would be summed")
        return top

    def _bases_key(self):
        return repr(self.base_kernel), self.min_core

    def _level_base(self, i: int, Xi: GraphSet | None, Yi: GraphSet | None, fit: bool = False):
        """The base kernel of level i: itself, or for :class:`MultiscaleLaplacian` an
        unnormalized copy with a basis: with ``fit`` (``k(X)``) a fresh copy whose
        ``_gram(Xi, None)`` fits it on X's i-cores; else the one the last ``k(X)``
        fitted for level i (kept while the base kernel and ``min_core`` are unchanged),
        else one fitted on the level's cores of X (of Y where X has none)."""
        from .multiscale_laplacian import MultiscaleLaplacian
        base = self.base_kernel
        if not isinstance(base, MultiscaleLaplacian):
            return base
        kept = self.__dict__.get("_level_bases")
        if not fit and kept and kept[0] is base and kept[1] == self._bases_key() \
                and i in kept[2]:
            return kept[2][i]
        base = copy.deepcopy(base)
        base.normalize, base.basis_ = False, None
        if not fit:
            base._stats(Xi if Xi is not None else Yi, refit=True)
        return base

    def _pairs(self, X: GraphSet, Y: GraphSet) -> torch.Tensor:
        """k(x_j, y_j): over a pair-local or feature-map base as every graph kernel does;
        over another Gram-only base, at every level the entries of the base's lazy Gram
        of the level's cores that pair x_j with y_j, read by row blocks
        (:class:`MultiscaleLaplacian`: its paired values in the level's basis) —
        O(block · m) memory, no (n, m) Gram."""
        if self._features_base or self._pair_local:
            return super()._pairs(X, Y)
        self._check_pair(X, Y)
        Y = Y if Y.dtype == X.dtype else Y.to(dtype=X.dtype)
        (cx, tx), (cy, ty) = self._levels(X), self._levels(Y)
        out = torch.zeros(len(X), dtype=X.dtype, device=X.device)
        for i in range(self._top(tx, ty), self.min_core, -1):
            j = ((tx >= i) & (ty >= i)).nonzero().reshape(-1)  # pairs with both i-cores
            if not j.numel():
                continue
            (_, Xi), (_, Yi) = self._cores(X, cx, tx, i), self._cores(Y, cy, ty, i)
            px = (torch.cumsum(tx >= i, 0) - 1).index_select(0, j)  # j's place in Xi
            py = (torch.cumsum(ty >= i, 0) - 1).index_select(0, j)
            base = self._level_base(i, Xi, Yi)
            if base is not self.base_kernel:
                vals = base._pairs(Xi.take(px), Yi.take(py))
            else:
                K = base._gram(Xi, Yi)
                vals = torch.cat([K.rows(a)[torch.arange(a.numel(), device=a.device), b]
                                  for a, b in zip(px.split(K.block_rows()),
                                                  py.split(K.block_rows()))])
            out.index_add_(0, j, vals.to(out.dtype))
        if self.normalize:
            _, dx, dy = self._level_grams(X, Y, diag=True, gram=False)
            out = out * _inv_sqrt(dx) * _inv_sqrt(dy)
        return out

    def _entries(self, G: GraphSet):
        return self._core_entries(G, merge_private=False)

    def _counts(self, G: GraphSet):
        return self._core_entries(G, merge_private=True)

    def _core_entries(self, G: GraphSet, merge_private: bool):
        core = core_numbers(G)
        top = int(core.max()) if core.numel() else 0
        if top <= self.min_core:
            raise ValueError(f"min_core={self.min_core} is not below the largest core number "
                             f"{top} of the graphs: no level would be summed")
        m = top - self.min_core  # levels i = min_core + 1 + j, j in [0, m)
        if (getattr(self.base_kernel, "_per_graph_features", False)
                and m * (int(G.ptr[-1]) + int(G.eptr[-1])) <= self._levels_budget):
            return self._distinct_core_entries(G, core - (self.min_core + 1), m, merge_private)
        rows, cols, vals, offset = [], [], [], 0
        for i in range(top, self.min_core, -1):
            r, c, v, p = self.base_kernel._entries(induced_subgraphs(
                G, core >= i, _reads_edge_labels(self.base_kernel),
                self.base_kernel._reads_attributes))
            rows.append(r), cols.append(c + offset), vals.append(v)
            offset += p
        return torch.cat(rows), torch.cat(cols), torch.cat(vals), offset

    def _distinct_core_entries(self, G: GraphSet, rel: torch.Tensor, m: int,
                               merge_private: bool = False):
        """The entries ``(rows, cols, vals, p)`` of Φ, sorted by (row, column), from one
        base-kernel call on the distinct cores: node v lies in levels j ≤ ``rel[v]``.

        ``merge_private``: the columns held by one graph only (most late WL labels) add
        only to that graph's ⟨φ, φ⟩, a sum D of squared counts; they are replaced by a
        few columns of that graph whose squares sum to D (greedily, values ≤ 127), so
        Φ Φᵀ is unchanged and exact."""
        n, dev = len(G), G.device
        C = m * n  # copies: copy j·n + g is the core of graph g at level j
        gon = G.graph_of_node
        j = torch.arange(m, device=dev)
        top = torch.full((n,), -1, dtype=torch.long, device=dev).scatter_reduce_(
            0, gon, rel, "amax")  # the last level of every graph (−1: none)
        # new[g, j]: graph g's core at level j is not its core at level j − 1, i.e. g has
        # a node that leaves at level j (rel = j − 1); level 0 is new in every graph
        new = torch.zeros(n * m, dtype=torch.bool, device=dev)
        leaves = (rel >= 0) & (rel < m - 1)
        new[gon[leaves] * m + rel[leaves] + 1] = True
        new = new.view(n, m)
        new[:, 0] = True
        held = j <= top[:, None]  # (g, j): level j's core of g is not empty
        new &= held
        keep = (rel >= j[:, None]) & new.T.index_select(1, gon)
        counted = self.base_kernel._counts(induced_subgraphs(
            G, keep, _reads_edge_labels(self.base_kernel), self.base_kernel._reads_attributes))
        # level j of graph g holds the features of its copy at the last new level ≤ j
        g, lvl = held.nonzero().unbind(1)  # sorted by (g, j)
        copy = torch.where(new, j, -1).cummax(1).values[g, lvl] * n + g
        run = torch.bincount(copy, minlength=C)  # the number of levels of every copy
        owner = torch.arange(C, device=dev).remainder_(n)  # the graph of every copy
        private = torch.zeros(n, dtype=torch.long, device=dev)  # D of every graph
        if len(counted) == 3:
            item_copy, feature, p = counted
            few = feature.numel() <= self._items_budget
            if merge_private:  # an item of a feature no other item has: a count of 1
                once = torch.bincount(feature, minlength=p).index_select(0, feature) == 1
                copy_once = item_copy.masked_select(once)
                private.index_add_(0, owner.index_select(0, copy_once),
                                   run.index_select(0, copy_once))
                squares = _squares(private) if few else None
                # merged unless their columns (Σ D, one per item and level) are fewer
                if not few or squares[0].numel() < int(private.sum()):
                    more = once.logical_not_().nonzero().reshape(-1)
                    item_copy = item_copy.index_select(0, more)
                    feature = feature.index_select(0, more)
                else:
                    private.zero_()
                    squares = _squares(private)
            if merge_private and few:
                # few items: every level's items, for a dense Φ counted by one bincount;
                # the private squares as items too (a_k items of value 1 in a column)
                rep = run.index_select(0, item_copy)
                n_items = int(rep.sum())
                if n_items <= self._items_budget:
                    item = torch.repeat_interleave(
                        torch.arange(rep.numel(), device=dev), rep, output_size=n_items)
                    first = torch.cumsum(rep, 0) - rep
                    level = (torch.div(item_copy, n, rounding_mode="floor") - first
                             ).index_select(0, item) + torch.arange(n_items, device=dev)
                    col = level * p + feature.index_select(0, item)
                    present = int((torch.bincount(col, minlength=m * p) > 0).sum())
                    prow, pcol, pval, K = squares
                    if self._dense(n, present + prow.numel()):
                        return (torch.cat([owner.index_select(0, item_copy).index_select(0, item),
                                           torch.repeat_interleave(prow, pval)]),
                                torch.cat([col, torch.repeat_interleave(pcol + m * p, pval)]),
                                m * p + K * n)
            rows, cols, vals, p = count_items(item_copy, feature, p, C)
        else:
            rows, cols, vals, p = counted
            if rows.numel() > 1 and not bool((rows[1:] >= rows[:-1]).all()):
                order = torch.argsort(rows, stable=True)
                rows, cols, vals = rows[order], cols[order], vals[order]
        merge_private = merge_private and not vals.is_floating_point()  # counts
        if merge_private and rows.numel():  # features of one graph's copies only
            graph = owner.index_select(0, rows)
            lo = torch.full((p,), n, dtype=torch.long, device=dev).scatter_reduce_(
                0, cols, graph, "amin")
            hi = torch.full((p,), -1, dtype=torch.long, device=dev).scatter_reduce_(
                0, cols, graph, "amax")
            mine = (lo == hi).index_select(0, cols)
            private.index_add_(0, graph[mine],
                               vals[mine].long().square_() * run.index_select(0, rows[mine]))
            rows, cols, vals = rows[~mine], cols[~mine], vals[~mine]
        if p > rows.numel():  # number the features that occur
            present = torch.zeros(p, dtype=torch.bool, device=dev)
            present[cols] = True
            cols = (torch.cumsum(present, 0) - 1).index_select(0, cols)
            p = int(present.sum())
        size = torch.bincount(rows, minlength=C)
        start = torch.cumsum(size, 0) - size
        count = size.index_select(0, copy)
        at = segment_ranges(start.index_select(0, copy), count)
        total = at.numel()
        rows = torch.repeat_interleave(g, count, output_size=total)
        cols = (torch.repeat_interleave(lvl * p, count, output_size=total)
                + cols.index_select(0, at))
        vals = vals.index_select(0, at)
        if not merge_private or not bool(private.any()):
            return rows, cols, vals, m * p
        prow, pcol, pval, K = _squares(private)
        pcol, pval = pcol + m * p, pval.to(vals.dtype)
        # each row: its level entries, then its private ones
        n_priv = torch.bincount(prow, minlength=n)
        upto = torch.cumsum(torch.bincount(rows, minlength=n), 0)  # level entries ≤ row
        ahead = torch.cumsum(n_priv, 0) - n_priv  # private entries of the rows before
        at = torch.cat([torch.arange(total, device=dev) + ahead.index_select(0, rows),
                        torch.arange(prow.numel(), device=dev) + upto.index_select(0, prow)])
        out = [torch.empty(total + prow.numel(), dtype=t.dtype, device=dev).index_copy_(
            0, at, torch.cat([t, s])) for t, s in ((rows, prow), (cols, pcol), (vals, pval))]
        return out[0], out[1], out[2], m * p + K * n


def _reads_edge_labels(kernel) -> bool:
    """Whether a base kernel reads edge labels (the cores then carry them)."""
    from .pyramid_match import PyramidMatch
    from .shortest_path import ShortestPath
    from .wl import WeisfeilerLehman
    if isinstance(kernel, WeisfeilerLehman):
        return kernel.edge_labels
    return not isinstance(kernel, (ShortestPath, PyramidMatch))
