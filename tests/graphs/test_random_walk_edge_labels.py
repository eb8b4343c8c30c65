"""Random walks that follow edge labels (``RandomWalk(edge_labels=True)``) against the
explicit product graph Σ_c A₁⁽ᶜ⁾ ⊗ A₂⁽ᶜ⁾ (dense Kronecker products, numpy / scipy)."""

import numpy as np
import pytest
import torch

from torchkern.graphs import RandomWalk
from tests.graphs.test_graph_kernels import dense, labels_of, random_graphs, walk_sum
from tests.graphs.test_wl_relabel import edge_labels_of, with_edge_labels


def adjacency_per_label(d, n_edge_labels):
    A = np.zeros((n_edge_labels, d.num_nodes, d.num_nodes))
    (s, t), c = d.edge_index.numpy(), np.asarray(edge_labels_of(d), int)
    A[c, s, t] = 1
    return A


def rw_edge_reference(d1, d2, lam, labeled, C, kind="geometric", p=None):
    """1ᵀ f(λ A×) 1 with A× = diag(m) Σ_c (A₁⁽ᶜ⁾ ⊗ A₂⁽ᶜ⁾) diag(m)."""
    m = (labels_of(d1)[:, None] == labels_of(d2)[None, :]).reshape(-1) if labeled \
        else np.ones(d1.num_nodes * d2.num_nodes, bool)
    m = m.astype(float)
    A1, A2 = adjacency_per_label(d1, C), adjacency_per_label(d2, C)
    Ax = m[:, None] * sum(np.kron(A1[c], A2[c]) for c in range(C)) * m[None, :]
    return walk_sum(Ax, m, lam, kind, p)


CASES = [dict(kind="geometric"), dict(kind="exponential"), dict(kind="geometric", p=3)]


@pytest.mark.parametrize("labeled", [True, False])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c.values())))
def test_edge_labelled_walks_equal_the_explicit_product_graph(case, labeled):
    X = with_edge_labels(random_graphs(6, 3, 8, 0.5, 2, seed=21), 3, seed=1)
    Y = with_edge_labels(random_graphs(4, 2, 7, 0.5, 2, seed=22), 3, seed=2)
    lam = 0.03
    k = RandomWalk(lam, labeled=labeled, edge_labels=True, **case)
    ref = np.array([[rw_edge_reference(a, b, lam, labeled, 3, case["kind"], case.get("p"))
                     for b in Y] for a in X])
    np.testing.assert_allclose(dense(k(X, Y)), ref, rtol=1e-10, atol=1e-12)
    refxx = np.array([[rw_edge_reference(a, b, lam, labeled, 3, case["kind"], case.get("p"))
                       for b in X] for a in X])
    np.testing.assert_allclose(dense(k(X)), refxx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(k.diag(X).numpy(), np.diag(refxx), rtol=1e-10)
    # fewer common walks than without edge labels (each step must match a label too)
    assert (dense(k(X)) <= dense(RandomWalk(lam, labeled=labeled, **case)(X)) + 1e-9).all()


def test_edge_labelled_walks_directed_and_one_edge_label():
    X = with_edge_labels(random_graphs(5, 3, 7, 0.5, 2, seed=23, directed=True), 2, seed=3,
                         directed=True)
    lam = 0.5 / max(np.abs(np.linalg.eigvals(adjacency_per_label(d, 2).sum(0))).max()
                    for d in X) ** 2
    ref = np.array([[rw_edge_reference(a, b, lam, True, 2) for b in X] for a in X])
    np.testing.assert_allclose(dense(RandomWalk(lam, edge_labels=True)(X)), ref, rtol=1e-10)
    one = with_edge_labels(random_graphs(5, 3, 8, 0.5, 2, seed=24), 1, seed=4)
    for labeled in (True, False):  # a single edge label: the plain kernel
        np.testing.assert_allclose(
            dense(RandomWalk(lam, labeled=labeled, edge_labels=True)(one)),
            dense(RandomWalk(lam, labeled=labeled)(one)), rtol=1e-10)


def test_edge_labels_only_in_y_match_nothing_and_errors():
    X = with_edge_labels(random_graphs(4, 3, 7, 0.5, 2, seed=25), 2, seed=5)
    Y = with_edge_labels(random_graphs(3, 3, 7, 0.5, 2, seed=26), 3, seed=6)  # label 2 new
    # one-hot widths differ (2 vs 3 columns): pad X's to width 3, label 2 unused in X
    X = [d.clone() for d in X]
    for d in X:
        d.edge_attr = torch.nn.functional.pad(d.edge_attr, (0, 1))
    k = RandomWalk(0.03, edge_labels=True)
    ref = np.array([[rw_edge_reference(a, b, 0.03, True, 3) for b in Y] for a in X])
    np.testing.assert_allclose(dense(k(X, Y)), ref, rtol=1e-10)
    bare = random_graphs(3, 3, 6, 0.5, 2, seed=27)
    with pytest.raises(ValueError, match="edge_labels=True needs edge labels"):
        k(bare)
    with pytest.raises(TypeError, match="edge_labels must be a bool"):
        RandomWalk(0.1, edge_labels=1)
