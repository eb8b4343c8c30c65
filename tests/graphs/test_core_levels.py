"""The core framework's two evaluations — every level's cores as one GraphSet and one
base-kernel call, or one call per level — against each other and against GraKeL 0.1.11;
core numbers with self-loops against peeling by dictionaries."""
import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from torchkern.graphs import GraphSet, ShortestPath, WeisfeilerLehman
from torchkern.graphs.core import CoreFramework, core_numbers
from tests.graphs.test_grakel_part_b import to_grakel
from tests.graphs.test_graph_kernels import dense, random_graphs

import grakel  # noqa: E402  (the test extra installs it: never skipped)
from grakel import kernels as gk  # noqa: E402


def peel(n, edges):
    """Core numbers by repeated removal, on neighbour sets (a self-loop: v ∈ N(v))."""
    nbrs = [set() for _ in range(n)]
    for s, t in edges:
        nbrs[s].add(t)
    alive, core, k = set(range(n)), [0] * n, 0
    while alive:
        low = [v for v in alive if len(nbrs[v] & alive) <= k]
        if not low:
            k = min(len(nbrs[v] & alive) for v in alive)
            continue
        for v in low:
            core[v] = k
        alive -= set(low)
    return core


def test_core_numbers_with_self_loops_equal_peeling():
    graphs = random_graphs(15, 1, 14, 0.35, 1, seed=21, isolated=1)
    rng = np.random.default_rng(3)
    looped = []
    for d in graphs:  # a self-loop on some nodes (both directions of it are the same edge)
        v = torch.as_tensor(np.flatnonzero(rng.random(d.num_nodes) < 0.3))
        looped.append(Data(x=d.x, edge_index=torch.cat([d.edge_index, torch.stack([v, v])], 1),
                           num_nodes=d.num_nodes))
    ref = sum((peel(d.num_nodes, d.edge_index.t().tolist()) for d in looped), [])
    assert core_numbers(GraphSet(looped)).tolist() == ref


@pytest.mark.parametrize("base, ref_base", [
    (WeisfeilerLehman(n_iter=2), (gk.WeisfeilerLehman, dict(n_iter=2))),
    (ShortestPath(), gk.ShortestPath)])
def test_levels_at_once_equal_levels_one_by_one_and_grakel(base, ref_base, monkeypatch):
    X = random_graphs(40, 3, 16, 0.4, 3, seed=22)
    # GraKeL 0.1.11's SP fails on isolated nodes
    X = [d for d in X if torch.unique(d.edge_index[0]).numel() == d.num_nodes][:30]
    ref = gk.CoreFramework(base_graph_kernel=ref_base).fit_transform(to_grakel(X))
    at_once = dense(CoreFramework(base)(X))
    monkeypatch.setattr(CoreFramework, "_levels_budget", 0)  # one base call per level
    np.testing.assert_array_equal(dense(CoreFramework(base)(X)), at_once)
    np.testing.assert_array_equal(at_once, ref)
    # k(X, Y): the rows of K(X ∪ Y)
    np.testing.assert_array_equal(dense(CoreFramework(base)(X[:7], X[7:])), at_once[:7, 7:])
