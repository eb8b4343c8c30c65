"""Lovász-θ and SVM-θ kernels against GraKeL 0.1.11 and against closed forms.

GraKeL's Lovász SDP needs cvxopt (not installed in CI): its values are stored in
theta_references.npz by make_theta_references.py. The rest of GraKeL's pipeline (the
labelling and the minimum-cone routine with its random draws, the SVM-θ kernel) runs
here from the installed GraKeL."""
import itertools
import math
import os
import types
import zlib

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from torch_geometric.data import Batch, Data

import torchkern as tk
from tests.graphs.test_grakel_part_b import random_graphs
from torchkern.graphs import GraphSet, LovaszTheta, SVMTheta
from torchkern.graphs import theta as theta_mod
from torchkern.graphs.theta import (_distribute_samples, _edge_pairs, _exact_cone,
                                    _LegacyDraws, _one_class_direct, _one_class_sklearn,
                                    _svm_theta_alphas_all, lovasz_theta_sdp, svm_theta_alphas)

import grakel  # noqa: E402  (the test extra installs it: never skipped)
from grakel import kernels as gk  # noqa: E402
from grakel.kernels.lovasz_theta import LovaszTheta as GrakelLovasz  # noqa: E402
from grakel.kernels.lovasz_theta import _calculate_lovasz_labelling_  # noqa: E402
from grakel.kernels.svm_theta import _calculate_svm_theta_  # noqa: E402
from grakel.tools import distribute_samples  # noqa: E402

DATA = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")
REF = np.load(os.path.join(os.path.dirname(__file__), "theta_references.npz"))


@pytest.fixture(scope="module")
def mutag():
    return tk.datasets.read_tu(os.path.join(DATA, "MUTAG"))


@pytest.fixture(scope="module")
def rand():
    return random_graphs(40, 6, 16, 0.2, 1, seed=11)  # as in make_theta_references.py


def graph(n, edges):
    e = np.array(list(edges), dtype=np.int64).reshape(-1, 2)
    ei = torch.as_tensor(np.concatenate([e, e[:, ::-1]]).T.copy())
    return Data(edge_index=ei, num_nodes=n)


def bare(d):  # the edges only (mixed with graphs without labels)
    return Data(edge_index=d.edge_index, num_nodes=d.num_nodes)


def cycle(n):
    return graph(n, [(i, (i + 1) % n) for i in range(n)])


def complete(n):
    return graph(n, itertools.combinations(range(n), 2))


def petersen():
    outer = [(i, (i + 1) % 5) for i in range(5)]
    inner = [(5 + i, 5 + (i + 2) % 5) for i in range(5)]
    return graph(10, outer + inner + [(i, i + 5) for i in range(5)])


def adjacency(d):
    A = np.zeros((d.num_nodes, d.num_nodes))
    A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
    return A


def graph_draws_reference(graphs, lo, hi, S, seed):
    """SVM-θ features with ``draws="graph"`` written out with NumPy's and GraKeL's own
    calls: per graph, RandomState([seed, n, crc32(edges)]).choice per subset, GraKeL's α,
    the mean of Σ α per subset size (0 where no subset is drawn). (graphs, sizes) array."""
    out = np.zeros((len(graphs), hi - lo + 1))
    for d, want in zip(graphs, out):
        n, pairs = _edge_pairs(GraphSet([d]))[0]
        if n < lo:
            continue
        alphas = _calculate_svm_theta_(adjacency(d))
        rs = np.random.RandomState([seed, n, zlib.crc32(np.ascontiguousarray(pairs, np.int64))])
        plan = distribute_samples(n, (lo, hi), S)
        for level in range(lo, hi + 1):
            if plan.get(level):
                want[level - lo] = np.mean([np.sum(alphas[rs.choice(n, level, replace=False)])
                                            for _ in range(plan[level])])
    return out


def sdp(graphs):
    return lovasz_theta_sdp(_edge_pairs(GraphSet(graphs)))


# -- the pieces -----------------------------------------------------------------------------

def test_draws_replay_numpy_random_state():
    rs, ours = np.random.RandomState(7), _LegacyDraws(7)
    for t in range(600):
        n = t % 23 + 1
        if t % 3 == 0:
            assert rs.permutation(n).tolist() == ours.permutation(n)
        elif t % 3 == 1:
            assert int(rs.randint(0, n)) == ours.interval(n - 1)
        else:
            k = t % n + 1
            assert rs.choice(n, k, replace=False).tolist() == ours.permutation(n)[:k]


def test_removals_are_nested_randint_picks():
    # GraKeL's minidisk(P, R) removes P[randint(0, len(P))] and calls itself on the rest
    rs, ours = np.random.RandomState(5), _LegacyDraws(5)
    for t in range(300):
        P = rs.permutation(t % 19 + 1).tolist()
        assert ours.permutation(len(P)) == P
        start, want = P, []
        while P:
            p = P[rs.randint(0, len(P))]
            P = [q for q in P if q != p]
            want.append((p, P))
        assert ours.removals(start) == want
        assert int(rs.randint(0, 2 ** 30)) == ours.interval(2 ** 30 - 1)


@pytest.mark.parametrize("n", [2, 3, 5, 8, 17, 28, 60])
@pytest.mark.parametrize("rng, n_samples", [((2, 8), 50), ((1, 3), 7), ((4, 4), 13)])
def test_distribute_samples_is_grakels(n, rng, n_samples):
    if n < rng[0]:
        assert _distribute_samples(n, *rng, n_samples) == ()
        return
    ref = distribute_samples(n, rng, n_samples)
    ours = _distribute_samples(n, *rng, n_samples)
    assert {rng[0] + j: c for j, c in enumerate(ours) if c > 0} == ref


# -- the SDP: closed forms and cvxopt -------------------------------------------------------

def test_lovasz_sdp_closed_forms():
    # GraKeL's SDP is ϑ of the complement: θ(C5) = √5 (self-complementary), θ(K_n) = n,
    # θ(empty) = 1; perfect graphs (C6, a path, a triangle with a pendant edge): the
    # clique number; vertex-transitive G: ϑ(Ḡ) = n/ϑ(G) (Lovász, 1979), with
    # ϑ(C7) = 7cos(π/7)/(1+cos(π/7)) and ϑ(Petersen) = 4.
    c7 = 7 * math.cos(math.pi / 7) / (1 + math.cos(math.pi / 7))
    cases = [(cycle(5), math.sqrt(5)), (complete(4), 4.0), (complete(6), 6.0),
             (graph(5, []), 1.0), (cycle(6), 2.0), (graph(4, [(0, 1), (1, 2), (2, 3)]), 2.0),
             (graph(5, [(0, 1), (1, 2), (0, 2), (2, 3)]), 3.0), (cycle(7), 7 / c7),
             (petersen(), 10 / 4)]
    out = sdp([g for g, _ in cases])
    # the interior-point method stops at a duality gap of about 1e-8 (beyond, its Schur
    # system is too ill-conditioned): θ is an upper bound within that (measured: 1.1e-8
    # for Petersen's complement, 6e-9 for C7, 2e-9 for C5)
    for (g, want), (theta, W) in zip(cases, out):
        assert want - 1e-12 <= theta < want + 2e-8, (g, theta, want)
        # W = θI − J + Y is the optimal slack: positive semidefinite and singular, −1 on
        # the edges, θ − 1 on the diagonal
        ev = np.linalg.eigvalsh(W)
        assert ev[0] > -1e-9 and ev[0] < 1e-7
        assert np.allclose(np.diag(W), theta - 1, atol=1e-12)
        A = adjacency(g)
        assert np.allclose(W[A > 0], -1.0, atol=1e-12)


def test_lovasz_sdp_of_a_graph_is_the_same_in_any_batch():
    """A graph's slack W is bit-equal whichever graphs share its batched solve and at
    whatever position (odd n, n + E not a multiple of 4: the sizes padded; before, the
    batched LAPACK calls rounded by the matrix's offset in the batch and W moved by up to
    0.2 on these graphs, whose optimal slack is not unique). θ(C5) checks the solve."""
    rng = np.random.default_rng(5)
    for n, E in ((13, 35), (16, 33), (13, 34)):
        pairs = np.array(list(itertools.combinations(range(n), 2)))
        gs = [(n, pairs[np.sort(rng.choice(len(pairs), E, replace=False))])
              for _ in range(6)]
        cycle = (5, np.array([(i, (i + 1) % 5) for i in range(5)]))
        a, b = lovasz_theta_sdp(gs[:5]), lovasz_theta_sdp(gs[1:] + [cycle])
        for (ta, Wa), (tb, Wb) in zip(a[1:], b):
            assert ta == tb and np.array_equal(Wa, Wb), (n, E)
        assert abs(b[-1][0] - math.sqrt(5)) < 2e-8


def test_lovasz_sdp_complete_graphs():
    """θ(K_n) = n and the slack is W = nI − J, the only feasible one (no non-edge). From
    9 nodes on, the first interior-point step from the starting point raised the duality
    gap, was taken back and the solve stopped there (θ = n + 1: a RuntimeError)."""
    out = sdp([complete(n) for n in (9, 10, 13)])
    for n, (theta, W) in zip((9, 10, 13), out):
        # measured: θ 4e-10 to 6e-10 above n, W = θI − J (cvxopt, GraKeL's solver: θ
        # 1.5e-8 to 2.6e-8 below n)
        assert n - 1e-12 <= theta < n + 2e-8
        assert np.abs(W - (n * np.eye(n) - 1)).max() < 2e-8


def test_lovasz_sdp_finished_graphs_leave_the_batch(monkeypatch):
    """Graphs of one batch finish at different iterations and leave it then: a graph's θ
    and W are bit-equal whether it is solved alone (a batch of one throughout) or with
    others that finish before or after it, and so are LovaszTheta's features of a set
    and the rows of them in a larger set; the Gram of the set equals its block of the
    larger set's Gram."""
    rng = np.random.default_rng(2)
    n = 8
    pairs = np.array(list(itertools.combinations(range(n), 2)))
    gs = [(n, pairs[np.sort(rng.choice(len(pairs), E, replace=False))])
          for E in (13, 14, 15, 16, 13, 14, 15)]  # n + E padded to 24: one batch
    sizes = []
    lu = torch.linalg.lu_factor_ex
    monkeypatch.setattr(torch.linalg, "lu_factor_ex",
                        lambda M, *a, **k: (sizes.append(M.shape[0]), lu(M, *a, **k))[1])
    alone = [lovasz_theta_sdp([g])[0] for g in gs]
    sizes.clear()
    big = lovasz_theta_sdp(gs)
    shrink_big, sizes[:] = list(sizes), []
    sub = [1, 3, 4]
    small = lovasz_theta_sdp([gs[i] for i in sub])
    shrink_small = list(sizes)
    # the batches shrank, differently (measured: 7, 3, 1 and 3, 2, 1)
    assert shrink_big[0] == 7 and shrink_big[-1] < 7 and len(set(shrink_big)) > 2
    assert shrink_small[0] == 3 and shrink_small[-1] < 3 and shrink_big != shrink_small
    for (ta, Wa), (tb, Wb) in zip(alone, big):
        assert ta == tb and np.array_equal(Wa, Wb)
    for i, (t, W) in zip(sub, small):
        assert t == alone[i][0] and np.array_equal(W, alone[i][1])
    # a graph given again is solved once, its result the same as solved alone (a copy)
    sizes.clear()
    again = lovasz_theta_sdp([gs[2], gs[5], gs[2], gs[2]])
    assert sizes[0] == 2
    for (t, W), i in zip(again, (2, 5, 2, 2)):
        assert t == alone[i][0] and np.array_equal(W, alone[i][1])
    assert again[0][1] is not again[2][1]
    # and the kernel (a graph's own draws): the features of X are rows of those of X ∪ Y
    data = [graph(n, e) for _, e in gs] + [cycle(5), petersen()]
    k = LovaszTheta(n_samples=20, subsets_size_range=(2, 5))
    F = k.features(data)
    assert torch.equal(k.features([data[i] for i in sub]), F[sub])
    K = k(data).to_dense()
    assert torch.equal(k([data[i] for i in sub]).to_dense(), K[sub][:, sub])


def test_lovasz_sdp_equals_cvxopt_theta(mutag, rand):
    # cvxopt's defaults (abstol 1e-7, reltol 1e-6) bound GraKeL's own accuracy: θ agrees to
    # that, not to 1e-10 (measured: 1.4e-7 relative on MUTAG, 1.2e-7 on the random graphs)
    for name, graphs, every in (("mutag", mutag, 4), ("random", rand, 1)):
        theta = np.array([t for t, _ in sdp(graphs[::every])])
        ref = REF[f"theta_{name}"][::every]
        assert np.abs(theta - ref).max() <= 1e-6 * ref.max()


# -- GraKeL's kernel ------------------------------------------------------------------------

def test_cone_replay_equals_grakel_code(mutag):
    # GraKeL's own labelling and minimum-cone code, given our SDP solution, with the same
    # seed: the same features to rounding (every draw and every tolerance test replayed)
    graphs = mutag[:6]
    d = max(g.num_nodes for g in graphs) + 1
    fake = types.SimpleNamespace(subsets_size_range=(2, 6), n_samples=20,
                                 random_state_=np.random.RandomState(3))
    ref = np.array([GrakelLovasz._calculate_MEC_(
        fake, _calculate_lovasz_labelling_(W, theta, d))[:, 0] for theta, W in sdp(graphs)])
    ours = LovaszTheta(n_samples=20, subsets_size_range=(2, 6), random_state=3,
                       draws="grakel").features(graphs)
    assert np.abs(ours.numpy() - ref).max() < 1e-12


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("name", ["mutag", "random"])
def test_lovasz_theta_equals_grakel(mutag, rand, name, normalize):
    # GraKeL's Gram (stored, cvxopt) on the graphs whose optimal slack cvxopt and we agree
    # on to 1e-6 (114 of 188 MUTAG graphs, 8 of 40 random ones; elsewhere the slack is not
    # unique and GraKeL's depends on where cvxopt stops): equal to cvxopt's accuracy.
    # The draws go graph after graph, so the first 10 graphs' block of the stored Gram is
    # theirs alone.
    graphs = (mutag if name == "mutag" else rand)
    sub = [graphs[i] for i in REF[f"agree_{name}"][:10]]
    K = LovaszTheta(random_state=0, draws="grakel", normalize=normalize)(sub).to_dense().numpy()
    ref = REF[f"gram_{name}_{'norm' if normalize else 'raw'}"][:10, :10]
    # measured on the 40 stored graphs: 1.2e-6 relative (normalized 4.5e-7) on MUTAG, 5.2e-6
    # (1.2e-5) on the random graphs: the slacks agree to 1e-6 and the minimum-ball systems
    # of nearly dependent support points amplify that
    assert np.abs(K - ref).max() <= 5e-5 * np.abs(ref).max()


@pytest.mark.parametrize("normalize", [False, True])
def test_svm_theta_equals_grakel(mutag, rand, normalize):
    # GraKeL's default metric is np.inner(x, y)[0, 0] (first subset size only); the dot
    # product of all sizes is its metric x.T @ y. Measured: 2.5e-16 relative.
    for graphs in (mutag[:40], rand[:20]):
        ref = gk.SvmTheta(random_state=4, normalize=normalize,
                          metric=lambda x, y: (x.T @ y).item()).fit_transform(
            [[adjacency(d)] for d in graphs])
        K = SVMTheta(random_state=4, draws="grakel",
                     normalize=normalize)(graphs).to_dense().numpy()
        assert np.abs(K - ref).max() <= 1e-12 * np.abs(ref).max()


def test_svm_alphas_equal_grakels_oneclasssvm(mutag, rand, monkeypatch):
    # GraKeL's own α (eigvalsh + OneClassSVM per graph) against the batched path: libsvm
    # called directly, λ_min batched by size — bit for bit, on graphs of every kind
    # (no edge: no ridge; one node; complete; vertex-transitive; with isolated nodes)
    graphs = [bare(d) for d in mutag[::3] + rand] + [
        graph(1, []), graph(2, []), graph(6, []), complete(7), cycle(9), petersen(),
        graph(4, [(0, 1)])]
    ref = [_calculate_svm_theta_(adjacency(d)) for d in graphs]
    pairs = _edge_pairs(GraphSet(graphs))
    for fn in (_one_class_direct, _one_class_sklearn):  # the fast call and its fallback
        monkeypatch.setitem(theta_mod._DIRECT, "fn", fn)
        ours = _svm_theta_alphas_all(pairs)
        assert all(np.array_equal(a, b) for a, b in zip(ours, ref))
    n, e = pairs[0]
    assert np.array_equal(svm_theta_alphas(n, e), ref[0])
    assert svm_theta_alphas(0, np.zeros((0, 2), dtype=np.int64)).shape == (0,)


@pytest.mark.parametrize("rng, n_samples", [((2, 8), 50), ((1, 12), 30)])
def test_svm_theta_features_are_grakels_bit_for_bit(mutag, rand, rng, n_samples):
    # GraKeL's per-graph level vectors (its parse_input: same draws, np.sum per subset,
    # np.mean per size) against the bulk draws and sums; sizes up to 12 sum more than 8
    # values (NumPy's pairwise summation)
    for graphs in (mutag[:40], rand[:20]):
        ref = gk.SvmTheta(random_state=7, n_samples=n_samples, subsets_size_range=rng).fit(
            [[adjacency(d)] for d in graphs]).X
        f = SVMTheta(random_state=7, n_samples=n_samples, subsets_size_range=rng,
                     draws="grakel").features(graphs).numpy()
        assert np.array_equal(f, np.hstack(ref).T)


def test_svm_theta_keeps_libsvm_quiet(mutag, capfd):
    # a verbose OneClassSVM leaves libsvm's printing on; the direct calls turn it off
    from sklearn.svm import OneClassSVM
    OneClassSVM(kernel="precomputed", verbose=True).fit(np.eye(3) + 0.5)
    capfd.readouterr()
    SVMTheta(n_samples=5).features(mutag[:5])
    assert capfd.readouterr().out == ""


def test_svm_theta_graph_draws_are_a_random_state_per_graph(mutag):
    # draws="graph": graph by graph, RandomState([seed, n, crc32(edges)]).choice per subset
    # and GraKeL's α — written out here with NumPy's and GraKeL's own calls
    graphs = [bare(d) for d in mutag[:12]] + [graph(1, []), cycle(5)]
    lo, hi, S, seed = 2, 6, 15, 5
    f = SVMTheta(n_samples=S, subsets_size_range=(lo, hi), random_state=seed).features(graphs)
    assert np.array_equal(f.numpy(), graph_draws_reference(graphs, lo, hi, S, seed))


def test_svm_theta_grakel_default_metric_is_first_size(mutag):
    graphs = mutag[:30]
    ref = gk.SvmTheta(random_state=1).fit_transform([[adjacency(d)] for d in graphs])
    f = SVMTheta(random_state=1, draws="grakel").features(graphs).numpy()
    assert np.abs(np.outer(f[:, 0], f[:, 0]) - ref).max() == 0.0


# -- the paper's cone -----------------------------------------------------------------------

def test_exact_cone_is_the_qp():
    rng = np.random.default_rng(0)
    for k in (2, 3, 5, 8):
        U = rng.normal(size=(6, k)) + 1.5  # a cone of angle < 90°
        U /= np.linalg.norm(U, axis=0)
        res = minimize(lambda w: w @ w, U.mean(1), jac=lambda w: 2 * w, method="SLSQP",
                       constraints=[{"type": "ineq", "fun": lambda w: U.T @ w - 1,
                                     "jac": lambda w: U.T}], options={"ftol": 1e-14})
        assert abs(_exact_cone(U.T @ U) - res.fun) < 1e-8 * res.fun


def test_exact_cone_of_all_nodes_is_theta():
    # the optimal labelling with its handle attains θ: θ_V = θ(G) for the whole node set
    for g, want in ((cycle(5), math.sqrt(5)), (complete(4), 4.0), (cycle(6), 2.0)):
        f = LovaszTheta(n_samples=2, subsets_size_range=(g.num_nodes,) * 2,
                        cone="exact").features([g])
        assert abs(float(f[0, 0]) - want) < 1e-7


# -- as a torchkern kernel ------------------------------------------------------------------

def test_inputs_blocks_and_small_graphs(mutag):
    graphs = mutag[:10]
    k = SVMTheta(n_samples=20)
    K = k(graphs).to_dense()
    assert torch.equal(k(Batch.from_data_list(graphs)).to_dense(), K)
    assert torch.equal(k(GraphSet(graphs)).to_dense(), K)
    # draws="graph": a graph's features are its own, so k(X, Y) is a block of k(X ∪ Y)
    assert torch.allclose(k(graphs[:4], graphs[4:]).to_dense(), K[:4, 4:], rtol=1e-14)
    assert torch.equal(k.features(graphs[3:5]), k.features(graphs)[3:5])
    # draws="grakel": one stream for the set; k(X, Y) uses the features of k(X) and k(Y)
    kg = SVMTheta(n_samples=20, draws="grakel")
    fx, fy = kg.features(graphs[:4]), kg.features(graphs[4:])
    assert torch.allclose(kg(graphs[:4], graphs[4:]).to_dense(), fx @ fy.T, rtol=1e-14)
    assert not torch.equal(fy, kg.features(graphs)[4:])
    assert torch.allclose(k.diag(graphs), torch.diagonal(K), rtol=1e-14)
    # a graph smaller than the smallest subset size gets zero features (GraKeL fails)
    tiny = graph(1, [])
    assert not LovaszTheta(n_samples=5).features([tiny]).any()
    assert not SVMTheta(n_samples=5).features([tiny, cycle(5)])[0].any()
    kn = LovaszTheta(n_samples=10, normalize=True)([tiny, cycle(5)]).to_dense()
    assert kn[0].abs().sum() == 0 and abs(float(kn[1, 1]) - 1) < 1e-15


def test_base_kernel_and_grid_search(mutag):
    graphs = mutag[:30]
    y = torch.as_tensor([int(d.y) for d in graphs])
    rbf = tk.kernels.RBF(lengthscale=2.0)
    k = SVMTheta(n_samples=20, base_kernel=rbf, normalize=True)
    f = k.features(graphs)
    K = k(graphs).to_dense()
    assert torch.allclose(K, rbf(f).to_dense(), rtol=1e-12)
    c = clone(k).set_params(base_kernel__lengthscale=0.5, n_samples=10)
    assert c.n_samples == 10 and abs(c.base_kernel.lengthscale.item() - 0.5) < 1e-12
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    gs = GridSearchCV(tk.SVC(kernel=SVMTheta(n_samples=10)),
                      {"kernel__subsets_size_range": [(2, 4), (3, 8)]}, cv=cv).fit(graphs, y)
    assert gs.best_params_["kernel__subsets_size_range"] in [(2, 4), (3, 8)]


@pytest.mark.parametrize("make, match", [
    (lambda: LovaszTheta(n_samples=0), "n_samples must be"),
    (lambda: SVMTheta(n_samples=2.5), "n_samples must be"),
    (lambda: LovaszTheta(subsets_size_range=(3, 2)), "subsets_size_range must be"),
    (lambda: SVMTheta(subsets_size_range=(0, 2)), "subsets_size_range must be"),
    (lambda: SVMTheta(subsets_size_range=3), "subsets_size_range must be"),
    (lambda: LovaszTheta(random_state=1.5), "random_state must be"),
    (lambda: SVMTheta(random_state=-1), "random_state must be"),
    (lambda: SVMTheta(random_state=2 ** 32), "random_state must be"),  # numpy's range
    (lambda: LovaszTheta(random_state=2 ** 32, draws="grakel"), "random_state must be"),
    (lambda: LovaszTheta(cone="ball"), "cone must be"),
    (lambda: SVMTheta(draws="set"), "draws must be"),
    (lambda: SVMTheta(base_kernel=lambda x, y: x @ y), "base_kernel must be"),
])
def test_bad_arguments(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


@pytest.mark.parametrize("kw, match", [
    ({"tol": 0.0}, "tol must be"), ({"tol": -1e-9}, "tol must be"),
    ({"tol": float("nan")}, "tol must be"), ({"tol": float("inf")}, "tol must be"),
    ({"tol": "1e-9"}, "tol must be"), ({"tol": True}, "tol must be"),
    ({"max_iter": 0}, "max_iter must be"), ({"max_iter": 2.5}, "max_iter must be"),
    ({"max_iter": True}, "max_iter must be"), ({"max_iter": None}, "max_iter must be"),
])
def test_lovasz_sdp_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        sdp_args = _edge_pairs(GraphSet([cycle(5)]))
        lovasz_theta_sdp(sdp_args, **kw)


def test_lovasz_sdp_accepts_numpy_arguments():
    (theta, _), = lovasz_theta_sdp(_edge_pairs(GraphSet([cycle(5)])), tol=np.float64(1e-9),
                                   max_iter=np.int64(60))
    assert abs(theta - math.sqrt(5)) < 2e-8
