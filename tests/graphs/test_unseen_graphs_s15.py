"""Graph kernels on unusual but valid inputs the other tests do not use — sets in which
every graph is empty, normalized Grams of edgeless sets, ... — against closed forms and
GraKeL 0.1.11; each test guards a fix found that way (it fails on the code before)."""
import math

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

import torchkern.graphs as tg


def bare(labels, attributes=None):
    """A graph without edges: ``x`` the integer labels as one column, empty ``edge_attr``
    (one column), optional ``node_attributes``."""
    n = len(labels)
    d = Data(x=torch.tensor(labels, dtype=torch.long).reshape(n, 1), num_nodes=n,
             edge_index=torch.zeros(2, 0, dtype=torch.long),
             edge_attr=torch.zeros(0, 1, dtype=torch.long))
    if attributes is not None:
        d.node_attributes = torch.as_tensor(np.asarray(attributes, dtype=np.float64))
    return d


# -- sets without nodes or edges ----------------------------------------------------------------

@pytest.mark.parametrize("kernel_type", ["linear", "gaussian"])
@pytest.mark.parametrize("normalize", [False, True])
def test_graphhopper_on_one_node_and_empty_graphs(kernel_type, normalize):
    """One-node graphs: the one shortest path (length 0, through its node) gives
    k(G, G') = k_node(a, a') — ⟨a, a'⟩ or exp(−μ‖a − a'‖²) — and a graph with no node
    0. A set or a cross pair with no node at all used to fail in a reshape
    (RuntimeError) instead of giving zeros."""
    A = [[1.0, 2.0], [2.0, 4.0], [-1.0, 0.5]]
    ones = [bare([0], [a]) for a in A]
    empty = bare([], np.zeros((0, 2)))
    a = np.array(A)
    if kernel_type == "linear":
        ref = a @ a.T
    else:
        ref = np.exp(-((a[:, None] - a[None]) ** 2).sum(2))  # mu = 1
    if normalize:
        ref = ref / np.sqrt(np.outer(np.diag(ref), np.diag(ref)))
    k = tg.GraphHopper(kernel_type=kernel_type, normalize=normalize)
    want = np.zeros((4, 4))
    want[:3, :3] = ref
    np.testing.assert_allclose(k(ones + [empty]).to_dense().numpy(), want, rtol=1e-14,
                               atol=1e-15)
    np.testing.assert_array_equal(k([empty, empty]).to_dense().numpy(), np.zeros((2, 2)))
    np.testing.assert_array_equal(k([empty], ones).to_dense().numpy(), np.zeros((1, 3)))
    np.testing.assert_array_equal(k(ones, [empty]).to_dense().numpy(), np.zeros((3, 1)))


def test_random_walk_edge_labels_normalized_on_graphs_without_edges():
    """No graph has an edge (zero edge labels): only the length-0 walks count, k(G, G') =
    the number of equal-label node pairs, and normalized its cosine. The normalized Gram
    (whose diagonal is computed apart) used to fail with a ZeroDivisionError."""
    X = [bare([0, 0, 1]), bare([0]), bare([1, 1, 1])]
    Y = [bare([1, 0]), bare([2])]
    lab = [d.x[:, 0].numpy() for d in X + Y]
    M = np.array([[(a[:, None] == b[None, :]).sum() for b in lab] for a in lab], float)
    C = M / np.sqrt(np.outer(np.diag(M), np.diag(M)))
    k = tg.RandomWalk(lam=0.1, edge_labels=True, normalize=True)
    np.testing.assert_allclose(k(X).to_dense().numpy(), C[:3, :3], rtol=1e-14)
    np.testing.assert_allclose(k(X, Y).to_dense().numpy(), C[:3, 3:], rtol=1e-14)
    assert math.isclose(float(k([Y[1]]).to_dense()), 1.0, rel_tol=1e-14)
