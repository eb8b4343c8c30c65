"""Every graph kernel of ``torchkern.graphs``, one small configuration each, through every
input form, the cross Gram, ``normalize``, the estimators and GridSearchCV.

For each kernel class in ``torchkern.graphs.__all__`` that is a graph kernel (a
``GraphKernel``): the Gram of a list of ``Data`` equals the Gram of a ``Batch``, a
``GraphSet`` and a TUDataset-like ``InMemoryDataset`` of the same graphs; the blocks of
k(X, Y) and k(Y, X) equal those of k(X ∪ Y); ``normalize=True`` gives
K_ij / sqrt(K_ii K_jj) of the unnormalized Gram (unit diagonal); torchkern's SVC,
KernelRidge and KernelPCA on the graphs give what they give on the precomputed dense Gram;
scikit-learn's GridSearchCV over one argument of the kernel scores each value as the
precomputed Gram of that value does; on CUDA (where present) the values are the CPU's.
A kernel class with no entry in ``CONFIGS`` fails ``test_every_graph_kernel_is_swept``.
"""
import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV, KFold
from torch_geometric.data import Batch, Data

import torchkern as tk
import torchkern.graphs as tg
from tests._devices import dev, requires_device  # noqa: F401 (fixture)
from tests._invariants import assert_close_up_to_sign
from tests.graphs.test_graph_inputs import SmallGraphs
from torchkern.graphs import GraphSet
from torchkern.graphs._batch import GraphKernel

# class name: (defaults, GridSearchCV grid over one kernel argument); the kernel is
# make(name, **kw): the class with the defaults updated by kw
CONFIGS = {
    "WeisfeilerLehman": (dict(n_iter=2), {"n_iter": [1, 2]}),
    "ShortestPath": ({}, {"with_labels": [True, False]}),
    "RandomWalk": (dict(lam=0.05), {"lam": [0.01, 0.05]}),
    "GraphletSampling": (dict(k=3, n_samples=None), {"k": [3, 5]}),
    "NeighborhoodHash": (dict(R=2, random_state=0), {"R": [1, 2]}),
    "PyramidMatch": (dict(L=3, d=3), {"L": [2, 3]}),
    "CoreFramework": (dict(base_kernel=tg.WeisfeilerLehman(1)), {"min_core": [-1, 1]}),
    "NeighborhoodSubgraphPairwiseDistance": (dict(r=1, d=2), {"r": [0, 1]}),
    "ODDSTh": (dict(h=2), {"h": [1, 2]}),
    "VertexHistogram": ({}, {"normalize": [False, True]}),
    "EdgeHistogram": ({}, {"normalize": [False, True]}),
    "WeisfeilerLehmanOptimalAssignment": (dict(n_iter=2), {"n_iter": [1, 2]}),
    "GraphHopper": ({}, {"kernel_type": ["linear", "gaussian"]}),
    "Propagation": (dict(t_max=2, random_state=0), {"t_max": [1, 2]}),
    "PropagationAttr": (dict(t_max=2, random_state=0), {"t_max": [1, 2]}),
    "HadamardCode": (dict(n_iter=2), {"n_iter": [1, 2]}),
    "SubgraphMatching": (dict(k=3, edge_labels=True), {"k": [2, 3]}),
    "LovaszTheta": (dict(n_samples=5, subsets_size_range=(2, 4), cone="exact", random_state=0),
                    {"random_state": [0, 1]}),
    "SVMTheta": (dict(n_samples=5, subsets_size_range=(2, 4), random_state=0),
                 {"random_state": [0, 1]}),
    "MultiscaleLaplacian": (dict(L=2, n_samples=10, P=3, random_state=0), {"L": [1, 2]}),
}
NAMES = sorted(CONFIGS)
CONSISTENT = NAMES
# relative agreement of a graph's values computed in different sets: exact arithmetic up
# to rounding for every kernel (Lovász-θ's SDPs, batched over the graphs of a call, are
# solved at padded sizes so that a graph's arithmetic is the same in any batch)
RTOL = {}


def make(name, **kw):
    return getattr(tg, name)(**{**CONFIGS[name][0], **kw})


def graph_kernel_classes():
    return sorted(n for n in tg.__all__
                  if isinstance(getattr(tg, n), type) and issubclass(getattr(tg, n), GraphKernel))


def small_graphs(m=10, seed=0):
    """``m`` connected graphs of 4–8 nodes (a path plus random chords), one-hot node labels
    from 3 (every label in each half of the list), one-hot bond labels from 2 per
    undirected edge, 2-dim normal ``node_attributes``, class y = i mod 2."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(m):
        n = int(rng.integers(4, 9))
        A = np.triu(rng.random((n, n)) < 0.3, 1)
        A[np.arange(n - 1), np.arange(1, n)] = True
        bond = np.triu(rng.integers(0, 2, (n, n)), 1)
        bond = bond + bond.T
        s, t = np.nonzero(A | A.T)
        lab = rng.integers(0, 3, n)
        lab[:3] = [0, 1, 2] if i in (0, m // 2) else lab[:3]
        out.append(Data(x=torch.nn.functional.one_hot(torch.as_tensor(lab), 3).float(),
                        edge_index=torch.as_tensor(np.stack([s, t])),
                        edge_attr=torch.nn.functional.one_hot(torch.as_tensor(bond[s, t]),
                                                              2).float(),
                        node_attributes=torch.as_tensor(rng.normal(size=(n, 2))),
                        y=torch.tensor([i % 2]), num_nodes=n))
    return out


SmallDataset = SmallGraphs  # a TUDataset-like InMemoryDataset in a temporary folder


@pytest.fixture(scope="module")
def graphs():
    return small_graphs()


@pytest.fixture(scope="module")
def dataset(graphs, tmp_path_factory):
    return SmallDataset(str(tmp_path_factory.mktemp("sweep")), graphs)


def dense(K):
    return K.to_dense().numpy()


def test_every_graph_kernel_is_swept():
    missing = sorted(set(graph_kernel_classes()) - set(CONFIGS))
    assert not missing, f"graph kernels without a sweep configuration: {missing}"


@pytest.mark.parametrize("name", NAMES)
def test_input_forms_and_normalize(name, graphs, dataset):
    k = make(name)
    ref = dense(k(graphs))
    for X in (Batch.from_data_list(graphs), GraphSet(graphs), dataset):
        np.testing.assert_array_equal(dense(k(X)), ref)
    d = np.sqrt(np.diag(ref))
    assert (d > 0).all()
    N = dense(make(name, normalize=True)(graphs))
    np.testing.assert_allclose(N, ref / np.outer(d, d), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.diag(N), 1.0, rtol=1e-12)


@pytest.mark.parametrize("name", CONSISTENT)
def test_cross_gram_is_a_block_of_the_joint_gram(name, graphs):
    # one instance per call sequence: a fitted kernel (MultiscaleLaplacian) keeps the
    # basis of k(X ∪ Y) for k(X, Y), as the estimators use it (fit, then predict)
    k, rtol = make(name), RTOL.get(name, 1e-12)
    ref = dense(k(graphs))
    X, Y = graphs[:6], graphs[6:]
    np.testing.assert_allclose(dense(k(X, Y)), ref[:6, 6:], rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(dense(k(Y, X)), ref[6:, :6], rtol=rtol, atol=1e-12)
    kn = make(name, normalize=True)
    N = dense(kn(graphs))
    np.testing.assert_allclose(dense(kn(X, Y)), N[:6, 6:], rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("name", CONSISTENT)
def test_estimators_equal_the_precomputed_gram(name, graphs):
    k = make(name, normalize=True)
    y = np.array([int(d.y) for d in graphs])
    train, test = graphs[:7], graphs[7:]
    K, Kt = k(train).to_dense(), k(test, train).to_dense()
    svc = tk.SVC(kernel=k, C=10.0).fit(train, y[:7])
    ref = tk.SVC(kernel="precomputed", C=10.0).fit(K, y[:7])
    rtol = max(RTOL.get(name, 1e-10), 1e-10)
    np.testing.assert_allclose(np.asarray(svc.decision_function(test)),
                               np.asarray(ref.decision_function(Kt)), rtol=rtol, atol=1e-10)
    yt = torch.as_tensor(2.0 * y[:7] - 1)
    kr = tk.KernelRidge(kernel=k, alpha=0.1, solver="cholesky").fit(train, yt)
    ref = tk.KernelRidge(kernel="precomputed", alpha=0.1, solver="cholesky").fit(K, yt)
    np.testing.assert_allclose(kr.predict(test).numpy(), ref.predict(Kt).numpy(),
                               rtol=rtol, atol=1e-12)
    pca = tk.KernelPCA(kernel=k, n_components=2, eigen_solver="dense").fit(train)
    ref = tk.KernelPCA(kernel="precomputed", n_components=2, eigen_solver="dense").fit(K)
    assert_close_up_to_sign(pca.transform(test).numpy(), ref.transform(Kt).numpy(),
                            rtol=max(rtol, 1e-8), atol=1e-10)


@pytest.mark.parametrize("name", NAMES)
def test_grid_search_over_a_kernel_argument(name, graphs):
    (arg, values), = CONFIGS[name][1].items()
    y = np.array([int(d.y) for d in graphs])
    cv = KFold(2, shuffle=True, random_state=0)
    gs = GridSearchCV(tk.SVC(kernel=make(name, normalize=True), C=10.0),
                      {f"kernel__{arg}": values}, cv=cv).fit(graphs, y)
    for v, score in zip(values, gs.cv_results_["mean_test_score"]):
        # the precomputed Grams of each fold: k(train), k(test, train) (a fitted kernel
        # fits on the training fold, as in the search)
        folds = []
        for tr, te in cv.split(graphs):
            k = make(name, **{"normalize": True, arg: v})
            Xtr, Xte = [graphs[i] for i in tr], [graphs[i] for i in te]
            Ktr, Kte = k(Xtr).to_dense(), k(Xte, Xtr).to_dense()
            folds.append(tk.SVC(kernel="precomputed", C=10.0).fit(Ktr, y[tr]).score(Kte, y[te]))
        assert score == np.mean(folds), (arg, v)


@requires_device
@pytest.mark.parametrize("name", NAMES)
def test_on_device(dev, name, graphs):
    k = make(name)
    ref = dense(k(graphs[:4], graphs))
    X = k.check_input(graphs).to(device=dev)
    K = k(X[:4], X)
    assert K.device.type == dev.type
    np.testing.assert_allclose(K.to_dense().cpu().numpy(), ref, rtol=1e-12, atol=1e-12)
