"""Generate tests/graphs/theta_references.npz: GraKeL 0.1.11's Lovász-θ values, which
need cvxopt (not a torchkern dependency). Run once, in a scratch environment with cvxopt:

    python -m venv --system-site-packages /tmp/h1-venv && /tmp/h1-venv/bin/pip install cvxopt
    /tmp/h1-venv/bin/python tests/graphs/make_theta_references.py

Stored:
- ``theta_mutag`` / ``theta_random``: θ of every MUTAG graph and of the random graphs of
  ``random_graphs(40, 6, 16, 0.2, 1, seed=11)`` from GraKeL's SDP (cvxopt, default
  tolerances);
- ``agree_*``: the graphs where cvxopt's slack (the one GraKeL uses) is within 1e-6 of
  torchkern's (max abs). On the others the SDP's optimal slack is not unique and the
  point cvxopt stops at depends on its path and tolerances (it moves by up to 0.07 on
  MUTAG between cvxopt's default tolerances and 1e-9) — GraKeL's labelling, and so its
  kernel, is then not a function of the graph alone;
- ``gram_*``: GraKeL's ``LovaszTheta(random_state=0)`` Gram (normalize off and on) on the
  first 40 ``agree`` graphs of each set.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import grakel  # noqa: E402
from grakel.kernels import LovaszTheta  # noqa: E402
from grakel.kernels.lovasz_theta import _calculate_lovasz_embeddings_  # noqa: E402

import torchkern as tk  # noqa: E402
from tests.graphs.test_grakel_part_b import random_graphs  # noqa: E402

DATA = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")


def adjacency(d):
    A = np.zeros((d.num_nodes, d.num_nodes))
    A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
    return A


def sdp(graphs):
    return [_calculate_lovasz_embeddings_(adjacency(d)) for d in graphs]


def main():
    from torchkern.graphs import GraphSet
    from torchkern.graphs.theta import _edge_pairs, lovasz_theta_sdp
    mutag = tk.datasets.read_tu(os.path.join(DATA, "MUTAG"))
    rand = random_graphs(40, 6, 16, 0.2, 1, seed=11)
    out = {}
    for name, graphs in (("mutag", mutag), ("random", rand)):
        ref = sdp(graphs)
        ours = lovasz_theta_sdp(_edge_pairs(GraphSet(graphs)))
        out[f"theta_{name}"] = np.array([float(t) for _, t in ref])
        agree = np.array([np.abs(a[0] - b[1]).max() <= 1e-6 for a, b in zip(ref, ours)])
        out[f"agree_{name}"] = np.flatnonzero(agree)
        gs = [[adjacency(graphs[i])] for i in np.flatnonzero(agree)[:40]]
        for norm in (False, True):
            out[f"gram_{name}_{'norm' if norm else 'raw'}"] = LovaszTheta(
                random_state=0, normalize=norm).fit_transform(gs)
        print(name, "agree:", agree.sum(), "of", len(graphs))
    np.savez_compressed(os.path.join(os.path.dirname(__file__), "theta_references.npz"), **out)


if __name__ == "__main__":
    main()
