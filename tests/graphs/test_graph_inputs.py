"""What graph and node kernels accept, and what they refuse, before computing anything.

- one edge_index check for both families: a float edge_index is an error, not rounded;
- node kernels read ``data.weight`` (what ``torch_geometric.utils.from_networkx`` writes for
  a weighted networkx graph) as well as ``data.edge_weight``: checked against scipy's expm
  of networkx's weighted Laplacian;
- torch-geometric datasets, DataLoaders and lists of Batch objects are sets of graphs: the
  same values as the list of Data they hold;
- a graph too large for a kernel's dense per-graph tables is refused at once, with the size.
"""
import math
import time

import networkx as nx
import numpy as np
import pytest
import scipy.linalg
import torch
from sklearn.model_selection import cross_val_score
from torch_geometric.data import Batch, Data, InMemoryDataset
from torch_geometric.loader import DataLoader
from torch_geometric.utils import from_networkx

import torchkern as tk
from torchkern.stats import HSICTest
from torchkern.graphs import (CommuteTime, DiffusionKernel, GraphletSampling, PStepRandomWalk,
                              RandomWalk, RegularizedLaplacian, ShortestPath, WeisfeilerLehman)

GRAPH_KERNELS = [WeisfeilerLehman(2), WeisfeilerLehman(1, base="shortest_path"), ShortestPath(),
                 RandomWalk(0.05), RandomWalk(0.05, labeled=False), GraphletSampling(3, None),
                 GraphletSampling(4, 50, random_state=0)]
NODE_KERNELS = [DiffusionKernel(0.5), RegularizedLaplacian(1.0), PStepRandomWalk(2.0, 2),
                CommuteTime()]
GRAPH_IDS = ["wl", "wl_sp", "sp", "rw", "rw_unlabeled", "graphlets_all", "graphlets_sampled"]
EXPECTED = (r"edge_index must be an integer tensor of shape \(2, E\) with entries in "
            r"\[0, num_nodes\)")


# -- one edge_index check -------------------------------------------------------------------

FLOAT_EDGE = Data(edge_index=torch.tensor([[0., 1.7], [1.7, 0.]]), num_nodes=2)


@pytest.mark.parametrize("k", GRAPH_KERNELS, ids=GRAPH_IDS)
def test_graph_kernels_refuse_a_float_edge_index(k):
    with pytest.raises(TypeError, match=rf"X: graph 0: {EXPECTED}; got dtype torch.float32"):
        k([FLOAT_EDGE])
    good = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    # a bool edge_index among int64 ones (torch.cat would promote it silently)
    flags = Data(edge_index=torch.tensor([[False, True], [True, False]]), num_nodes=2)
    with pytest.raises(TypeError, match=rf"Y: graph 1: {EXPECTED}; got dtype torch.bool"):
        k([good], [good, flags])
    # the graphs of a Batch (collated by PyG, float edges stay float)
    with pytest.raises(TypeError, match=rf"X: the Batch: {EXPECTED}; got dtype torch.float32"):
        k(Batch.from_data_list([FLOAT_EDGE, FLOAT_EDGE]))
    with pytest.raises(ValueError, match=rf"X: graph 0: {EXPECTED}; got shape \(3, 1\)"):
        k([Data(edge_index=torch.zeros(3, 1, dtype=torch.long), num_nodes=2)])


@pytest.mark.parametrize("k", NODE_KERNELS, ids=lambda k: type(k).__name__)
def test_node_kernels_refuse_a_float_edge_index_with_the_same_message(k):
    with pytest.raises(TypeError, match=rf"X: {EXPECTED}; got dtype torch.float32"):
        k(FLOAT_EDGE)
    with pytest.raises(TypeError, match=rf"graph: {EXPECTED}; got dtype float64"):
        type(k)(graph=(np.array([[0., 1.], [1., 0.]]), 2))
    with pytest.raises(ValueError, match=rf"X: {EXPECTED}; got node id 2 in a graph with "
                                         rf"num_nodes=2"):
        k(Data(edge_index=torch.tensor([[0, 2], [2, 0]]), num_nodes=2))


# -- node kernels read from_networkx's weights -------------------------------------------

def _weighted_nx():
    """A connected weighted graph whose weights are exact in float32 (from_networkx stores
    them so), and a pendant path that makes the weights matter for every kernel."""
    G = nx.Graph()
    G.add_nodes_from(range(7))
    for (u, v), w in zip([(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (3, 4), (4, 5), (5, 6)],
                         [0.25, 2.5, 1.75, 0.5, 3.0, 1.25, 0.125, 2.0]):
        G.add_edge(u, v, weight=w)
    return G


def _laplacians(G):
    nodes = range(G.number_of_nodes())
    L = nx.laplacian_matrix(G, nodelist=nodes, weight="weight").toarray()
    Ln = nx.normalized_laplacian_matrix(G, nodelist=nodes, weight="weight").toarray()
    return L, Ln


def _dense(K):
    return K.to_dense().detach().numpy()


@pytest.mark.parametrize("method", ["dense", "krylov"])
def test_diffusion_on_from_networkx_equals_expm_of_the_weighted_laplacian(method):
    G = _weighted_nx()
    data = from_networkx(G)
    assert "weight" in data and "edge_weight" not in data  # what PyG writes
    L, _ = _laplacians(G)
    beta = 0.7
    ref = scipy.linalg.expm(-beta * L)
    unweighted = scipy.linalg.expm(-beta * nx.laplacian_matrix(G, weight=None).toarray())
    assert np.abs(ref - unweighted).max() > 0.1  # ignoring the weights would show
    K = _dense(DiffusionKernel(beta, method=method)(data))
    np.testing.assert_allclose(K, ref, rtol=0, atol=1e-9 if method == "krylov" else 1e-12)
    # through graph= and node indices too
    idx = [1, 4, 6]
    Kb = _dense(DiffusionKernel(beta, graph=data, method=method)(idx))
    np.testing.assert_allclose(Kb, ref[np.ix_(idx, idx)], rtol=0,
                               atol=1e-9 if method == "krylov" else 1e-12)


def test_other_node_kernels_read_weight_too():
    G = _weighted_nx()
    data = from_networkx(G)
    L, Ln = _laplacians(G)
    n = L.shape[0]
    np.testing.assert_allclose(_dense(RegularizedLaplacian(0.5)(data)),
                               np.linalg.inv(L + 0.5 * np.eye(n)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(_dense(CommuteTime()(data)), np.linalg.pinv(L),
                               rtol=0, atol=1e-12)
    M = 2.5 * np.eye(n) - Ln
    np.testing.assert_allclose(_dense(PStepRandomWalk(2.5, 3)(data)), M @ M @ M,
                               rtol=0, atol=1e-12)


def test_edge_weight_and_weight_together():
    G = _weighted_nx()
    data = from_networkx(G)
    L, _ = _laplacians(G)
    data.edge_weight = data.weight.clone()  # both, equal: fine
    np.testing.assert_allclose(_dense(DiffusionKernel(0.7)(data)),
                               scipy.linalg.expm(-0.7 * L), rtol=0, atol=1e-12)
    data.edge_weight = 2 * data.weight
    with pytest.raises(ValueError, match="X has both edge_weight and weight .* they differ"):
        DiffusionKernel(0.7)(data)
    with pytest.raises(ValueError, match="graph has both edge_weight and weight"):
        DiffusionKernel(0.7, graph=data)


def test_a_weight_that_is_not_per_edge_is_not_an_edge_weight():
    G = _weighted_nx()
    data = from_networkx(G)
    del data.weight
    data.weight = torch.rand(G.number_of_nodes())  # one per node, not per edge (7 != 16)
    ref = scipy.linalg.expm(-0.7 * nx.laplacian_matrix(G, weight=None).toarray())
    np.testing.assert_allclose(_dense(DiffusionKernel(0.7)(data)), ref, rtol=0, atol=1e-12)


# -- datasets, loaders and batches are sets of graphs -------------------------------------

class SmallGraphs(InMemoryDataset):
    """An InMemoryDataset built in a temporary folder from given Data objects (no
    download: process() saves them)."""

    def __init__(self, root, graphs):
        self._graphs = graphs
        super().__init__(root, log=False)
        self.load(self.processed_paths[0])

    @property
    def raw_file_names(self):
        return []

    @property
    def processed_file_names(self):
        return ["graphs.pt"]

    def process(self):
        self.save(self._graphs, self.processed_paths[0])


def _random_graphs(m, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(m):
        n = int(rng.integers(3, 9))
        e = rng.integers(0, n, (2, n + 2))
        e = e[:, e[0] != e[1]]
        ei = torch.tensor(np.concatenate([e, e[::-1]], 1))
        out.append(Data(edge_index=ei, x=torch.tensor(rng.integers(0, 3, (n, 1))),
                        num_nodes=n, y=torch.tensor([i % 2])))
    return out


@pytest.fixture(scope="module")
def graphs_and_dataset(tmp_path_factory):
    graphs = _random_graphs(22)
    return graphs, SmallGraphs(str(tmp_path_factory.mktemp("small_graphs")), graphs)


@pytest.mark.parametrize("k", GRAPH_KERNELS, ids=GRAPH_IDS)
def test_datasets_loaders_and_batches_give_the_values_of_the_list(k, graphs_and_dataset):
    graphs, ds = graphs_and_dataset
    ref = _dense(k(graphs))
    loader = DataLoader(ds, batch_size=5)  # 22 graphs: the last batch is short
    batches = list(loader)
    mixed = [batches[0], graphs[5], graphs[6], Batch.from_data_list(graphs[7:22])]
    for X in (ds, loader, batches, mixed, tuple(batches)):
        np.testing.assert_array_equal(_dense(k(X)), ref, err_msg=type(X).__name__)
    np.testing.assert_array_equal(_dense(k(ds[:6], loader)), _dense(k(graphs[:6], graphs)))
    np.testing.assert_array_equal(k.diag(loader).numpy(), k.diag(graphs).numpy())


def test_estimators_take_datasets_and_loaders(graphs_and_dataset):
    graphs, ds = graphs_and_dataset
    y = np.array([int(d.y) for d in graphs])
    k = WeisfeilerLehman(2, normalize=True)
    ref = np.asarray(tk.SVC(kernel=k).fit(graphs, y).decision_function(graphs))
    for X in (ds, DataLoader(ds, batch_size=4)):
        out = tk.SVC(kernel=k).fit(X, y).decision_function(X)
        # torch data in, torch out: a user's InMemoryDataset subclass like TUDataset
        assert isinstance(out, torch.Tensor), type(out)
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-12, atol=1e-12)
    ridge = np.asarray(tk.KernelRidge(kernel=k, alpha=0.1).fit(graphs, y.astype(float))
                       .predict(graphs[:7]))
    out = tk.KernelRidge(kernel=k, alpha=0.1).fit(DataLoader(ds, batch_size=3),
                                                    y.astype(float)).predict(ds[:7])
    np.testing.assert_allclose(np.asarray(out), ridge, rtol=1e-12, atol=1e-12)
    cv = np.asarray(cross_val_score(tk.SVC(kernel=k), ds, y, cv=3))
    np.testing.assert_array_equal(cv, cross_val_score(tk.SVC(kernel=k), graphs, y, cv=3))
    km = np.asarray(tk.KernelKMeans(k, 2, random_state=0).fit(graphs).labels_)
    loader = DataLoader(ds, batch_size=8)
    for X in (ds, loader):
        np.testing.assert_array_equal(
            np.asarray(tk.KernelKMeans(k, 2, random_state=0).fit(X).labels_), km)
    z = np.random.default_rng(0).normal(size=(len(graphs), 1))
    hsic = HSICTest(k, tk.RBF(), n_permutations=20, random_state=0)
    ref = hsic.test(graphs, z)
    out = hsic.test(loader, z)
    assert float(out.statistic) == float(ref.statistic) and out.p_value == ref.p_value


def test_a_shuffling_loader_is_refused(graphs_and_dataset):
    _, ds = graphs_and_dataset
    with pytest.raises(ValueError, match="X is a DataLoader that does not read its dataset in "
                                         "order .*RandomSampler.* shuffle=False"):
        WeisfeilerLehman(2)(DataLoader(ds, batch_size=4, shuffle=True))


def test_a_loader_that_drops_its_last_graphs_is_refused(graphs_and_dataset):
    graphs, ds = graphs_and_dataset  # 22 graphs
    with pytest.raises(ValueError, match=r"X is a DataLoader with drop_last=True, which leaves "
                                         r"out the last 2 of its 22 graphs \(batch_size=4\)"):
        WeisfeilerLehman(2)(DataLoader(ds, batch_size=4, drop_last=True))
    # nothing dropped where the batches divide the set: the list's values
    k = WeisfeilerLehman(2)
    np.testing.assert_array_equal(_dense(k(DataLoader(ds, batch_size=11, drop_last=True))),
                                  _dense(k(graphs)))


# -- too large: refused at once, with the size ----------------------------------------------

def _huge():
    # 10^7 nodes, three of them on a path: cheap to build, hopeless for dense tables
    return Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=10 ** 7)


@pytest.mark.parametrize("k, what, nbytes", [
    (ShortestPath(), r"ShortestPath on a graph of 10,000,000 nodes computes all hop distances "
                     r"by BFS on dense \(n, n\) tables", 14 * 10 ** 14),
    (WeisfeilerLehman(1, base="shortest_path"),
     r"WeisfeilerLehman\(base='shortest_path'\) on a graph of 10,000,000 nodes", 14 * 10 ** 14),
    (RandomWalk(0.1), r"RandomWalk on a graph of 10,000,000 nodes finds the spectral radius",
     8 * 10 ** 14),
    (RandomWalk(0.1, labeled=False), r"RandomWalk on a graph of 10,000,000 nodes", 8 * 10 ** 14),
    (GraphletSampling(4, None), r"GraphletSampling\(n_samples=None\) on a graph of 10,000,000 "
                                r"nodes enumerates its C\(n, 4\)",
     64 * math.comb(10 ** 7, 4) + 224 * 2 ** 20),  # (4k + 48)·C + (16k + 160)·2^20 rows
    (GraphletSampling(3, None), r"GraphletSampling\(k=3, n_samples=None\) on a graph of "
                                r"10,000,000 nodes counts its triangles on dense \(n, n\) tables",
     24 * 10 ** 14),
], ids=["sp", "wl_sp", "rw", "rw_unlabeled", "graphlets", "graphlets_k3"])
def test_a_ten_million_node_graph_is_refused_at_once(k, what, nbytes):
    small = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    t = time.perf_counter()
    with pytest.raises(ValueError, match=rf"^Y: {what}.* needs at least {nbytes:,} bytes "
                                         rf"\(.*\), more than the [\d,]+ bytes"):
        k([small], [_huge()])
    with pytest.raises(ValueError, match=rf"^X: {what}"):
        k([_huge(), small])
    assert time.perf_counter() - t < 10  # before any per-node work (power steps took 26 s)


def test_sampled_graphlets_still_run_on_a_ten_million_node_graph():
    # sampling needs no table of all subsets: 3 sampled nodes of 10^7 almost never touch
    # the 3-node path, so all samples are the empty graphlet (class 0)
    phi = GraphletSampling(3, 50, random_state=0).features([_huge()])
    np.testing.assert_array_equal(phi.numpy(), [[1.0, 0.0, 0.0, 0.0]])


def test_sizes_beyond_a_petabyte_are_written_in_petabytes():
    # 64 C(10^7, 4) (+ the lookup's rows) = 2.67e28 bytes is 2.67e+13 PB (24 C(10^7, 3)
    # was written 4e+03 PB instead of 4e+06 PB: one division too many)
    with pytest.raises(ValueError, match=r"bytes \(2\.67e\+13 PB\), more than"):
        GraphletSampling(4, None)([_huge()])
    with pytest.raises(ValueError, match=r"bytes \(1\.4 PB\), more than"):
        ShortestPath()([_huge()])
