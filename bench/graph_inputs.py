"""Benchmark: VertexHistogram / EdgeHistogram from each graph input against GraKeL.

    python bench/graph_inputs.py                     # ER1000x20, ER1000x200, MUTAG, Cuneiform
    python bench/graph_inputs.py --sets MUTAG --repeat 11 --inner 5

The data and GraKeL's input are bench/graphs.py's (``load_sets``, ``grakel_input``: dense
adjacency, node-label ids, edge-label ids; the ER sets with a path, one-hot bond labels and
3-dim node attributes). torchkern times one dense Gram K(X, X) (``k(X).to_dense()``, as a
NumPy array) from (a) the list of PyG ``Data``, (b) a ``Batch`` of them, (c) a ready
``GraphSet`` (used again: its count key, kept with the set by the first use, makes the
Gram one ``bincount`` and one product; ``GraphSet, first use``: a copy without that key,
so the keys are made in the run), (d) an ``InMemoryDataset`` holding them (read from its
collated storage);
GraKeL 0.1.11 times ``fit_transform`` from its input lists (its parsing included). Both on
one thread (torch, and BLAS via threadpoolctl). The runs of the two libraries alternate
(``--repeat`` rounds of GraKeL, then each torchkern input, each ``--inner`` times in a
row) so that both meet the same load, and each figure is the best run on the process CPU
clock (``time.process_time``; the
machine may be shared) with the 1-minute load average beside the row. ``diff`` is max
|K − K_GraKeL| over every input (integer counts: exact). ``floor from a list``: the time
of :func:`floor` (reading and stacking the fields, and the Gram product), a lower bound
of the list column. ``GraphSet(list)``: the conversion alone of the list into a
:class:`~torchkern.graphs.GraphSet` that reads every field (x, node attributes, edges),
as the kernels without a field list (WeisfeilerLehman, ...) do.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread for both libraries, also in those loaded later

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from graphs import grakel_input, load_sets  # noqa: E402


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


def first_use(G):
    """A copy of the GraphSet ``G`` without the count keys the histogram kernels keep
    with a set (``_count_key_*``): what a set met for the first time costs them."""
    from torchkern.graphs import GraphSet
    H = GraphSet(G)
    for key in [k for k in H.__dict__ if k.startswith("_count_key_")]:
        del H.__dict__[key]
    return H


def floor(graphs, edges: bool, C):
    """A lower bound of any count kernel from a list of Data that stacks the fields it
    reads: each graph's attribute dict read once, its fields (x; or edge_index and
    edge_attr) read and concatenated by one ``torch.cat`` each, and the dense Gram
    C Cᵀ of a ready count matrix C (exact int8 product, as float64) — nothing checked,
    no label ids, no counting."""
    import torch
    from torchkern.graphs._labels import _int8_product
    stores = [g._store._mapping for g in graphs]
    if edges:
        torch.cat([st["edge_index"] for st in stores], 1)
        torch.cat([st["edge_attr"] for st in stores])
    else:
        torch.cat([st["x"] for st in stores])
    c8 = C.to(torch.int8)
    return _int8_product(c8, c8).double().numpy()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default="ER1000x20,ER1000x200,MUTAG,Cuneiform")
    p.add_argument("--repeat", type=int, default=7, help="rounds")
    p.add_argument("--inner", type=int, default=3, help="runs in a row per round")
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
        for name, graphs, _, _ in load_sets(a.sets.split(",")):
            batch = Batch.from_data_list(graphs)
            ds = in_memory(graphs, tempfile.mkdtemp())
            for kname, k, gker, el in (("VH", VertexHistogram(), GVH, False),
                                       ("EH", EdgeHistogram(), GEH, True)):
                gk = grakel_input(graphs, labels="ids", edge_labels=el)
                G = GraphSet(graphs)
                inputs = (graphs, batch, G, ds)
                k(graphs[:3]), gker().fit_transform(gk[:3])  # warm-up
                runs = [lambda: gker().fit_transform(gk)]
                runs += [lambda X=X: k(X).to_dense().numpy() for X in inputs]
                runs.append(lambda: k(first_use(G)).to_dense().numpy())
                C = k.features(graphs).to_dense()  # the count matrix, for the floor
                runs.append(lambda: floor(graphs, el, C))
                runs.append(lambda: GraphSet(graphs))
                best = [float("inf")] * len(runs)
                for _ in range(a.repeat):  # alternating: both meet the same load
                    for i, fn in enumerate(runs):
                        for _ in range(a.inner):  # a few in a row: warm caches
                            t = time.process_time()
                            fn()
                            best[i] = min(best[i], time.process_time() - t)
                Kg = gker().fit_transform(gk)
                diff = max(float(np.abs(k(X).to_dense().numpy() - Kg).max())
                           for X in inputs + (first_use(G),))
                best.insert(4, best.pop(5))  # first use beside the GraphSet column
                line = [name, kname, f"{best[0] * 1e3:.2f}"]
                line += [f"{b * 1e3:.2f} ({best[0] / b:.1f}x)" for b in best[1:-1]]
                line += [f"{best[-1] * 1e3:.2f}"]
                line += [f"{diff:.0e}", f"{os.getloadavg()[0]:.1f}"]
                rows.append(line)
                print(" | ".join(line), flush=True)
    cols = ["set", "kernel", "GraKeL ms", "list ms (ratio)", "Batch", "GraphSet",
            "GraphSet, first use", "InMemoryDataset", "floor from a list",
            "GraphSet(list) ms", "diff", "load"]
    print("\n| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
