"""The ReLU recursion's KeOps form (``analytic._relu_keops``): KeOps formulas are trees
without shared subexpressions, so the NTK's formula grows geometrically with the depth,
by a factor set by how often one layer reads the previous layer's c and e. Its values are
checked here on torch tensors (the same arithmetic; a KeOps compile of a depth-2 NTK takes
16 s to a minute on the CPU, too long for the suite) against the form the other backends
use, and its size on the LazyTensor formula itself (built, not compiled)."""
import torch

from torchkern.gram import _keops_lazy
from torchkern.ntk import NTK, analytic


def _layer_inputs():
    """(qx, qy, c, e) of pairs of Gaussian vectors (d = 5), with a zero vector and a
    repeated one among them: moderate norm ratios, where both forms are exact."""
    g = torch.Generator().manual_seed(4)
    X = torch.randn(12, 5, generator=g, dtype=torch.float64)
    Y = torch.cat([torch.randn(9, 5, generator=g, dtype=torch.float64), X[:2],
                   torch.zeros(1, 5, dtype=torch.float64)])
    X[3] = 0.0
    qx = (X * X).sum(1)[:, None].expand(12, 12)
    qy = (Y * Y).sum(1)[None].expand(12, 12)
    c = X @ Y.T
    e = ((X[:, None] - Y[None]) ** 2).sum(-1)
    return qx, qy, c, e


def test_keops_form_equals_the_weighted_form_on_ordinary_inputs():
    qx, qy, c, e = _layer_inputs()
    S = qx + qy + analytic._TINY
    ours = analytic._relu_keops(qx, qy, c, e, S)
    ref = analytic._relu(qx, qy, c, e)
    for a, b in zip(ours, ref):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-13), float((a - b).abs().max())
    # a zero-variance unit: E φφ = 0 and E φ'φ' = 1/4 exactly (neural-tangents' convention)
    assert float(ours[2][3].abs().max()) == 0.0
    assert torch.equal(ours[4][3], torch.full((12,), 0.25, dtype=torch.float64))


def test_depth_three_keops_formula_stays_small():
    # Measured: 1.9 million characters (1.7 before the zero-variance gate); the weighted
    # form of the other backends gave 8.8 million (its Python side alone took 4.5 min
    # before g++ started).
    X = torch.randn(6, 3, dtype=torch.float64)
    K = NTK(depth=3).double()(X, X[:4], backend="keops")
    assert len(str(_keops_lazy(K.formula).formula)) < 2_500_000
