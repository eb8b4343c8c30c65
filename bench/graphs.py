"""Benchmark: torchkern graph kernels against GraKeL — seconds per Gram, max difference.

    python bench/graphs.py                          # MUTAG + default ER sets (< 10 min, 2 cores)
    python bench/graphs.py --sizes 100x20,2000x100:wl+sp --kernels wl,sp
    python bench/graphs.py --threads 2              # torch / BLAS threads (default 1)
    python bench/graphs.py --clock cpu              # process CPU time instead of wall time

Data: MUTAG (188 molecules, from the installed GraKeL) and Erdős–Rényi sets "GxN": G graphs
with n ~ uniform[N/2, 3N/2] nodes, average degree 4 (p = 4/(n − 1)), 5 node labels,
seeded. Kernels, GraKeL 0.1.11 on the same edge lists and labels:

- WL   ``WeisfeilerLehman(n_iter=3)`` vs ``WeisfeilerLehman(n_iter=3, VertexHistogram)``
- SP   ``ShortestPath()`` (labels) vs ``ShortestPath(with_labels=True)``
- RW   ``RandomWalk(0.01, labeled=False)`` vs ``RandomWalk(lamda=0.01, method_type="baseline")``
- RWL  ``RandomWalk(0.01)`` (labeled) vs ``RandomWalkLabeled(lamda=0.01, method_type="baseline")``,
  which also counts one length-0 walk per pair of differently labelled nodes: that
  count (n₁n₂ minus the matched pairs) is added to torchkern's values before comparing.

Times are one Gram matrix K(X, X), each library from its own input format to a dense
matrix: torchkern from the list of PyG ``Data`` (GraphSet conversion included) to a dense
tensor and then a NumPy array; GraKeL's ``fit_transform`` from edge sets and label dicts
(its conversion to ``Graph`` objects included). Building either input from the ER/TU data
is not timed, and both get one small untimed call first (lazy imports, caches). Best of
three runs each (one run where a run takes over 30 s); the machine may be shared: check
``uptime`` and rerun for stable ratios.
``diff`` is max |K − K_GraKeL| (WL, SP: integer counts) or max |K/K_GraKeL − 1| (RW).
GraKeL's RW baselines invert an (n₁n₂)² matrix per pair: on sets with more than
``--rw-grakel-graphs`` graphs (default 40) they run on the first that many graphs and the
time is extrapolated by the number of pairs (marked "~"), ``diff`` on that subset; on
graphs of more than 30 nodes on average they are not run ("n/a": hours).
Both libraries run with ``--threads`` threads (torch, and numpy's BLAS via threadpoolctl).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import conditions, device_name, table  # noqa: E402


def erdos_renyi(n_graphs, n_avg, seed=0, degree=4.0, n_labels=5):
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


def to_grakel(graphs, adjacency=False):
    """[edge set, node label dict] per graph (GraKeL builds its Graph objects inside);
    ``adjacency``: a dense adjacency matrix instead of the edge set (GraKeL's random walk
    drops the isolated nodes of an edge set, torchkern and the adjacency keep them)."""
    out = []
    for d in graphs:
        labels = dict(enumerate(d.x.argmax(1).tolist()))
        if adjacency:
            A = np.zeros((d.num_nodes, d.num_nodes))
            A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
            out.append([A, labels])
        else:
            out.append([{tuple(e) for e in d.edge_index.t().tolist()}, labels])
    return out


CLOCK = time.perf_counter  # --clock cpu: time.process_time


def _time(fn, repeat=3, long=30.0):
    """Best time of ``repeat`` calls (one call when it takes over ``long`` seconds)."""
    best = float("inf")
    for i in range(repeat):
        t = CLOCK()
        out = fn()
        best = min(best, CLOCK() - t)
        if best > long:
            break
    return best, out


def _unmatched(graphs):
    """n₁n₂ minus the label-matched node pairs, for every pair of graphs: the length-0
    walks GraKeL's RandomWalkLabeled counts between differently labelled nodes."""
    lab = [d.x.argmax(1).numpy() for d in graphs]
    return np.array([[a.size * b.size - (a[:, None] == b[None, :]).sum() for b in lab]
                     for a in lab])


def bench_one(name, graphs, kernel, rw_grakel_graphs):
    import grakel
    import torchkern.graphs as tg
    ours = {"WL": lambda: tg.WeisfeilerLehman(n_iter=3),
            "SP": lambda: tg.ShortestPath(),
            "RW": lambda: tg.RandomWalk(0.01, labeled=False),
            "RWL": lambda: tg.RandomWalk(0.01, labeled=True)}[kernel]()
    theirs = {"WL": lambda: grakel.WeisfeilerLehman(n_iter=3,
                                                    base_graph_kernel=grakel.VertexHistogram),
              "SP": lambda: grakel.ShortestPath(with_labels=True),
              "RW": lambda: grakel.RandomWalk(lamda=0.01, method_type="baseline"),
              "RWL": lambda: grakel.RandomWalkLabeled(lamda=0.01, method_type="baseline")}[kernel]
    ours(graphs[:2]).to_dense()  # first-call overheads (lazy imports) outside the timing
    t_ours, K = _time(lambda: ours(graphs).to_dense().numpy())
    n = len(graphs)
    nodes = np.mean([d.num_nodes for d in graphs])
    row = dict(data=name, graphs=n, nodes=f"{nodes:.1f}", kernel=kernel,
               torchkern_s=f"{t_ours:.3f}")
    walk = kernel.startswith("RW")
    if walk and nodes > 30:  # GraKeL: (n₁n₂)³ per pair, hours
        return dict(row, grakel_s="n/a", speedup="n/a", diff="n/a")
    sub = min(n, rw_grakel_graphs) if walk else n
    g_in = to_grakel(graphs[:sub], adjacency=walk)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs().fit_transform(g_in[:2])  # first-call overheads, as for torchkern
        t_g, Kg = _time(lambda: theirs().fit_transform(g_in))
    estimated = sub < n
    if estimated:
        t_g *= (n * (n + 1) / 2) / (sub * (sub + 1) / 2)
    Ks = K[:sub, :sub]
    if kernel == "RWL":
        Ks = Ks + _unmatched(graphs[:sub])
    diff = np.abs(Ks / Kg - 1).max() if walk else np.abs(Ks - Kg).max()
    mark = "~" if estimated else ""
    return dict(row, grakel_s=f"{mark}{t_g:.2f}", speedup=f"{mark}{t_g / t_ours:.0f}x",
                diff=f"{diff:.1e}" if walk else f"{diff:g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100x20,1000x20:wl+sp+rw,2000x50:wl+sp+rw,1000x200:wl+rw",
                    help="comma-separated GxN Erdős–Rényi sets (G graphs of ~N nodes), "
                         "optionally :k1+k2 for the kernels of that set")
    ap.add_argument("--kernels", default="wl,sp,rw,rwl")
    ap.add_argument("--no-mutag", action="store_true")
    ap.add_argument("--rw-grakel-graphs", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: process CPU time (steadier than wall time on a shared machine; "
                         "equal to it with one thread each)")
    ap.add_argument("--busy-rows", action="store_true",
                    help="also every row beside one busy loop (bench/_util.busy), each row "
                         "with the 1-minute load average at its end")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter

    import torch
    from threadpoolctl import threadpool_limits
    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads)
    import grakel
    from torchkern.datasets import read_tu

    sets = []
    if not args.no_mutag:
        sets.append(("MUTAG", read_tu(os.path.join(os.path.dirname(grakel.__file__),
                                                   "tests", "data", "MUTAG")), ""))
    for s in filter(None, args.sizes.split(",")):
        size, _, kernels = s.partition(":")
        g, n = (int(v) for v in size.lower().split("x"))
        sets.append((f"ER {g}x{n}", erdos_renyi(g, n, seed=g + n), kernels))
    print(f"torchkern graph kernels vs GraKeL {grakel.__version__} — {device_name('cpu')}, "
          f"{args.threads} thread(s) each, {args.clock} time, best of 3\n")
    rows = []
    for cond, context in conditions(args.busy_rows):
        with context():
            for name, graphs, kernels in sets:
                for kernel in (kernels or args.kernels).upper().replace("+", ",").split(","):
                    row = bench_one(name, graphs, kernel, args.rw_grakel_graphs)
                    rows.append(dict(row, condition=cond, load=f"{os.getloadavg()[0]:.2f}"))
                    print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    table(rows, ["condition", "data", "graphs", "nodes", "kernel", "torchkern_s", "grakel_s",
                 "speedup", "diff", "load"])


# -- part B of issue 24: neighborhood hash, pyramid match, core framework ---------------------

def _with_edge_labels(graphs, g_in):
    """GraKeL's NSPDK input: [adjacency, node labels, edge labels] (edge_attr's argmax, or
    0 for every edge)."""
    out = []
    for d, (A, labels) in zip(graphs, g_in):
        ea = getattr(d, "edge_attr", None)
        el = ea.argmax(1).tolist() if ea is not None else [0] * d.edge_index.shape[1]
        out.append([A, labels, {tuple(e): v for e, v in zip(d.edge_index.t().tolist(), el)}])
    return out


def bench_part_b(sets, kernels=("NH", "PM", "CORE-WL", "CORE-SP", "NSPDK", "ODD")):
    """One run per kernel and set (``python bench/graphs.py --part-b``), torchkern from the
    list of Data to a dense NumPy Gram, GraKeL's ``fit_transform`` from adjacency matrices
    and label dicts (isolated nodes kept):

    - NH       ``NeighborhoodHash(R=3, random_state=0)`` vs GraKeL's, same seed (same codes)
    - PM       ``PyramidMatch()`` (labels, L=4, d=6) vs GraKeL's; graphs with a repeated
      eigenvalue or a coordinate on a bin edge differ (any eigenbasis is an answer):
      ``diff`` gives the share of entries that differ
    - CORE-WL  ``CoreFramework(WeisfeilerLehman(3))`` vs ``CoreFramework(WL(3), VertexHistogram)``
    - CORE-SP  ``CoreFramework(ShortestPath())`` vs ``CoreFramework(ShortestPath)`` (not
      on ~200-node graphs: GraKeL's Floyd–Warshall per core, hours)
    - NSPDK    ``NeighborhoodSubgraphPairwiseDistance()`` (r=3, d=4) vs GraKeL's: the values
      differ by design (GraKeL's encoding depends on the node numbering; ``diff`` says
      by how much); not on ~200-node graphs (torchkern O(r Σ n³), GraKeL hours)
    - ODD      ``ODDSTh(h=3)`` vs ``OddSth(h=3)``: different kernels by design (torchkern:
      canonical child order, all depths j ≤ h, λ; GraKeL: numbering-dependent order, full
      visits only, weights from the first graph); ``diff`` gives the share of entries
      where GraKeL differs from its own formula on torchkern's full-visit counts (the
      entries its child order changes); not on ~200-node graphs
    """
    import grakel
    import torchkern.graphs as tg
    gk = grakel.kernels
    ours = {"NH": lambda: tg.NeighborhoodHash(R=3, random_state=0),
            "PM": lambda: tg.PyramidMatch(),
            "CORE-WL": lambda: tg.CoreFramework(tg.WeisfeilerLehman(n_iter=3)),
            "CORE-SP": lambda: tg.CoreFramework(tg.ShortestPath()),
            "NSPDK": lambda: tg.NeighborhoodSubgraphPairwiseDistance(),
            "ODD": lambda: tg.ODDSTh(h=3)}
    theirs = {"NH": lambda: gk.NeighborhoodHash(R=3, random_state=0),
              "PM": lambda: gk.PyramidMatch(),
              "CORE-WL": lambda: gk.CoreFramework(base_graph_kernel=(
                  gk.WeisfeilerLehman, dict(n_iter=3))),
              "CORE-SP": lambda: gk.CoreFramework(base_graph_kernel=gk.ShortestPath),
              "NSPDK": lambda: gk.NeighborhoodSubgraphPairwiseDistance(),
              "ODD": lambda: gk.OddSth(h=3)}
    rows = []
    for name, graphs in sets:
        nodes = np.mean([d.num_nodes for d in graphs])
        g_in = to_grakel(graphs, adjacency=True)
        for kernel in kernels:
            if kernel in ("NSPDK", "ODD") and nodes > 100:
                continue
            ours[kernel]()(graphs[:2]).to_dense()  # first-call overheads, untimed
            t_ours, K = _time(lambda: ours[kernel]()(graphs).to_dense().numpy(), repeat=1)
            row = dict(data=name, graphs=len(graphs), nodes=f"{nodes:.1f}", kernel=kernel,
                       torchkern_s=f"{t_ours:.3f}", load=" ".join(f"{v:.1f}" for v in
                                                                 os.getloadavg()))
            if kernel == "CORE-SP" and nodes > 100:
                rows.append(dict(row, grakel_s="n/a", speedup="n/a", diff="n/a"))
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inp = _with_edge_labels(graphs, g_in) if kernel == "NSPDK" else g_in
                theirs[kernel]().fit_transform(inp[:2])
                t_g, Kg = _time(lambda: theirs[kernel]().fit_transform(inp), repeat=1)
            D = np.abs(K - Kg)
            diff = f"{D.max():.1e}"
            if kernel == "PM":
                diff += f" ({100 * (D > 1e-9).mean():.1f}% of entries)"
            if kernel == "ODD":
                k = ours[kernel]()
                g, t, cnt, _ = k.tree_features(k.check_input(graphs), depths=[k.h])
                phi = np.zeros((len(graphs), int(t.max()) + 1))
                phi[g.numpy(), t.numpy()] = cnt.numpy()
                c = phi[(phi > 0).argmax(0), np.arange(phi.shape[1])]
                diff = f"{100 * ((phi * c) @ phi.T != Kg).mean():.1f}% of entries"
            rows.append(dict(row, grakel_s=f"{t_g:.2f}", speedup=f"{t_g / t_ours:.1f}x",
                             diff=diff))
            print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def main_part_b():
    ap = argparse.ArgumentParser(description="issue 24 part B kernels vs GraKeL")
    ap.add_argument("--part-b", action="store_true")
    ap.add_argument("--sizes", default="1000x20,1000x200")
    ap.add_argument("--kernels", default="NH,PM,CORE-WL,CORE-SP,NSPDK,ODD")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    import torch
    from threadpoolctl import threadpool_limits
    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads)
    import grakel
    from torchkern.datasets import read_tu
    sets = [("MUTAG", read_tu(os.path.join(os.path.dirname(grakel.__file__), "tests", "data",
                                           "MUTAG")))]
    for s in filter(None, args.sizes.split(",")):
        g, n = (int(v) for v in s.lower().split("x"))
        sets.append((f"ER {g}x{n}", erdos_renyi(g, n, seed=g + n)))
    print(f"part B graph kernels vs GraKeL {grakel.__version__} — {device_name('cpu')}, "
          f"{args.threads} thread(s) each, wall time, one run; load = os.getloadavg() after\n")
    rows = bench_part_b(sets, args.kernels.upper().split(","))
    table(rows, ["data", "graphs", "nodes", "kernel", "torchkern_s", "grakel_s", "speedup",
                 "diff", "load"])


# -- issue 24 part A: attributes, assignment, propagation and histogram kernels -----------

def _with_extras(graphs, seed, dim=3, n_bond=3, connect=True):
    """Copies of ER graphs with, seeded: a path 0 - 1 - ... - n−1 added (``connect``:
    GraKeL 0.1.11's GraphHopper fails on isolated nodes), bond labels (one-hot
    ``edge_attr``, one per undirected edge) and ``dim`` standard normal node attributes."""
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


def _grakel_part_a(graphs, what):
    """GraKeL's [adjacency, node labels or attribute vectors, edge labels] per graph:
    node labels are torchkern's label ids (sorted label rows, so that Propagation's
    seeded draws fall on the same labels), edge labels the argmax of ``edge_attr``."""
    import torch
    from torchkern.graphs import GraphSet
    from torchkern.graphs._labels import initial_labels
    G = GraphSet(graphs)
    ids = torch.split(initial_labels(G)[0], G.num_nodes.tolist())
    out = []
    for d, lab in zip(graphs, ids):
        A = np.zeros((d.num_nodes, d.num_nodes))
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        nodes = (dict(enumerate(lab.tolist())) if what == "labels"
                 else dict(enumerate(d.node_attributes.double().numpy())))
        edges = {}
        if d.edge_attr is not None:
            edges = dict(zip(map(tuple, d.edge_index.t().tolist()),
                             d.edge_attr.argmax(1).tolist()))
        out.append([A, nodes, edges])
    return out


PART_A = {  # name: (torchkern kernel, GraKeL kernel, reads attributes, integer values)
    "VH": (lambda tg: tg.VertexHistogram(), lambda gk: gk.VertexHistogram(), False, True),
    "EH": (lambda tg: tg.EdgeHistogram(), lambda gk: gk.EdgeHistogram(), False, True),
    "WLOA": (lambda tg: tg.WeisfeilerLehmanOptimalAssignment(3),
             lambda gk: gk.WeisfeilerLehmanOptimalAssignment(n_iter=3), False, True),
    "PROP": (lambda tg: tg.Propagation(random_state=0),
             lambda gk: gk.Propagation(random_state=0), False, True),
    "PROPATTR": (lambda tg: tg.PropagationAttr(random_state=0),
                 lambda gk: gk.PropagationAttr(random_state=0), True, True),
    "GH-LIN": (lambda tg: tg.GraphHopper(), lambda gk: gk.GraphHopper(kernel_type="linear"),
               True, False),
    "GH-GAUSS": (lambda tg: tg.GraphHopper(kernel_type="gaussian", mu=1.0),
                 lambda gk: gk.GraphHopper(kernel_type="gaussian"), True, False),
}


def bench_part_a(sets, kernels, grakel_cap):
    """One run per kernel and set (``python bench/graphs.py --part-a``): torchkern from the
    list of Data to a dense NumPy Gram, GraKeL's ``fit_transform`` from adjacency
    matrices, label / attribute dicts and edge-label dicts (conversion to its Graph
    objects included). Where GraKeL would take too long (``grakel_cap(kernel, set)``
    graphs < the set), both libraries also run on the set's first that many graphs, a
    row of its own ("first S") with the ratio and the values compared there; the full
    row then has GraKeL "n/a"."""
    import grakel
    import torchkern.graphs as tg
    gk = grakel.kernels
    rows = []
    for name, graphs, kernel_names in sets:
        for kernel in kernel_names:
            make_ours, make_theirs, attrs, integer = PART_A[kernel]
            nodes = np.mean([d.num_nodes for d in graphs])
            make_ours(tg)(graphs[:2]).to_dense()  # first-call overheads, untimed
            cap = grakel_cap(kernel, name, len(graphs))
            if kernel == "GH-GAUSS" and nodes * len(graphs) > 50_000:
                t_ours = float("nan")  # every node pair: O(N²δ²), hours; subset row only
            else:
                t_ours, K = _time(lambda: make_ours(tg)(graphs).to_dense().numpy(), repeat=1)
            load = " ".join(f"{v:.1f}" for v in os.getloadavg())
            row = dict(data=name, graphs=len(graphs), nodes=f"{nodes:.1f}", kernel=kernel,
                       torchkern_s=f"{t_ours:.3f}", load=load)
            sub = graphs
            if cap < len(graphs):
                rows.append(dict(row, grakel_s="n/a", speedup="n/a", diff="n/a"))
                print(f"  {rows[-1]}", file=sys.stderr, flush=True)
                sub = graphs[:cap]
                t_ours, K = _time(lambda: make_ours(tg)(sub).to_dense().numpy(), repeat=1)
                row = dict(row, data=f"{name} [first {cap}]", graphs=cap,
                           torchkern_s=f"{t_ours:.3f}")
            g_in = _grakel_part_a(sub, "attributes" if attrs else "labels")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                make_theirs(gk).fit_transform(g_in[:2])
                t_g, Kg = _time(lambda: make_theirs(gk).fit_transform(g_in), repeat=1)
            if integer:
                diff = f"{np.abs(K - Kg).max():.1e}"
            else:
                diff = f"{(np.abs(K - Kg).max() / np.abs(Kg).max()):.1e} rel"
            rows.append(dict(row, grakel_s=f"{t_g:.3f}", speedup=f"{t_g / t_ours:.1f}x",
                             diff=diff, load=" ".join(f"{v:.1f}" for v in os.getloadavg())))
            print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def _part_a_cap(kernel, name, n_graphs):
    """How many graphs GraKeL runs on (its pairwise Python loops: O(G²) calls, dense
    hierarchy rows for WLOA, (n², δ²) weight products for GraphHopper)."""
    if "x200" in name:
        return min(n_graphs, 20 if kernel.startswith("GH") else 100)
    if kernel.startswith("GH") and name.startswith("ER"):
        return min(n_graphs, 200)
    return n_graphs


def main_part_a():
    ap = argparse.ArgumentParser(description="issue 24 part A kernels vs GraKeL")
    ap.add_argument("--part-a", action="store_true")
    ap.add_argument("--sizes", default="1000x20,1000x200")
    ap.add_argument("--kernels", default="VH,EH,WLOA,PROP,PROPATTR,GH-LIN,GH-GAUSS")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    import torch
    from threadpoolctl import threadpool_limits
    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads)
    import grakel
    from torchkern.datasets import read_tu
    data = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")
    wanted = args.kernels.upper().split(",")
    labels_only = [k for k in wanted if not PART_A[k][2]]
    sets = [("MUTAG", read_tu(os.path.join(data, "MUTAG")), labels_only),
            ("Cuneiform", read_tu(os.path.join(data, "Cuneiform")), wanted)]
    for s in filter(None, args.sizes.split(",")):
        g, n = (int(v) for v in s.lower().split("x"))
        sets.append((f"ER {g}x{n}", _with_extras(erdos_renyi(g, n, seed=g + n), seed=g * n),
                     wanted))
    print(f"part A graph kernels vs GraKeL {grakel.__version__} — {device_name('cpu')}, "
          f"{args.threads} thread(s) each, wall time, one run; load = os.getloadavg()\n"
          f"ER sets: degree-4 Erdős–Rényi plus a path (connected), 5 node labels, 3 bond "
          f"labels, 3-dim normal node attributes\n")
    rows = bench_part_a(sets, wanted, _part_a_cap)
    table(rows, ["data", "graphs", "nodes", "kernel", "torchkern_s", "grakel_s", "speedup",
                 "diff", "load"])


if __name__ == "__main__":
    if "--part-a" in sys.argv:
        main_part_a()
    else:
        main_part_b() if "--part-b" in sys.argv else main()
