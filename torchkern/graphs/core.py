"""The core framework for graph kernels (Nikolentzos et al., 2018)."""
from __future__ import annotations

import torch

from .._validation import is_int
from ._batch import GraphSet
from ._labels import CountFeatureKernel

__all__ = ["CoreFramework", "core_numbers", "induced_subgraphs"]


def core_numbers(G: GraphSet) -> torch.Tensor:
    """The core number of every node (N,): the largest k such that the node belongs to
    the k-core of its graph, the largest subgraph whose nodes all have degree ≥ k in it.

    Peeling on the whole set at once: at level k every node of degree ≤ k in what
    remains is removed (core number k), repeatedly, and k moves up to the smallest
    remaining degree when none is left to remove; one segment count over the edges per
    step. The degree of v is its number of neighbours u (edges v → u), a self-loop
    counting once, as in GraKeL."""
    N = int(G.ptr[-1])
    src, dst = G.edge_index
    core = torch.zeros(N, dtype=torch.long, device=G.device)
    alive = torch.ones(N, dtype=torch.bool, device=G.device)
    k = 0
    while bool(alive.any()):
        deg = torch.zeros(N, dtype=torch.long, device=G.device).index_add_(
            0, src, alive[dst].long())
        peel = alive & (deg <= k)
        if bool(peel.any()):
            core[peel] = k
            alive &= ~peel
        else:
            k = int(deg[alive].min())
    return core


def induced_subgraphs(G: GraphSet, keep: torch.Tensor) -> GraphSet:
    """The subgraph of every graph of G induced by the nodes ``keep`` (a boolean (N,)
    mask), as a GraphSet with as many graphs as G (some possibly empty); node and edge
    labels kept."""
    new_id = torch.cumsum(keep.long(), 0) - 1
    counts = torch.zeros(len(G), dtype=torch.long, device=G.device).index_add_(
        0, G.graph_of_node, keep.long())
    ptr = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    src, dst = G.edge_index
    e = keep[src] & keep[dst]
    edge_index = new_id[G.edge_index[:, e]]
    eptr = torch.searchsorted(edge_index[0].contiguous(), ptr)
    return GraphSet._from_parts(
        ptr, edge_index, eptr, G.node_label[keep], G.label_values, dtype=G.dtype,
        **G._edge_label_parts(e.nonzero().reshape(-1)))


class CoreFramework(CountFeatureKernel):
    r"""Core framework (Nikolentzos, Meladianos, Limnios and Vazirgiannis, 2018): a base
    graph kernel summed over the k-cores of the graphs,

    .. math:: k(G, G') = \sum_{i = c_0 + 1}^{\delta} k_{\text{base}}(C_i(G), C_i(G')),

    C_i(G) the i-core of G (the subgraph induced by the nodes of core number ≥ i,
    :func:`core_numbers`), δ the largest core number in the set, c₀ = ``min_core``
    (−1: from the 0-core, the whole graph, up); a graph without an i-core adds nothing
    at level i. This is GraKeL 0.1.11's ``CoreFramework(base_graph_kernel=...,
    min_core=...)``.

    Parameters
    ----------
    base_kernel : CountFeatureKernel
        A feature-map graph kernel of torchkern — :class:`WeisfeilerLehman`,
        :class:`ShortestPath`, :class:`PyramidMatch` — whose features are concatenated
        over the levels. Its own ``normalize`` is not used (GraKeL too sets it False);
        normalize here instead. Its arguments are reached as ``base_kernel__n_iter``.
    min_core : int
        Levels i > ``min_core`` are summed, ``min_core`` ≥ −1.
    normalize : bool
        Cosine normalization of the sum.

    Notes
    -----
    φ(G) is the concatenation of φ_base(C_i(G)) over the levels, so the Gram is a sparse
    features KernelMatrix like the base kernel's. The cores of all graphs come from one
    peeling on the whole set (:func:`core_numbers`) and every level's cores form one
    GraphSet (:func:`induced_subgraphs`) for the base kernel. Cores are defined for
    undirected graphs (edges in both directions).

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
        if not isinstance(base_kernel, CountFeatureKernel):
            raise TypeError(f"base_kernel must be a feature-map graph kernel of torchkern "
                            f"(WeisfeilerLehman, ShortestPath, PyramidMatch, ...), got "
                            f"{type(base_kernel).__name__}")
        if not is_int(min_core) or min_core < -1:
            raise ValueError(f"min_core must be an int >= -1, got {min_core!r}")
        self.base_kernel = base_kernel
        self.min_core, self.normalize = int(min_core), bool(normalize)

    def _structural_args(self) -> dict:
        out = super()._structural_args()
        out["base_kernel"] = self.base_kernel
        return out

    def extra_repr(self) -> str:
        return f"min_core={self.min_core}, normalize={self.normalize}"

    def _check_size(self, X: GraphSet, name: str) -> None:
        self.base_kernel._check_size(X, name)

    def _entries(self, G: GraphSet):
        core = core_numbers(G)
        top = int(core.max()) if core.numel() else 0
        if top <= self.min_core:
            raise ValueError(f"min_core={self.min_core} is not below the largest core number "
                             f"{top} of the graphs: no level would be summed")
        rows, cols, vals, offset = [], [], [], 0
        for i in range(top, self.min_core, -1):
            r, c, v, p = self.base_kernel._entries(induced_subgraphs(G, core >= i))
            rows.append(r), cols.append(c + offset), vals.append(v)
            offset += p
        return torch.cat(rows), torch.cat(cols), torch.cat(vals), offset
