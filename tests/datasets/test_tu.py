"""read_tu against a direct parse of the TU files (MUTAG from the installed GraKeL, and
small data sets written here)."""
import os
from collections import Counter

import numpy as np
import pytest
import torch

from torchkern.datasets import read_tu

import grakel  # noqa: E402  (the test extra installs it: never skipped)
MUTAG = os.path.join(os.path.dirname(grakel.__file__), "tests", "data", "MUTAG")


def _raw(name, suffix, folder=MUTAG):
    return np.loadtxt(os.path.join(folder, f"{name}_{suffix}.txt"), delimiter=",", dtype=np.int64,
                      ndmin=2)


def test_mutag_matches_the_files():
    graphs = read_tu(MUTAG)
    A, ind = _raw("MUTAG", "A"), _raw("MUTAG", "graph_indicator")[:, 0]
    nl, el = _raw("MUTAG", "node_labels")[:, 0], _raw("MUTAG", "edge_labels")[:, 0]
    gl = _raw("MUTAG", "graph_labels")[:, 0]
    assert len(graphs) == 188 == len(gl)
    assert sorted(Counter(int(d.y) for d in graphs).values()) == [63, 125]
    # y: -1 -> 0, 1 -> 1
    np.testing.assert_array_equal([int(d.y) for d in graphs], (gl == 1).astype(int))
    assert sum(d.num_nodes for d in graphs) == len(ind) == 3371
    assert sum(d.edge_index.shape[1] for d in graphs) == len(A) == 7442
    np.testing.assert_array_equal([d.num_nodes for d in graphs], np.bincount(ind)[1:])
    # one-hot columns = distinct label values in sorted order
    x = torch.cat([d.x for d in graphs])
    assert x.shape[1] == len(np.unique(nl))
    np.testing.assert_array_equal(np.unique(nl)[x.argmax(1).numpy()], nl)
    assert torch.all(x.sum(1) == 1)
    # edges per graph, as given, with their labels
    start = np.concatenate([[0], np.cumsum(np.bincount(ind)[1:])])
    got = Counter()
    for g, d in enumerate(graphs):
        lab = np.unique(el)[d.edge_attr.argmax(1).numpy()]
        for (s, t), l in zip(d.edge_index.t().tolist(), lab):
            got[(s + start[g] + 1, t + start[g] + 1, l)] += 1
    assert got == Counter((int(s), int(t), int(l)) for (s, t), l in zip(A, el))


def _write(folder, name, files):
    os.makedirs(folder, exist_ok=True)
    for suffix, rows in files.items():
        with open(os.path.join(folder, f"{name}_{suffix}.txt"), "w") as f:
            f.write("\n".join(", ".join(str(v) for v in np.atleast_1d(r)) for r in rows) + "\n")


def test_small_dataset_with_attributes_gaps_and_isolated_nodes(tmp_path):
    # graph 1: nodes 1-3 (path 1-2-3), graph 2: nodes 4-5, node 5 isolated, graph 3: node 6
    files = {"A": [(1, 2), (2, 1), (2, 3), (3, 2)],
             "graph_indicator": [1, 1, 1, 2, 2, 3],
             "graph_labels": [0.5, 1.25, -2.0],
             "node_labels": [5, 1, 5, 9, 1, 1],
             "node_attributes": [(0.1, 1.0), (0.2, 2.0), (0.3, 3.0), (0.4, 4.0), (0.5, 5.0),
                                 (0.6, 6.0)]}
    _write(str(tmp_path), "TOY", files)
    graphs = read_tu(str(tmp_path))
    assert [d.num_nodes for d in graphs] == [3, 2, 1]
    assert [d.edge_index.shape[1] for d in graphs] == [4, 0, 0]
    # labels 1, 5, 9 -> 3 columns (no columns for the values in between)
    assert graphs[0].x.tolist() == [[0, 1, 0], [1, 0, 0], [0, 1, 0]]
    assert graphs[1].x.tolist() == [[0, 0, 1], [1, 0, 0]]
    assert [float(d.y) for d in graphs] == [0.5, 1.25, -2.0]  # not integers: kept
    np.testing.assert_allclose(graphs[1].node_attributes.numpy(), [[0.4, 4.0], [0.5, 5.0]])
    assert graphs[0].edge_attr is None


def test_bad_folders(tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        read_tu(str(tmp_path / "nope"))
    _write(str(tmp_path / "a"), "X", {"A": [(1, 2)], "graph_indicator": [1, 1]})
    with pytest.raises(ValueError, match="X_graph_labels.txt is missing"):
        read_tu(str(tmp_path / "a"))
    _write(str(tmp_path / "b"), "X", {"A": [(1, 2)], "graph_indicator": [2, 1],
                                      "graph_labels": [0, 1]})
    with pytest.raises(ValueError, match="non-decreasing"):
        read_tu(str(tmp_path / "b"))
    _write(str(tmp_path / "c"), "X", {"A": [(1, 3)], "graph_indicator": [1, 1, 2],
                                      "graph_labels": [0, 1]})
    with pytest.raises(ValueError, match="between two graphs"):
        read_tu(str(tmp_path / "c"))
    _write(str(tmp_path / "c"), "Y", {"A": [(1, 2)], "graph_indicator": [1, 1],
                                      "graph_labels": [0]})
    with pytest.raises(ValueError, match="exactly one"):
        read_tu(str(tmp_path / "c"))
    assert len(read_tu(str(tmp_path / "c"), name="Y")) == 1
    _write(str(tmp_path / "d"), "X", {"A": [(1, 2)], "graph_indicator": [1, 1],
                                      "graph_labels": [0], "node_labels": [1]})
    with pytest.raises(ValueError, match="has 1 lines, expected 2"):
        read_tu(str(tmp_path / "d"))


@pytest.mark.parametrize("suffix, values, line", [
    ("graph_labels", ["0", "nan"], 2),
    ("node_attributes", [(0.5, 1.0), (1.0, 2.0), (1.0, "inf")], 3),
    ("edge_attributes", [(0.5,), ("-inf",)], 2),
])
def test_nan_or_inf_values_name_the_file_and_line(tmp_path, suffix, values, line):
    # NumPy reads 'nan' and 'inf' as numbers: a NaN graph label (y) or attribute went out
    # of read_tu silently
    files = {"A": [(1, 2), (2, 1)], "graph_indicator": [1, 1, 2],
             "graph_labels": ["0", "1"], suffix: values}
    _write(str(tmp_path), "T", files)
    with pytest.raises(ValueError, match=f"T_{suffix}.txt, line {line}: .* must be finite"):
        read_tu(str(tmp_path))


@pytest.mark.parametrize("suffix, rows", [
    ("graph_labels", [(0, 5), (1, 7)]),
    ("graph_indicator", [(1, 1), (1, 2), (2, 2)]),
])
def test_one_column_files_with_more_columns_are_refused(tmp_path, suffix, rows):
    # the first column was read and the others dropped, silently
    files = {"A": [(1, 2), (2, 1)], "graph_indicator": [1, 1, 2], "graph_labels": [0, 1]}
    files[suffix] = rows
    _write(str(tmp_path), "T", files)
    with pytest.raises(ValueError, match=f"T_{suffix}.txt must have one value per line, "
                                         f"got 2 columns"):
        read_tu(str(tmp_path))
