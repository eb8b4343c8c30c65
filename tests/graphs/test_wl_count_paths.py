"""The counting and relabelling shortcuts of the WL subtree kernel (``_labels``): each
against brute force (dense counts, a dictionary WL) or GraKeL 0.1.11."""
import numpy as np
import pytest
import torch

import torchkern.graphs._labels as wl_core


@pytest.mark.parametrize("n_graphs,p", [(40, 3000), (3000, 2 ** 20 + 5), (50, 60),
                                        (4096, 2 ** 51)])
def test_count_pairs_equals_the_dense_count(n_graphs, p):
    """Distinct (graph, feature) items and their counts, sorted: packed keys in int32
    (40 · 2^12 < 2^31), in int64 (3000 · 2^21 > 2^31), a small key space (bincount) and
    keys past 2^62 (4096 · 2^51: :func:`count_items`) — against torch.unique's distinct
    columns."""
    g = torch.Generator().manual_seed(n_graphs)
    graph = torch.randint(0, n_graphs, (20000,), generator=g)
    feature = torch.randint(0, min(p, 400), (20000,), generator=g) * (p // min(p, 400))
    rows, cols, counts = wl_core._count_pairs(graph, feature, p, n_graphs)
    ref, ref_counts = torch.unique(torch.stack([graph, feature]), dim=1, return_counts=True)
    assert torch.equal(torch.stack([rows, cols]), ref)  # lexicographic: sorted by (row, col)
    assert torch.equal(counts, ref_counts)
