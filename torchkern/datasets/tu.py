"""Reader for graph data sets in the TU format (Morris et al., 2020)."""
from __future__ import annotations

import glob
import os

import numpy as np
import torch

__all__ = ["read_tu"]


def _read(path, dtype, name, width=1):
    if os.path.getsize(path) == 0:  # e.g. the A file of graphs without edges
        return np.zeros((0, width), dtype=dtype)
    try:
        a = np.loadtxt(path, delimiter=",", dtype=dtype, ndmin=2)
    except ValueError as e:
        raise ValueError(f"{os.path.basename(path)} is not a comma-separated table of "
                         f"{name}: {e}") from None
    return a


def _check_finite(a: np.ndarray, path, name: str) -> None:
    """A NaN or infinite value read from ``path`` is a ValueError naming the file and the
    line (np.loadtxt reads 'nan' and 'inf' as numbers)."""
    bad = ~np.isfinite(a)
    if bad.any():
        line = int(np.argwhere(bad)[0, 0]) + 1
        raise ValueError(f"{os.path.basename(path)}, line {line}: {name} must be finite, got "
                         f"{a[line - 1].tolist()}")


def _one_hot(values: np.ndarray) -> torch.Tensor:
    """One column per distinct value of each column of ``values``, in sorted order."""
    blocks = []
    for col in values.T:
        distinct, inv = np.unique(col, return_inverse=True)
        blocks.append(np.eye(len(distinct), dtype=np.float32)[inv])
    return torch.from_numpy(np.concatenate(blocks, 1))


def read_tu(folder: str, name: str | None = None):
    """Read a graph data set in the TU format into a list of ``torch_geometric`` Data.

    The folder holds ``<NAME>_A.txt`` (one edge "i, j" per line, 1-based node ids),
    ``<NAME>_graph_indicator.txt`` (the graph of every node, 1-based, nodes grouped by
    graph), ``<NAME>_graph_labels.txt`` and, optionally, ``<NAME>_node_labels.txt``,
    ``<NAME>_edge_labels.txt``, ``<NAME>_node_attributes.txt``,
    ``<NAME>_edge_attributes.txt`` (Morris et al., 2020). Nothing is downloaded.

    Each graph becomes a ``Data`` with

    - ``x``: one-hot node labels, one column per distinct label value of the whole data
      set in sorted order (columns of a multi-column label file side by side), as
      PyG's ``TUDataset`` (which also makes columns for values that never occur); absent
      without a node-label file;
    - ``edge_index`` (2, E): the edges as listed (TU files list both directions of an
      undirected edge), local node ids;
    - ``edge_attr``: one-hot edge labels, likewise;
    - ``y`` (1,): the graph label — integer labels renumbered 0, 1, … in sorted order
      (MUTAG's −1/1 become 0/1, as in ``TUDataset``), other values kept as floats;
    - ``node_attributes`` (num_nodes, d) / ``edge_attributes`` (E, d'): the continuous
      attributes (float32, in the order of the file and of ``edge_index``), kept apart
      from ``x``. torch-geometric's ``TUDataset(use_node_attr=True)`` puts them in
      front of the one-hot labels in ``x``; here ``x`` holds labels only — the graph
      kernels read each distinct row of ``x`` as one discrete label — and the attribute
      kernels (:class:`~torchkern.graphs.GraphHopper`,
      :class:`~torchkern.graphs.PropagationAttr`) read ``node_attributes``.

    Parameters
    ----------
    folder : str
        The data set's folder.
    name : str, optional
        The file prefix; by default the one prefix of the folder's ``*_A.txt`` file.

    Returns
    -------
    list of torch_geometric.data.Data

    References
    ----------
    C. Morris, N. M. Kriege, F. Bause, K. Kersting, P. Mutzel and M. Neumann, "TUDataset:
    a collection of benchmark datasets for learning with graphs", ICML workshop GRL+
    (2020).

    Examples
    --------
    >>> import os, grakel
    >>> from torchkern.datasets import read_tu
    >>> graphs = read_tu(os.path.join(os.path.dirname(grakel.__file__), "tests/data/MUTAG"))
    >>> len(graphs), graphs[0]
    (188, Data(x=[17, 7], edge_index=[2, 38], edge_attr=[38, 4], y=[1]))
    >>> read_tu(os.path.join(os.path.dirname(grakel.__file__), "tests/data/Cuneiform"))[0]
    Data(x=[36, 7], edge_index=[2, 180], edge_attr=[180, 2], y=[1], node_attributes=[36, 3], edge_attributes=[180, 2])
    """
    from torch_geometric.data import Data

    if not os.path.isdir(folder):
        raise ValueError(f"folder {folder!r} is not a directory")
    if name is None:
        found = sorted(glob.glob(os.path.join(folder, "*_A.txt")))
        if len(found) != 1:
            raise ValueError(f"folder {folder!r} must hold exactly one <NAME>_A.txt file to "
                             f"infer the name, found {len(found)}; pass name=")
        name = os.path.basename(found[0])[:-len("_A.txt")]

    def path(suffix):
        return os.path.join(folder, f"{name}_{suffix}.txt")

    for req in ("A", "graph_indicator", "graph_labels"):
        if not os.path.exists(path(req)):
            raise ValueError(f"{path(req)} is missing: a TU data set needs {name}_A.txt, "
                             f"{name}_graph_indicator.txt and {name}_graph_labels.txt")
    edges = _read(path("A"), np.int64, "node ids", width=2) - 1
    indicator = _read(path("graph_indicator"), np.int64, "graph ids")
    glabels = _read(path("graph_labels"), np.float64, "labels")
    for suffix, a in (("graph_indicator", indicator), ("graph_labels", glabels)):
        if a.shape[1] != 1:  # its first column was read, the others dropped silently
            raise ValueError(f"{name}_{suffix}.txt must have one value per line, got "
                             f"{a.shape[1]} columns")
    _check_finite(glabels, path("graph_labels"), "graph labels")
    indicator, glabels = indicator[:, 0] - 1, glabels[:, 0]
    n_graphs = len(glabels)
    if edges.shape[1] != 2:
        raise ValueError(f"{name}_A.txt must have two columns, got {edges.shape[1]}")
    if len(indicator) and (np.any(np.diff(indicator) < 0) or indicator.min() < 0
                           or indicator.max() >= n_graphs):
        raise ValueError(f"{name}_graph_indicator.txt must list graph ids 1..{n_graphs} in "
                         f"non-decreasing order (nodes grouped by graph)")
    n_nodes = len(indicator)
    if edges.size and (edges.min() < 0 or edges.max() >= n_nodes):
        raise ValueError(f"{name}_A.txt refers to nodes outside 1..{n_nodes}")
    graph_of_edge = indicator[edges[:, 0]]
    if np.any(indicator[edges[:, 1]] != graph_of_edge):
        raise ValueError(f"{name}_A.txt has an edge between two graphs")

    def optional(suffix, rows, dtype):
        if not os.path.exists(path(suffix)):
            return None
        a = _read(path(suffix), dtype, suffix.replace("_", " "))
        if a.dtype.kind == "f":
            _check_finite(a, path(suffix), suffix.replace("_", " "))
        if len(a) != rows:
            raise ValueError(f"{name}_{suffix}.txt has {len(a)} lines, expected {rows}")
        return a

    node_labels = optional("node_labels", n_nodes, np.int64)
    edge_labels = optional("edge_labels", len(edges), np.int64)
    node_attr = optional("node_attributes", n_nodes, np.float32)
    edge_attr = optional("edge_attributes", len(edges), np.float32)

    if np.all(glabels == np.round(glabels)):
        _, inv = np.unique(glabels, return_inverse=True)
        y = torch.from_numpy(inv.astype(np.int64))
    else:
        y = torch.from_numpy(glabels)

    node_counts = np.bincount(indicator, minlength=n_graphs)
    node_start = np.concatenate([[0], np.cumsum(node_counts)])
    order = np.argsort(graph_of_edge, kind="stable")  # edges grouped by graph, file order kept
    edge_counts = np.bincount(graph_of_edge, minlength=n_graphs).tolist()
    local = torch.from_numpy((edges - node_start[graph_of_edge][:, None])[order].T.copy())

    def split(t, counts):
        return [None] * n_graphs if t is None else torch.split(t, counts)

    xs = split(None if node_labels is None else _one_hot(node_labels), node_counts.tolist())
    eas = split(None if edge_labels is None else _one_hot(edge_labels)[order], edge_counts)
    nas = split(None if node_attr is None else torch.from_numpy(node_attr), node_counts.tolist())
    eats = split(None if edge_attr is None else torch.from_numpy(edge_attr)[order], edge_counts)
    eis = torch.split(local, edge_counts, dim=1)
    graphs = []
    for g in range(n_graphs):
        d = Data(x=xs[g], edge_index=eis[g], edge_attr=eas[g], y=y[g:g + 1])
        if xs[g] is None:
            d.num_nodes = int(node_counts[g])
        if nas[g] is not None:
            d.node_attributes = nas[g]
        if eats[g] is not None:
            d.edge_attributes = eats[g]
        graphs.append(d)
    return graphs
