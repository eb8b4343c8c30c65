"""Benchmark: Lovász-θ (LT) on the Erdős–Rényi set of 1,000 graphs of ~200 nodes, where
GraKeL 0.1.11 cannot run on the set itself.

    python bench/lovasz_200.py                    # torchkern on the first 40 graphs,
                                                  # GraKeL on the set's smallest graph
    python bench/lovasz_200.py --first 100 --grakel-smallest 2

GraKeL's ``LovaszTheta`` solves, with cvxopt, an SDP with one variable per *non-edge*
(about n²/2: 20,000 on a 200-node graph of the set) and factors a dense Schur matrix of
that order at every interior-point iteration: 3.2 GB and hours for one 200-node graph, 16 GB
for the set's 300-node graphs. So ``bench/graphs.py`` leaves its LT cell on this set n/a, and
this script gives it instead:

- torchkern: ``LovaszTheta(random_state=0, draws="grakel")`` on the first ``--first``
  graphs of ``ER 1000x200`` (``bench/graphs.py``'s set), as ``bench/graphs.py`` times it;
- GraKeL: ``LovaszTheta(random_state=0).fit_transform`` on the ``--grakel-smallest``
  smallest graphs of the set (fewest nodes, then fewest non-edges), timed, with the
  interior-point iterations cvxopt took;
- GraKeL's time on the first ``--first`` graphs is then bounded below by ``--first`` times
  the smallest graph's time per graph (every graph of the set has at least as many
  non-edges, and each of cvxopt's iterations factors a matrix of that order), and estimated
  as Σ_i t_min (ne_i / ne_min)³ (ne: non-edges; the dense Cholesky of the Schur matrix
  dominates);
- ``diff``: max |K − K_GraKeL| / max |K_GraKeL| on the graphs GraKeL ran on, and the
  largest relative difference of θ from cvxopt's (the kernel differs where a graph's
  optimal slack is not unique: see docs/graphs.md, Lovász-θ).

Clock: process CPU time (``time.process_time``), one torch thread and one BLAS thread, as
``bench/graphs.py``; ``load`` is ``os.getloadavg()`` after each side. Needs cvxopt (GraKeL's
Lovász-θ imports it).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
# this checkout's torchkern, also from a venv that has another install of it (cvxopt's)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import graphs as bg  # noqa: E402


def non_edges(d):
    """Pairs u < v of distinct nodes without an edge (GraKeL's SDP variables)."""
    s, t = d.edge_index.numpy()
    keep = s != t
    e = {(min(a, b), max(a, b)) for a, b in zip(s[keep].tolist(), t[keep].tolist())}
    n = d.num_nodes
    return n * (n - 1) // 2 - len(e)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", default="1000x200")
    ap.add_argument("--first", type=int, default=40, help="torchkern's graphs (the first S)")
    ap.add_argument("--grakel-smallest", type=int, default=1,
                    help="GraKeL's graphs: the set's smallest")
    args = ap.parse_args(argv)

    import torch
    from threadpoolctl import threadpool_limits
    torch.set_num_threads(1)
    import grakel
    import grakel.kernels.lovasz_theta as glt
    import torchkern.graphs as tg
    from torchkern.graphs import GraphSet
    from torchkern.graphs.theta import _edge_pairs, lovasz_theta_sdp

    (name, G, _, _), = bg.load_sets([args.set])
    S = min(args.first, len(G))
    ne = np.array([non_edges(d) for d in G])
    nodes = np.array([d.num_nodes for d in G])
    small = np.lexsort((ne, nodes))[:args.grakel_smallest].tolist()

    def ours(graphs):
        return tg.LovaszTheta(random_state=0, draws="grakel")(graphs).to_dense().numpy()

    iters, thetas = [], []
    sdp = glt.sdp

    def counting_sdp(*a, **kw):  # cvxopt's solver, recording its iterations and θ
        sol = sdp(*a, **kw)
        iters.append(sol["iterations"])
        thetas.append(sol["x"][-1])
        return sol

    glt.sdp = counting_sdp
    from cvxopt import solvers
    solvers.options["show_progress"] = False
    spec = next(s for s in bg.REGISTRY if s.name == "LT")
    with threadpool_limits(1):
        ours(G[:2])  # first-call overheads, untimed
        t = time.process_time()
        ours(G[:S])
        t_ours = time.process_time() - t
        load_ours = bg._load()
        print(f"torchkern: first {S} graphs (nodes {nodes[:S].min()}-{nodes[:S].max()}, mean "
              f"{nodes[:S].mean():.1f}): {t_ours:.3f} s ({t_ours / S:.3f} s per graph), "
              f"load {load_ours}", flush=True)
        sub = [G[i] for i in small]
        g_in = bg.grakel_input(sub, spec.form, spec.labels, spec.edge_labels, spec.attributes)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.process_time()
            Kg = np.asarray(grakel.kernels.LovaszTheta(random_state=0).fit_transform(g_in))
            t_g = time.process_time() - t
        print(f"GraKeL: graphs {small} (nodes {nodes[small].tolist()}, non-edges "
              f"{ne[small].tolist()}, cvxopt iterations {iters}): {t_g:.3f} s, "
              f"load {bg._load()}", flush=True)
        K = ours(sub)
        theta = np.array([t for t, _ in lovasz_theta_sdp(_edge_pairs(GraphSet(sub)))])
    diff = np.abs(K - Kg).max() / np.abs(Kg).max()
    d_theta = np.abs(theta / np.array(thetas) - 1).max()
    per = t_g / len(small)
    ne_min = ne[small].mean()
    bound = S * per
    model = float((per * (ne[:S] / ne_min) ** 3).sum())
    print(f"GraKeL on the first {S}: >= {bound:.1f} s (each graph >= the smallest's "
          f"{per:.1f} s), ~{model:.0f} s by (non-edges)^3 (first {S}: non-edges "
          f"{ne[:S].min()}-{ne[:S].max()}; the set's largest {ne.max()}: a "
          f"{ne.max() ** 2 * 8 / 1e9:.1f} GB Schur matrix)")
    print(f"| LT | {name} [first {S}] | >= {bound / t_ours:.1f}x ({t_ours:.3f} / >= {bound:.1f} s)"
          f" | ~{model / t_ours:.0f}x (~{model:.0f} s) | {diff:.1e} rel (θ: {d_theta:.1e} rel) "
          f"[{len(small)} smallest] | {load_ours} |")


if __name__ == "__main__":
    main()
