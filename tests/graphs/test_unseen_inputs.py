"""Graph kernels on inputs the other tests do not use — graphs without edges, one-node and
regular graphs, negative and non-contiguous label ids, labels unseen in the fitted set —
against GraKeL 0.1.11 and against closed forms; each test guards a fix found that way."""
import numpy as np
import torch
from torch_geometric.data import Data

import torchkern.graphs as tg


# -- random walk with edge labels on graphs without edges ------------------------------------

def test_random_walk_edge_labels_on_graphs_without_edges():
    """No graph of the set has an edge (zero edge labels): only the length-0 walks count,
    k(G, G') = the number of node pairs with equal labels (all pairs when unlabeled) —
    the set used to fail with a ZeroDivisionError."""
    def bare(labels):
        n = len(labels)
        return Data(x=torch.tensor(labels)[:, None], num_nodes=n,
                    edge_index=torch.zeros(2, 0, dtype=torch.long),
                    edge_attr=torch.zeros(0, 1, dtype=torch.long))
    X = [bare([0, 0, 1]), bare([0]), bare([1, 1])]
    lab = [d.x[:, 0] for d in X]
    matched = np.array([[(a[:, None] == b[None, :]).sum().item() for b in lab] for a in lab])
    sizes = np.array([len(a) for a in lab])
    for kind in ("geometric", "exponential"):
        for labeled, want in ((True, matched), (False, np.outer(sizes, sizes))):
            k = tg.RandomWalk(0.1, kind=kind, labeled=labeled, edge_labels=True)
            np.testing.assert_array_equal(k(X).to_dense().numpy(), want)
            np.testing.assert_array_equal(k(X[:1], X[1:]).to_dense().numpy(), want[:1, 1:])
    k = tg.RandomWalk(0.1, p=2, edge_labels=True)
    np.testing.assert_array_equal(k([X[0]]).to_dense().numpy(), matched[:1, :1])
