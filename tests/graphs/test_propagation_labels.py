"""The propagation kernel on node labels: its hash draws.

- ``n_labels=L``: GraKeL 0.1.11's draws — equal to GraKeL's ``Propagation`` for the same
  seed (MUTAG, random graphs; fit_transform on all graphs, and fit/transform when the
  fitted graphs hold every label);
- default, per-label draws: Neumann et al.'s Algorithm 1 written out with dense matrices
  and the draws of the docstring;
- both: a graph's features never depend on the other graphs of the call, so k(X),
  k(X, Y) and k(Y) are exact blocks of k(X ∪ Y), and an SVC on the kernel predicts as on
  the blocks of the joint Gram.
"""
import os
import warnings

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

import torchkern as tk
from torchkern.datasets import read_tu
from torchkern.graphs import Propagation, PropagationAttr

import grakel  # noqa: E402  (the test extra installs it: never skipped)
DATA = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")


@pytest.fixture(scope="module")
def mutag():
    return read_tu(os.path.join(DATA, "MUTAG"))


def column_labels(d):
    """A graph's node labels as GraKeL gets them: the column of the 1 of a one-hot x, or
    the value of a one-column x."""
    return (d.x.argmax(1) if d.x.shape[1] > 1 else d.x[:, 0]).long().tolist()


def grakel_graphs(graphs):
    out = []
    for d in graphs:
        A = np.zeros((d.num_nodes, d.num_nodes))
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        out.append(grakel.Graph(A, node_labels=dict(enumerate(column_labels(d)))))
    return out


def grakel_gram(kernel, X, Y=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GraKeL's format-change warnings
        if Y is None:
            return kernel.fit_transform(grakel_graphs(X))
        return kernel.fit(grakel_graphs(X)).transform(grakel_graphs(Y))


def dense(K):
    return K.to_dense().numpy()


def random_graphs(count, seed, labels=(0, 1, 2), width=1, n_max=9):
    """Erdős–Rényi graphs, both directions, labels drawn from ``labels`` (rows of
    ``width`` entries: one column, or one-hot when the labels are ints and width > 1)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(2, n_max + 1))
        A = np.triu(rng.random((n, n)) < 0.4, 1)
        A[0, 1] = True
        s, t = np.nonzero(A | A.T)
        lab = torch.as_tensor(np.asarray(labels)[rng.integers(0, len(labels), n)])
        x = lab[:, None] if width == 1 else torch.nn.functional.one_hot(lab, width)
        out.append(Data(x=x.float(), edge_index=torch.as_tensor(np.stack([s, t])), num_nodes=n))
    return out


# -- n_labels: GraKeL's draws -------------------------------------------------------------

@pytest.mark.parametrize("normalize", [False, True])
def test_n_labels_equals_grakel_on_mutag(mutag, normalize):
    for M in ("TV", "H"):
        K = dense(Propagation(t_max=4, M=M, random_state=7, n_labels=7,
                              normalize=normalize)(mutag))
        R = grakel_gram(grakel.Propagation(t_max=4, M=M, random_state=7,
                                           normalize=normalize), mutag)
        if normalize:
            np.testing.assert_allclose(K, R, rtol=1e-10, atol=1e-13)
        else:
            np.testing.assert_array_equal(K, R)


def test_n_labels_equals_grakel_on_random_graphs_and_fit_transform(mutag):
    graphs = random_graphs(40, seed=3)  # one column of labels 0, 1, 2
    for w in (0.01, 0.3):
        np.testing.assert_array_equal(
            dense(Propagation(t_max=3, w=w, random_state=1, n_labels=3)(graphs)),
            grakel_gram(grakel.Propagation(t_max=3, w=w, random_state=1), graphs))
    # GraKeL's fit(X).transform(Y) when X holds all seven labels: k(Y, X)
    X, Y = mutag[:120], mutag[120:]
    assert len({c for d in X for c in column_labels(d)}) == 7
    for M in ("TV", "H"):
        np.testing.assert_array_equal(
            dense(Propagation(t_max=3, M=M, random_state=5, n_labels=7)(Y, X)),
            grakel_gram(grakel.Propagation(t_max=3, M=M, random_state=5), X, Y))


def test_n_labels_reads_one_hot_rows_and_label_columns_alike(mutag):
    k = Propagation(t_max=3, random_state=2, n_labels=7)
    as_column = [Data(x=torch.tensor(column_labels(d))[:, None], edge_index=d.edge_index,
                      num_nodes=d.num_nodes) for d in mutag[:40]]
    np.testing.assert_array_equal(dense(k(as_column)), dense(k(mutag[:40])))


# -- per-label draws: the paper's definition ---------------------------------------------

def brute_force(graphs, t_max, w, M, seed):
    """Neumann et al. (2016), Algorithm 1 with dense matrices: P_0 one-hot rows,
    P_{t+1} = D⁻¹A P_t per graph, h_t = ⌊(⟨√P_t or P_t, u_t⟩ + b_t)/w⌋, and
    k = Σ_t #(pairs of nodes with equal h_t); u_t(ℓ) drawn per label row as the
    docstring says."""
    rows = sorted({tuple(r) for d in graphs for r in d.x.long().tolist()})
    col = {r: i for i, r in enumerate(rows)}
    U = np.empty((len(rows), t_max))
    for r, i in col.items():
        z = [2 * e if e >= 0 else -2 * e - 1 for e in r]
        words = [q for x in z for q in (x % 2 ** 32, x // 2 ** 32)]  # low, high
        a = np.random.default_rng([seed, 1] + words)
        a = a.standard_normal((t_max, 2))
        U[i] = a[:, 0] / a[:, 1] if M == "TV" else a[:, 0]
    b = w * np.random.default_rng([seed, 0]).random(t_max)
    feats = []
    for d in graphs:
        A = np.zeros((d.num_nodes, d.num_nodes))
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        T = A / np.maximum(A.sum(1, keepdims=True), 1)
        P = np.eye(len(rows))[[col[tuple(r)] for r in d.x.long().tolist()]]
        f = []
        for t in range(t_max):
            f.append(np.floor(((np.sqrt(P) if M == "H" else P) @ U[:, t] + b[t]) / w))
            P = T @ P
        feats.append(f)
    return np.array([[sum(float(np.sum(fi[t][:, None] == fj[t][None, :])) for t in range(t_max))
                      for fj in feats] for fi in feats])


def test_per_label_draws_by_the_definition():
    # labels with negative entries and rows of two columns, both metrics
    graphs = random_graphs(12, seed=5, labels=(-3, 0, 2, 7))
    for d in graphs:
        d.x = torch.cat([d.x, (d.x > 0).float()], 1)
    for M, w in (("TV", 0.1), ("H", 0.05)):
        np.testing.assert_array_equal(
            dense(Propagation(t_max=3, w=w, M=M, random_state=4)(graphs)),
            brute_force(graphs, 3, w, M, 4))


def test_per_label_streams_differ_for_large_label_entries():
    # numpy's SeedSequence splits an int entry into 32-bit words and concatenates them:
    # rows (2^31, 2) and (0, -(2^33 + 1)) would give the same word list, the same u_t,
    # and their nodes the same bins (k = 1 between the two one-node graphs, not 0)
    no_edges = torch.zeros(2, 0, dtype=torch.long)
    graphs = [Data(x=torch.tensor([row]), edge_index=no_edges, num_nodes=1)
              for row in ((2 ** 31, 2), (0, -(2 ** 33 + 1)))]
    for M in ("TV", "H"):
        K = dense(Propagation(t_max=1, w=1e-6, M=M, random_state=0)(graphs))
        np.testing.assert_array_equal(K, np.eye(2))
        np.testing.assert_array_equal(K, brute_force(graphs, 1, 1e-6, M, 0))


# -- both: features independent of the other graphs of the call ---------------------------

@pytest.mark.parametrize("n_labels", [None, 7])
def test_blocks_of_the_joint_gram(mutag, n_labels):
    # X lacks label 4 (one node of one graph), Y lacks labels X has: each side has labels
    # the other lacks, the case GraKeL's fit/transform hashes differently
    has4 = [i for i, d in enumerate(mutag) if 4 in column_labels(d)]
    X = [d for i, d in enumerate(mutag[:60]) if i not in has4]
    Y = [mutag[i] for i in has4] + [d for d in mutag[60:90]
                                    if not {3, 5, 6} & set(column_labels(d))]
    lx = {c for d in X for c in column_labels(d)}
    ly = {c for d in Y for c in column_labels(d)}
    assert lx - ly and ly - lx
    for M in ("TV", "H"):
        k = Propagation(t_max=4, M=M, random_state=3, n_labels=n_labels)
        whole = dense(k(X + Y))
        nx = len(X)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_array_equal(dense(k(X)), whole[:nx, :nx])
            np.testing.assert_array_equal(dense(k(Y)), whole[nx:, nx:])
            np.testing.assert_array_equal(dense(k(X, Y)), whole[:nx, nx:])
            np.testing.assert_array_equal(dense(k(Y, X)), whole[nx:, :nx])
        kn = Propagation(t_max=4, M=M, random_state=3, n_labels=n_labels, normalize=True)
        np.testing.assert_allclose(dense(kn(Y, X)), dense(kn(X + Y))[nx:, :nx],
                                   rtol=1e-15, atol=0)


def test_svc_predicts_as_on_the_joint_gram(mutag):
    # a training set without label 4, a test set with it: the SVC's kernel calls k(train)
    # and k(test, train), which are blocks of the Gram of all graphs
    has4 = [i for i, d in enumerate(mutag) if 4 in column_labels(d)]
    train = [d for i, d in enumerate(mutag) if i not in has4][:120]
    test = [mutag[i] for i in has4] + mutag[150:]
    y = np.array([int(d.y) for d in train])
    k = Propagation(t_max=3, random_state=0, normalize=True)
    pred = tk.SVC(kernel=k, C=10.0).fit(train, y).predict(test)
    G = dense(k(train + test))
    n = len(train)
    want = tk.SVC(kernel="precomputed", C=10.0).fit(G[:n, :n], y).predict(G[n:, :n])
    np.testing.assert_array_equal(np.asarray(pred), np.asarray(want))


def test_n_labels_is_checked_by_name():
    for bad in (0, 2.5, True, "7"):
        with pytest.raises(ValueError, match="n_labels must be None .* or a positive int"):
            Propagation(n_labels=bad)
    graphs = random_graphs(3, seed=1, labels=(0, 1, 5))
    with pytest.raises(ValueError, match=r"n_labels=3: the node labels must be the integers "
                                         r"0\.\.2 .* values in \[0, 5\]"):
        Propagation(n_labels=3)(graphs)
    graphs = random_graphs(3, seed=1, width=3)  # one-hot of width 3
    with pytest.raises(ValueError, match="n_labels=4: .* one-hot rows of width 4; got rows "
                                         "of width 3"):
        Propagation(n_labels=4)(graphs)
    Propagation(n_labels=3)(graphs)  # width 3 one-hot: fine


def test_random_state_is_checked_by_name():
    # numpy's RandomState (GraKeL's draws, PropagationAttr) takes seeds below 2^32 only
    msg = r"random_state must be None, a numpy RandomState or a non-negative int below 2\^32"
    for make in (Propagation, lambda **a: Propagation(n_labels=3, **a), PropagationAttr):
        for bad in (-1, 2 ** 32, 1.5, "0"):
            with pytest.raises(ValueError, match=msg):
                make(random_state=bad)
        make(random_state=2 ** 32 - 1)
