"""Benchmark: every torchkern graph kernel against its GraKeL 0.1.11 twin — seconds per
Gram, ratio, max difference — in one run and one table.

    python bench/graphs.py                          # every kernel, every set (long: see below)
    python bench/graphs.py --kernels WL,SP,NH --sets MUTAG,ER1000x20
    python bench/graphs.py --part-a                 # the part-A kernels (VH, EH, WLOA, ...)
    python bench/graphs.py --part-b                 # the part-B kernels (NH, PM, CORE, ...)
    python bench/graphs.py --sizes 100x20,2000x50   # other Erdős–Rényi sets
    python bench/graphs.py --sizes 1000x40:wl+sp --no-mutag --busy-rows  # kernels per set;
                                                    # rows also beside one busy loop
    python bench/graphs.py --clock wall --threads 2 # wall time, 2 torch / BLAS threads
    python bench/graphs.py --list                   # the registry

Data: MUTAG (188 molecules) and Cuneiform (267 graphs, two-column node labels, 3-dim node
attributes, edge labels), both from the installed GraKeL's tests/data, and Erdős–Rényi sets
"GxN": G graphs with n ~ uniform[N/2, 3N/2] nodes, average degree 4 (p = 4/(n − 1)),
5 node labels (one-hot ``x``), seeded, plus a path 0 − 1 − … − n−1 (connected: GraKeL's
GraphHopper fails on isolated nodes), 3 bond labels (one-hot ``edge_attr``) and 3-dim
standard normal ``node_attributes``. Label kernels run on MUTAG, Cuneiform and the ER sets,
attribute kernels on Cuneiform and the ER sets.

Each kernel is one entry of ``REGISTRY`` (:class:`Spec`): the torchkern kernel, GraKeL's,
the input GraKeL gets, how the values compare, and where GraKeL (or torchkern) runs on a
subset. Adding a kernel is one entry.

Times are one Gram matrix K(X, X) from each library's own input format to a dense matrix:
torchkern from the list of PyG ``Data`` (GraphSet conversion included) to a NumPy array;
GraKeL's ``fit_transform`` from [edge set or adjacency, node label / attribute dict,
edge label dict] lists (its conversion to ``Graph`` objects included). Building either
input from the data is not timed, and both get one small untimed call first (lazy
imports, caches). Best of three runs when a run takes under 2 s, else one run. The clock
(``--clock``) is by default the process CPU time (``time.process_time``) with one torch
thread and one BLAS thread (threadpoolctl) for both libraries, so that other users of a
shared machine do not distort the figures; ``--clock wall`` takes ``time.perf_counter``.
``load`` is ``os.getloadavg()`` (1, 5, 15 min) after the row.

Where GraKeL would take hours it runs on the first ``S`` graphs of the set and its time is
extrapolated to the whole set by the number of pairs (S(S+1)/2 → G(G+1)/2; kernels whose
GraKeL cost is per pair: random walk, GraphHopper, WLOA) or by the number of graphs (per-graph
cost: core framework, NSPDK, ODD): the GraKeL time and the ratio are marked "~", ``diff`` is
on those S graphs. Where torchkern itself is capped (GraphHopper's Gaussian node kernel
compares every node pair: O(N²δ²)), both run on the first S graphs and the row says
"[first S]". "n/a": not run (GraKeL's random walk on 200-node graphs inverts a 40,000² matrix
per pair).

``diff``: max |K − K_GraKeL| (integer kernels: 0 expected), max |K/K_GraKeL − 1| ("rel":
random walk, GraphHopper), or the kernel's own comparison where the two are different
kernels by design (see each entry's note: RWL, PM, NSPDK, ODD).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import warnings
from typing import Callable

# every thread pool of the process -- torch's, NumPy's and SciPy's OpenBLAS, scikit-learn's
# OpenMP, cvxopt's BLAS, including those loaded later -- at ``--threads`` (default 1)
# before any of them is loaded: threadpool_limits only reaches the libraries loaded when
# it is called
_THREADS = (sys.argv[sys.argv.index("--threads") + 1]
            if "--threads" in sys.argv[:-1] else "1")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _THREADS

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import conditions, device_name, table  # noqa: E402


# -- data -------------------------------------------------------------------------------------

def erdos_renyi(n_graphs, n_avg, seed=0, degree=4.0, n_labels=5):
    """``n_graphs`` Erdős–Rényi graphs of n ~ uniform[n_avg/2, 3 n_avg/2] nodes, average
    degree ``degree``, one-hot labels from ``n_labels`` (isolated nodes possible)."""
    import torch
    from torch_geometric.data import Data
    rng = np.random.default_rng(seed)
    out = []
    for n in rng.integers(max(2, n_avg // 2), 3 * n_avg // 2 + 1, n_graphs):
        iu = np.triu_indices(n, 1)
        keep = rng.random(len(iu[0])) < degree / (n - 1)
        s, t = iu[0][keep], iu[1][keep]
        ei = torch.as_tensor(np.stack([np.r_[s, t], np.r_[t, s]]))
        x = torch.nn.functional.one_hot(torch.as_tensor(rng.integers(0, n_labels, n)), n_labels)
        out.append(Data(x=x.float(), edge_index=ei, num_nodes=int(n)))
    return out


def with_extras(graphs, seed, dim=3, n_bond=3, connect=True):
    """Copies of ER graphs with, seeded: a path 0 - 1 - ... - n−1 added (``connect``),
    bond labels (one-hot ``edge_attr``, one per undirected edge) and ``dim`` standard
    normal ``node_attributes``."""
    import torch
    from torch_geometric.data import Data
    rng = np.random.default_rng(seed)
    out = []
    for d in graphs:
        n = d.num_nodes
        A = np.zeros((n, n), dtype=bool)
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = True
        if connect:
            A[np.arange(n - 1), np.arange(1, n)] = A[np.arange(1, n), np.arange(n - 1)] = True
        bond = np.triu(rng.integers(0, n_bond, (n, n)), 1)
        bond = bond + bond.T
        s, t = np.nonzero(A)
        out.append(Data(x=d.x, edge_index=torch.as_tensor(np.stack([s, t])),
                        edge_attr=torch.nn.functional.one_hot(
                            torch.as_tensor(bond[s, t]), n_bond).float(),
                        node_attributes=torch.as_tensor(rng.normal(size=(n, dim))),
                        num_nodes=n))
    return out


def grakel_input(graphs, form="adj", labels="numbers", edge_labels=False, attributes=False):
    """GraKeL's input, one list per graph: [edge set (``form="edges"``) or dense adjacency
    (``"adj"``: GraKeL drops the isolated nodes of an edge set), node labels (a dict; with
    ``attributes`` the ``node_attributes`` rows instead), edge labels (``edge_labels``: the
    argmax of ``edge_attr``)]. Node labels are ``labels="numbers"``: torchkern's
    ``label_numbers`` (the column of a one-hot row, the value of one integer column,
    else a number of the row itself: what the hashing kernels hash), or ``"ids"``: GraphSet's label ids (sorted label rows: what
    Propagation's seeded draws follow)."""
    import torch
    from torchkern.graphs import GraphSet
    from torchkern.graphs._labels import initial_labels
    from torchkern.graphs.neighborhood_hash import label_numbers
    G = GraphSet(graphs)
    lab = label_numbers(G) if labels == "numbers" else initial_labels(G)[0]
    lab = torch.split(lab, G.num_nodes.tolist())
    out = []
    for d, ell in zip(graphs, lab):
        ei = d.edge_index.t().tolist()
        if form == "edges":
            first = {tuple(e) for e in ei}
        else:
            first = np.zeros((d.num_nodes, d.num_nodes))
            first[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        nodes = (dict(enumerate(d.node_attributes.double().numpy())) if attributes
                 else dict(enumerate(ell.tolist())))
        g = [first, nodes]
        if edge_labels:
            ea = getattr(d, "edge_attr", None)
            el = ea.argmax(1).tolist() if ea is not None else [0] * len(ei)
            g.append(dict(zip(map(tuple, ei), el)))
        out.append(g)
    return out


# -- comparisons ------------------------------------------------------------------------------

def _exact(K, Kg, graphs, spec):
    return f"{np.abs(K - Kg).max():.1e}"


def _rel(K, Kg, graphs, spec):
    return f"{np.abs(K / Kg - 1).max():.1e} rel"


def _rel_max(K, Kg, graphs, spec):
    return f"{np.abs(K - Kg).max() / np.abs(Kg).max():.1e} rel"


def _rwl(K, Kg, graphs, spec):
    """GraKeL's RandomWalkLabeled also counts one length-0 walk per pair of differently
    labelled nodes: n₁n₂ minus the label-matched pairs, added to torchkern's values."""
    from torchkern.graphs import GraphSet
    from torchkern.graphs._labels import initial_labels
    G = GraphSet(graphs)
    lab = [t.numpy() for t in torch_split(initial_labels(G)[0], G.num_nodes.tolist())]
    un = np.array([[a.size * b.size - (a[:, None] == b[None, :]).sum() for b in lab]
                   for a in lab])
    return _rel(K + un, Kg, graphs, spec)


def torch_split(t, sizes):
    import torch
    return torch.split(t, sizes)


def _share(K, Kg, graphs, spec):
    """Max difference and the share of entries that differ (PM: graphs with a repeated
    eigenvalue or a coordinate on a bin edge differ, any eigenbasis being an answer;
    NSPDK: GraKeL's encoding depends on the node numbering)."""
    D = np.abs(K - Kg)
    return f"{D.max():.1e} ({100 * (D > 1e-9 * max(1.0, np.abs(Kg).max())).mean():.1f}% of entries)"


def _pm_unique(g, d=6, L=4, tol=1e-6):
    """Whether a graph's pyramid-match embedding is unique and stable as GraKeL computes
    it: the d selected eigenvalues simple, no tie in modulus at the d-th, no coordinate
    within ``tol`` of a bin edge of the finest level (elsewhere any orthonormal
    eigenbasis, or either side of an edge, is a valid answer)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.linalg import eigs
    n = g.num_nodes
    A = np.zeros((n, n))
    A[g.edge_index[0].numpy(), g.edge_index[1].numpy()] = 1
    lam = np.linalg.eigvalsh(A)
    if n > d + 1:
        mod = np.sort(np.abs(lam))[::-1]
        if mod[d - 1] - mod[d] < tol:
            return False
        sel = lam[np.argsort(-np.abs(lam))[:d]]
        w, U = eigs(csr_matrix(A), k=d, ncv=10 * d)
        U = np.abs(U[:, np.argsort(w)[::-1]])
    else:
        sel, U = lam, np.abs(np.linalg.eigh(A)[1])
    if n > 1 and (np.sort(np.abs(sel[:, None] - lam[None, :]), 1)[:, 1] < tol).any():
        return False
    frac = (U * 2 ** (L - 1)) % 1
    return not (np.minimum(frac, 1 - frac)[U * 2 ** (L - 1) > 0.5] < tol).any()


def _pm(K, Kg, graphs, spec):
    """PM: max difference between the graphs whose embedding is unique (:func:`_pm_unique`;
    elsewhere any eigenbasis is an answer) and the share of all entries that differ."""
    keep = np.array([_pm_unique(g) for g in graphs])
    D = np.abs(K - Kg)
    if not keep.any():
        return f"no graph unique; {100 * (D > 1e-9).mean():.1f}% of entries differ"
    return (f"{D[np.ix_(keep, keep)].max():.1e} on {keep.sum()} unique; "
            f"{100 * (D > 1e-9).mean():.1f}% of all differ")


def _odd(K, Kg, graphs, spec):
    """ODD-STh: different kernels by design (torchkern: canonical child order, all depths
    j ≤ h, λ; GraKeL: numbering-dependent order, full visits only, weights from the first
    graph). The share of entries where GraKeL differs from its own formula evaluated on
    torchkern's full-visit counts (the entries its child order changes)."""
    k = spec.ours(_tg())
    g, t, cnt, _ = k.tree_features(k.check_input(graphs), depths=[k.h])
    phi = np.zeros((len(graphs), int(t.max()) + 1))
    phi[g.numpy(), t.numpy()] = cnt.numpy()
    c = phi[(phi > 0).argmax(0), np.arange(phi.shape[1])]
    return f"{100 * ((phi * c) @ phi.T != Kg).mean():.1f}% of entries"


def _grakel_graphlet_model(graphs):
    """GraKeL 0.1.11's ``GraphletSampling(k=3, sampling=None)`` Gram rebuilt from its own
    enumeration (``sample_graphlets_all_connected``, its ConSubg, which misses some
    connected 3-subsets) and its bin rule: the first subgraph of a class in a graph is
    counted twice when an earlier graph opened that class's bin (``local_values[(i, k)]
    = 1`` then ``+= 1``). Returns ``(K_model, enumerated counts (G, 2): paths,
    triangles)``."""
    from grakel.kernels.graphlet_sampling import bGraph, sample_graphlets_all_connected
    triangle = bGraph(3, iter([(0, 1), (1, 0), (1, 2), (2, 1), (0, 2), (2, 0)]))  # as GraKeL's
    counts = np.zeros((len(graphs), 2))
    for i, d in enumerate(graphs):
        A = np.zeros((d.num_nodes, d.num_nodes), dtype=int)
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        for sg in sample_graphlets_all_connected(A, 3):  # connected: a path or a triangle
            counts[i, int(sg.isomorphic(triangle))] += 1
    model, opened = counts.copy(), np.full(2, -1)
    for i in range(len(graphs)):
        for c in range(2):
            if counts[i, c]:
                if opened[c] < 0:
                    opened[c] = i
                elif opened[c] < i:
                    model[i, c] += 1
    return model @ model.T, counts


def _graphlet(K, Kg, graphs, spec):
    """Graphlets (k = 3): different definitions — torchkern's φ is the distribution of the
    class of all k-subsets, GraKeL's (``sampling=None``) the counts of the connected ones.
    c = the connected-class counts from torchkern's φ (C(n, 3) φ of the path and the
    triangle classes; equal to brute-force enumeration in tests/graphs). GraKeL's Gram
    differs from ⟨c, c'⟩ by its own miscounts, which :func:`_grakel_graphlet_model`
    reproduces: the column gives max |K_GraKeL − model| (0: GraKeL's values fully
    explained), the share of graphs whose GraKeL enumeration misses connected subsets,
    and max |K_GraKeL − ⟨c, c'⟩|."""
    import math
    phi = spec.ours(_tg()).features(graphs).double().numpy()
    n3 = np.array([math.comb(int(d.num_nodes), 3) for d in graphs], dtype=float)
    P = np.round(phi[:, 2:] * n3[:, None])
    model, enum = _grakel_graphlet_model(graphs)
    missed = (enum != P).any(1)
    return (f"GraKeL = its model {np.abs(model - Kg).max():.1e}; its ConSubg misses "
            f"subsets in {100 * missed.mean():.0f}% of graphs; vs true counts "
            f"{np.abs(P @ P.T - Kg).max():.1e}")


def _one_hot_width(graphs):
    """L when every graph's ``x`` is one-hot of width L (Propagation's ``n_labels=L``:
    GraKeL's hash draws), else None (per-label draws)."""
    if graphs is None:
        return None
    xs = [d.x for d in graphs]
    ok = all(x.shape[1] == xs[0].shape[1] and bool(((x == 0) | (x == 1)).all())
             and bool((x.sum(1) == 1).all()) for x in xs)
    return int(xs[0].shape[1]) if ok else None


def _prop(K, Kg, graphs, spec):
    if _one_hot_width(graphs) is None:
        return "n/a: per-label draws (labels not one-hot), not GraKeL's"
    return _exact(K, Kg, graphs, spec)


def _tg():
    import torchkern.graphs as tg
    return tg


# -- the registry -----------------------------------------------------------------------------

def _all(set_name, nodes, n):
    return n


@dataclasses.dataclass
class Spec:
    """One kernel of the benchmark.

    ``ours(tg)`` / ``theirs(gk)``: the torchkern kernel (``tg`` = torchkern.graphs) and
    GraKeL's (``gk`` = grakel.kernels). ``form``, ``labels``, ``edge_labels``,
    ``attributes``: GraKeL's input (:func:`grakel_input`); ``attributes`` also means the
    kernel runs on the attributed sets only. ``compare(K, K_grakel, graphs, spec)``: the
    ``diff`` column. ``grakel_cap(set, mean nodes, G)``: the graphs GraKeL runs on (0: not
    run), its time extrapolated by ``scale`` ("pairs" or "graphs"); ``ours_cap``: the
    same for torchkern (both then run on that subset)."""
    name: str
    ours: Callable
    theirs: Callable
    form: str = "adj"
    labels: str = "numbers"
    edge_labels: bool = False
    attributes: bool = False
    compare: Callable = _exact
    grakel_cap: Callable = _all
    ours_cap: Callable = _all
    scale: str = "pairs"
    part: str = ""
    note: str = ""
    relabel: bool = False  # labels that are not one-hot rows: both libraries get ids


def _as_label_ids(graphs):
    """Copies of ``graphs`` whose ``x`` is one column of label ids 0..L−1 (GraphSet's,
    the numbers GraKeL's input gets with ``labels="ids"``) where some row of ``x`` is
    not one-hot (Cuneiform's two-part rows): NeighborhoodHash codes those by the row
    itself, GraKeL by its order of the labels, so both get the same numbers; else
    ``graphs`` itself."""
    import torch
    from torch_geometric.data import Data
    from torchkern.graphs import GraphSet
    x = torch.cat([d.x.reshape(d.num_nodes, -1) for d in graphs])
    if x.shape[1] < 2 or bool((x.sum(1) == 1).all() & ((x == 0) | (x == 1)).all()):
        return graphs
    G = GraphSet(graphs)
    ids = G.node_label
    return [Data(x=ids[int(G.ptr[i]):int(G.ptr[i + 1]), None], edge_index=d.edge_index,
                 num_nodes=d.num_nodes) for i, d in enumerate(graphs)]


def _rw_cap(s, nodes, n):  # GraKeL inverts an (n₁n₂)² matrix per pair
    return 0 if nodes > 30 else min(n, 40)


def _gh_cap(s, nodes, n):  # GraKeL: (n₁n₂ δ²) weight products per pair in Python
    return min(n, 20 if nodes > 100 else 200)


def _gh_gauss_ours(s, nodes, n):  # torchkern too: every node pair, O(N²δ²)
    return n if nodes * n <= 50_000 else 20


def _dot(x, y):
    """GraKeL's SvmTheta metric over all subset sizes (its default: the first only)."""
    return float((x.T @ y).item())


def _big(cap):
    return lambda s, nodes, n: min(n, cap) if nodes > 100 else n


REGISTRY = [
    Spec("WL", lambda tg: tg.WeisfeilerLehman(n_iter=3),
         lambda gk: gk.WeisfeilerLehman(n_iter=3, base_graph_kernel=gk.VertexHistogram),
         form="edges"),
    Spec("WL-SP", lambda tg: tg.WeisfeilerLehman(n_iter=2, base="shortest_path"),
         lambda gk: gk.WeisfeilerLehman(n_iter=2, base_graph_kernel=gk.ShortestPath),
         form="adj", grakel_cap=_big(50), scale="graphs"),
    Spec("SP", lambda tg: tg.ShortestPath(), lambda gk: gk.ShortestPath(with_labels=True),
         form="edges", grakel_cap=_big(100), scale="graphs"),
    Spec("RW", lambda tg: tg.RandomWalk(0.01, labeled=False),
         lambda gk: gk.RandomWalk(lamda=0.01, method_type="baseline"),
         compare=_rel, grakel_cap=_rw_cap),
    Spec("RWL", lambda tg: tg.RandomWalk(0.01, labeled=True),
         lambda gk: gk.RandomWalkLabeled(lamda=0.01, method_type="baseline"),
         labels="ids", compare=_rwl, grakel_cap=_rw_cap, ours_cap=_big(20),
         note="GraKeL's length-0 walks between differently labelled nodes added"),
    Spec("GRAPHLET", lambda tg: tg.GraphletSampling(k=3, n_samples=None),
         lambda gk: gk.GraphletSampling(k=3, sampling=None), compare=_graphlet,
         grakel_cap=_big(20), scale="graphs",
         note="different definitions (connected counts vs all-subset frequencies); "
              "GraKeL's miscounts modelled"),
    Spec("VH", lambda tg: tg.VertexHistogram(), lambda gk: gk.VertexHistogram(),
         labels="ids", part="a"),
    Spec("EH", lambda tg: tg.EdgeHistogram(), lambda gk: gk.EdgeHistogram(),
         labels="ids", edge_labels=True, part="a"),
    Spec("WLOA", lambda tg: tg.WeisfeilerLehmanOptimalAssignment(3),
         lambda gk: gk.WeisfeilerLehmanOptimalAssignment(n_iter=3), labels="ids",
         grakel_cap=_big(100), part="a"),
    Spec("PROP", lambda tg, graphs=None: tg.Propagation(random_state=0,
                                                        n_labels=_one_hot_width(graphs)),
         lambda gk: gk.Propagation(random_state=0), compare=_prop, part="a",
         note="GraKeL's draws (n_labels=L) on one-hot labels; else per-label draws"),
    Spec("PROPATTR", lambda tg: tg.PropagationAttr(random_state=0),
         lambda gk: gk.PropagationAttr(random_state=0), attributes=True, part="a"),
    Spec("GH-LIN", lambda tg: tg.GraphHopper(), lambda gk: gk.GraphHopper(kernel_type="linear"),
         attributes=True, compare=_rel_max, grakel_cap=_gh_cap, part="a"),
    Spec("GH-GAUSS", lambda tg: tg.GraphHopper(kernel_type="gaussian", mu=1.0),
         lambda gk: gk.GraphHopper(kernel_type="gaussian"), attributes=True,
         compare=_rel_max, grakel_cap=_gh_cap, ours_cap=_gh_gauss_ours, part="a"),
    Spec("NH", lambda tg: tg.NeighborhoodHash(R=3, random_state=0),
         lambda gk: gk.NeighborhoodHash(R=3, random_state=0), part="b", relabel=True),
    Spec("PM", lambda tg: tg.PyramidMatch(), lambda gk: gk.PyramidMatch(), compare=_pm,
         part="b", note="repeated eigenvalues / bin edges: share of entries that differ"),
    Spec("CORE-WL", lambda tg: tg.CoreFramework(tg.WeisfeilerLehman(n_iter=3)),
         lambda gk: gk.CoreFramework(base_graph_kernel=(gk.WeisfeilerLehman, dict(n_iter=3))),
         part="b"),
    Spec("CORE-SP", lambda tg: tg.CoreFramework(tg.ShortestPath()),
         lambda gk: gk.CoreFramework(base_graph_kernel=gk.ShortestPath),
         grakel_cap=_big(20), scale="graphs", part="b"),
    Spec("NSPDK", lambda tg: tg.NeighborhoodSubgraphPairwiseDistance(),
         lambda gk: gk.NeighborhoodSubgraphPairwiseDistance(), edge_labels=True,
         compare=_share, grakel_cap=_big(8), scale="graphs", part="b", ours_cap=_big(100),
         note="different encodings by design (GraKeL's is numbering-dependent)"),
    Spec("ODD", lambda tg: tg.ODDSTh(h=3), lambda gk: gk.OddSth(h=3), compare=_odd,
         grakel_cap=_big(50), scale="graphs", part="b",
         note="different kernels by design: share of entries GraKeL's child order changes"),
]
REGISTRY += [
    Spec("HC", lambda tg: tg.HadamardCode(n_iter=5),
         lambda gk: gk.HadamardCode(n_iter=5, base_graph_kernel=gk.VertexHistogram),
         labels="ids"),
    Spec("SM", lambda tg: tg.SubgraphMatching(k=3, edge_labels=True),
         lambda gk: gk.SubgraphMatching(k=3), labels="ids", edge_labels=True,
         grakel_cap=lambda s, nodes, n: min(n, 10 if nodes > 100 else 60),
         note="k = 3 (GraKeL's default 5: hours on 1,000 graphs)"),
    Spec("MLG", lambda tg: tg.MultiscaleLaplacian(random_state=0),
         lambda gk: gk.MultiscaleLaplacian(random_state=0), attributes=True, compare=_rel_max,
         grakel_cap=lambda s, nodes, n: min(n, 5 if nodes > 100 else 100),
         ours_cap=lambda s, nodes, n: min(n, 5) if nodes > 100 else n,
         note="attributes; L=3, 50 landmarks, P=10 (200 nodes: both on 5 graphs, GraKeL "
              "~20-60 s per graph)"),
    Spec("SVMT", lambda tg: tg.SVMTheta(random_state=0, draws="grakel"),
         lambda gk: gk.SvmTheta(random_state=0, metric=_dot),
         compare=_rel_max, grakel_cap=_big(50), scale="graphs",
         note="GraKeL's draws; GraKeL with metric x.T @ y (its default: first size only)"),
    Spec("LT", lambda tg: tg.LovaszTheta(random_state=0, draws="grakel"),
         lambda gk: gk.LovaszTheta(random_state=0), compare=_rel_max,
         grakel_cap=lambda s, nodes, n: 0 if nodes > 100 else min(n, 50), scale="graphs",
         ours_cap=lambda s, nodes, n: min(n, 10) if nodes > 100 else n,
         note="GraKeL needs cvxopt (n/a without it); ~200 nodes: GraKeL n/a here (one SDP "
              "variable per non-edge: hours and GBs per graph), see bench/lovasz_200.py"),
]


# -- running ----------------------------------------------------------------------------------

CLOCK = time.process_time


def _time(fn, repeat=3, long=2.0):
    """Best time of ``repeat`` calls (one call when it takes over ``long`` seconds)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = CLOCK()
        out = fn()
        best = min(best, CLOCK() - t)
        if best > long:
            break
    return best, out


def _load():
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def bench_one(spec, set_name, graphs):
    import grakel
    tg, gk = _tg(), grakel.kernels
    n = len(graphs)
    nodes = float(np.mean([d.num_nodes for d in graphs]))
    row = dict(kernel=spec.name, data=set_name, graphs=n, nodes=f"{nodes:.1f}")
    if spec.relabel:
        graphs = _as_label_ids(graphs)
    sub_ours = spec.ours_cap(set_name, nodes, n)
    if sub_ours < n:
        graphs, n = graphs[:sub_ours], sub_ours
        row.update(data=f"{set_name} [first {n}]", graphs=n)
    make = (lambda: spec.ours(tg, graphs)) if spec.ours.__code__.co_argcount > 1 else \
        (lambda: spec.ours(tg))
    make()(graphs[:2]).to_dense()  # first-call overheads, untimed
    t_ours, K = _time(lambda: make()(graphs).to_dense().numpy())
    row["torchkern_s"] = f"{t_ours:.3f}"
    sub = spec.grakel_cap(set_name, nodes, n)
    if sub == 0:
        return dict(row, grakel_s="n/a", ratio="n/a", diff="n/a", load=_load())
    g_in = grakel_input(graphs[:sub], spec.form, spec.labels, spec.edge_labels, spec.attributes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            spec.theirs(gk).fit_transform(g_in[:2])
        except ImportError as e:  # LovaszTheta: cvxopt
            return dict(row, grakel_s=f"n/a ({e})", ratio="n/a", diff="n/a",
                        load=_load())
        t_g, Kg = _time(lambda: spec.theirs(gk).fit_transform(g_in))
    mark = ""
    if sub < n:
        mark = "~"
        t_g *= (n * (n + 1) / (sub * (sub + 1))) if spec.scale == "pairs" else n / sub
    if sub < n:  # fitted or draw-order kernels: compare on the same graphs, untimed
        K = make()(graphs[:sub]).to_dense().numpy()
    diff = spec.compare(K[:sub, :sub], np.asarray(Kg), graphs[:sub], spec)
    if sub < n:
        diff += f" [first {sub}]"
    return dict(row, grakel_s=f"{mark}{t_g:.3f}", ratio=f"{mark}{t_g / t_ours:.1f}x",
                diff=diff, load=_load())


def load_sets(names):
    import grakel
    from torchkern.datasets import read_tu
    data = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")
    sets = []
    for s in names:
        s, _, only = s.partition(":")  # "1000x40:wl+sp": those kernels on that set
        if s.upper() in ("MUTAG", "CUNEIFORM"):
            name = "MUTAG" if s.upper() == "MUTAG" else "Cuneiform"
            sets.append((name, read_tu(os.path.join(data, name)), name == "Cuneiform", only))
        else:
            g, n = (int(v) for v in s.upper().removeprefix("ER").split("X"))
            sets.append((f"ER {g}x{n}", with_extras(erdos_renyi(g, n, seed=g + n), seed=g * n),
                         True, only))
    return sets


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", default="all", help="comma-separated registry names")
    ap.add_argument("--part-a", action="store_true", help="the part-A kernels only")
    ap.add_argument("--part-b", action="store_true", help="the part-B kernels only")
    ap.add_argument("--sets", default="MUTAG,Cuneiform",
                    help="comma-separated: MUTAG, Cuneiform, ERgxn")
    ap.add_argument("--sizes", default="1000x20,1000x200",
                    help="Erdős–Rényi sets GxN appended to --sets, optionally GxN:k1+k2 for "
                         "the kernels of that set")
    ap.add_argument("--no-mutag", action="store_true", help="leave MUTAG out of --sets")
    ap.add_argument("--busy-rows", action="store_true",
                    help="also every row beside one busy loop (bench/_util.busy)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    ap.add_argument("--list", action="store_true", help="print the registry and exit")
    args = ap.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.list:
        for s in REGISTRY:
            print(f"{s.name:10s} attributes={s.attributes!s:5s} {s.note}")
        return
    specs = REGISTRY
    if args.part_a or args.part_b:
        specs = [s for s in specs if s.part == ("a" if args.part_a else "b")]
    if args.kernels != "all":
        want = [k.strip().upper() for k in args.kernels.split(",")]
        unknown = set(want) - {s.name for s in REGISTRY}
        if unknown:
            ap.error(f"--kernels: unknown {sorted(unknown)}; --list shows the registry")
        specs = [s for s in specs if s.name in want]

    import grakel  # (first: it loads scipy's OpenBLAS and sklearn's OpenMP, which
    import torch   # threadpool_limits only limits once they are loaded)
    from threadpoolctl import threadpool_limits
    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads)
    names = [s for s in args.sets.split(",") + args.sizes.split(",") if s]
    if args.no_mutag:
        names = [s for s in names if s.upper() != "MUTAG"]
    sets = load_sets(names)
    clock = "process CPU time" if args.clock == "cpu" else "wall time"
    print(f"torchkern graph kernels vs GraKeL {grakel.__version__} — {device_name('cpu')}, "
          f"{args.threads} torch / BLAS thread(s) each, {clock}, best of 3 under 2 s; "
          f"load = os.getloadavg() after the row\n")
    rows = []
    for cond, context in conditions(args.busy_rows):
        with context():
            for spec in specs:
                for set_name, graphs, attributed, only in sets:
                    if spec.attributes and not attributed:
                        continue
                    if only and spec.name not in only.upper().split("+"):
                        continue
                    rows.append(dict(condition=cond, **bench_one(spec, set_name, graphs)))
                    print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    table(rows, (["condition"] if args.busy_rows else [])
          + ["kernel", "data", "graphs", "nodes", "torchkern_s", "grakel_s", "ratio", "diff",
             "load"])


if __name__ == "__main__":
    main()
