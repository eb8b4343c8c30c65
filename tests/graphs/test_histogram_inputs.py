"""VertexHistogram / EdgeHistogram from each input equal label counts made in Python.

The inputs: a list of Data, a Batch, a GraphSet, an InMemoryDataset and its index views
(``ds[idx]``: a slice, a permutation, a boolean mask, a view of a view), on sets with
graphs of 0 nodes, graphs without edges, graphs of very different sizes (so that a node
id of one graph is out of range in another), coalesced and uncoalesced edges. The
reference of every Gram is :func:`tests.graphs.test_fast_inputs.gram_from_counts`
(Python Counters of each graph's label rows, over its distinct edges).

The data set paths read the collated storage; where its edges are valid and sorted in
each graph, EdgeHistogram counts them from the stored (per-graph) node ids, without
building the global edge_index: the tests check that this path is the one taken, and
that every fallback (unsorted or duplicated edges, edge_attributes, a bad node id)
gives the same counts, or the error naming the graph.
"""
import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.utils import coalesce

from tests.graphs.test_fast_inputs import (edge_labels, gram_from_counts, node_labels,
                                          same_rows_for_duplicates)
from tests.graphs.test_graph_inputs import SmallGraphs as Saved
from torchkern.graphs import EdgeHistogram, GraphSet, VertexHistogram
from torchkern.graphs import _batch


def labelled_graphs(m, seed=0, coalesced=True, empty=True):
    """Graphs of 0 to 30 nodes (some of 0 nodes, some without edges), one-hot float x,
    one-hot float edge_attr of 3 bond labels, both directions of every edge; coalesced
    (sorted by (source, target) in each graph, no duplicate) or in a random order with
    some edges twice."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(m):
        n = int(rng.integers(1, 31)) if i % 5 else int(rng.integers(0, 3)) * empty
        k = int(rng.integers(0, 3 * n + 1)) if n and i % 4 else 0
        e = rng.integers(0, max(n, 1), (2, k))
        e = torch.tensor(np.concatenate([e, e[::-1]], 1), dtype=torch.long)
        a = torch.nn.functional.one_hot(torch.as_tensor(rng.integers(0, 3, k)), 3).float()
        a = torch.cat([a, a])
        if coalesced:
            e, a = coalesce(e, a, n, reduce="max")
        else:
            extra = torch.as_tensor(rng.integers(0, max(k, 1), k // 3))[: e.shape[1]]
            e, a = torch.cat([e, e[:, extra]], 1), torch.cat([a, a[extra]])
            p = torch.as_tensor(rng.permutation(e.shape[1]))
            e, a = e[:, p], a[p]
            a = a[same_rows_for_duplicates(e.numpy(), n)]  # a pair drawn twice: one label
        x = torch.nn.functional.one_hot(torch.as_tensor(rng.integers(0, 4, n)), 4).float()
        out.append(Data(x=x, edge_index=e, edge_attr=a, num_nodes=n))
    return out


def views(ds, m):
    perm = np.random.default_rng(3).permutation(m)
    mask = torch.arange(m) % 3 != 1
    return [(ds, list(range(m))), (ds[4:m - 3], list(range(4, m - 3))),
            (ds[perm], list(perm)), (ds[mask], mask.nonzero().reshape(-1).tolist()),
            (ds[perm][2:30:3], list(perm[2:30:3]))]


def assert_gram(K, graphs, key, normalize=False):
    np.testing.assert_allclose(K.to_dense().numpy(), gram_from_counts(graphs, graphs, key,
                                                                      normalize),
                               rtol=1e-14, atol=0)


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    out = {}
    for name, kw in (("coalesced", {}), ("shuffled", dict(coalesced=False))):
        graphs = labelled_graphs(60, seed=len(name), **kw)
        out[name] = graphs, Saved(str(tmp_path_factory.mktemp(name)), graphs)
    return out


def test_the_stored_edges_are_counted_without_global_node_ids(sets, monkeypatch):
    """Coalesced graphs of a data set: EdgeHistogram never builds the global edge_index
    (its reader's ``edges`` is not called), from the data set and from every view, and
    the edges are still read right afterwards, on first use."""
    graphs, ds = sets["coalesced"]
    sizes = [g.num_nodes for g in graphs]
    assert 0 in sizes and max(sizes) > 2 * min(s for s in sizes if s)  # ids out of range
    for view, idx in views(ds, len(graphs)):
        sub = [graphs[i] for i in idx]
        with monkeypatch.context() as m:
            m.setattr(_batch._CollatedFields, "edges",
                      lambda self: pytest.fail("the global edge_index was built"))
            G = EdgeHistogram().check_input(view)
            for normalize in (False, True):
                assert_gram(EdgeHistogram(normalize)(G), sub, edge_labels, normalize)
                assert_gram(EdgeHistogram(normalize)(view), sub, edge_labels, normalize)
        ref = GraphSet(sub)  # the edges, read on first use, are the list's
        assert torch.equal(G.edge_index, ref.edge_index) and torch.equal(G.eptr, ref.eptr)
        assert torch.equal(G.edge_label_values[G.edge_label], ref.edge_label_values[ref.edge_label])
        assert_gram(EdgeHistogram()(G), sub, edge_labels)  # counted from the read edges
        assert_gram(VertexHistogram()(view), sub, node_labels)


def test_every_input_gives_the_python_counts(sets):
    for graphs, ds in sets.values():
        for k, key in ((VertexHistogram(), node_labels), (EdgeHistogram(), edge_labels)):
            for X in (graphs, Batch.from_data_list(graphs), GraphSet(graphs), ds):
                assert_gram(k(X), graphs, key)
            for view, idx in views(ds, len(graphs)):
                assert_gram(k(view), [graphs[i] for i in idx], key)
        X, Y = graphs[:20], ds[20:]  # a cross Gram: list against data set view
        K = EdgeHistogram()(X, Y).to_dense().numpy()
        np.testing.assert_allclose(K, gram_from_counts(X, graphs[20:], edge_labels), rtol=0)


def test_the_fallbacks_of_the_stored_edges(tmp_path, monkeypatch):
    """Uncoalesced edges (a random order, duplicates) and edge_attr rows per graph that
    are not the edges' are read the usual way (the global edge_index, merged), with the
    same counts; edge_attributes do not change the path, and are checked; a bad node
    id is refused naming the graph, however large the other graphs."""
    calls = []
    edges = _batch._CollatedFields.edges

    def counted(self):
        calls.append(1)
        return edges(self)
    monkeypatch.setattr(_batch._CollatedFields, "edges", counted)
    shuffled = labelled_graphs(30, seed=4, coalesced=False)
    plus = [Data(**{k: v for k, v in g}, edge_attributes=torch.ones(g.num_edges, 2))
            for g in labelled_graphs(30, seed=5)]
    for i, graphs in enumerate((shuffled, plus)):
        ds = Saved(str(tmp_path / str(i)), graphs)
        calls.clear()
        assert_gram(EdgeHistogram()(ds), graphs, edge_labels)
        assert bool(calls) == (i == 0)  # unsorted: read the usual way
    # edge_attributes are checked (not read by EdgeHistogram), as when read
    nan = [Data(**dict(g)) for g in plus[:4]]
    nan[2].edge_attributes = nan[2].edge_attributes.clone()
    nan[2].edge_attributes[0, 1] = float("nan")
    assert nan[2].num_edges > 0
    for X in (nan, Saved(str(tmp_path / "nan"), nan)):
        with pytest.raises(ValueError, match="X: edge_attributes contains NaN or infinity"):
            EdgeHistogram()(X)
    # one row of edge_attr too many in graph 1, one too few in graph 2: totals agree
    g = labelled_graphs(3, seed=6, empty=False)
    assert g[1].num_edges > 0 and g[2].num_edges > 0
    g[1].edge_attr = torch.cat([g[1].edge_attr, g[1].edge_attr[:1]])
    g[2].edge_attr = g[2].edge_attr[1:]
    calls.clear()
    EdgeHistogram()(Saved(str(tmp_path / "rows"), g))
    assert calls
    big = Data(x=torch.zeros(40, 1), edge_index=torch.tensor([[0, 39], [39, 0]]),
               edge_attr=torch.zeros(2, 1), num_nodes=40)
    bad = Data(x=torch.zeros(3, 1), edge_index=torch.tensor([[0, 5], [5, 0]]),
               edge_attr=torch.zeros(2, 1), num_nodes=3)
    ds = Saved(str(tmp_path / "bad"), [big, big, bad, big])
    with pytest.raises(ValueError, match=r"X: graph 2: edge_index must be .* node id 5 in a "
                                         r"graph with num_nodes=3"):
        EdgeHistogram()(ds)
    assert_gram(EdgeHistogram()(ds[[0, 3]]), [big, big], edge_labels)  # a view without it


def test_the_kept_count_key_is_remade_after_an_in_place_change(sets):
    """A GraphSet's label tensors written in place after a first Gram (same objects, new
    values): the next Gram counts the new labels, not the kept key's."""
    graphs, _ = sets["coalesced"]
    G = GraphSet(graphs)
    assert_gram(VertexHistogram()(G), graphs, node_labels)
    assert_gram(EdgeHistogram()(G), graphs, edge_labels)
    G.labelled_nodes()[0].zero_()  # every node the first label row, in place
    n = torch.tensor([g.num_nodes for g in graphs], dtype=torch.float64)
    assert torch.equal(VertexHistogram()(G).to_dense(), torch.outer(n, n))
    G.labelled_edges()[1].zero_()  # every edge the first label row, in place
    m = torch.tensor([g.num_edges for g in graphs], dtype=torch.float64)
    assert torch.equal(EdgeHistogram()(G).to_dense(), torch.outer(m, m))


@pytest.mark.parametrize("int32_keys", [0, 2 ** 31])
def test_a_set_used_again_keeps_its_count_key_until_its_labels_change(sets, monkeypatch,
                                                                       int32_keys):
    """The bincount key kept with a GraphSet (``_count_key``) gives the Python counts on
    every later use, and is remade when the tensors it comes from change: new node
    labels, new edge labels, a move (``to``); a copy ``GraphSet(G)`` changed leaves G's.
    Kept as int32 below 2^31 keys, as int64 above (forced here by a zero bound)."""
    import torchkern.graphs.histogram as hist
    monkeypatch.setattr(hist, "_INT32_KEYS", int32_keys)
    graphs, _ = sets["coalesced"]
    G = GraphSet(graphs)
    for k, key in ((VertexHistogram(), node_labels), (EdgeHistogram(), edge_labels)):
        for _ in range(2):
            assert_gram(k(G), graphs, key)
        kept = G.__dict__[f"_count_key_{type(k).__name__}"][1]
        assert kept.dtype == (torch.int32 if int32_keys else torch.int64)
    H = GraphSet(G)
    H.node_label = torch.zeros_like(H.node_label)  # every node one label
    H.edge_label = torch.zeros_like(H.edge_label)
    n = torch.tensor([g.num_nodes for g in graphs], dtype=torch.float64)
    m = torch.tensor([g.num_edges for g in graphs], dtype=torch.float64)
    assert torch.equal(VertexHistogram()(H).to_dense(), torch.outer(n, n))
    assert torch.equal(EdgeHistogram()(H).to_dense(), torch.outer(m, m))
    assert_gram(VertexHistogram()(G), graphs, node_labels)  # G's own keys still
    assert_gram(EdgeHistogram()(G), graphs, edge_labels)
    other = G.to(dtype=torch.float32)  # the same tensors: the same keys, another dtype
    K = EdgeHistogram()(other).to_dense()
    assert K.dtype == torch.float32
    np.testing.assert_array_equal(K.numpy(), gram_from_counts(graphs, graphs, edge_labels))
    moved = G.to(device="cpu")  # tensors moved (here: to the same device): keys dropped
    assert not any(k.startswith("_count_key_") for k in moved.__dict__)
    assert_gram(EdgeHistogram()(moved), graphs, edge_labels)


def test_a_list_of_coalesced_graphs_is_counted_without_global_node_ids(sets, monkeypatch):
    """From a list of Data as from a data set: coalesced graphs counted from their own
    node ids (no global edge_index built), and every fallback (unsorted edges: the
    concatenation kept is shifted in place; int32 edge_index; edge_attr rows per graph
    not the edges'; a graph without edge_index; a bad node id) and graphs with
    edge_attributes give the Python counts or the error naming the graph."""
    graphs, _ = sets["coalesced"]
    with monkeypatch.context() as m:
        m.setattr(_batch, "_global_edges", lambda *a, **k: pytest.fail("global ids built"))
        for normalize in (False, True):
            assert_gram(EdgeHistogram(normalize)(graphs), graphs, edge_labels, normalize)
    G = EdgeHistogram().check_input(graphs)
    EdgeHistogram()(G)
    assert torch.equal(G.edge_index, GraphSet(graphs).edge_index)  # read on first use
    shuffled, _ = sets["shuffled"]
    assert_gram(EdgeHistogram()(shuffled), shuffled, edge_labels)
    G = EdgeHistogram().check_input(shuffled)
    assert G.__dict__["_reader"]._local[0] is not None  # valid: concatenated, kept
    assert_gram(EdgeHistogram()(G), shuffled, edge_labels)
    assert torch.equal(G.edge_index, GraphSet(shuffled).edge_index)
    small = labelled_graphs(12, seed=8, empty=False)
    variants = [[Data(x=g.x, edge_index=g.edge_index.int(), edge_attr=g.edge_attr,
                      num_nodes=g.num_nodes) for g in small],
                [Data(**dict(g), edge_attributes=torch.zeros(g.num_edges, 1)) for g in small]]
    for graphs2 in variants:
        assert_gram(EdgeHistogram()(graphs2), small, edge_labels)
    g = labelled_graphs(3, seed=6, empty=False)
    g[1].edge_attr = torch.cat([g[1].edge_attr, g[1].edge_attr[:1]])  # totals agree
    g[2].edge_attr = g[2].edge_attr[1:]
    # read the usual way, at once: the rows are checked graph by graph (only the total
    # was, and the labels of graphs 1 and 2 were shifted by one edge silently)
    with pytest.raises(ValueError, match=r"X: every graph's edge_attr must have one row "
                                         r"per edge \(graph 1 has \d+ rows for \d+ edges"):
        EdgeHistogram().check_input(g)
    no_edges = Data(x=torch.zeros(2, 1), edge_attr=torch.zeros(0, 3), num_nodes=2)
    ref = Data(x=no_edges.x, edge_index=torch.zeros(2, 0, dtype=torch.long),
               edge_attr=no_edges.edge_attr, num_nodes=2)
    assert_gram(EdgeHistogram()(small[:3] + [no_edges]), small[:3] + [ref], edge_labels)
    big = Data(x=torch.zeros(40, 1), edge_index=torch.tensor([[0, 39], [39, 0]]),
               edge_attr=torch.zeros(2, 1), num_nodes=40)
    bad = Data(x=torch.zeros(3, 1), edge_index=torch.tensor([[0, 5], [5, 0]]),
               edge_attr=torch.zeros(2, 1), num_nodes=3)
    with pytest.raises(ValueError, match=r"X: graph 1: edge_index must be .* node id 5 in a "
                                         r"graph with num_nodes=3"):
        EdgeHistogram()([big, bad, big])


def test_vertex_histogram_counts_x_before_the_node_labels_are_read(sets):
    """VertexHistogram reads x for counting (``labelled_nodes``): ids into the whole
    label space when it is small, numbered labels when it is not (a wide integer
    column), the same counts either way and after the node labels are read."""
    graphs, ds = sets["coalesced"]
    for X in (graphs, Batch.from_data_list(graphs), ds):
        G = VertexHistogram().check_input(X)
        assert "nodes" in G.__dict__["_pending"] and "_labelled_nodes" in G.__dict__
        ids, values = G.labelled_nodes()
        assert values.shape[0] == 2 ** 4  # every one-hot row of width 4 and more
        assert_gram(VertexHistogram()(G), graphs, node_labels)
        assert torch.equal(G.label_values[G.node_label], values[ids])  # now read
        assert "_labelled_nodes" not in G.__dict__
        assert_gram(VertexHistogram()(G), graphs, node_labels)  # counted again
    rng = np.random.default_rng(9)
    wide = [Data(x=torch.as_tensor(rng.choice([0, 7, 40_000], (n, 1))), num_nodes=n,
                 edge_index=torch.zeros(2, 0, dtype=torch.long)) for n in (5, 0, 9, 4)]
    G = VertexHistogram().check_input(wide)
    assert G.labelled_nodes()[1].shape[0] <= 3  # 40,001 rows: numbered
    for normalize in (False, True):
        assert_gram(VertexHistogram(normalize)(G), wide, node_labels, normalize)
        assert_gram(VertexHistogram(normalize)(wide), wide, node_labels, normalize)


def test_few_unsorted_distinct_edges_are_told_distinct_by_one_sort(tmp_path, monkeypatch):
    """Edges in file order (each graph's distinct, unsorted, as TU files list them):
    told distinct by one sort of (graph, source, target) keys, counted without global
    ids; above ``_SORT_DISTINCT`` edges, read and counted the usual way. Both equal
    the Python counts."""
    rng = np.random.default_rng(11)
    graphs = []
    for g in labelled_graphs(30, seed=12):
        p = torch.as_tensor(rng.permutation(g.num_edges))
        graphs.append(Data(x=g.x, edge_index=g.edge_index[:, p], edge_attr=g.edge_attr[p],
                           num_nodes=g.num_nodes))
    ds = Saved(str(tmp_path), graphs)
    with monkeypatch.context() as m:
        m.setattr(_batch, "_global_edges", lambda *a, **k: pytest.fail("global ids built"))
        for X in (graphs, ds):
            assert_gram(EdgeHistogram()(X), graphs, edge_labels)
    monkeypatch.setattr(_batch, "_SORT_DISTINCT", 0)
    for X in (graphs, ds):
        assert_gram(EdgeHistogram()(X), graphs, edge_labels)


@pytest.mark.parametrize("cells", [1, 200, 2 ** 17])
def test_the_int8_product_by_blocks_of_rows(sets, monkeypatch, cells):
    """The dense Gram of counts ≤ 127 (int8 product) by blocks of one row, of a few
    rows with a shorter last block, and in one block: the Python counts, for the Gram,
    a cross Gram and rows."""
    import torchkern.graphs.histogram as hist
    monkeypatch.setattr(hist, "_BLOCK_CELLS", cells)
    graphs, _ = sets["coalesced"]
    X, Y = graphs[:23], graphs[23:]
    for k, key in ((VertexHistogram(), node_labels), (EdgeHistogram(), edge_labels)):
        K = k(graphs)
        assert K._lowp()[0].dtype == (torch.int8 if hist._int8_product_works() else
                                      torch.float32)
        assert_gram(K, graphs, key)
        cross = gram_from_counts(X, Y, key)
        np.testing.assert_array_equal(k(X, Y).to_dense().numpy(), cross)
        np.testing.assert_array_equal(k(X, Y).rows([5, 0, 22, 5]).numpy(), cross[[5, 0, 22, 5]])
