"""Graph inputs read without per-graph Python, and the histogram kernels' dense path.

- a GraphSet from an InMemoryDataset (read from its collated storage and ``slices``), from
  its index views (a slice, a permutation, a boolean mask), from a Batch and from a list of
  Data holds the edges, labels and attributes a per-graph Python reference builds: the
  distinct edges of every graph with global node ids, sorted; a duplicated edge's rows
  (equal: duplicates with other ``edge_attr`` rows are refused where read);
- the edges are merged on first read, so ``take``/``concat``/``to`` before that read give
  the same sets as after it;
- VertexHistogram / EdgeHistogram equal k(G, G') = Σ_ℓ c_ℓ(G) c_ℓ(G') from label counts
  made by Python dictionaries, on their dense path (int8, float32 and float64 products) and
  on the sparse path (many labels), normalized, cross Grams, rows, products and diagonals.
"""
from collections import Counter

import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV
from torch_geometric.data import Batch, Data, InMemoryDataset, in_memory_dataset

import torchkern as tk
from tests.graphs.test_graph_inputs import SmallGraphs as Saved
from torchkern.graphs import EdgeHistogram, GraphSet, VertexHistogram


def graphs_with_everything(m, seed=0, n_labels=3):
    """Random graphs with one-hot float x, integer edge_attr (one label column), float
    node_attributes and edge_attributes; some edges duplicated (with the same rows),
    some graphs without edges, isolated nodes."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(m):
        n = int(rng.integers(1, 9))
        k = int(rng.integers(0, 2 * n + 1)) if i % 7 else 0
        e = rng.integers(0, n, (2, k))
        e = np.concatenate([e, e[::-1], e[:, : k // 3]], 1)  # both ways, a few twice
        x = np.eye(n_labels)[rng.integers(0, n_labels, n)]
        ea = rng.integers(0, 4, (e.shape[1], 1))
        na = rng.normal(size=(n, 2))
        eat = rng.normal(size=(e.shape[1], 3))
        first = same_rows_for_duplicates(e, n)
        out.append(Data(x=torch.tensor(x, dtype=torch.float32),
                        edge_index=torch.tensor(e, dtype=torch.long),
                        edge_attr=torch.tensor(ea[first]),
                        node_attributes=torch.tensor(na),
                        edge_attributes=torch.tensor(eat[first]),
                        num_nodes=n))
    return out


def same_rows_for_duplicates(e, n):
    """For every column of the (2, E) array ``e``, the column of its edge's first
    occurrence: the rows of a duplicate edge copied from its first occurrence, since
    duplicates with other ``edge_attr`` rows are refused by the kernels that read them."""
    _, first, inv = np.unique(e[0] * max(n, 1) + e[1], return_index=True, return_inverse=True)
    return first[inv.reshape(-1)]


def reference(graphs):
    """Per-graph Python: (ptr, edges, first-occurrence edge rows, node label rows)."""
    ptr, edges, erows, eattr = [0], [], [], []
    for g in graphs:
        off, seen = ptr[-1], {}
        for j, (s, t) in enumerate(g.edge_index.t().tolist()):
            seen.setdefault((s + off, t + off), j)
        for (s, t), j in sorted(seen.items()):
            edges.append((s, t))
            erows.append(g.edge_attr[j].tolist())
            eattr.append(g.edge_attributes[j].tolist())
        ptr.append(off + g.num_nodes)
    return ptr, edges, erows, eattr


def check_set(G, graphs):
    ptr, edges, erows, eattr = reference(graphs)
    assert G.ptr.tolist() == ptr
    assert [tuple(e) for e in G.edge_index.t().tolist()] == edges
    src = G.edge_index[0]
    assert G.eptr.tolist() == [int((src < p).sum()) for p in ptr]
    assert G.edge_label_values[G.edge_label].tolist() == erows
    np.testing.assert_array_equal(G.edge_attributes.numpy(), np.array(eattr).reshape(-1, 3))
    x = torch.cat([g.x for g in graphs])
    assert torch.equal(G.label_values[G.node_label].to(x.dtype), x)
    np.testing.assert_array_equal(G.node_attributes.numpy(),
                                  torch.cat([g.node_attributes for g in graphs]).numpy())


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    graphs = graphs_with_everything(40)
    return graphs, Saved(str(tmp_path_factory.mktemp("fast_inputs")), graphs)


def test_every_input_gives_the_per_graph_reference(data):
    graphs, ds = data
    for X in (graphs, tuple(graphs), Batch.from_data_list(graphs), ds):
        check_set(GraphSet(X) if not isinstance(X, InMemoryDataset)
                  else VertexHistogram().check_input(X), graphs)
    perm = np.random.default_rng(1).permutation(len(graphs))
    mask = torch.arange(len(graphs)) % 3 == 1
    for view, idx in ((ds[5:17], range(5, 17)), (ds[perm], perm),
                      (ds[mask], mask.nonzero().reshape(-1).tolist()),
                      (ds[perm][3:20:2], perm[3:20:2])):
        check_set(VertexHistogram().check_input(view), [graphs[i] for i in idx])


def test_the_collated_read_needs_no_graph_objects(data, monkeypatch):
    """The data set's own per-graph access is never called (no transform set)."""
    graphs, ds = data

    def forbidden(*a, **k):
        raise AssertionError("a graph was read one by one")
    monkeypatch.setattr(ds, "_data_list", None)
    monkeypatch.setattr(in_memory_dataset, "separate", forbidden)
    check_set(VertexHistogram().check_input(ds), graphs)
    check_set(VertexHistogram().check_input(ds[2:9]), graphs[2:9])


def test_a_dataset_without_x_reads_its_node_counts(tmp_path, monkeypatch):
    """No x: the node counts come from the collated num_nodes list; isolated nodes count."""
    rng = np.random.default_rng(6)
    graphs = []
    for _ in range(15):
        n = int(rng.integers(1, 7))
        e = rng.integers(0, n, (2, n))
        graphs.append(Data(edge_index=torch.tensor(np.concatenate([e, e[::-1]], 1)),
                           num_nodes=n))
    ds = Saved(str(tmp_path), graphs)
    monkeypatch.setattr(in_memory_dataset, "separate",
                        lambda *a, **k: pytest.fail("read one by one"))
    for view, sub in ((ds, graphs), (ds[[4, 1, 9]], [graphs[4], graphs[1], graphs[9]])):
        G = VertexHistogram().check_input(view)
        ptr, edges, _, _ = reference([Data(edge_index=g.edge_index, num_nodes=g.num_nodes,
                                           edge_attr=g.edge_index.t(),
                                           edge_attributes=g.edge_index.t())
                                      for g in sub])
        assert G.ptr.tolist() == ptr
        assert [tuple(e) for e in G.edge_index.t().tolist()] == edges
        n = torch.tensor([g.num_nodes for g in sub], dtype=torch.float64)
        assert torch.equal(VertexHistogram()(view).to_dense(), torch.outer(n, n))


def test_a_transform_is_applied_graph_by_graph(tmp_path):
    graphs = graphs_with_everything(6, seed=3)

    def drop_last_node_label(d):
        d = d.clone()
        d.x = d.x * 0  # every node the same label
        return d
    ds = Saved(str(tmp_path), graphs)
    ds.transform = drop_last_node_label
    K = VertexHistogram()(ds).to_dense()
    n = torch.tensor([g.num_nodes for g in graphs], dtype=torch.float64)
    torch.testing.assert_close(K, torch.outer(n, n), rtol=0, atol=0)


def test_a_subclass_with_its_own_get_is_read_graph_by_graph(tmp_path):
    """A data set whose class reads its graphs its own way (here ``get`` gives every
    node one label) is read through that method, not from the collated storage."""
    class OwnGet(Saved):
        def get(self, idx):
            d = super().get(idx)
            d.x = torch.zeros(d.num_nodes, 1)
            return d
    graphs = graphs_with_everything(6, seed=3)
    ds = OwnGet(str(tmp_path), graphs)
    n = torch.tensor([g.num_nodes for g in graphs], dtype=torch.float64)
    assert torch.equal(VertexHistogram()(ds).to_dense(), torch.outer(n, n))
    assert torch.equal(VertexHistogram()(ds[[4, 0]]).to_dense(),
                       torch.outer(n[[4, 0]], n[[4, 0]]))


def test_dataset_errors_name_the_graph(tmp_path):
    good = Data(x=torch.zeros(2, 1), edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    bad = Data(x=torch.zeros(2, 1), edge_index=torch.tensor([[0, 2], [2, 0]]), num_nodes=2)
    ds = Saved(str(tmp_path / "a"), [good, good, bad])
    for k in (EdgeHistogram(), tk.graphs.WeisfeilerLehman(1)):  # kernels that read edges
        with pytest.raises(ValueError, match=r"X: graph 2: edge_index must be .* node id 2 "
                                             r"in a graph with num_nodes=2"):
            k(ds)
    # VertexHistogram reads no edges (as from a list): the node counts, 2 nodes alike each
    assert torch.equal(VertexHistogram()(ds).to_dense(), torch.full((3, 3), 4.0,
                                                                    dtype=torch.float64))
    half = Data(x=torch.tensor([[0.5], [0.]]), edge_index=good.edge_index, num_nodes=2)
    with pytest.raises(ValueError, match="x holds floats that are not integers"):
        VertexHistogram()(Saved(str(tmp_path / "b"), [good, half]))


def test_merging_on_first_read_commutes_with_take_concat_and_to(data):
    graphs, _ = data
    idx = torch.tensor([7, 3, 3, 30, 0])
    pick = [graphs[i] for i in idx.tolist()]
    check_set(GraphSet(graphs).take(idx), pick)  # taken before any edge read
    check_set(GraphSet.concat([GraphSet(graphs[:9]), GraphSet(graphs[9:])]), graphs)
    moved = GraphSet(graphs).to(dtype=torch.float32)
    assert moved.dtype == torch.float32
    check_set(moved, graphs)
    G = GraphSet(graphs)
    H = GraphSet(G)  # a copy made before the merge merges on its own
    check_set(H, graphs)
    check_set(G, graphs)


def test_an_interrupted_merge_leaves_the_set_whole(data, monkeypatch):
    """An error inside the merge (memory, an interrupt) leaves the raw edges in place: the
    next read merges them. The one-thread scopes of the construction and of the merge give
    the caller's thread count back on errors too (issue 25)."""
    from torchkern.graphs import _batch
    graphs, _ = data
    prev = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        G = GraphSet(graphs)

        def fail(*a, **k):
            raise MemoryError("no memory")
        with monkeypatch.context() as m:
            m.setattr(_batch, "_merge_edges", fail)
            with pytest.raises(MemoryError):
                G.edge_index  # noqa: B018
        assert torch.get_num_threads() == 2
        bad = Data(x=torch.zeros(2, 1), edge_index=torch.tensor([[0], [2]]), num_nodes=2)
        with pytest.raises(ValueError, match="node id 2"):
            GraphSet([bad])
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(prev)
    check_set(G, graphs)


# -- histogram kernels ---------------------------------------------------------------------

def gram_from_counts(X, Y, key, normalize=False):
    """Σ_ℓ c_ℓ(G) c_ℓ(G') from Python Counters of each graph's labels (``key``)."""
    cx, cy = [Counter(key(g)) for g in X], [Counter(key(g)) for g in Y]
    K = np.array([[sum(a[k] * b.get(k, 0) for k in a) for b in cy] for a in cx], dtype=float)
    if normalize:
        dx = np.array([sum(v * v for v in a.values()) for a in cx], dtype=float)
        dy = np.array([sum(v * v for v in b.values()) for b in cy], dtype=float)
        with np.errstate(divide="ignore"):
            sx, sy = np.where(dx > 0, dx ** -0.5, 0), np.where(dy > 0, dy ** -0.5, 0)
        K = K * sx[:, None] * sy[None, :]
    return K


def node_labels(g):
    return [tuple(r) for r in g.x.tolist()]


def edge_labels(g):
    seen = {}
    for (s, t), r in zip(g.edge_index.t().tolist(), g.edge_attr.tolist()):
        seen.setdefault((s, t), tuple(r))
    return list(seen.values())


def distinct_shuffled(graphs, seed=5):
    """Copies whose edges are distinct, in a random order (EdgeHistogram then counts them
    without merging)."""
    rng = np.random.default_rng(seed)
    out = []
    for g in graphs:
        _, first = np.unique(g.edge_index.numpy(), axis=1, return_index=True)
        keep = torch.as_tensor(rng.permutation(first))
        out.append(Data(x=g.x, edge_index=g.edge_index[:, keep], edge_attr=g.edge_attr[keep],
                        num_nodes=g.num_nodes))
    return out


@pytest.mark.parametrize("normalize", [False, True])
def test_histograms_equal_python_counts(data, normalize):
    graphs, ds = data
    distinct = distinct_shuffled(graphs)
    G = GraphSet(distinct)
    labels = G.labelled_edges()[1]  # the edges as given (shuffled), not merged
    assert not torch.equal(labels, G.edge_label)  # the merged ones, sorted
    assert torch.equal(labels.sort().values, G.edge_label.sort().values)
    ref = gram_from_counts(distinct, distinct, edge_labels, normalize)
    for inp in (distinct, Batch.from_data_list(distinct)):
        np.testing.assert_allclose(EdgeHistogram(normalize)(inp).to_dense().numpy(), ref,
                                   rtol=1e-14, atol=0)
    # an edge between two graphs of a Batch: refused, naming the edge and both graphs
    b = Batch.from_data_list(distinct[:3])
    b.edge_index = torch.cat([b.edge_index, torch.tensor([[0], [int(b.ptr[2])]])], 1)
    b.edge_attr = torch.cat([b.edge_attr, torch.tensor([[9]])])
    with pytest.raises(ValueError, match=r"joins graph 0 to graph 2"):
        EdgeHistogram(normalize)(b)
    X, Y = graphs[:25], graphs[25:]
    for k, key in ((VertexHistogram(normalize), node_labels),
                   (EdgeHistogram(normalize), edge_labels)):
        ref = gram_from_counts(graphs, graphs, key, normalize)
        for inp in (graphs, Batch.from_data_list(graphs), ds):
            np.testing.assert_allclose(k(inp).to_dense().numpy(), ref, rtol=1e-14, atol=0)
        K = k(X, Y)
        cross = gram_from_counts(X, Y, key, normalize)
        np.testing.assert_allclose(K.to_dense().numpy(), cross, rtol=1e-14, atol=0)
        np.testing.assert_allclose(K.T.to_dense().numpy(), cross.T, rtol=1e-14, atol=0)
        np.testing.assert_allclose(K.rows([4, 0, 4]).numpy(), cross[[4, 0, 4]], rtol=1e-14)
        v = torch.linspace(-1, 1, len(Y), dtype=torch.float64)
        np.testing.assert_allclose((K @ v).numpy(), cross @ v.numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(k.diag(X).numpy(), np.diag(gram_from_counts(X, X, key,
                                                                                normalize)))


def test_edge_histogram_of_large_edgeless_graphs_allocates_no_node_pairs():
    """No edges but an (empty) edge_attr: no Σ n_g² flags (3·10^12 bytes here)."""
    graphs = [Data(edge_index=torch.zeros(2, 0, dtype=torch.long),
                   edge_attr=torch.zeros(0, 1, dtype=torch.long), num_nodes=10 ** 6)
              for _ in range(3)]
    assert torch.equal(EdgeHistogram()(graphs).to_dense(),
                       torch.zeros(3, 3, dtype=torch.float64))


def test_histogram_products_stay_exact_for_large_counts():
    """Counts above 127 (no int8) and a squared norm above 2^24 (no float32): still exact."""
    rng = np.random.default_rng(2)
    sizes = [3, 200, 150, 4100, 4097]
    graphs = [Data(x=torch.tensor(rng.integers(0, 2, (n, 1)) * (i != 3)),
                   edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=n)
              for i, n in enumerate(sizes)]
    K = VertexHistogram()(graphs).to_dense().numpy()
    np.testing.assert_array_equal(K, gram_from_counts(graphs, graphs, node_labels))
    assert K[3, 3] == 4100 ** 2 > 2 ** 24


def test_many_labels_take_the_sparse_path():
    rng = np.random.default_rng(4)
    graphs = [Data(x=torch.tensor(rng.integers(0, 5000, (30, 1))),
                   edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=30)
              for _ in range(12)]
    for normalize in (False, True):
        np.testing.assert_allclose(
            VertexHistogram(normalize)(graphs).to_dense().numpy(),
            gram_from_counts(graphs, graphs, node_labels, normalize), rtol=1e-14, atol=0)


def test_histograms_in_grid_search(data):
    graphs, ds = data
    y = np.array([i % 2 for i in range(len(graphs))])
    grid = GridSearchCV(tk.KernelRidge(kernel=VertexHistogram()),
                        {"kernel": [VertexHistogram(True), EdgeHistogram(True)],
                         "alpha": [0.1, 1.0]}, cv=3)
    ref = grid.fit(graphs, y.astype(float)).cv_results_["mean_test_score"]
    assert np.isfinite(ref).all()
    np.testing.assert_allclose(grid.fit(ds, y.astype(float)).cv_results_["mean_test_score"],
                               ref, rtol=1e-12)


def test_label_ids_equal_torch_unique_rows():
    """Label ids by counting (one range for all columns, or one per column) or by sorting,
    against torch.unique(dim=0): one-hot floats, negative, huge, mixed-range and bool rows."""
    from torchkern.graphs._batch import _label_ids
    g = torch.Generator().manual_seed(0)
    cases = [torch.nn.functional.one_hot(torch.randint(0, 5, (50,), generator=g), 5).float(),
             torch.randint(-3, 4, (40, 2), generator=g),
             torch.tensor([[2 ** 60 + 5], [2 ** 60 + 7], [2 ** 60 + 5]]),
             torch.cat([torch.randint(0, 1000, (60, 1), generator=g),
                        torch.randint(-2, 2, (60, 1), generator=g)], 1),
             torch.randint(0, 2 ** 40, (20, 2), generator=g),
             torch.randint(0, 3, (30, 1), generator=g).double(),
             torch.tensor([[True], [False], [True]]),
             # wide float rows: (max - min + 1)^d past a float's range (1e308)
             torch.nn.functional.one_hot(torch.randint(0, 1100, (40,), generator=g),
                                         1100).float(),
             torch.randint(0, 1001, (30, 110), generator=g).double(),
             # a column of span 2^61 after a renumbered one: k·2^61 wraps around 2^64
             torch.tensor([[i, 0] for i in range(9)] + [[0, 2 ** 61 - 1]]),
             # 64-bit hashes as labels: max − min overflows int64
             torch.randint(-2 ** 63, 2 ** 63 - 1, (8, 1), generator=g)[
                 torch.randint(0, 8, (60,), generator=g)],
             torch.randint(-2 ** 63, 2 ** 63 - 1, (8, 3), generator=g)[
                 torch.randint(0, 8, (60,), generator=g)]]
    for x in cases:
        ids, values = _label_ids(x, x.shape[0], "x", x.device)
        ref_values, ref_ids = torch.unique(x.long() if x.dtype == torch.bool else x, dim=0,
                                           return_inverse=True)
        assert torch.equal(ids, ref_ids) and torch.equal(values, ref_values), x.dtype


def test_edge_merge_key_forms_equal_torch_unique():
    """The merge's packed keys — source·n + target in int32 (small n), source·m + local
    target in int32 (graph offsets given, every edge inside its graph), int64 otherwise
    (an edge between two graphs) — give the distinct edges, sorted, with the position of
    each one's first occurrence."""
    from torchkern.graphs._batch import _merge_edges
    g = torch.Generator().manual_seed(0)
    ptr = torch.tensor([0, 20000, 45000, 60000])
    which = torch.randint(0, 3, (3000,), generator=g)
    lo, size = ptr[which], (ptr[1:] - ptr[:-1])[which]
    inside = torch.stack([lo + torch.randint(0, 2 ** 30, (3000,), generator=g) % size,
                          lo + torch.randint(0, 2 ** 30, (3000,), generator=g) % size])
    across = inside.clone()
    across[1, 7] = 59999 if int(across[0, 7]) < 45000 else 0
    small = torch.randint(0, 50, (2, 3000), generator=g)
    for ei, n, p in ((small, 50, None), (inside, 60000, ptr), (across, 60000, ptr),
                     (inside, 60000, None)):
        ei = torch.cat([ei, ei[:, :500]], 1)  # duplicates
        key = ei[0] * n + ei[1]
        values = torch.unique(key)
        for positions in (False, True):
            out, first = _merge_edges(ei, n, positions, p)
            assert torch.equal(out, torch.stack([values // n, values % n]))
            if positions:
                pos = torch.arange(key.numel())
                ref = torch.stack([pos[key == v].min() for v in values])
                assert torch.equal(first, ref)


# -- fields read on first use, node counts ---------------------------------------------------

def test_histograms_read_only_their_fields_from_a_list(data):
    """From a list of Data, VertexHistogram reads x (not the edges), EdgeHistogram the edges
    (not x): a broken field the kernel does not read is no error, one it reads is; the
    set's other fields, read later, equal the eagerly built set's (the same reference)."""
    graphs, _ = data
    bad_edges = [Data(x=g.x, edge_index=g.edge_index + 100, edge_attr=g.edge_attr,
                      num_nodes=g.num_nodes) for g in graphs[:5]]
    np.testing.assert_array_equal(
        VertexHistogram()(bad_edges).to_dense().numpy(),
        gram_from_counts(bad_edges, bad_edges, node_labels))
    with pytest.raises(ValueError, match=r"X: graph \d: edge_index must be .* node id 1\d\d"):
        EdgeHistogram()(bad_edges)
    with pytest.raises(ValueError, match=r"X: graph \d: edge_index must be"):
        tk.graphs.WeisfeilerLehman(1)(bad_edges)
    b = Batch.from_data_list(bad_edges)  # a Batch the same way
    np.testing.assert_array_equal(VertexHistogram()(b).to_dense().numpy(),
                                  gram_from_counts(bad_edges, bad_edges, node_labels))
    with pytest.raises(ValueError, match=r"X: the Batch: edge_index must be .* node id"):
        EdgeHistogram()(b)
    no_x = [Data(edge_index=g.edge_index, edge_attr=g.edge_attr, num_nodes=g.num_nodes,
                 edge_attributes=g.edge_attributes)  # and no node_attributes
            if i == 2 else g for i, g in enumerate(graphs[:6])]
    np.testing.assert_array_equal(EdgeHistogram()(no_x).to_dense().numpy(),
                                  gram_from_counts(no_x, no_x, edge_labels))
    with pytest.raises(ValueError, match="X: graph 2 has no x while others do"):
        VertexHistogram()(no_x)
    # a lazily read set holds what an eager one holds, through take / concat / to / pickle
    import pickle
    for k in (VertexHistogram(), EdgeHistogram()):
        G = k.check_input(graphs, "X")
        assert G.__dict__.get("_pending")  # some groups not read yet
        check_set(G, graphs)
        G = k.check_input(Batch.from_data_list(graphs), "X")
        assert G.__dict__.get("_pending")
        check_set(G, graphs)
        check_set(pickle.loads(pickle.dumps(k.check_input(graphs, "X"))), graphs)
        check_set(k.check_input(graphs, "X").to(dtype=torch.float32), graphs)
        moved = GraphSet(k.check_input(graphs, "X"), device="cpu", dtype=torch.float32)
        assert "_pending" not in moved.__dict__  # moved: every group read
        check_set(moved, graphs)
        idx = torch.tensor([3, 0, 7])
        check_set(k.check_input(graphs, "X").take(idx), [graphs[i] for i in idx])
        check_set(GraphSet.concat([k.check_input(graphs[:4], "X"),
                                   k.check_input(graphs[4:9], "X")]), graphs[:9])


def test_edge_histogram_cross_gram_needs_edge_labels_of_one_width(data):
    graphs, _ = data
    wide = [Data(x=g.x, edge_index=g.edge_index, num_nodes=g.num_nodes,
                 edge_attr=torch.cat([g.edge_attr, g.edge_attr], 1)) for g in graphs[:3]]
    with pytest.raises(ValueError, match=r"edge labels \(edge_attr\) of X \(rows of width "
                                         r"1\) and Y \(width 2\) are not comparable"):
        EdgeHistogram()(graphs[:3], wide)
    # x of other widths: not read by EdgeHistogram
    narrow = [Data(x=g.x[:, :1], edge_index=g.edge_index, edge_attr=g.edge_attr,
                   num_nodes=g.num_nodes) for g in graphs[3:6]]
    np.testing.assert_array_equal(EdgeHistogram()(graphs[:3], narrow).to_dense().numpy(),
                                  gram_from_counts(graphs[:3], narrow, edge_labels))


def test_sorted_distinct_edges_are_counted_as_given(data):
    """Coalesced graphs (edges sorted by (source, target), as PyG stores them): counted
    without the merge, equal to the Python counts; sorted with a duplicate: merged."""
    from torch_geometric.utils import coalesce
    graphs, _ = data
    co = []
    for g in graphs:
        ei, ea = coalesce(g.edge_index, g.edge_attr, g.num_nodes, reduce="min")
        co.append(Data(x=g.x, edge_index=ei, edge_attr=ea, num_nodes=g.num_nodes))
    G = EdgeHistogram().check_input(co, "X")
    assert G.labelled_edges() is not None and "_edge_index" not in G.__dict__  # not merged
    np.testing.assert_array_equal(EdgeHistogram()(co).to_dense().numpy(),
                                  gram_from_counts(co, co, edge_labels))
    # sorted by (target, source): the rows swapped (each edge reversed, a directed graph)
    flip = [Data(x=g.x, edge_index=g.edge_index.flip(0), edge_attr=g.edge_attr,
                 num_nodes=g.num_nodes) for g in co]
    G = EdgeHistogram().check_input(flip, "X")
    graph, _, _ = G.labelled_edges()
    assert "_edge_index" not in G.__dict__  # not merged
    assert torch.equal(graph, G.graph_of_node[G.edge_index[0]])  # (now merged)
    np.testing.assert_array_equal(EdgeHistogram()(flip).to_dense().numpy(),
                                  gram_from_counts(flip, flip, edge_labels))
    dup = [Data(x=g.x, edge_index=g.edge_index.repeat_interleave(2, 1),
                edge_attr=g.edge_attr.repeat_interleave(2, 0), num_nodes=g.num_nodes)
           for g in co]
    np.testing.assert_array_equal(EdgeHistogram()(dup).to_dense().numpy(),
                                  gram_from_counts(co, co, edge_labels))


def test_num_nodes_must_be_an_integer():
    """An integral float (or a 0-d tensor, a NumPy integer) is that integer; 2.5, a
    negative count or a bool is refused, naming the graph and num_nodes."""
    ei = torch.tensor([[0, 1], [1, 0]])
    x = torch.tensor([[0], [1], [1]])
    ref = VertexHistogram()([Data(x=x, edge_index=ei, num_nodes=3)] * 2).to_dense()
    for v in (3.0, torch.tensor(3), np.int32(3)):
        g = Data(x=x, edge_index=ei, num_nodes=v)
        assert GraphSet([g, g]).num_nodes.tolist() == [3, 3]
        assert torch.equal(VertexHistogram()([g, g]).to_dense(), ref)
    for v, err, msg in ((2.5, ValueError, r"2\.5"), (-1, ValueError, "-1"),
                        (float("nan"), ValueError, "nan"), (True, TypeError, "bool True")):
        g = Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=v)
        for k in (VertexHistogram(), EdgeHistogram(), tk.graphs.ShortestPath()):
            with pytest.raises(err, match=rf"X: graph 1: num_nodes must be a non-negative "
                                          rf"integer, got .*{msg}"):
                k([Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=1), g])
    # x's rows are checked against an integral float num_nodes as against an int
    with pytest.raises(ValueError, match=r"X: every graph's x must have one row per node "
                                         r"\(graph 1 has 1 rows for 3 nodes\)"):
        VertexHistogram()([Data(x=x, edge_index=ei, num_nodes=3.0),
                           Data(x=x[:1], edge_index=ei, num_nodes=3.0)])


def test_edge_label_counts_are_kept_with_the_set_until_its_edges_change(data):
    """A set used twice (a fitted model's) counts its edge labels once; setting its edge
    labels (or moving it) counts again."""
    graphs, _ = data
    distinct = distinct_shuffled(graphs)
    G = EdgeHistogram().check_input(distinct, "X")
    ref = gram_from_counts(distinct, distinct, edge_labels)
    for _ in range(2):
        np.testing.assert_array_equal(EdgeHistogram()(G).to_dense().numpy(), ref)
    assert G.labelled_edges() is G.labelled_edges()
    G.edge_label = torch.zeros_like(G.edge_label)  # every edge one label
    G.edge_label_values = G.edge_label_values[:1]
    m = torch.tensor([float(len(edge_labels(g))) for g in distinct], dtype=torch.float64)
    assert torch.equal(EdgeHistogram()(G).to_dense(), torch.outer(m, m))


def test_uncompressed_label_ids_index_the_whole_label_space():
    """``_label_ids(compress=False)`` (EdgeHistogram's counting): where the label space is
    counted, ids index rows of the whole space — values[ids] is every item's row, and the
    rows that occur are torch.unique's, in its order; elsewhere the compressed ids."""
    from torchkern.graphs._batch import _label_ids
    g = torch.Generator().manual_seed(3)
    cases = [torch.nn.functional.one_hot(torch.randint(0, 4, (30,), generator=g), 5).float(),
             torch.randint(-3, 4, (40, 2), generator=g),
             torch.randint(2, 5, (25,), generator=g),
             torch.randint(0, 2 ** 40, (20, 2), generator=g)]  # sorted: compressed
    for x in cases:
        ids, values = _label_ids(x, x.shape[0], "x", x.device, compress=False)
        rows = x if x.dim() == 2 else x[:, None]
        assert torch.equal(values[ids], rows)
        ref = torch.unique(rows, dim=0)
        assert torch.equal(values[torch.unique(ids)], ref)


def test_edge_index_checked_per_graph_against_its_own_node_count():
    """The edge check of a list of Data: a node id valid in a larger graph but not in its
    own is refused naming that graph (graphs without edges in between), a negative id
    too; valid sets (the largest id below every node count, or not; int32 edge_index)
    give the per-graph reference."""
    def graph(n, edges, dtype=torch.long):
        e = torch.tensor(edges, dtype=dtype).reshape(-1, 2).T
        return Data(x=torch.zeros(n, 1), edge_index=e, edge_attr=torch.zeros(e.shape[1], 1),
                    node_attributes=torch.zeros(n, 2),
                    edge_attributes=torch.zeros(e.shape[1], 3), num_nodes=n)
    good = [graph(3, [[0, 2], [2, 0]]), graph(1, []), graph(5, [[4, 1], [1, 4], [3, 3]]),
            graph(2, [[1, 0]])]
    check_set(GraphSet(good), good)
    small = [graph(3, [[0, 1], [1, 0]]), graph(2, [[1, 0], [0, 1]]), graph(4, [])]
    check_set(GraphSet(small), small)  # every id below every graph's node count
    as32 = [graph(g.num_nodes, g.edge_index.T.tolist(), torch.int32) for g in good]
    check_set(GraphSet(as32), good)
    bad = good[:3] + [graph(2, [[1, 0], [0, 3]])]
    with pytest.raises(ValueError, match=r"X: graph 3: edge_index must be .* node id 3 in a "
                                         r"graph with num_nodes=2"):
        EdgeHistogram()(bad)
    with pytest.raises(ValueError, match=r"graph 2: edge_index must be .* node id -1"):
        GraphSet(good[:2] + [graph(5, [[4, -1]])] + good[3:])


@pytest.mark.parametrize("sort_limit", [0, 2 ** 15])
def test_unsorted_edges_are_told_distinct_by_flags_or_by_a_sort(data, monkeypatch, sort_limit):
    """Edges in no sorted order are told distinct by one sort (few edges) or by the
    per-graph (source, target) flags (sort_limit 0 forces them): counted as given when
    distinct, merged when one is duplicated, an edge between two graphs of a Batch
    refused; equal to the Python counts each way."""
    from torchkern.graphs import _batch
    monkeypatch.setattr(_batch, "_SORT_DISTINCT", sort_limit)
    graphs, _ = data
    distinct = distinct_shuffled(graphs, seed=8)
    G = GraphSet(distinct)
    graph, _, _ = G.labelled_edges()
    assert "_raw_edges" in G.__dict__  # counted as given, not merged
    np.testing.assert_array_equal(EdgeHistogram()(distinct).to_dense().numpy(),
                                  gram_from_counts(distinct, distinct, edge_labels))
    dup = [Data(x=g.x, edge_index=torch.cat([g.edge_index, g.edge_index[:, :1]], 1),
                edge_attr=torch.cat([g.edge_attr, g.edge_attr[:1]]), num_nodes=g.num_nodes)
           for g in distinct]
    G = GraphSet(dup)
    G.labelled_edges()
    assert "_raw_edges" not in G.__dict__  # a duplicate: merged
    np.testing.assert_array_equal(EdgeHistogram()(dup).to_dense().numpy(),
                                  gram_from_counts(distinct, distinct, edge_labels))
    i = next(i for i, g in enumerate(distinct) if g.num_edges)
    dup[i].edge_attr = torch.cat([distinct[i].edge_attr, distinct[i].edge_attr[:1] + 7])
    with pytest.raises(ValueError, match=rf"edge_attr: graph {i} lists the edge"):
        EdgeHistogram()(dup)  # a duplicate with another label: no one label to count
    b = Batch.from_data_list(distinct[:4])
    b.edge_index = torch.cat([b.edge_index, torch.tensor([[int(b.ptr[1])], [0]])], 1)
    b.edge_attr = torch.cat([b.edge_attr, torch.tensor([[9]])])
    with pytest.raises(ValueError, match=r"joins graph 1 to graph 0"):  # no graph owns it
        EdgeHistogram()(b)


@pytest.mark.parametrize("n", [1000, 2 ** 15 - 1, 2 ** 15, 50_000])
def test_sorted_unique_below_and_from_the_radix_sort_length(n):
    """sorted_unique sorts by NumPy below 2^15 keys and by torch's radix sort from there:
    values, inverse and counts equal torch.unique's, ``first`` the smallest position."""
    from torchkern.graphs._batch import sorted_unique
    g = torch.Generator().manual_seed(n)
    key = torch.randint(0, 2 ** 40, (n // 3,), generator=g)[torch.randint(0, n // 3, (n,),
                                                                          generator=g)]
    values, inv, counts, first = sorted_unique(key)
    ref_v, ref_inv, ref_c = torch.unique(key, return_inverse=True, return_counts=True)
    assert torch.equal(values, ref_v) and torch.equal(inv, ref_inv) and torch.equal(counts, ref_c)
    ref_first = torch.full((ref_v.numel(),), n).scatter_reduce_(0, ref_inv, torch.arange(n), "amin")
    assert torch.equal(first, ref_first)
