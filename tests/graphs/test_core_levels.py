"""The core framework's evaluations — every level's items in a dense Φ, the distinct
cores' entries with the private columns merged, one base-kernel call per level — against
GraKeL 0.1.11 and against the literal features; induced subgraphs and core numbers
(with self-loops) against graph-by-graph references."""
import math

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from torchkern.graphs import GraphSet, ShortestPath, WeisfeilerLehman
from torchkern.graphs._labels import _isqrt
from torchkern.graphs.core import CoreFramework, core_numbers, induced_subgraphs
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


PATHS = {  # the evaluations of CoreFramework, forced by its size thresholds
    "items": {},  # small sets: every level's items counted into a dense Φ
    "entries": {"_items_budget": 0},  # distinct cores' entries, private columns merged
    "per_level": {"_levels_budget": 0},  # one base-kernel call per level
}


_GRAKEL = {}


def grakel_grams(X, ref_base):
    """GraKeL's Gram and normalized Gram of X, once per base for the three paths."""
    key = repr(ref_base)
    if key not in _GRAKEL:
        _GRAKEL[key] = tuple(gk.CoreFramework(base_graph_kernel=ref_base, normalize=nz)
                             .fit_transform(to_grakel(X)) for nz in (False, True))
    return _GRAKEL[key]


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("base, ref_base", [
    (WeisfeilerLehman(n_iter=2), (gk.WeisfeilerLehman, dict(n_iter=2))),
    (ShortestPath(), gk.ShortestPath),
    (WeisfeilerLehman(n_iter=1, base="shortest_path"),
     (gk.WeisfeilerLehman, dict(n_iter=1, base_graph_kernel=gk.ShortestPath)))],
    ids=["wl", "sp", "wl-sp"])
def test_every_path_equals_grakel(base, ref_base, path, monkeypatch):
    X = random_graphs(40, 3, 16, 0.4, 3, seed=22)
    # GraKeL 0.1.11's SP fails on isolated nodes
    X = [d for d in X if torch.unique(d.edge_index[0]).numel() == d.num_nodes][:30]
    ref, ref_n = grakel_grams(X, ref_base)
    for name, value in PATHS[path].items():
        monkeypatch.setattr(CoreFramework, name, value)
    K = dense(CoreFramework(base)(X))
    np.testing.assert_array_equal(K, ref)
    # k(X, Y): the rows of K(X ∪ Y)
    np.testing.assert_array_equal(dense(CoreFramework(base)(X[:7], X[7:])), K[:7, 7:])
    np.testing.assert_allclose(dense(CoreFramework(base, normalize=True)(X)), ref_n,
                               rtol=1e-12, atol=0)


@pytest.mark.parametrize("min_core", [-1, 1])
def test_merged_private_columns_keep_the_gram(min_core, monkeypatch):
    # a graph of 2,000 nodes: its WL labels from round 1 on are almost all its own, a sum
    # of squares far above 127², written as several columns of values ≤ 127
    X = random_graphs(1, 2000, 2000, 0.003, 3, seed=5) + random_graphs(8, 4, 30, 0.3, 3,
                                                                         seed=6, isolated=1)
    k = CoreFramework(WeisfeilerLehman(n_iter=3), min_core=min_core)
    phi = k.features(X).to_dense()  # the literal concatenated counts
    ref = (phi @ phi.T).numpy()
    np.testing.assert_array_equal(dense(k(X)), ref)  # few items: squares as items
    monkeypatch.setattr(CoreFramework, "_items_budget", 0)
    rows, cols, vals, p = k._counts(GraphSet(X))
    assert bool((vals == 127).any()) and vals.numel() < phi.count_nonzero() / 2
    np.testing.assert_array_equal(dense(k(X)), ref)
    np.testing.assert_array_equal(dense(k(X[3:], X)), ref[3:])
    monkeypatch.setattr(CoreFramework, "_levels_budget", 0)
    np.testing.assert_array_equal(dense(k(X)), ref)


def test_isqrt_equals_math_isqrt():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.integers(0, 2 ** 52, 2000), np.arange(300),
                        np.arange(1, 3000) ** 2, np.arange(1, 3000) ** 2 - 1])
    got = _isqrt(torch.as_tensor(x)).tolist()
    assert got == [math.isqrt(int(v)) for v in x]


def test_induced_subgraphs_equal_subgraphs_graph_by_graph():
    X = random_graphs(12, 1, 15, 0.4, 3, seed=8, isolated=1)
    G = GraphSet(X)
    rng = np.random.default_rng(4)
    N = int(G.ptr[-1])
    keep = torch.as_tensor(rng.random((4, N)) < 0.7)
    keep[1] &= (G.graph_of_node == 3) | (G.graph_of_node == 7)  # few graphs: their edges
    keep[2] = False  # an empty copy
    S = induced_subgraphs(G, keep)
    assert len(S) == 4 * len(X)
    for j in range(4):
        for g, d in enumerate(X):
            nodes = np.flatnonzero(keep[j, int(G.ptr[g]):int(G.ptr[g + 1])].numpy())
            local = {int(v): i for i, v in enumerate(nodes)}
            ref = sorted((local[s], local[t]) for s, t in d.edge_index.t().tolist()
                         if s in local and t in local)
            c = j * len(X) + g
            lo, hi = int(S.ptr[c]), int(S.ptr[c + 1])
            assert hi - lo == len(nodes)
            ei = S.edge_index[:, int(S.eptr[c]):int(S.eptr[c + 1])] - lo
            assert sorted(map(tuple, ei.t().tolist())) == ref
            assert S.node_label[lo:hi].tolist() == G.node_label[
                int(G.ptr[g]) + torch.as_tensor(nodes, dtype=torch.long)].tolist()
