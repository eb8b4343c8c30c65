"""Session 18: GraphletSampling on 5 to 7 nodes, Propagation's random_state=None, the
empty graph in MultiscaleLaplacian, PropagationAttr's overflowing hash."""
import itertools
import math
import warnings
from collections import Counter

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from tests.graphs.test_graph_kernels import adjacency, random_graphs
from torchkern.graphs import (GraphHopper, GraphletSampling, ODDSTh, Propagation,
                              PropagationAttr)

import grakel  # noqa: E402  (the test extra installs it: never skipped)


# -- graphlets on k = 5 to 7 nodes ---------------------------------------------------------

def _bits(k):
    return list(itertools.combinations(range(k), 2))


def _canonical_codes(k):
    """The smallest adjacency code over the k! node permutations, for every code (bit b
    the b-th pair i < j): brute force, independent of graphlet_classes' propagation."""
    pairs = _bits(k)
    index = {p: b for b, p in enumerate(pairs)}
    perm_bits = [[index[tuple(sorted((p[u], p[v])))] for (u, v) in pairs]
                 for p in itertools.permutations(range(k))]
    codes = np.arange(2 ** len(pairs))
    best = np.full(codes.size, codes.size)
    for pb in perm_bits:
        moved = np.zeros_like(codes)
        for b, nb in enumerate(pb):
            moved |= (codes >> b & 1) << nb
        best = np.minimum(best, moved)
    return best


def _graph(code, k):
    e = [p for b, p in enumerate(_bits(k)) if code >> b & 1]
    ei = torch.tensor([[u for u, v in e] + [v for u, v in e],
                       [v for u, v in e] + [u for u, v in e]], dtype=torch.long).reshape(2, -1)
    return Data(edge_index=ei, num_nodes=k)


def _column_of_class(kern, k, canon):
    """torchkern's column of every isomorphism class: the one nonzero of φ of the class's
    smallest-code graph on k nodes."""
    reps = sorted(set(canon.tolist()))
    phi = kern.features([_graph(c, k) for c in reps]).numpy()
    assert np.all(phi.sum(1) == 1) and np.all((phi == 0) | (phi == 1))
    return {c: int(col) for c, col in zip(reps, phi.argmax(1))}


def _code(A, S):
    return sum(int(A[S[u], S[v]]) << b for b, (u, v) in enumerate(_bits(len(S))))


def test_five_node_graphlets_equal_enumeration_and_sampling():
    canon = _canonical_codes(5)
    kern = GraphletSampling(5, n_samples=None)
    col = _column_of_class(kern, 5, canon)
    assert len(col) == 34 and sorted(col.values()) == list(range(34))  # a bijection
    X = random_graphs(6, 5, 9, 0.45, 1, seed=8, isolated=1)
    X.append(Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=4))  # < 5 nodes: φ = 0
    ref = np.zeros((len(X), 34))
    for g, d in enumerate(X):
        A = adjacency(d)
        A = ((A + A.T) > 0).astype(int)
        for S in itertools.combinations(range(d.num_nodes), 5):
            ref[g, col[int(canon[_code(A, S)])]] += 1
        ref[g] /= max(math.comb(d.num_nodes, 5), 1)
    np.testing.assert_allclose(kern.features(X).numpy(), ref, rtol=1e-12, atol=1e-15)
    # Hoeffding: with 20000 samples each frequency is within 0.02 with probability
    # > 1 − 2e-6 (seed fixed)
    sampled = GraphletSampling(5, n_samples=20000, random_state=0).features(X).numpy()
    np.testing.assert_allclose(sampled, ref, atol=0.02)
    np.testing.assert_allclose(sampled.sum(1), [1.0] * 6 + [0.0])


@pytest.mark.parametrize("k, n_classes", [(6, 156), (7, 1044)])
def test_graphlet_classes_are_isomorphism_classes(k, n_classes):
    # the k = 7 table is built on int32 codes, degree sequences of the class minima only
    rng = np.random.default_rng(0)
    pairs = _bits(k)
    index = {p: b for b, p in enumerate(pairs)}
    perm_bits = np.array([[index[tuple(sorted((p[u], p[v])))] for (u, v) in pairs]
                          for p in itertools.permutations(range(k))])  # (k!, C(k, 2))

    def relabel(c, pb):  # the code of c with its pairs' bits moved to pb (any shape)
        return sum((c >> b & 1) << pb[..., b] for b in range(len(pairs)))

    def canon(c):  # brute force: the smallest code over the k! relabelings
        return int(relabel(c, perm_bits).min())

    # each code beside a random relabeling of itself: same class, and classes equal
    # exactly when the brute-force canonical forms are
    codes = rng.integers(0, 2 ** len(pairs), 30).tolist()
    relabeled = [int(relabel(c, perm_bits[rng.integers(len(perm_bits))])) for c in codes]
    kern = GraphletSampling(k, n_samples=None)
    phi = kern.features([_graph(c, k) for c in codes + relabeled])
    assert phi.shape[1] == n_classes
    cols = phi.argmax(1).tolist()
    assert cols[:30] == cols[30:]
    forms = [canon(c) for c in codes]
    for i, j in itertools.combinations(range(30), 2):
        assert (cols[i] == cols[j]) == (forms[i] == forms[j])
    # classes numbered by sorted degree sequence (base-k code), then smallest code
    from torchkern.graphs.graphlet import graphlet_classes

    def key(c):
        deg = sorted(sum(c >> index[tuple(sorted((u, v)))] & 1 for v in range(k) if v != u)
                     for u in range(k))
        return sum(d * k ** i for i, d in enumerate(deg)), c

    assert [int(graphlet_classes(k)[0][f]) for f in sorted(set(forms), key=key)] == \
        sorted(cols[forms.index(f)] for f in set(forms))


def test_graphlet_subsets_are_itertools_combinations():
    # the exhaustive mode enumerated subsets with torch.combinations, which builds all
    # n^k tuples first (k = 6 on three 30-node graphs: 174 s here, 1.6 s now)
    from torchkern.graphs.graphlet import _combinations
    for n in range(9):
        for k in range(1, 8):
            assert _combinations(n, k).tolist() == [list(c) for c in
                                                    itertools.combinations(range(n), k)]


def test_graphlet_memory_check_covers_the_measured_peak(monkeypatch):
    # k = 5 on a 30-node graph: C(30, 5) = 142,506 subsets. The check asked for
    # C·k·8 = 5.7 MB, but enumerating and looking them up peaked at 30 MiB resident
    # (ru_maxrss, 221 bytes a subset; 28 MiB now): a device of 20 MB passed the check and
    # then ran out. The check now counts 4k + 48 bytes a subset plus 16k + 160 a row looked
    # up at once (44 MB here).
    import torchkern.graphs._batch as batch
    X = random_graphs(1, 30, 30, 0.3, 1, seed=4)
    kern = GraphletSampling(5, n_samples=None)
    monkeypatch.setattr(batch, "device_memory", lambda device: 20 * 10 ** 6)
    with pytest.raises(ValueError, match=r"X: GraphletSampling\(n_samples=None\) on a graph "
                                         r"of 30 nodes .* 43,891,848 bytes"):
        kern.features(X)
    monkeypatch.setattr(batch, "device_memory", lambda device: 44 * 10 ** 6)
    assert kern.features(X).sum().item() == pytest.approx(1.0)


def test_graphlet_numpy_generator_is_replayed_at_every_call():
    # a NumPy Generator as random_state (taken since the RandomState/Generator change) was
    # drawn from anew at every call: k(X) twice differed by 0.10, and a subset's features
    # were not rows of the set's. Now its state at the first call is replayed, as a
    # RandomState's: one seed integers(2^63 - 1) from that state seeds the uniforms.
    X = random_graphs(6, 6, 9, 0.4, 1, seed=0)
    rng = np.random.default_rng(0)
    k = GraphletSampling(4, n_samples=50, random_state=rng)
    phi = k.features(X)
    seed = int(np.random.default_rng(0).integers(2 ** 63 - 1))
    ref = GraphletSampling(4, n_samples=50, random_state=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(phi, ref.features(X), rtol=0, atol=0)
    torch.testing.assert_close(k.features(X[:3]), phi[:3], rtol=0, atol=0)
    torch.testing.assert_close(k(X).to_dense(), phi @ phi.T, rtol=1e-12, atol=0)
    assert int(rng.integers(2 ** 63 - 1)) == seed  # the caller's Generator is not advanced


def test_graphlet_class_counts_and_k_range():
    from torchkern.graphs.graphlet import graphlet_classes
    # the numbers of graphs on 3..7 nodes (OEIS A000088)
    assert [graphlet_classes(k)[1] for k in (3, 4, 5, 6, 7)] == [4, 11, 34, 156, 1044]
    for bad in (2, 8, 5.0, True):
        with pytest.raises(ValueError, match="k must be an int from 3 to 7"):
            GraphletSampling(k=bad)


def test_five_node_graphlets_match_grakel_on_connected_five_node_graphs():
    # GraKeL's sampling=None enumerates the connected 5-subsets (its ConSubg misses some on
    # larger graphs, and a class's first subgraph counts twice in later graphs: see
    # docs/graphs.md); on a connected 5-node graph the one subset is the graph itself, and
    # the normalized Gram is 1 for isomorphic graphs, 0 otherwise, in both. But GraKeL's
    # enumeration misses that subset on some labellings (110 of the 728 labelled connected
    # 5-node graphs): its φ is then 0, so those graphs are filtered out here, and counted.
    from grakel.kernels.graphlet_sampling import sample_graphlets_all_connected
    canon = _canonical_codes(5)
    rng = np.random.default_rng(1)
    graphs, n_connected, n_missed = [], 0, 0
    for c in sorted(set(canon.tolist())):
        d = _graph(c, 5)
        A = adjacency(d)
        reach = np.linalg.matrix_power(A + np.eye(5), 4) > 0
        if not reach.all():  # not connected
            continue
        n_connected += 1
        p = torch.as_tensor(rng.permutation(5))
        for e in (d, Data(edge_index=p[d.edge_index], num_nodes=5)):
            if sum(1 for _ in sample_graphlets_all_connected(adjacency(e).astype(int), 5)):
                graphs.append(e)  # GraKeL's enumeration finds the subset
            else:
                n_missed += 1
    assert n_connected == 21  # the connected graphs on 5 nodes
    # the filter drops few of the 42 (each class's smallest code and one relabelling)
    assert (len(graphs), n_missed) == (37, 5)
    gk = grakel.GraphletSampling(k=5, normalize=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Kg = gk.fit_transform([grakel.Graph(adjacency(d).astype(int)) for d in graphs])
    K = GraphletSampling(5, n_samples=None, normalize=True)(graphs).to_dense().numpy()
    np.testing.assert_allclose(K, Kg, atol=1e-12)


# -- Propagation(random_state=None) --------------------------------------------------------

def _labelled(seed, attributes=False):
    X = random_graphs(8, 4, 8, 0.4, 3, seed=seed)
    if attributes:
        g = torch.Generator().manual_seed(seed)
        for d in X:
            d.node_attributes = torch.randn(d.num_nodes, 2, generator=g, dtype=torch.float64)
    return X


@pytest.mark.parametrize("kind", ["labels", "grakel_draws", "attributes"])
def test_propagation_random_state_none_draws_once_per_object(kind):
    from torchkern.graphs import Propagation, PropagationAttr

    def make():
        if kind == "attributes":
            return PropagationAttr(t_max=3, w=0.5, random_state=None)
        return Propagation(t_max=3, w=1e-3, random_state=None,
                           n_labels=3 if kind == "grakel_draws" else None)

    X = _labelled(3, kind == "attributes")
    A, B = X[:5], X[5:]
    np.random.seed(0)
    k = make()
    K = k(X).to_dense()
    # one object: every call uses the same draws (a fitted model predicts with them)
    torch.testing.assert_close(k(A, B).to_dense(), K[:5, 5:], rtol=0, atol=0)
    torch.testing.assert_close(k(B).to_dense(), K[5:, 5:], rtol=0, atol=0)
    # a clone (sklearn's clone deep-copies a torchkern kernel) made after the first call
    # keeps the seed: no draw from NumPy's generator
    from sklearn.base import clone
    state = np.random.get_state()[1].copy()
    torch.testing.assert_close(clone(k)(X).to_dense(), K, rtol=0, atol=0)
    np.testing.assert_array_equal(np.random.get_state()[1], state)
    # the seed comes from NumPy's global generator: reseeding reproduces it...
    np.random.seed(0)
    torch.testing.assert_close(make()(X).to_dense(), K, rtol=0, atol=0)
    # ...and a new object, or a clone made before the first call, draws anew
    np.random.seed(0)
    fresh = make()
    early = clone(fresh)
    torch.testing.assert_close(fresh(X).to_dense(), K, rtol=0, atol=0)
    assert not torch.equal(early(X).to_dense(), K)  # the next seed of NumPy's generator
    Ks = [make()(X).to_dense() for _ in range(3)]
    assert any(not torch.equal(Ki, K) for Ki in Ks)


# -- MultiscaleLaplacian on an empty graph ---------------------------------------------------

def test_multiscale_laplacian_empty_graph_is_the_regularizer_gaussian():
    # Kondor and Pan's S = Uᵀ(L + ηI)⁻¹U + γI is γI for a graph of 0 nodes (an empty
    # sum): at L = 0 with 1-d attributes u (the level-0 map is then the identity),
    # k(G, ∅) = (1/s + 1/γ)^{-1/2} / (sγ)^{1/4} with s = uᵀ(L + ηI)⁻¹u + γ. GraKeL refuses
    # a graph without nodes; its value for a 1-node graph of attribute 0 (the same S)
    # agrees.
    from torchkern.graphs import MultiscaleLaplacian
    u = np.array([1.0, 2.0, 3.0])
    ring = torch.tensor([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]])
    tri = Data(edge_index=ring, num_nodes=3, node_attributes=torch.tensor(u[:, None]))
    none = torch.zeros(2, 0, dtype=torch.long)
    f64 = dict(dtype=torch.float64)
    empty = Data(edge_index=none, num_nodes=0, node_attributes=torch.zeros(0, 1, **f64))
    zero = Data(edge_index=none, num_nodes=1, node_attributes=torch.zeros(1, 1, **f64))
    gamma = heta = 0.01
    A = np.ones((3, 3)) - np.eye(3)
    s = u @ np.linalg.solve(np.diag(A.sum(1)) - A + heta * np.eye(3), u) + gamma
    closed = np.sqrt(1 / (1 / s + 1 / gamma)) / (s * gamma) ** 0.25
    args = dict(L=0, gamma=gamma, heta=heta, n_samples=4, P=1, random_state=0)
    K = MultiscaleLaplacian(**args)([tri, empty]).to_dense()
    np.testing.assert_allclose(K.numpy(), [[2 ** -0.5, closed], [closed, 2 ** -0.5]],
                               rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Kg = grakel.MultiscaleLaplacian(**args).fit_transform(
            [grakel.Graph(A, node_labels={i: u[i:i + 1] for i in range(3)}),
             grakel.Graph(np.zeros((1, 1)), node_labels={0: np.zeros(1)})])
    np.testing.assert_allclose(K.numpy(), Kg, rtol=1e-12)
    # with levels: the empty graph holds no landmark, so the others' values do not move
    tri2 = Data(edge_index=ring[:, :4], num_nodes=3,
                node_attributes=torch.tensor([[1.0], [0.5], [2.0]], **f64))
    k = MultiscaleLaplacian(L=2, random_state=0)
    K3 = k([tri, empty, tri2]).to_dense()
    K2 = MultiscaleLaplacian(L=2, random_state=0)([tri, tri2]).to_dense()
    torch.testing.assert_close(K3[[0, 2]][:, [0, 2]], K2, rtol=1e-12, atol=0)
    torch.testing.assert_close(k([tri, tri2], [empty]).to_dense(), K3[[0, 2]][:, [1]],
                               rtol=1e-12, atol=0)
    assert K3[1, 1] == pytest.approx(float(K3[0, 0]), rel=1e-12)  # 2^{-p/2}, as every graph


# -- PropagationAttr: attributes whose hash overflows float64 -------------------------------

def test_propagation_attr_hashes_huge_attributes_exactly():
    # Reference in exact rationals: P_{t+1} = D⁻¹A P, bins ⌊(p u_t + b_t)/w⌋ with the
    # documented draws (numpy RandomState: u_t = randn/randn, b_t = w randn), nodes of
    # equal bins counted step by step. Near 1e308, p·u_t overflows float64: every such
    # node fell in one ±inf bin (K[g, h] was 9 here, 3 in exact arithmetic).
    from fractions import Fraction
    from torchkern.graphs import PropagationAttr
    t_max, w, seed = 3, 4.0, 0
    path = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    star = torch.tensor([[0, 1, 0, 2, 0, 3], [1, 0, 2, 0, 3, 0]])
    f64 = dict(dtype=torch.float64)
    attrs = [[1e308, 6e307, -9e307], [1e308] * 3, [-1e308, 3.0, 6e307, 1e308]]
    X = [Data(edge_index=e, num_nodes=len(a), node_attributes=torch.tensor(a, **f64)[:, None])
         for e, a in zip((path, path, star), attrs)]
    rs = np.random.RandomState(seed)
    draws = []
    for _ in range(t_max):
        u = rs.randn(1)
        u = u / rs.randn(1)
        draws.append((Fraction(float(u[0])), Fraction(float(w * rs.randn(1)[0]))))
    assert abs(float(draws[0][0])) * 1e308 > np.finfo(np.float64).max  # it overflows
    counts = []  # per step, per graph: Counter of bins
    states = [[Fraction(float(a)) for a in d.node_attributes[:, 0]] for d in X]
    for t in range(t_max):
        u, b = draws[t]
        counts.append([Counter(math.floor((p * u + b) / Fraction(w)) for p in P)
                       for P in states])
        new = []
        for d, P in zip(X, states):
            nb = {v: [] for v in range(d.num_nodes)}
            for s, tt in d.edge_index.t().tolist():
                nb[s].append(tt)
            new.append([sum((P[j] for j in nb[v]), Fraction(0)) / len(nb[v])
                        for v in range(d.num_nodes)])
        states = new
    ref = np.array([[sum(sum(c[i][key] * c[j][key] for key in c[i]) for c in counts)
                     for j in range(len(X))] for i in range(len(X))], dtype=float)
    K = PropagationAttr(t_max=t_max, w=w, random_state=seed)(X).to_dense().numpy()
    np.testing.assert_array_equal(K, ref)


# -- NumPy float hyperparameters ---------------------------------------------------------------

@pytest.mark.parametrize("make, match, smooth", [
    (lambda v: GraphHopper(kernel_type="gaussian", mu=v), "mu must be a positive number", True),
    (lambda v: ODDSTh(h=2, lam=v), "lam must be a finite number > 0", True),
    (lambda v: Propagation(t_max=2, w=v), "w must be a positive number", False),
    (lambda v: PropagationAttr(t_max=2, w=v), "w must be a positive number", False),
])
def test_numpy_float_hyperparameters_are_numbers(make, match, smooth):
    # a grid built with np.linspace / np.float32 holds NumPy scalars, which GraKeL and
    # scikit-learn take: np.float32(0.5) was refused as "not a positive number". A NumPy
    # scalar is the number it holds: np.float32(0.1) is 0.100000001490116..., not 0.1.
    X = _labelled(5, attributes=True)
    for v in (np.float32(0.1), np.float16(0.1), np.int64(1) / 10):
        want = make(float(v))(X).to_dense()
        torch.testing.assert_close(make(v)(X).to_dense(), want, rtol=0, atol=0)
        if smooth and v.dtype != np.float64:  # a smooth kernel sees the rounding of 0.1
            assert not torch.equal(want, make(0.1)(X).to_dense())
    for bad in (True, np.bool_(True), "0.5", np.float32("nan"), np.float32(0)):
        with pytest.raises(ValueError, match=match):
            make(bad)


# -- a numpy RandomState as random_state -------------------------------------------------------

def _grakel_graphs(X, what):
    out = []
    for d in X:
        A = adjacency(d)
        if what == "labels":
            nodes = dict(enumerate(d.x.argmax(1).tolist()))
        else:
            nodes = dict(enumerate(d.node_attributes.double().numpy()))
        out.append(grakel.Graph(A, node_labels=nodes))
    return out


@pytest.mark.parametrize("kind", ["propagation", "propagation_attr", "multiscale"])
def test_numpy_random_state_draws_as_grakel(kind):
    # GraKeL (sklearn's check_random_state) takes a RandomState; it was refused here
    from torchkern.graphs import MultiscaleLaplacian
    X = _labelled(11, attributes=True)
    X = [d for d in X if d.edge_index.shape[1]]  # GraKeL's readers need an edge
    if kind == "propagation":
        # GraKeL draws for its fitted labels in order: all 3 labels must occur
        assert sorted(set(torch.cat([d.x.argmax(1) for d in X]).tolist())) == [0, 1, 2]
        ours = lambda rs: Propagation(t_max=3, w=1e-3, random_state=rs, n_labels=3)
        theirs = lambda rs: grakel.Propagation(t_max=3, w=1e-3, random_state=rs)
        what = "labels"
    elif kind == "propagation_attr":
        ours = lambda rs: PropagationAttr(t_max=3, w=0.5, random_state=rs)
        theirs = lambda rs: grakel.PropagationAttr(t_max=3, w=0.5, random_state=rs)
        what = "attributes"
    else:
        ours = lambda rs: MultiscaleLaplacian(L=2, n_samples=8, P=3, random_state=rs)
        theirs = lambda rs: grakel.MultiscaleLaplacian(L=2, n_samples=8, P=3, random_state=rs)
        what = "attributes"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Kg = theirs(np.random.RandomState(7)).fit_transform(_grakel_graphs(X, what))
    k = ours(np.random.RandomState(7))
    K = k(X).to_dense().numpy()
    np.testing.assert_allclose(K, Kg, rtol=1e-10, atol=1e-12 * np.abs(Kg).max())
    np.testing.assert_array_equal(k(X).to_dense().numpy(), K)  # replayed at every call
    np.testing.assert_array_equal(ours(7)(X).to_dense().numpy(), K)  # = the int seed
    if kind == "propagation":  # per-label draws: one seed taken from the RandomState
        k = Propagation(t_max=3, w=1e-3, random_state=np.random.RandomState(7))
        K = k(X).to_dense()
        torch.testing.assert_close(k(X[:3], X[3:]).to_dense(), K[:3, 3:], rtol=0, atol=0)
        seed = int(np.random.RandomState(7).randint(2 ** 32, dtype=np.int64))
        torch.testing.assert_close(Propagation(t_max=3, w=1e-3, random_state=seed)(X).to_dense(),
                                   K, rtol=0, atol=0)


# -- the θ kernels with random_state=None --------------------------------------------------

@pytest.mark.parametrize("draws", ["graph", "grakel"])
def test_theta_kernels_take_random_state_none(draws):
    # GraKeL's LovaszTheta / SvmTheta default random_state=None was refused here. None is a
    # seed drawn once per object from NumPy's global generator: reseeding reproduces it,
    # every call of one object draws the same, and a new object draws anew.
    from sklearn.base import clone
    from torchkern.graphs import LovaszTheta, SVMTheta
    X = random_graphs(5, 4, 7, 0.5, 1, seed=2)
    for make in (lambda rs: SVMTheta(n_samples=6, subsets_size_range=(2, 3), random_state=rs,
                                     draws=draws),
                 lambda rs: LovaszTheta(n_samples=3, subsets_size_range=(2, 3), random_state=rs,
                                        draws=draws)):
        np.random.seed(3)
        k = make(None)
        K = k(X).to_dense()
        phi = k.features(X)
        torch.testing.assert_close(K, phi @ phi.T, rtol=1e-12, atol=0)
        torch.testing.assert_close(clone(k).features(X), phi, rtol=0, atol=0)  # seed kept
        # (with draws="grakel" a set's features depend on the set: compare with its φ)
        torch.testing.assert_close(k(X[:2], X[2:]).to_dense(),
                                   k.features(X[:2]) @ k.features(X[2:]).T, rtol=1e-12, atol=0)
        np.random.seed(3)
        torch.testing.assert_close(make(None)(X).to_dense(), K, rtol=0, atol=0)
        assert any(not torch.equal(make(None).features(X), phi) for _ in range(3))


@pytest.mark.parametrize("w, scale", [(1e-320, 1.0), (1e300, 1e308), (4.0, 1e308),
                                      (1.5e308, 1.0)])
def test_propagation_hash_past_float64_keeps_distinct_values_apart(w, scale):
    # With one step (no diffusion) the bins are those of the labels (attributes): nodes of
    # equal labels share a bin, and bins of width w much below the gaps keep the others
    # apart, so K = Σ [ℓ(v) = ℓ(v')] (a histogram dot product). A bin width below 1e-300
    # overflowed (z + b)/w, attributes near 1e308 overflowed p·u: every such node fell in
    # one ±inf bin. (1e300: p·u overflows where (p·u + b)/w, about 1e8, does not.)
    # A bin width near float64's max holds all of them.
    lab = [[0, 1, 2, 1], [2, 2, 0], [3, 1]]
    X = [Data(x=torch.tensor(v)[:, None], edge_index=torch.zeros(2, 0, dtype=torch.long),
              node_attributes=scale / 4 * (1.0 + torch.tensor(v, dtype=torch.float64)[:, None]))
         for v in lab]
    ref = np.array([[sum(a == b for a in u for b in v) for v in lab] for u in lab], float)
    if w > 1e300:  # one bin of width 1.5e308 holds every attribute (b = w·N(0, 1) = ±inf)
        ref = np.outer([len(v) for v in lab], [len(v) for v in lab]).astype(float)
    kernels = [PropagationAttr(t_max=1, w=w, random_state=s) for s in range(3)]
    if scale == 1.0:
        kernels += [Propagation(t_max=1, w=w, M=M, random_state=s, n_labels=n)
                    for M in ("TV", "H") for n in (None, 4) for s in range(2)]
    for k in kernels:
        np.testing.assert_array_equal(k(X).to_dense().numpy(), ref)
