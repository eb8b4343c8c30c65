"""The counting and relabelling shortcuts of the WL subtree kernel (``_labels``): each
against brute force (dense counts, a dictionary WL) or GraKeL 0.1.11."""
import numpy as np
import pytest
import torch

from torch_geometric.data import Data

import torchkern.graphs._labels as wl_core
from torchkern._threads import one_thread
from torchkern.graphs import GraphSet, WeisfeilerLehman
from tests.graphs.test_graph_kernels import dense, mutag, random_graphs  # noqa: F401
from tests.graphs.test_wl_relabel import grakel_wl, wl_edge_reference, with_edge_labels


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


# -- relabelling: only the nodes of shared labels, and the stable partition -----------------

def _same_partition(a, b):
    """Whether two label vectors split the nodes alike (a bijection between their ids)."""
    pairs = torch.unique(torch.stack([a, b]), dim=1)
    return pairs.shape[1] == torch.unique(a).numel() == torch.unique(b).numel()


@pytest.mark.parametrize("directed,edge_labels,squeeze", [
    (False, False, False), (True, True, False), (False, False, True), (True, True, True)])
def test_refine_on_the_shared_nodes_only_equals_the_full_round(monkeypatch, directed,
                                                               edge_labels, squeeze):
    """A round that hashes only the nodes of shared labels (a late round: most labels held
    by one node) splits the nodes as the full round does — also with edge labels,
    directed edges, and with the hash squeezed to 2 bits (collisions: the check and the
    exact regrouping run on the restricted edges) — and WL through it equals the
    dictionary WL (edge labels) or GraKeL."""
    X = random_graphs(60, 6, 14, 0.3, 3, seed=21, directed=directed)
    if edge_labels:
        X = with_edge_labels(X, 3, seed=4, directed=directed)
    G = GraphSet(X)
    edges = wl_core.wl_edges(G, edge_labels)
    labels, L = wl_core.initial_labels(G)
    labels, L = wl_core.wl_relabel(labels, L, edges)
    labels, L = wl_core.wl_relabel(labels, L, edges)
    shared = torch.bincount(labels, minlength=L).index_select(0, labels) > 1
    assert 0 < int(shared.sum()) and 2 * int(shared.sum()) <= labels.numel()  # restricted
    ref, L_ref = wl_core.wl_relabel(labels, L, edges)
    if squeeze:
        codes, exact, calls = wl_core._random_codes, wl_core._exact_relabel, []
        monkeypatch.setattr(wl_core, "_random_codes",
                            lambda n, salt, dev: codes(n, salt, dev) & 3)
        monkeypatch.setattr(wl_core, "_exact_radix", lambda *args: None)
        monkeypatch.setattr(wl_core, "_exact_relabel",
                            lambda *args: calls.append(1) or exact(*args))
    new, L_new = wl_core._refine(labels, L, edges)
    assert L_new == L_ref and new.min() == 0 and new.max() == L_new - 1
    assert _same_partition(new, ref)
    if squeeze:
        assert calls  # the collisions were seen and regrouped exactly
    K = dense(WeisfeilerLehman(4, edge_labels=edge_labels)(X))
    expected = wl_edge_reference(X, 4) if edge_labels else grakel_wl(X, 4)
    np.testing.assert_array_equal(K, expected)


def test_refine_with_every_label_alone_gives_fresh_ids():
    """Every node alone with its label (no node to hash): the ids are a permutation."""
    X = random_graphs(5, 4, 6, 0.5, 2, seed=3)
    G = GraphSet(X)
    n = int(G.ptr[-1])
    labels = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    new, L = wl_core._refine(labels, n, wl_core.wl_edges(G))
    assert L == n and torch.equal(new.sort().values, torch.arange(n))


def test_stable_partition_repeats_the_labels_and_equals_grakel(monkeypatch):
    """Cycles with one node label and a labelled path: round 2 splits no class of round 1,
    so every later round has the same labels (two relabellings run, not five); WL(5)
    equals GraKeL's."""
    X = []
    for n in (4, 5, 6, 7, 9):
        s = torch.arange(n)
        ei = torch.cat([torch.stack([s, (s + 1) % n]), torch.stack([(s + 1) % n, s])], 1)
        X.append(Data(x=torch.tensor([[1., 0.]]).repeat(n, 1), edge_index=ei, num_nodes=n))
    X.append(Data(x=torch.tensor([[1., 0.], [0., 1.], [0., 1.]]),
                  edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3))
    calls = []
    refine = wl_core._refine
    monkeypatch.setattr(wl_core, "_refine", lambda *args: calls.append(1) or refine(*args))
    seq = wl_core.wl_label_sequence(GraphSet(X), 5)
    assert [L for _, L in seq] == [2, 4, 4, 4, 4, 4] and len(calls) == 2
    assert seq[5][0] is seq[2][0]
    np.testing.assert_array_equal(dense(WeisfeilerLehman(5)(X)), grakel_wl(X, 5))


# -- the sparse part of K(X, X) by pairs ------------------------------------------------------

@pytest.mark.parametrize("n,p,budget", [(300, 2000, 2 ** 20), (300, 2 ** 40, 2 ** 20),
                                        (300, 2000, 30)])
def test_self_pairs_add_the_sparse_gram(monkeypatch, n, p, budget):
    """out += A Aᵀ by the pairs of every column's entries, in int32, equals the dense
    product (brute force): packed keys in int32 (300 rows, 2,000 columns), in int64
    (2^40 columns), and the pairs in batches of about 30 (an entry of the 40-row column
    with more partners alone in its batch)."""
    monkeypatch.setattr(wl_core, "_PAIR_BUDGET", budget)
    g = torch.Generator().manual_seed(p % 97)
    cols = torch.cat([torch.randint(0, 900, (3000,), generator=g),
                      torch.full((40,), 450)]) * (p // 900)  # one column of 40+ rows
    rows = torch.cat([torch.randint(0, n, (3000,), generator=g), torch.arange(40)])
    key = torch.unique(rows * p + cols)
    r, c = key // p, key % p
    v = torch.randint(1, 128, (key.numel(),), generator=g).double()
    a = torch.sparse_coo_tensor(torch.stack([r, c]), v, (n, p), is_coalesced=True,
                                check_invariants=False)
    out = torch.randint(0, 1000, (n, n), generator=g, dtype=torch.int32)
    ref = out.double().clone()
    cu, ci = torch.unique(c, return_inverse=True)  # the columns in use, dense
    A = torch.zeros(n, cu.numel(), dtype=torch.float64).index_put_((r, ci), v)
    ref += A @ A.T
    with one_thread():  # as K(X, X) runs it (a parallel region per small batch is slow)
        assert wl_core._add_self_pairs(out, a)
    assert torch.equal(out.double(), ref)


def test_self_pairs_of_wide_columns_and_the_scipy_fallback(monkeypatch, mutag):
    """Column ids up to 2^60 (four 16-bit digits to sort) add the right pairs; where the
    pairs are refused (off the CPU), WL's K(X, X) takes SciPy's product and still equals
    GraKeL."""
    a = torch.sparse_coo_tensor(torch.tensor([[0, 1, 2, 2], [5, 5, 2 ** 60 - 1, 5]]),
                                torch.tensor([1., 2., 3., 4.], dtype=torch.float64),
                                (3, 2 ** 60), check_invariants=True).coalesce()
    out = torch.zeros(3, 3, dtype=torch.int32)
    assert wl_core._add_self_pairs(out, a)
    v = torch.tensor([[1, 0], [2, 0], [4, 3]])  # columns 5 and 2^60 - 1
    assert torch.equal(out, (v @ v.T).int())
    monkeypatch.setattr(wl_core, "_add_self_pairs", lambda out, a: False)
    monkeypatch.setattr(wl_core.CountFeatureKernel, "_dense_cells", 0)  # a sparse Φ
    K = WeisfeilerLehman(3)(mutag)
    assert isinstance(K, wl_core.SparseFeatureKernelMatrix)
    np.testing.assert_array_equal(dense(K), grakel_wl(mutag, 3))


def test_isqrt_and_squares_against_python():
    """⌊√x⌋ on tensors and NumPy arrays equals math.isqrt (squares and their neighbours up
    to 2^52); the greedy squares of D equal a Python loop, row by row."""
    import math
    g = np.random.default_rng(0)
    r = g.integers(0, 2 ** 26, 2000)
    x = np.concatenate([r * r - 1, r * r, r * r + 1, g.integers(0, 2 ** 52, 2000), [0, 1]])
    x = x[x >= 0]
    ref = np.array([math.isqrt(int(v)) for v in x])
    assert np.array_equal(wl_core._isqrt(x), ref)
    assert np.array_equal(wl_core._isqrt(torch.from_numpy(x)).numpy(), ref)
    D = torch.from_numpy(g.integers(0, 127 ** 2 * 64, 300))
    D[:5] = 0
    rows, cols, vals, K = wl_core._squares(D)
    expected = []
    for i, d in enumerate(D.tolist()):
        k = 0
        while d:
            a = min(math.isqrt(d), 127)
            expected.append((i, k * 300 + i, a))
            d, k = d - a * a, k + 1
    assert list(zip(rows.tolist(), cols.tolist(), vals.tolist())) == expected
    assert K == max(c // 300 for _, c, _ in expected) + 1


@pytest.mark.parametrize("n,bits", [(5000, 20), (5000, 47), (20000, 33), (3000, 1)])
def test_sorted_unique_by_16_bit_digits_equals_torch_unique(n, bits):
    """sorted_unique from 2^11 to 2^15 keys (an LSD radix sort of 16-bit digits): the
    distinct values, inverse and counts of torch.unique, and the first position of every
    value (brute force)."""
    from torchkern.graphs._batch import sorted_unique
    g = torch.Generator().manual_seed(bits)
    key = torch.randint(0, 2 ** bits, (n // 2,), generator=g)
    key = key[torch.randint(0, n // 2, (n,), generator=g)]  # repeated values
    values, inv, counts, first = sorted_unique(key)
    ref_v, ref_inv, ref_c = torch.unique(key, return_inverse=True, return_counts=True)
    assert torch.equal(values, ref_v) and torch.equal(inv, ref_inv)
    assert torch.equal(counts, ref_c)
    ref_first = torch.full((ref_v.numel(),), n).scatter_reduce_(0, ref_inv, torch.arange(n),
                                                               "amin")
    assert torch.equal(first, ref_first)
