"""The Weisfeiler–Lehman optimal assignment kernel (Kriege et al., 2016)."""
from __future__ import annotations

import torch

from .._validation import check_bool, is_int
from ._batch import GraphSet, compact, segment_ranges
from ._labels import CountFeatureKernel, round_histograms, wl_label_sequence

__all__ = ["WeisfeilerLehmanOptimalAssignment"]


class WeisfeilerLehmanOptimalAssignment(CountFeatureKernel):
    r"""Weisfeiler–Lehman optimal assignment kernel (Kriege, Giscard and Wilson, 2016).

    The value of an optimal assignment between the nodes of two graphs under the
    base kernel "number of WL rounds in which u and v carry the same label", which is
    a strong kernel because the WL labels form a hierarchy (a label determines those of
    the earlier rounds). Kriege et al. show that it equals the histogram intersection of
    the label counts of all rounds:

    .. math:: k(G, G') = \sum_{i=0}^{h} \sum_{\ell} \min\bigl(c_\ell(G_i),
              c_\ell(G'_i)\bigr),

    G_i the graph with the labels of WL round i (G_0: the initial labels), c_ℓ the
    number of nodes with label ℓ, h = ``n_iter`` relabelling rounds (as in
    :class:`WeisfeilerLehman`) — GraKeL's ``WeisfeilerLehmanOptimalAssignment(n_iter=h)``.

    **Reads** the node labels (``x``) and the edges; no attribute.

    Parameters
    ----------
    n_iter : int
        Number of WL relabelling rounds h ≥ 0.
    normalize : bool
        Cosine normalization k(G, G')/√(k(G, G) k(G', G')), applied lazily.

    Notes
    -----
    The intersection min(a, b) of two counts is Σ_{t ≥ 1} [a ≥ t][b ≥ t], so
    k(G, G') = ⟨φ(G), φ(G')⟩ with φ(G) the 0/1 vector of the pairs (label, t),
    1 ≤ t ≤ c_ℓ(G): sparse features with one entry per node and round, and the Gram is
    the same exact integer feature product as the WL subtree kernel's (lazy features
    KernelMatrix, no n_graphs × n_graphs loop). The relabelling is the one of
    :class:`WeisfeilerLehman` (the whole set at once, exact ids).

    References
    ----------
    N. M. Kriege, P.-L. Giscard and R. C. Wilson, "On valid optimal assignment kernels
    and applications to graph classification", NeurIPS (2016).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import WeisfeilerLehmanOptimalAssignment
    >>> path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3)
    >>> edge = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    >>> WeisfeilerLehmanOptimalAssignment(n_iter=1)([path, edge]).to_dense()
    tensor([[6., 4.],
            [4., 4.]], dtype=torch.float64)
    """

    _graph_fields = ("nodes", "edges")  # a list of Data: no node attributes read

    def __init__(self, n_iter: int = 5, normalize: bool = False):
        super().__init__()
        if not is_int(n_iter) or n_iter < 0:
            raise ValueError(f"n_iter must be a non-negative int, got {n_iter!r}")
        self.n_iter, self.normalize = n_iter, check_bool(normalize, "normalize")

    def extra_repr(self) -> str:
        return f"n_iter={self.n_iter}, normalize={self.normalize}"

    def _entries(self, G: GraphSet):
        seq = wl_label_sequence(G, self.n_iter)
        rows, cols, counts, p = round_histograms(G.graph_of_node, seq, len(G))
        # one 0/1 feature (column, t) per t = 0 .. count - 1
        starts = torch.zeros_like(counts)
        idx = segment_ranges(starts, counts)  # t within each (row, column) entry
        rows = torch.repeat_interleave(rows, counts, output_size=idx.numel())
        cols = torch.repeat_interleave(cols, counts, output_size=idx.numel())
        top = int(counts.max()) if counts.numel() else 1
        col, ncol, _ = compact([cols, idx], [max(p, 1), top])
        return rows, col, torch.ones_like(col), ncol.numel()
