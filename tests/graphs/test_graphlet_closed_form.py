"""GraphletSampling(k=3, n_samples=None) counts 3-node graphlets in closed form (edges,
triangles, two-edge paths): against enumeration of every 3-subset (the brute-force
reference of test_graph_kernels) on graphs with edges given in one direction, self-loops,
repeated edges, isolated nodes and fewer than three nodes, and random multigraphs."""
import numpy as np
import torch
from torch_geometric.data import Data

from tests.graphs.test_graph_kernels import graphlet_reference
from torchkern.graphs import GraphletSampling


def _graphs():
    g = torch.Generator().manual_seed(0)
    out = [Data(edge_index=torch.tensor([[0, 1, 2, 2, 3], [1, 2, 0, 2, 4]]), num_nodes=6),
           Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=2),
           Data(edge_index=torch.tensor([[0, 1, 1, 0], [1, 0, 0, 1]]), num_nodes=3),
           Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=5)]
    for n in (7, 11, 30):
        out.append(Data(edge_index=torch.randint(0, n, (2, 3 * n), generator=g), num_nodes=n))
    return out


def test_three_node_graphlets_equal_enumeration():
    X = _graphs()
    ref = np.array([graphlet_reference(d, 3) for d in X])
    np.testing.assert_array_equal(GraphletSampling(3, None).features(X).numpy(), ref)
