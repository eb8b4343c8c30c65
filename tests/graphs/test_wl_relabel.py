"""The Weisfeiler–Lehman relabelling: its exact keys, its hashed keys with their collision
fallback, and edge labels — against GraKeL 0.1.11 on MUTAG and a dictionary-based WL."""
from collections import Counter

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

import torchkern.graphs._labels as wl_core
from torchkern.graphs import GraphSet, WeisfeilerLehman
from tests.graphs.test_graph_kernels import (dense, labels_of, mutag, random_graphs,  # noqa: F401
                                             to_grakel)

import grakel  # noqa: E402  (the test extra installs it: never skipped)


def grakel_wl(graphs, h):
    gk = grakel.WeisfeilerLehman(n_iter=h, base_graph_kernel=grakel.VertexHistogram)
    return gk.fit_transform(to_grakel(graphs))


def edge_labels_of(d):
    return d.edge_attr.argmax(1).tolist() if d.edge_attr.dim() == 2 else d.edge_attr.tolist()


def wl_edge_reference(graphs, h):
    """WL subtree Gram by dictionaries, a node's new label being (own label, sorted
    (edge label, neighbour label) pairs over its out-edges)."""
    lab = [[("init", int(v)) for v in labels_of(d)] for d in graphs]
    nbrs = []
    for d in graphs:
        nb = [[] for _ in range(d.num_nodes)]
        for (s, t), e in zip(d.edge_index.t().tolist(), edge_labels_of(d)):
            nb[s].append((e, t))
        nbrs.append(nb)
    feats = [Counter((0, l) for l in L) for L in lab]
    for it in range(1, h + 1):
        lab = [[(L[v], tuple(sorted((e, L[u]) for e, u in nb[v]))) for v in range(len(L))]
               for L, nb in zip(lab, nbrs)]
        for f, L in zip(feats, lab):
            f.update((it, l) for l in L)
    return np.array([[sum(c * g[k] for k, c in f.items()) for g in feats] for f in feats], float)


def with_edge_labels(graphs, n_edge_labels, seed, directed=False):
    """Copies of ``graphs`` with one-hot edge labels; an undirected edge gets one label for
    both directions."""
    rng = np.random.default_rng(seed)
    out = []
    for d in graphs:
        s, t = d.edge_index
        n = max(d.num_nodes, 1)
        key = (s * n + t) if directed else torch.minimum(s, t) * n + torch.maximum(s, t)
        uniq, inv = torch.unique(key, return_inverse=True)
        lab = torch.as_tensor(rng.integers(0, n_edge_labels, uniq.numel()))
        ea = torch.nn.functional.one_hot(lab[inv], n_edge_labels).float()
        out.append(Data(x=d.x, edge_index=d.edge_index, edge_attr=ea, num_nodes=d.num_nodes))
    return out


# -- the two kinds of keys, and the collision fallback ---------------------------------------

def test_mutag_uses_exact_keys_then_hashed_keys_and_equals_grakel(mutag, monkeypatch):
    """On MUTAG round 1 fits base-(max degree + 1) keys, later rounds are hashed and
    checked; both equal GraKeL."""
    kinds = []
    wl_hash = wl_core.wl_hash

    def spy(labels, n_labels, edges, radix=None):
        kinds.append("exact" if radix is not None else "hash")
        return wl_hash(labels, n_labels, edges, radix)
    monkeypatch.setattr(wl_core, "wl_hash", spy)
    np.testing.assert_array_equal(dense(WeisfeilerLehman(4)(mutag)), grakel_wl(mutag, 4))
    assert kinds == ["exact", "hash", "hash", "hash"]


@pytest.mark.parametrize("codes,digits", [("tiny", True), ("zero", True), ("tiny", False)])
def test_hash_collisions_fall_back_to_exact_grouping(mutag, monkeypatch, codes, digits):
    """Codes squeezed into 2 bits (or all zero) make different signatures share a key: the
    check must see it and regroup exactly — still GraKeL's values, exact integers. The
    check compares digit rows of the token counts (``digits``) or, when those would be
    too many, the sorted tokens of the grouped nodes."""
    random_codes, exact = wl_core._random_codes, wl_core._exact_relabel
    calls = []
    if not digits:
        monkeypatch.setattr(wl_core, "_digit_rows", lambda *args: None)

    def squeezed(n, salt, device):
        c = random_codes(n, salt, device)
        return c & 3 if codes == "tiny" else torch.zeros_like(c)

    def spy(*args):
        calls.append(1)
        return exact(*args)
    monkeypatch.setattr(wl_core, "_random_codes", squeezed)
    monkeypatch.setattr(wl_core, "_exact_relabel", spy)
    np.testing.assert_array_equal(dense(WeisfeilerLehman(3)(mutag)), grakel_wl(mutag, 3))
    assert len(calls) >= 2  # rounds 2 and 3 collided and were regrouped
    X = random_graphs(12, 5, 14, 0.3, 3, seed=11, directed=True)
    calls.clear()
    np.testing.assert_array_equal(dense(WeisfeilerLehman(3, edge_labels=True)(
        with_edge_labels(X, 3, seed=2, directed=True))),
        wl_edge_reference(with_edge_labels(X, 3, seed=2, directed=True), 3))
    assert calls


def test_relabel_without_the_exact_keys_gives_the_same_labels(mutag, monkeypatch):
    """Every round hashed (the base-B keys switched off) gives the same partition of the
    nodes as the exact keys, round by round."""
    G = GraphSet(mutag)
    ref = wl_core.wl_label_sequence(G, 3)
    monkeypatch.setattr(wl_core, "_exact_radix", lambda *args: None)
    seq = wl_core.wl_label_sequence(G, 3)
    for (a, La), (b, Lb) in zip(ref, seq):
        assert La == Lb
        pairs = torch.unique(torch.stack([a, b]), dim=1)  # a bijection between the ids
        assert pairs.shape[1] == La


# -- edge labels ------------------------------------------------------------------------------

@pytest.mark.parametrize("h", [1, 3])
def test_wl_with_edge_labels_equals_dictionary_wl_on_mutag(mutag, h):
    assert all(d.edge_attr is not None for d in mutag)  # bond types
    K = dense(WeisfeilerLehman(h, edge_labels=True)(mutag))
    np.testing.assert_array_equal(K, wl_edge_reference(mutag, h))
    assert (K <= grakel_wl(mutag, h)).all() and (K != grakel_wl(mutag, h)).any()


def test_wl_with_edge_labels_on_random_graphs_and_one_edge_label():
    X = random_graphs(10, 4, 12, 0.35, 3, seed=12, isolated=1)
    for directed, seed in ((False, 3), (True, 4)):
        Xe = with_edge_labels(random_graphs(10, 4, 12, 0.35, 3, seed=seed, directed=directed),
                              4, seed=seed, directed=directed)
        np.testing.assert_array_equal(dense(WeisfeilerLehman(3, edge_labels=True)(Xe)),
                                      wl_edge_reference(Xe, 3))
    one = with_edge_labels(X, 1, seed=0)  # a single edge label: plain WL = GraKeL
    np.testing.assert_array_equal(dense(WeisfeilerLehman(3, edge_labels=True)(one)),
                                  grakel_wl(X, 3))
    # k(X, Y) shares one dictionary: rows of K(X ∪ Y)
    Xe = with_edge_labels(X, 3, seed=5)
    K = dense(WeisfeilerLehman(2, edge_labels=True)(Xe))
    np.testing.assert_array_equal(dense(WeisfeilerLehman(2, edge_labels=True)(Xe[:4], Xe[4:])),
                                  K[:4, 4:])


def test_wl_edge_labels_need_edge_attr():
    X = random_graphs(3, 3, 5, 0.5, 2, seed=13)
    with pytest.raises(ValueError, match="edge_labels=True needs edge labels"):
        WeisfeilerLehman(2, edge_labels=True)(X)
    with pytest.raises(TypeError, match="edge_labels must be a bool"):
        WeisfeilerLehman(2, edge_labels="yes")


def test_row_blocks_and_matvec_of_the_sparse_gram(mutag):
    """Row blocks (uncoalesced sparse slices), K @ V and the diagonal agree with the
    dense Gram, which equals GraKeL's."""
    K = WeisfeilerLehman(3)(mutag)
    full = dense(K)
    np.testing.assert_array_equal(full, grakel_wl(mutag, 3))
    idx = torch.tensor([187, 3, 3, 90, 0])
    np.testing.assert_array_equal(K.rows(idx).numpy(), full[idx.numpy()])
    V = torch.randn(len(mutag), 2, dtype=torch.float64)
    np.testing.assert_allclose((K @ V).numpy(), full @ V.numpy(), rtol=1e-12)
    np.testing.assert_array_equal(K.diag().numpy(), np.diag(full))


@pytest.mark.parametrize("sparse", [False, True])
def test_dense_part_of_the_gram_in_int8_and_in_float32(mutag, monkeypatch, sparse):
    """Counts ≤ 127 go through the int8 product where torch has one, larger counts (a
    300-node graph) through float32, and without the int8 product everything through
    float32 — the same exact integers (GraKeL's) on every path: the dense Φ of few
    graphs and features, and the dense columns of a sparse Φ."""
    import torchkern.graphs.histogram as hist
    if sparse:  # Φ sparse however small
        monkeypatch.setattr(wl_core.CountFeatureKernel, "_dense_cells", 0)

    def low(K):
        assert isinstance(K, wl_core.SparseFeatureKernelMatrix if sparse else hist._CountMatrix)
        return K._parts()[0][0].dtype if sparse else K._lowp()[0].dtype
    big = random_graphs(1, 300, 300, 0.01, 2, seed=14)
    X = mutag[:60] + big
    X = [Data(x=torch.nn.functional.one_hot(d.x.argmax(1) % 2, 2).float(),
              edge_index=d.edge_index, num_nodes=d.num_nodes) for d in X]  # counts to ~150
    ref_m, ref_x = grakel_wl(mutag, 3), grakel_wl(X, 3)
    K = WeisfeilerLehman(3)(mutag)
    np.testing.assert_array_equal(dense(K), ref_m)
    assert low(K) == (torch.int8 if wl_core._int8_product_works() else torch.float32)
    K = WeisfeilerLehman(3)(X)
    np.testing.assert_array_equal(dense(K), ref_x)
    assert low(K) == torch.float32
    monkeypatch.setattr(wl_core, "_int8_product_works", lambda: False)
    monkeypatch.setattr(hist, "_int8_product_works", lambda: False)
    K = WeisfeilerLehman(3)(mutag)
    np.testing.assert_array_equal(dense(K), ref_m)
    assert low(K) == torch.float32


def test_counts_with_single_features_equal_the_full_count(monkeypatch):
    """Features occurring once (most late WL labels) skip the sort of the items: the
    entries are sorted by (row, column), the column multiset and Φ Φᵀ are those of the
    full count (brute force on random items), and WL through this path equals GraKeL."""
    g = torch.Generator().manual_seed(3)
    graph = torch.randint(0, 40, (6000,), generator=g)
    feature = torch.cat([torch.randint(0, 50, (2000,), generator=g),
                         50 + torch.randperm(4000, generator=g)])  # 4,000 single features
    rows, cols, vals, p = wl_core._count_with_singletons(graph, feature, 4050, 40)
    assert p == 4050
    key = rows * p + cols
    assert bool((key[1:] > key[:-1]).all())
    phi = torch.zeros(40, p, dtype=torch.float64).index_put_((rows, cols), vals.double())
    ref = torch.zeros(40, 4050, dtype=torch.float64).index_put_(
        (graph, feature), torch.ones(6000, dtype=torch.float64), accumulate=True)
    torch.testing.assert_close(phi @ phi.T, ref @ ref.T, rtol=0, atol=0)
    assert sorted(map(tuple, phi.T.tolist())) == sorted(map(tuple, ref.T.tolist()))
    calls = []
    count = wl_core._count_with_singletons

    def spy(graph, feature, p, n):
        out = count(graph, feature, p, n)
        calls.append(out[3])
        return out
    monkeypatch.setattr(wl_core, "_count_with_singletons", spy)
    X = random_graphs(300, 15, 25, 0.15, 4, seed=5)  # a sparse Φ: 300 graphs, ~20,000 labels
    np.testing.assert_array_equal(dense(WeisfeilerLehman(3)(X)), grakel_wl(X, 3))
    assert calls and calls[0] > 4 * 300


@pytest.mark.parametrize("sorted_input,real", [(True, False), (False, False), (True, True)])
def test_private_columns_folded_keep_the_gram(sorted_input, real):
    """Columns held by one row folded into a few columns of the same square sum: Φ Φᵀ
    equal to the unfolded one (brute force), the shared columns kept, the entries sorted
    by (row, column) when the input was; integer counts stay integers."""
    g = torch.Generator().manual_seed(7)
    n, p = 80, 9000
    rows = torch.randint(0, n, (8000,), generator=g)
    cols = torch.cat([torch.randint(0, 40, (2000,), generator=g),
                      40 + torch.randperm(8960, generator=g)[:6000]])  # 6,000 private
    vals = torch.randint(1, 150, (8000,), generator=g)  # values past the 127 cap
    if real:
        vals = vals.double() / 7
    key = rows * p + cols
    uniq, inv = torch.unique(key, return_inverse=True)  # distinct (row, col) entries
    v = torch.zeros(uniq.numel(), dtype=vals.dtype).index_add_(0, inv, vals)
    r, c = uniq // p, uniq % p
    if not sorted_input:
        perm = torch.randperm(r.numel(), generator=g)
        r, c, v = r[perm], c[perm], v[perm]
    fr, fc, fv, fp = wl_core._fold_private(r, c, v, p, n)
    assert fr.numel() < r.numel() and fv.dtype == v.dtype
    dense = lambda r, c, v, p: torch.zeros(n, p, dtype=torch.float64).index_put_(  # noqa: E731
        (r, c), v.double(), accumulate=True)
    ref, out = dense(r, c, v, p), dense(fr, fc, fv, fp)
    torch.testing.assert_close(out @ out.T, ref @ ref.T, rtol=1e-13, atol=0)
    shared = ref[:, (ref != 0).sum(0) > 1]
    assert torch.equal(out[:, :shared.shape[1]], shared)
    if sorted_input:
        k = fr * fp + fc
        assert bool((k[1:] > k[:-1]).all())
