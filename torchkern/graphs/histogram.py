"""The vertex-histogram and edge-histogram graph kernels (label counts, linear kernel)."""
from __future__ import annotations

import torch

from ._batch import GraphSet
from ._labels import CountFeatureKernel, histogram, initial_labels

__all__ = ["VertexHistogram", "EdgeHistogram"]


class VertexHistogram(CountFeatureKernel):
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
    One sort of the (graph, label) keys; sparse features, a features KernelMatrix.

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

    def __init__(self, normalize: bool = False):
        super().__init__()
        self.normalize = bool(normalize)

    def extra_repr(self) -> str:
        return f"normalize={self.normalize}"

    def _entries(self, G: GraphSet):
        labels, L = initial_labels(G)
        rows, cols, counts = histogram(G.graph_of_node, labels, len(G), max(L, 1))
        return rows, cols, counts, max(L, 1)


class EdgeHistogram(CountFeatureKernel):
    r"""Edge-histogram graph kernel: the linear kernel on edge-label counts.

    .. math:: k(G, G') = \sum_{e} c_e(G)\, c_e(G'),

    c_e(G) the number of entries of G's ``edge_index`` with edge label e — an undirected
    edge, stored both ways, counts twice, as in GraKeL's ``EdgeHistogram`` given the
    edge-label dictionary of both directions.

    **Reads** the edge labels (``edge_attr``, each distinct row one label); every graph
    needs ``edge_attr``.

    Parameters
    ----------
    normalize : bool
        Cosine normalization, applied lazily.

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

    def __init__(self, normalize: bool = False):
        super().__init__()
        self.normalize = bool(normalize)

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
