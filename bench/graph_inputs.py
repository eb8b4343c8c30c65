"""Benchmark: VertexHistogram / EdgeHistogram from each graph input against GraKeL.

    python bench/graph_inputs.py                     # 1,000 x 20, 1,000 x 200, MUTAG
    python bench/graph_inputs.py --sets 1000x20 --repeat 7

torchkern times one dense Gram K(X, X) (``k(X).to_dense()``) from (a) a list of PyG
``Data``, (b) a ``Batch`` of them, (c) a ready ``GraphSet``, (d) an ``InMemoryDataset``
holding them (read from its collated storage); GraKeL 0.1.11 times ``fit_transform`` from
its input lists (edge set, node-label dict, edge-label dict: its parsing included). Both on
one thread (torch, and BLAS via threadpoolctl). Each figure is the best of ``--repeat``
runs on the process CPU clock (``time.process_time``; the machine may be shared) with the
wall clock beside it, and the 1-minute load average. ``diff`` is max |K − K_GraKeL|
(integer counts: exact). Data: bench/graphs.py's ``erdos_renyi`` sets (5 node labels) with
3 edge labels drawn per undirected edge, and MUTAG from GraKeL's test data.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from graphs import erdos_renyi  # noqa: E402


def with_edge_labels(graphs, seed=1, n_bond=3):
    """Copies with ``edge_attr``: one label column, drawn per undirected edge."""
    import torch
    from torch_geometric.data import Data
    rng = np.random.default_rng(seed)
    out = []
    for d in graphs:
        s, t = d.edge_index
        lab = rng.integers(0, n_bond, (d.num_nodes, d.num_nodes))
        lab = np.triu(lab, 1) + np.triu(lab, 1).T
        out.append(Data(x=d.x, edge_index=d.edge_index, num_nodes=d.num_nodes,
                        edge_attr=torch.as_tensor(lab[s.numpy(), t.numpy()])[:, None]))
    return out


def mutag():
    import grakel
    from torchkern.datasets import read_tu
    root = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")
    return read_tu(os.path.join(root, "MUTAG"), "MUTAG")


def to_grakel(graphs):
    """[edge set, node-label dict, edge-label dict] per graph (labels: the row's argmax)."""
    out = []
    for d in graphs:
        ei = [tuple(e) for e in d.edge_index.t().tolist()]
        x = d.x if d.x.dim() == 1 else d.x.argmax(1)
        ea = d.edge_attr
        el = (ea if ea.dim() == 1 or ea.shape[1] == 1 else ea.argmax(1)).reshape(-1).tolist()
        out.append([set(ei), dict(enumerate(x.tolist())), dict(zip(ei, el))])
    return out


def timed(fn, repeat):
    cpu, wall = [], []
    for _ in range(repeat):
        t0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        cpu.append(time.process_time() - t0)
        wall.append(time.perf_counter() - w0)
    return min(cpu) * 1e3, min(wall) * 1e3, out


def in_memory(graphs, root):
    from torch_geometric.data import InMemoryDataset

    class Saved(InMemoryDataset):
        def __init__(self):
            super().__init__(root, log=False)
            self.load(self.processed_paths[0])

        @property
        def raw_file_names(self):
            return []

        @property
        def processed_file_names(self):
            return ["graphs.pt"]

        def process(self):
            self.save(graphs, self.processed_paths[0])
    return Saved()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default="1000x20,1000x200,MUTAG")
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args(argv)
    import torch
    from threadpoolctl import threadpool_limits
    from grakel.kernels import EdgeHistogram as GEH, VertexHistogram as GVH
    from torch_geometric.data import Batch
    from torchkern.graphs import EdgeHistogram, GraphSet, VertexHistogram
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    rows = []
    with threadpool_limits(1):
        for name in a.sets.split(","):
            if name == "MUTAG":
                graphs = mutag()
            else:
                g, n = (int(v) for v in name.split("x"))
                graphs = with_edge_labels(erdos_renyi(g, n))
            gk = to_grakel(graphs)
            batch = Batch.from_data_list(graphs)
            ds = in_memory(graphs, tempfile.mkdtemp())
            for kname, k, gker in (("VH", VertexHistogram(), GVH),
                                   ("EH", EdgeHistogram(), GEH)):
                k(graphs[:3]), gker().fit_transform(gk[:3])  # warm-up
                gc_, gw, Kg = timed(lambda: gker().fit_transform(gk), max(1, a.repeat // 2))
                gs = GraphSet(graphs)
                line, diff = [name, kname, f"{gc_:.2f} / {gw:.2f}"], 0.0
                for X in (graphs, batch, gs, ds):
                    c, w, K = timed(lambda: k(X).to_dense(), a.repeat)
                    line.append(f"{c:.2f} / {w:.2f} ({gc_ / c:.0f}x)")
                    diff = max(diff, float(np.abs(K.numpy() - Kg).max()))  # every input
                line += [f"{diff:.0e}", f"{os.getloadavg()[0]:.1f}"]
                rows.append(line)
                print(" | ".join(line), flush=True)
    head = ["set", "kernel", "GraKeL ms cpu / wall", "list", "Batch", "GraphSet",
            "InMemoryDataset", "diff", "load"]
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
