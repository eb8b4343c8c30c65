"""Bad inputs of the graph kernels that an audit of the 24 kernels of bench/graphs.py's
registry found unchecked: each gets a clear error naming the argument (or, for a valid
input that gave wrong values, the right values against an independent reference).

- GraphHopper on directed graphs: its M_v weight matrices against a brute-force
  enumeration of every shortest path (a directed cycle raised an IndexError, other
  directed graphs gave wrong values silently).
- RandomWalk: ``tol`` outside (0, 1) (``tol >= 1`` gave a zero Gram) and a ``lam`` that
  is not a real number.
- NeighborhoodHash: a code table too large for memory (``bits=56``; a label number 2^62,
  a hang or NumPy's MemoryError before, is now coded by hashing).
- GraphSet: graphs whose ``x`` differ in width or dimension, or are not tensors.
- CoreFramework: directed graphs (the peeling had no definition there).
"""
import functools
import re
from collections import deque

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from torchkern.graphs import (CoreFramework, GraphHopper, GraphSet, NeighborhoodHash,
                              RandomWalk, ShortestPath, WeisfeilerLehman)


# -- GraphHopper on directed graphs ----------------------------------------------------

def _hopper_brute(n, edges, width):
    """M[v, a, b]: the number of shortest paths (any source, any target, one-node paths
    included) with b edges whose node at position a is v — every shortest path listed
    by a depth-first walk down each source's BFS DAG (edges s → t as given)."""
    out = [sorted({t for s, t in edges if s == v and t != v}) for v in range(n)]
    M = np.zeros((n, width, width))
    for src in range(n):
        dist = [-1] * n
        dist[src] = 0
        q = deque([src])
        while q:
            v = q.popleft()
            for u in out[v]:
                if dist[u] < 0:
                    dist[u] = dist[v] + 1
                    q.append(u)
        stack = [[src]]
        while stack:
            path = stack.pop()
            for a, v in enumerate(path):
                M[v, a, len(path) - 1] += 1
            stack.extend(path + [u] for u in out[path[-1]] if dist[u] == dist[path[-1]] + 1)
    return M


def _hopper_linear_brute(graphs):
    """GraphHopper's linear kernel Σ_{v, v'} ⟨M_v, M_v'⟩ ⟨a_v, a_v'⟩ (Feragen et al.,
    2013), each M padded to the widest graph."""
    w = max(g.num_nodes for g in graphs) + 1
    phi = []
    for g in graphs:
        M = _hopper_brute(g.num_nodes, g.edge_index.T.tolist(), w)
        a = g.node_attributes.double().numpy()
        phi.append(np.einsum("vab,vd->abd", M, a).ravel())
    phi = np.array(phi)
    return phi @ phi.T


def _digraph(n, edges, seed):
    g = torch.Generator().manual_seed(seed)
    return Data(edge_index=torch.tensor(edges, dtype=torch.long).T.reshape(2, -1),
                node_attributes=torch.randn(n, 2, generator=g, dtype=torch.float64),
                num_nodes=n)


def test_graphhopper_directed_graphs_equal_a_brute_force_path_enumeration():
    rng = np.random.default_rng(0)
    graphs = [
        _digraph(3, [(0, 1), (1, 2), (2, 0)], 0),  # a directed cycle: was an IndexError
        # s → u, s → x → y → v → u: the edge v → u has d(s, u) = d(s, v) − 2
        _digraph(5, [(0, 1), (0, 2), (2, 3), (3, 4), (4, 1)], 1),
        _digraph(4, [(0, 1), (1, 0), (1, 2), (2, 3), (3, 3)], 2),  # a self-loop
        _digraph(4, [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)], 3),  # undirected
    ]
    for seed, n in enumerate((5, 6, 7)):
        A = rng.random((n, n)) < 0.35
        np.fill_diagonal(A, False)
        graphs.append(_digraph(n, np.argwhere(A).tolist(), 10 + seed))
    K = GraphHopper()(graphs).to_dense().numpy()
    R = _hopper_linear_brute(graphs)
    np.testing.assert_allclose(K, R, rtol=1e-12, atol=1e-12 * np.abs(R).max())
    # the directed graphs of X against Y: the blocks of the whole Gram
    K = GraphHopper()(graphs[:3], graphs[3:]).to_dense().numpy()
    np.testing.assert_allclose(K, R[:3, 3:], rtol=1e-12, atol=1e-12 * np.abs(R).max())


# -- RandomWalk hyperparameters ---------------------------------------------------------

@pytest.mark.parametrize("tol", [1.0, 2.5, float("inf"), float("nan"), 0.0, -1e-9, True,
                                 "1e-9"])
def test_random_walk_refuses_tol_outside_zero_one_by_name(tol):
    with pytest.raises(ValueError, match=r"tol must be a real number in \(0, 1\)"):
        RandomWalk(0.01, tol=tol)


@pytest.mark.parametrize("lam", ["0.01", True, None, 0.01j])
def test_random_walk_refuses_a_lam_that_is_not_a_real_number(lam):
    with pytest.raises(TypeError, match="lam must be a real number"):
        RandomWalk(lam)


def _cycles(sizes=(4, 5, 6)):
    out = []
    for n in sizes:
        s = torch.arange(n)
        t = (s + 1) % n
        out.append(Data(x=(s % 3).unsqueeze(-1), num_nodes=n,
                        edge_index=torch.stack([torch.cat([s, t]), torch.cat([t, s])])))
    return out


def test_random_walk_takes_a_real_lam_of_any_numeric_type():
    """A NumPy float and a 0-d tensor are the same λ as the Python float."""
    K = RandomWalk(0.01, labeled=False)(_cycles()).to_dense()
    for lam in (np.float64(0.01), torch.tensor(0.01, dtype=torch.float64)):
        torch.testing.assert_close(RandomWalk(lam, labeled=False)(_cycles()).to_dense(), K,
                                   rtol=0, atol=0)


# -- NeighborhoodHash code table --------------------------------------------------------

def test_neighborhood_hash_refuses_a_code_table_too_large_by_name():
    with pytest.raises(ValueError, match="NeighborhoodHash with bits=56 .* needs at least"):
        NeighborhoodHash(bits=56, random_state=0)(_cycles())
    # a label number past 2^16 is coded by hashing, with no table up to it (2^62 was a
    # hang in the draws, then a refusal): the same code whatever the set holds
    graphs = _cycles()
    graphs[0].x = torch.tensor([[0], [2 ** 62], [1], [2]])
    k = NeighborhoodHash(random_state=0)
    K, both = k(graphs).to_dense(), k(graphs[1:] + graphs).to_dense()
    torch.testing.assert_close(K, both[2:, 2:], rtol=0, atol=0)
    assert float(K[0, 1]) < 1.0  # the label 2^62 is not one of the others


# -- GraphSet: x of different shapes ----------------------------------------------------

@pytest.mark.parametrize("bad", [torch.zeros(4, 2, dtype=torch.long),
                                 torch.zeros(4, 1, 1, dtype=torch.long)])
def test_graph_set_refuses_x_of_different_widths_or_dimensions_by_name(bad):
    graphs = _cycles()
    graphs[0].x = bad
    with pytest.raises(ValueError, match="X: every graph's x must have shape "
                                         r"\(num_nodes, d\) with one d"):
        WeisfeilerLehman(2)(graphs)
    with pytest.raises(ValueError, match="x must have shape"):
        GraphSet(graphs)


def test_graph_set_refuses_an_x_that_is_not_a_tensor_by_name():
    graphs = _cycles()
    graphs[0].x = np.array([["a"], ["b"], ["a"], ["c"]], dtype=object)
    with pytest.raises(TypeError, match=r"X: x must be a tensor in every graph \(graph 0 "
                                        "has a ndarray\\)"):
        ShortestPath()(graphs)


def test_graph_set_refuses_edge_attr_of_different_widths_or_not_a_tensor_by_name():
    graphs = _cycles()
    for g in graphs:
        g.edge_attr = torch.zeros(g.edge_index.shape[1], 1, dtype=torch.long)
    graphs[1].edge_attr = torch.zeros(graphs[1].edge_index.shape[1], 2, dtype=torch.long)
    with pytest.raises(ValueError, match="X: every graph's edge_attr must have shape "
                                         r"\(E, d\) with one d"):
        WeisfeilerLehman(2, edge_labels=True)(graphs)
    graphs[1].edge_attr = np.zeros((graphs[1].edge_index.shape[1], 1))
    with pytest.raises(TypeError, match=r"X: edge_attr must be a tensor in every graph "
                                        r"\(graph 1 has a ndarray\)"):
        WeisfeilerLehman(2, edge_labels=True)(graphs)


# -- CoreFramework on directed graphs ---------------------------------------------------

def test_core_framework_refuses_directed_graphs_by_name():
    graphs = _cycles()
    Y = [Data(x=g.x, edge_index=g.edge_index[:, :g.num_nodes], num_nodes=g.num_nodes)
         for g in graphs]  # one direction of every edge
    k = CoreFramework(WeisfeilerLehman(2))
    k(graphs)  # undirected: fine
    with pytest.raises(ValueError, match="X: CoreFramework needs undirected graphs"):
        k(Y)
    with pytest.raises(ValueError, match="Y: CoreFramework needs undirected graphs"):
        k(graphs, Y)


@pytest.mark.filterwarnings("ignore::torchkern.linalg._common.ConvergenceWarning")
@pytest.mark.parametrize("kw", [dict(lam=1e300, p=50), dict(lam=1e300, p=50, labeled=False),
                                dict(lam=1e300, kind="exponential", p=3),
                                dict(lam=1e3, kind="exponential"),
                                dict(lam=1e3, kind="exponential", labeled=False)])
def test_random_walk_refuses_a_series_that_overflows_by_lam(kw):
    """These gave inf/NaN entries silently."""
    lam = re.escape(f"lam={kw['lam']:g}: the ")
    with pytest.raises(ValueError, match=lam + ".* overflows float64"):
        RandomWalk(**kw)(_cycles()).to_dense()
    with pytest.raises(ValueError, match="overflows float64"):
        RandomWalk(**kw, normalize=True)(_cycles()).to_dense()


# -- GraphletSampling: samples past memory ----------------------------------------------

def test_graphlet_sampling_refuses_more_samples_than_memory_by_name():
    """Was torch's allocator RuntimeError."""
    from torchkern.graphs import GraphletSampling
    with pytest.raises(ValueError, match=re.escape(
            "X: GraphletSampling(n_samples=1,000,000,000,000,000) draws 3 float64 uniforms")):
        GraphletSampling(k=3, n_samples=10 ** 15, random_state=0)(_cycles())


# -- flags that read any truthy value as True -------------------------------------------

@pytest.mark.parametrize("make, arg", [
    (lambda v: ShortestPath(with_labels=v), "with_labels"),
    (lambda v: RandomWalk(0.01, labeled=v), "labeled")])
def test_flags_refuse_non_bools_by_name(make, arg):
    for v in ("False", "no", 0, None):  # "False" and "no" were read as True
        with pytest.raises(TypeError, match=f"{arg} must be a bool, got {v!r}"):
            make(v)
    K = make(False)(_cycles()).to_dense()  # a NumPy bool is a bool
    torch.testing.assert_close(make(np.bool_(False))(_cycles()).to_dense(), K, rtol=0, atol=0)


@pytest.mark.parametrize("bad", ["False", "no", 0, 1, -1, float("nan"), None])
def test_normalize_must_be_a_bool_everywhere(bad):
    """``normalize="False"`` (and -1, NaN, ...) read as True through bool(): every
    structured kernel with a normalize flag refuses a non-bool by name."""
    from torchkern.graphs import __all__ as graph_names
    from torchkern import graphs, sequences
    import inspect
    kernels = [getattr(graphs, n) for n in graph_names] + [
        getattr(sequences, n) for n in sequences.__all__]
    checked = 0
    for cls in kernels:
        if not inspect.isclass(cls) or "normalize" not in inspect.signature(cls).parameters:
            continue
        given = {"base_kernel": graphs.WeisfeilerLehman(1), "lam": 0.01}
        required = {p.name: given[p.name] for p in inspect.signature(cls).parameters.values()
                    if p.default is inspect.Parameter.empty}
        cls = functools.partial(cls, **required)
        with pytest.raises(TypeError, match="normalize must be a bool"):
            cls(normalize=bad)
        assert cls(normalize=np.bool_(True)).normalize is True
        checked += 1
    assert checked >= 20
