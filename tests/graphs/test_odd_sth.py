"""ODD-ST_h against a brute-force implementation of its definition (every node's BFS DAG,
every DAG node, every depth j ≤ h, the tree visits written out as nested tuples with
sorted children) and against GraKeL 0.1.11's ``OddSth`` where GraKeL's child order is
unambiguous; renumbering invariance, inputs and estimators."""
import collections
import os

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from torch_geometric.data import Batch, Data

import torchkern as tk
from tests._devices import dev, requires_device  # noqa: F401 (fixture)
from torchkern.graphs import GraphSet
from torchkern.graphs.neighborhood_hash import label_numbers
from torchkern.graphs.odd_sth import ODDSTh, multiset_label_ids

import grakel  # noqa: E402  (the test extra installs it: never skipped)
from grakel import kernels as gk  # noqa: E402

DATA = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")


@pytest.fixture(scope="module")
def mutag():
    return tk.datasets.read_tu(os.path.join(DATA, "MUTAG"))


def random_graphs(n_graphs, n_min, n_max, p, n_labels, seed, distinct=False, tree=False):
    """Undirected Erdős–Rényi graphs (isolated nodes possible) or random trees, one-hot
    labels; ``distinct``: no two nodes of a graph share a label (n_labels ≥ n_max)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_graphs):
        n = int(rng.integers(n_min, n_max + 1))
        A = np.zeros((n, n), dtype=bool)
        if tree:
            A[np.arange(1, n), [int(rng.integers(0, i)) for i in range(1, n)]] = True
        else:
            A = np.triu(rng.random((n, n)) < p, 1)
        s, t = np.nonzero(A | A.T)
        lab = rng.permutation(n_labels)[:n] if distinct else rng.integers(0, n_labels, n)
        x = torch.nn.functional.one_hot(torch.as_tensor(lab), n_labels).float()
        out.append(Data(x=x, edge_index=torch.as_tensor(np.stack([s, t])), num_nodes=n))
    return out


def label_list(graphs):
    G = GraphSet(graphs)
    lab = label_numbers(G).tolist()
    return [lab[int(G.ptr[i]):int(G.ptr[i + 1])] for i in range(len(graphs))]


def brute_force(graphs, h, lam, depths=None):
    """The definition, written over the roots' cut tree visits: for every root r, BFS
    distances d; DAG children of u are the neighbours w with d(r, u) < h and
    d(r, w) = d(r, u) + 1; ℓ_r = max d ≤ h; T_i(u) = (label, sorted tuple of the T_{i−1}
    of the children), T_0(u) = (label, ()). For every cut depth j = 0 … ℓ_r of the root's
    visit, each DAG node u with d(r, u) ≤ j is one proper subtree, T_{j−d(r, u)}(u); φ
    counts them and k = Σ_t λ^{s(t)} φ_t(G) φ_t(G'). ``depths``: instead T_j(u) for every
    DAG node u and each j in depths. Returns (K, the φ as Counters)."""
    labels = label_list(graphs)
    feats = []
    for d, lab in zip(graphs, labels):
        adj = collections.defaultdict(set)
        for a, b in d.edge_index.t().tolist():
            adj[a].add(b)
        phi = collections.Counter()
        for r in range(d.num_nodes):
            dist, queue = {r: 0}, [r]
            for u in queue:
                for w in sorted(adj[u]):
                    if w not in dist:
                        dist[w] = dist[u] + 1
                        queue.append(w)
            kids = {u: [w for w in adj[u] if dist[u] < h and dist.get(w) == dist[u] + 1]
                    for u in dist if dist[u] <= h}
            top = max(dist[u] for u in kids)

            def visit(u, j):
                return (lab[u], tuple(sorted(visit(w, j - 1) for w in kids[u])) if j else ())
            if depths is None:
                for j in range(top + 1):  # the root's visit cut at depth j
                    for u in kids:
                        if dist[u] <= j:
                            phi[visit(u, j - dist[u])] += 1
            else:
                for u in kids:
                    for j in depths:
                        phi[visit(u, j)] += 1
        feats.append(phi)

    def size(t):
        return 1 + sum(size(c) for c in t[1])
    K = np.array([[sum(lam ** size(t) * c * fb.get(t, 0) for t, c in fa.items())
                   for fb in feats] for fa in feats])
    return K, feats


def frequency_rule(graphs, h, lam):
    """The same features counted as the authors' implementation does (N. Navarin's
    scikit-learn-graph, ODDSTGraphKernel, exact variant), rewritten here: per DAG, nodes
    bottom-up; node u has encodings for cut depths i = 0 … H(u) (its height); the depth-0
    encoding of a leaf at DAG depth d has "frequency" ℓ_r − d, of an inner node 0; the
    cut-i encoding (i ≥ 1) takes the smallest frequency of its children's cut-(i − 1)
    encodings (their last one when they are shallower); each encoding adds
    frequency + 1 to φ."""
    out = []
    for d, lab in zip(graphs, label_list(graphs)):
        adj = collections.defaultdict(set)
        for a, b in d.edge_index.t().tolist():
            adj[a].add(b)
        phi, size = collections.Counter(), {}
        for r in range(d.num_nodes):
            dist, queue = {r: 0}, [r]
            for u in queue:
                for w in adj[u]:
                    if w not in dist and dist[u] < h:
                        dist[w] = dist[u] + 1
                        queue.append(w)
            top = max(dist.values())
            kids = {u: [w for w in adj[u] if dist.get(w) == dist[u] + 1] for u in dist}
            enc, freq = {}, {}
            for u in sorted(dist, key=lambda v: -dist[v]):  # children first
                height = max((len(enc[c]) for c in kids[u]), default=0)
                enc[u], freq[u] = [], []
                for i in range(height + 1):
                    if i == 0:
                        e, f, s = (lab[u], ()), (top - dist[u] if height == 0 else 0), 1
                    else:
                        ch = [min(len(enc[c]), i) - 1 for c in kids[u]]
                        e = (lab[u], tuple(sorted(enc[c][k] for c, k in zip(kids[u], ch))))
                        f = min(freq[c][k] for c, k in zip(kids[u], ch))
                        s = 1 + sum(size[enc[c][k]] for c, k in zip(kids[u], ch))
                    size[e] = s
                    enc[u].append(e)
                    freq[u].append(f)
                    phi[e] += f + 1
        out.append((phi, size))
    return np.array([[sum(lam ** sa[t] * c * fb.get(t, 0) for t, c in fa.items())
                      for fb, _ in out] for fa, sa in out])


@pytest.mark.parametrize("h", [1, 2, 4])
def test_equals_the_authors_frequency_rule(h):
    graphs = random_graphs(10, 1, 9, 0.3, 3, seed=10 + h)
    want = frequency_rule(graphs, h, 0.7)
    np.testing.assert_allclose(dense(ODDSTh(h=h, lam=0.7), graphs), want, rtol=1e-13, atol=0)
    np.testing.assert_allclose(brute_force(graphs, h, 0.7)[0], want, rtol=1e-13, atol=0)


def test_path_by_hand():
    # path a - b - c, one label x, h = 1: the DAGs 0 → 1, 1 → {0, 2}, 2 → 1 (depth 1);
    # cut visits: root 0 gives x (j = 0) and x(x), x (j = 1); root 1 gives x and x(x, x),
    # x, x; root 2 as root 0. φ = {x: 7, x(x): 2, x(x, x): 1}: k = 49 + 4 + 1.
    path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3)
    assert ODDSTh(h=1)([path]).to_dense().item() == 54
    # λ = 0.5: 49·0.5 + 4·0.5² + 1·0.5³
    assert ODDSTh(h=1, lam=0.5)([path]).to_dense().item() == 24.5 + 1 + 0.125
    # h = 3 on the same path: ℓ_r = 2 for the end nodes, 1 for the middle one
    assert ODDSTh(h=3)([path]).to_dense().item() == brute_force([path], 3, 1.0)[0][0, 0]


def test_multiset_label_ids_groups_exactly():
    # groups whose token lists are prefixes of one another, repeats, empty groups
    rng = np.random.default_rng(0)
    m = 400
    label = torch.as_tensor(rng.integers(0, 2, m))
    group = torch.as_tensor(rng.integers(0, m, 1500))
    token = torch.as_tensor(rng.integers(0, 3, 1500))
    ids, n = multiset_label_ids(label, group, token, (2, 3))
    keys = [(int(label[g]), tuple(sorted(token[group == g].tolist()))) for g in range(m)]
    first = {}
    for g, k in enumerate(keys):
        first.setdefault(k, g)
    assert n == len(first)
    assert all((ids[g] == ids[first[k]]).item() for g, k in enumerate(keys))
    assert len(set(ids[list(first.values())].tolist())) == n


def dense(k, X, Y=None):
    return k(X, Y).to_dense().numpy()


@pytest.mark.parametrize("h, lam", [(1, 1.0), (2, 1.0), (3, 1.0), (3, 0.6)])
def test_equals_brute_force(h, lam):
    graphs = random_graphs(12, 1, 8, 0.35, 3, seed=h)
    ref, _ = brute_force(graphs, h, lam)
    K = dense(ODDSTh(h=h, lam=lam), graphs)
    if lam == 1.0:  # integers: exact
        np.testing.assert_array_equal(K, ref)
    else:
        np.testing.assert_allclose(K, ref, rtol=1e-13, atol=0)
    d = np.sqrt(np.diag(ref))
    kn = ODDSTh(h=h, lam=lam, normalize=True)
    np.testing.assert_allclose(dense(kn, graphs), ref / np.outer(d, d), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(dense(kn, graphs[:5], graphs[5:]),
                               (ref / np.outer(d, d))[:5, 5:], rtol=1e-13, atol=1e-15)
    # k(X, Y) is the block of k(X ∪ Y); diag is the diagonal
    np.testing.assert_allclose(dense(ODDSTh(h=h, lam=lam), graphs[:5], graphs[5:]),
                               ref[:5, 5:], rtol=1e-13, atol=0)
    np.testing.assert_allclose(ODDSTh(h=h, lam=lam).diag(graphs).numpy(), np.diag(ref),
                               rtol=1e-13, atol=0)


def test_unlabelled_graphs_and_renumbering(mutag):
    graphs = random_graphs(8, 1, 10, 0.3, 1, seed=4)
    for g in graphs:
        g.x = None
    ref, _ = brute_force(graphs, 3, 1.0)
    np.testing.assert_array_equal(dense(ODDSTh(h=3), graphs), ref)
    # a function of the graphs only: renumbered MUTAG molecules give the same row
    gen = torch.Generator().manual_seed(0)
    sub = mutag[:20]
    moved = []
    for g in sub:
        perm = torch.randperm(g.num_nodes, generator=gen)  # old node i becomes perm[i]
        x = torch.empty_like(g.x)
        x[perm] = g.x
        moved.append(Data(x=x, edge_index=perm[g.edge_index], edge_attr=g.edge_attr,
                          num_nodes=g.num_nodes))
    k = ODDSTh(h=3)
    np.testing.assert_array_equal(dense(k, moved, sub), dense(k, sub))


def grakel_from_features(graphs, h):
    """GraKeL 0.1.11's OddSth Gram from torchkern's full-visit counts φ (j = h only):
    GraKeL computes Σ_t c_t φ_t(G) φ_t(G'), c_t the count of t in the first graph of the
    set that holds t (the frequency its BigDAG keeps for a node when it is created)."""
    k = ODDSTh(h=h)
    g, t, cnt, _ = k.tree_features(k.check_input(graphs), depths=[h])
    phi = np.zeros((len(graphs), int(t.max()) + 1))
    phi[g.numpy(), t.numpy()] = cnt.numpy()
    c = phi[(phi > 0).argmax(0), np.arange(phi.shape[1])]
    return (phi * c) @ phi.T


def to_grakel(graphs):
    out = []
    for d, lab in zip(graphs, label_list(graphs)):
        A = np.zeros((d.num_nodes, d.num_nodes))
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        out.append(grakel.Graph(A, node_labels=dict(enumerate(lab))))
    return out


def test_full_visit_counts_equal_grakel_on_mutag_h1(mutag):
    # h = 1: a tree visit is a label and its neighbours' labels; GraKeL's order of the
    # children (topological number, then label) is then a function of the labels
    ref = gk.OddSth(h=1).fit_transform(to_grakel(mutag))
    np.testing.assert_array_equal(grakel_from_features(mutag, 1), ref)
    # and the brute force's full-visit counts are torchkern's
    _, feats = brute_force(mutag[:10], 1, 1.0, depths=[1])
    phi = np.array([[f.get(t, 0) for t in sorted(set().union(*feats))] for f in feats])
    c = phi[(phi > 0).argmax(0), np.arange(phi.shape[1])]
    np.testing.assert_array_equal(grakel_from_features(mutag[:10], 1), (phi * c) @ phi.T)


@pytest.mark.parametrize("h", [2, 3, 4])
def test_full_visit_counts_equal_grakel_on_trees_with_distinct_labels(h):
    # in a tree every DAG is a tree and with distinct labels GraKeL's topological
    # numbering has no ties: its ordered trees are then canonical, as torchkern's
    graphs = random_graphs(60, 1, 9, 0.0, 9, seed=h, distinct=True, tree=True)
    ref = gk.OddSth(h=h).fit_transform(to_grakel(graphs))
    np.testing.assert_array_equal(grakel_from_features(graphs, h), ref)


def test_inputs_and_grid_search(mutag):
    mutag = mutag[::6]
    y = np.array([int(d.y) for d in mutag])
    k = ODDSTh(h=2, lam=0.8, normalize=True)
    K = dense(k, mutag)
    np.testing.assert_array_equal(dense(k, Batch.from_data_list(mutag)), K)
    np.testing.assert_array_equal(dense(k, GraphSet(mutag)), K)
    c = clone(k).set_params(h=3, lam=0.5)
    assert (c.h, c.lam, c.normalize, k.h) == (3, 0.5, True, 2)
    cv = StratifiedKFold(2, shuffle=True, random_state=0)
    grid = {"kernel__h": [1, 2]}
    gs = GridSearchCV(tk.SVC(kernel=ODDSTh(normalize=True), C=10.0), grid, cv=cv).fit(mutag, y)
    for h, score in zip(grid["kernel__h"], gs.cv_results_["mean_test_score"]):
        G = dense(ODDSTh(h=h, normalize=True), mutag)
        ref = GridSearchCV(tk.SVC(kernel="precomputed", C=10.0), {"C": [10.0]}, cv=cv).fit(G, y)
        assert score == ref.cv_results_["mean_test_score"][0]


@pytest.mark.parametrize("make, match", [
    (lambda: ODDSTh(h=0), "h must be"), (lambda: ODDSTh(h=1.5), "h must be"),
    (lambda: ODDSTh(lam=0), "lam must be"), (lambda: ODDSTh(lam=float("nan")), "lam must be"),
    (lambda: ODDSTh(lam="1"), "lam must be")])
def test_bad_arguments_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_overflowing_weights_are_refused():
    star = Data(edge_index=torch.tensor([[0] * 200 + list(range(1, 201)),
                                         list(range(1, 201)) + [0] * 200]), num_nodes=201)
    with pytest.raises(ValueError, match="lam=100: .* overflows"):
        ODDSTh(h=2, lam=100.0)([star])


@requires_device
def test_device_equals_cpu(dev):
    graphs = random_graphs(30, 1, 15, 0.3, 3, seed=8)
    k = ODDSTh(h=3, lam=0.7)
    ref = k(graphs).to_dense()
    out = k(GraphSet(graphs, device=dev)).to_dense()
    assert out.device.type == dev.type
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-12, atol=0)
