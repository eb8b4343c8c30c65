"""Shortest-path kernel: its three ways to the hop distances — bit-set BFS (graphs of at
most 64 nodes, CPU), the pairs of the dense BFS tables, the tables streamed by groups —
against distances by SciPy's csgraph BFS, graph by graph."""
import numpy as np
import pytest
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path as csgraph_sp
from torch_geometric.data import Data

import torchkern.graphs.shortest_path as sp
from torchkern.graphs import GraphSet, ShortestPath
from tests.graphs.test_graph_kernels import labels_of, random_graphs


def reference(graphs, with_labels=True):
    """The SP Gram from csgraph's unweighted distances (ordered pairs u ≠ v, finite)."""
    feats = []
    for d in graphs:
        n = d.num_nodes
        A = csr_matrix((np.ones(d.edge_index.shape[1]), d.edge_index.numpy()), shape=(n, n))
        D = csgraph_sp(A, unweighted=True, directed=True)
        lab = labels_of(d) if with_labels else np.zeros(n, int)
        f = {}
        for u, v in zip(*np.nonzero(np.isfinite(D) & ~np.eye(n, dtype=bool))):
            key = (lab[u], lab[v], int(D[u, v]))
            f[key] = f.get(key, 0) + 1
        feats.append(f)
    return np.array([[sum(c * g.get(k, 0) for k, c in f.items()) for g in feats]
                     for f in feats], float)


def graphs_with_loops(seed):
    X = random_graphs(12, 1, 64, 0.08, 3, seed=seed, directed=True, isolated=2)
    X += random_graphs(4, 64, 64, 0.05, 3, seed=seed + 1)  # 64 nodes: the last bit
    X.append(Data(x=torch.eye(3)[[0, 1]], edge_index=torch.tensor([[0, 1], [0, 1]]),
                  num_nodes=2))  # self-loops only
    return X


def test_bitset_pairs_equal_the_pairs_of_the_bfs_tables():
    G = GraphSet(graphs_with_loops(31))
    mine = torch.stack(sp._bitset_pairs(G), 1)
    ref = []
    for _, nodes, dist in sp.hop_distances(G):
        b, i, j = (dist > 0).nonzero().unbind(1)
        ref.append(torch.stack([nodes[b, i], nodes[b, j], dist[b, i, j].long()], 1))
    ref = torch.cat(ref)
    assert mine.shape == ref.shape and mine.shape[0] > 10_000
    assert torch.equal(torch.unique(mine, dim=0), torch.unique(ref, dim=0))


@pytest.mark.parametrize("way", ["bits", "tables", "streamed"])
@pytest.mark.parametrize("with_labels", [True, False])
def test_shortest_path_equals_csgraph_distances(way, with_labels, monkeypatch):
    X = graphs_with_loops(32)
    if way == "tables":  # a graph of more than 64 nodes: the pairs of the BFS tables
        X += random_graphs(1, 70, 70, 0.04, 3, seed=5)
    if way == "streamed":
        monkeypatch.setattr(sp, "_LIST_BUDGET", 0)
    K = ShortestPath(with_labels=with_labels)(X).to_dense().numpy()
    np.testing.assert_array_equal(K, reference(X, with_labels))
