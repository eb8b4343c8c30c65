"""Graph kernels and their inputs as an outside tester tries them: arguments at the edge
of their range (a Gaussian node kernel with a lengthscale whose square leaves float64,
pyramid-match levels past int64, subgraph weights given as a tensor). Values against
closed forms."""
import pytest
import torch
from torch_geometric.data import Data

import torchkern.graphs as tg
from torchkern.inputs import concat as concat_inputs


def _graph(n, pairs, labels, seed):
    e = pairs + [(b, a) for a, b in pairs]
    g = torch.Generator().manual_seed(seed)
    return Data(edge_index=torch.tensor(e, dtype=torch.long).T.reshape(2, -1), num_nodes=n,
                x=torch.tensor(labels)[:, None],
                node_attributes=torch.randn(n, 2, generator=g, dtype=torch.float64))


def _graphs():
    return [_graph(3, [(0, 1), (1, 2), (2, 0)], [0, 1, 0], 0),     # triangle
            _graph(4, [(0, 1), (1, 2), (2, 3)], [1, 1, 0, 2], 1),  # path
            _graph(4, [(0, 1), (0, 2), (0, 3)], [0, 0, 1, 1], 2)]  # star


def _label_counts(X, w1=1, w2=1):
    """k = 2 subgraph matching by hand: w1 · (node pairs of equal label) + w2 · (edge
    pairs of equal label pairs; an edge of two equal labels matches in both orders)."""
    def count(g, h):
        lg, lh = g.x[:, 0].tolist(), h.x[:, 0].tolist()
        nodes = sum(a == b for a in lg for b in lh)
        eg = [(lg[s], lg[t]) for s, t in g.edge_index.T.tolist()]   # both directions
        eh = [(lh[s], lh[t]) for s, t in h.edge_index.T.tolist()]
        return w1 * nodes + w2 * (sum(a == b for a in eg for b in eh) // 2)

    return torch.tensor([[float(count(g, h)) for h in X] for g in X], dtype=torch.float64)


@pytest.mark.parametrize("ell", [1e-160, 1e-200])
def test_subgraph_matching_gaussian_tiny_lengthscale_matches_equal_attributes_only(ell):
    # With every node's attributes distinct (random), exp(−‖a − a'‖²/(2ℓ²)) → [a = a']:
    # a subgraph matches only itself under the identity, so for k = 2 (nodes and edges,
    # uniform weights) K = diag(n + |E|). 1/(2ℓ²) was inf (NaN on the diagonal,
    # ℓ = 1e-160) or a ZeroDivisionError (ℓ = 1e-200).
    X = _graphs()
    ref = torch.diag(torch.tensor([3.0 + 3, 4 + 3, 4 + 3], dtype=torch.float64))
    k = tg.SubgraphMatching(k=2, node_kernel="gaussian", lengthscale=ell)
    torch.testing.assert_close(k(X).to_dense(), ref, rtol=0, atol=0)
    torch.testing.assert_close(k(X).diag(), ref.diagonal(), rtol=0, atol=0)
    torch.testing.assert_close(k(X[:1], X).to_dense(), ref[:1], rtol=0, atol=0)


def test_subgraph_matching_gaussian_huge_lengthscale_weighs_every_pair_one():
    # ℓ = 1e200: ℓ² overflowed (OverflowError); the Gaussian is 1 on every pair, so the
    # kernel is the label-only count Σ_c λ_c |Aut(c)| n_c(G) n_c(G').
    X = _graphs()
    ref = _label_counts(X)
    k = tg.SubgraphMatching(k=2, node_kernel="gaussian", lengthscale=1e200)
    torch.testing.assert_close(k(X).to_dense(), ref, rtol=0, atol=0)
    torch.testing.assert_close(k(X).diag(), ref.diagonal(), rtol=0, atol=0)


def test_subgraph_matching_takes_its_weights_as_a_tensor():
    # lw as a tensor of k weights was refused ("must hold k=2 finite non-negative
    # numbers, got tensor([1., 2.])"), while a list and an array were taken. k = 2,
    # λ = (1, 2): nodes of equal label count 1, edges of equal label pairs 2 (twice when
    # both ends have one label).
    X = _graphs()
    k = tg.SubgraphMatching(k=2, lw=torch.tensor([1.0, 2.0]))
    ref = tg.SubgraphMatching(k=2, lw=[1.0, 2.0])(X).to_dense()
    torch.testing.assert_close(k(X).to_dense(), ref, rtol=0, atol=0)
    assert float(ref[0, 0]) == 5 + 2 * (2 * 2 + 2)      # triangle with labels 0, 1, 0
    with pytest.raises(TypeError, match="lw must be"):
        tg.SubgraphMatching(k=1, lw=torch.tensor(1.0))   # a 0-d tensor is no sequence


@pytest.mark.parametrize("w", [2 ** 62, 1e160])
def test_subgraph_matching_large_weights(w):
    # λ = 2^62 was kept in int64, where λ·|Aut| wrapped around: k(G, G) read 3.2e19 for
    # 5.1e19; λ = 1e160 became a Python int too big for torch (OverflowError)
    X = _graphs()
    k = tg.SubgraphMatching(k=2, lw=[w, w])
    ref = _label_counts(X, w, w)
    torch.testing.assert_close(k(X).to_dense(), ref, rtol=1e-15, atol=0)
    torch.testing.assert_close(k(X).diag(), ref.diagonal(), rtol=1e-15, atol=0)


@pytest.mark.parametrize("kw", [{}, {"normalize": True}, {"node_kernel": "gaussian"}])
def test_subgraph_matching_weights_that_overflow_are_refused_by_name(kw):
    # 11 · 1e308: the Gram was inf and NaN (NaN normalized), silently
    k = tg.SubgraphMatching(k=2, lw=[1e308, 1e308], **kw)
    for part in (lambda G: k(G).to_dense(), lambda G: k(G).diag()):
        with pytest.raises(ValueError, match=r"overflow torch.float64 .* lw=\[1e\+308"):
            part(_graphs())


@pytest.mark.parametrize("L", [64, 65, 200])
def test_pyramid_match_refuses_levels_past_int64_by_name(L):
    # 3 labels · d = 6 · 2^(L−1) cells pass 2^63 from L = 60: L = 64 returned 0.5 where
    # L = 63 gives 5e-16 (the cell numbers wrapped around), L ≥ 65 an OverflowError.
    with pytest.raises(ValueError, match=f"L={L}: .* at most L=59"):
        tg.PyramidMatch(L=L)(_graphs())



def _path3():
    return Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3)


@pytest.mark.parametrize("method", ["dense", "krylov"])
def test_p_step_random_walk_refuses_a_power_past_float64_by_name(method):
    # (aI − L̃)^p has the eigenvalue a^p = 1e400: the dense Gram was NaN, silently (the
    # products raised a generic "not finite" error). The constructor refuses it; an a
    # set afterwards is refused by each method's own Gram, diagonal and product (the
    # Krylov products were inf).
    match = r"a\^p = 1e\+200\^2 overflows float64"
    with pytest.raises(ValueError, match=match):
        tg.PStepRandomWalk(1e200, 2, method=method)
    k = tg.PStepRandomWalk(2.0, 2, method=method).set_params(a=1e200)
    X = _path3()
    for part in (lambda: k(X).to_dense(), lambda: k(X).diag(),
                 lambda: k(X) @ torch.ones(3, 1, dtype=torch.float64)):
        with pytest.raises(ValueError, match=match):
            part()


@pytest.mark.parametrize("make, top", [
    (lambda: tg.RegularizedLaplacian(1e-300), "1e\\+300"),   # 1/ε on ker L
    (lambda: tg.PStepRandomWalk(1e20, 2), "1e\\+40"),        # a^p
])
def test_node_kernels_refuse_a_gram_beyond_float32_by_name(make, top):
    # in a float32 NodeSet the Gram was inf (diag too); float64 holds it
    X = tg.NodeSet(_path3(), dtype=torch.float32)
    for part in (lambda k: k(X).to_dense(), lambda k: k(X).diag()):
        with pytest.raises(ValueError, match=f"reach {top}, beyond the range of torch.float32"):
            part(make())
    K = make()(tg.NodeSet(_path3())).to_dense()
    assert torch.isfinite(K).all()


@pytest.mark.parametrize("device", ["gpu0", "cpu:x", 1.5])
def test_graph_set_refuses_an_unknown_device_by_name(device):
    # torch's RuntimeError ("Invalid device string: 'gpu0'") did not name the argument
    with pytest.raises(TypeError, match="device must be"):
        tg.GraphSet(_graphs(), device=device)


def test_a_set_of_more_nodes_than_memory_is_refused_by_name():
    # num_nodes = 10^15 (a typo, say): the label ids alone need 8 PB; this was the CPU
    # allocator's RuntimeError from deep inside, naming no argument
    big = Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=10 ** 15)
    with pytest.raises(ValueError, match=r"Y: a set of 1,000,000,000,000,003 nodes .*\(8 PB\)"):
        tg.WeisfeilerLehman(1)(_graphs()[:1], [big, _graphs()[0]])


@pytest.mark.parametrize("make", [lambda: tg.EdgeHistogram(),
                                  lambda: tg.WeisfeilerLehman(1, edge_labels=True),
                                  lambda: tg.RandomWalk(0.05, edge_labels=True)])
def test_edge_attr_rows_are_checked_graph_by_graph(make):
    # 8 rows for the triangle's 6 edges, 4 for the path's 6: the totals agree, and the
    # path's edges read the triangle's last two labels, silently
    X = _graphs()[:2]
    X[0].edge_attr = torch.tensor([[0], [1], [0], [0], [1], [0], [1], [1]])
    X[1].edge_attr = torch.zeros(4, 1, dtype=torch.long)
    with pytest.raises(ValueError, match=r"X: every graph's edge_attr must have one row per "
                                         r"edge \(graph 0 has 8 rows for 6 edges\)"):
        make()(X)


@pytest.mark.parametrize("concat", [tg.GraphSet.concat, tg.NodeSet.concat, concat_inputs])
def test_concatenating_no_parts_is_refused_by_name(concat):
    # an IndexError (list index out of range) that named nothing
    with pytest.raises(ValueError, match="parts is empty"):
        concat([])


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
def test_half_precision_graph_sets_compute_in_float32(half):
    # 300 nodes of one label: WL's k(G, G) = 3 · 300² = 270,000, past float16's 65,504 —
    # it was inf (bfloat16: 270,336), and normalized 0 for 1; half precision is float32
    # for the Grams, as the vector kernels upcast half-precision data
    big = Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=300,
               x=torch.zeros(300, 1, dtype=torch.long))
    for S in (tg.GraphSet([big], dtype=half), tg.GraphSet([big]).to(dtype=half)):
        assert S.dtype == torch.float32
        assert tg.WeisfeilerLehman(2)(S).to_dense().item() == 270_000.0
        assert tg.WeisfeilerLehman(2, normalize=True)(S).to_dense().item() == pytest.approx(
            1.0, rel=1e-6)                                  # float32 rounding


def test_node_set_dtype_is_checked_by_name():
    # an int dtype reached torch.finfo deep inside (or gave an int Gram); a str likewise
    for bad in (torch.int64, "float32"):
        with pytest.raises(TypeError, match="dtype must be a floating torch dtype"):
            tg.NodeSet(_path3(), dtype=bad)
    assert tg.NodeSet(_path3(), dtype=torch.float16).dtype == torch.float32


def test_random_walk_overflow_names_the_dtype_that_overflowed():
    # 9 e^(4·25) = 2.4e44 fits float64 but not a float32 set: the message said float64
    G = _graph(3, [(0, 1), (1, 2), (2, 0)], [0, 1, 0], 0)
    k = tg.RandomWalk(25.0, kind="exponential", labeled=False)
    with pytest.raises(ValueError, match=r"lam=25: .* overflows float32"):
        k(tg.GraphSet([G, G], dtype=torch.float32)).to_dense()
    assert torch.isfinite(k([G, G]).to_dense()).all()      # float64 holds it


@pytest.mark.parametrize("normalize", [False, True])
def test_odd_sth_values_past_float32_are_refused_by_name(normalize):
    # λ = 1e20: k(path, path) = 4e80 fits float64 only; a float32 set gave inf (NaN
    # normalized), silently, where the float64 check passed
    X = _graphs()[:2]
    k = tg.ODDSTh(lam=1e20, normalize=normalize)
    S = tg.GraphSet(X, dtype=torch.float32)
    for part in (lambda: k(S).to_dense(), lambda: k(S).diag()):
        with pytest.raises(ValueError, match=r"lam=1e\+20: k\(G, G\) reaches 4e\+80, beyond "
                                             r"the range of torch.float32"):
            part()
    assert torch.isfinite(k(X).to_dense()).all()


def _pair(a, b):
    """A labelled edge (labels 0, 1) with one attribute per node."""
    return Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2,
                x=torch.tensor([[0], [1]]),
                node_attributes=torch.tensor([[a], [b]], dtype=torch.float64))


def test_gaussian_node_kernels_on_attributes_past_the_square_root_of_max():
    # ‖a‖² + ‖b‖² − 2aᵀb is inf − inf = NaN for attributes of 1e200, where a node's
    # distance to itself is 0 and to the other node 1e200 (a Gaussian of 0): GraphHopper
    # and SubgraphMatching gave NaN on the diagonal, silently (SubgraphMatching now said
    # its weights overflowed). Far attributes give the values of attributes 0 and 100
    # (e^-10000 = 0), and nothing across the two graphs.
    X = [_pair(1e200, 2e200), _pair(1.0, 2.0)]
    for make in (lambda: tg.GraphHopper(kernel_type="gaussian"),
                 lambda: tg.SubgraphMatching(k=2, node_kernel="gaussian")):
        far, near = make()([_pair(0.0, 100.0)]).to_dense(), make()(X[1:]).to_dense()
        ref = torch.tensor([[far.item(), 0.0], [0.0, near.item()]], dtype=torch.float64)
        torch.testing.assert_close(make()(X).to_dense(), ref, rtol=1e-15, atol=0)
        torch.testing.assert_close(make()(X).diag(), ref.diagonal(), rtol=1e-15, atol=0)
    assert tg.SubgraphMatching(k=2, node_kernel="gaussian")(X).diag().tolist() == [3.0, 3.0]


@pytest.mark.parametrize("dtype, scale", [(torch.float64, 1e200), (torch.float32, 1e30)])
def test_graphhopper_linear_overflow_is_refused_by_name(dtype, scale):
    # k(G, G) = Σ ⟨M_v, M_v'⟩ a_v a_v' ~ scale²: inf (NaN normalized), silently; the
    # message names the input and the attributes' field (it said "scale the node
    # attributes down")
    S = tg.GraphSet([_pair(scale, 2 * scale), _pair(1.0, 2.0)], dtype=dtype)
    field = r"node attributes \(field 'node_attributes', node_attr=\)"
    for k in (tg.GraphHopper(), tg.GraphHopper(normalize=True)):
        for name, part in (("X", lambda: k(S).to_dense()), ("X", lambda: k(S).diag()),
                           ("X and Y", lambda: k(S, S).to_dense())):
            with pytest.raises(ValueError, match=f"^{name}: GraphHopper.*beyond the range of "
                                                 f"{dtype}; scale the {field} down"):
                part()


def test_multiscale_laplacian_landmark_gram_overflow_is_refused_by_name():
    # attributes of 1e160: the level-0 landmark Gram (1e320) was inf and every entry of
    # the kernel came out 2^(-1/2), the two small graphs' 0.4998 included, silently
    X = [_pair(1e160, 2e160), _pair(1.0, 2.0), _pair(3.0, -1.0)]
    k = tg.MultiscaleLaplacian(L=1, n_samples=3, random_state=0)
    for part in (lambda: k(X).to_dense(), lambda: k(X).diag()):
        with pytest.raises(ValueError, match="landmark Gram matrix at level 0 overflows"):
            part()
