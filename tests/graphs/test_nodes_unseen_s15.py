"""Node kernels where β‖L‖ is huge or ε tiny, on graphs with several components and an
isolated node, against closed forms: e^{−βL} → the projector P onto ker L (one vector per
component), (L + εI)⁻¹ = P/ε + L⁺ + O(ε), with numpy's pseudo-inverse for L⁺."""
import warnings

import numpy as np
import pytest
import torch
from scipy.sparse.csgraph import connected_components
from scipy.sparse.csgraph import laplacian as csgraph_laplacian

from torchkern.graphs import DiffusionKernel, RegularizedLaplacian

N = 30


def _graph(scale):
    """Two random components (nodes 0-17 and 18-28) and the isolated node 29; weights in
    [0.5, 2]·scale, each edge listed once."""
    rng = np.random.default_rng(0)
    edges = []
    for lo, hi, E in ((0, 18, 40), (18, 29, 25)):
        u, v = rng.integers(lo, hi, E), rng.integers(lo, hi, E)
        keep = u != v
        edges.append(np.stack([np.minimum(u, v)[keep], np.maximum(u, v)[keep]], 1))
    uv = np.unique(np.concatenate(edges), axis=0)
    w = rng.uniform(0.5, 2.0, len(uv)) * scale
    W = np.zeros((N, N))
    W[uv[:, 0], uv[:, 1]] = w
    W += W.T
    return (torch.as_tensor(uv.T.copy()), N, torch.as_tensor(w)), W


def _null_projector(W, normed):
    """Σ_c z_c z_cᵀ, z_c = s 1_c / ‖s 1_c‖ with s = 1 (L) or √d (L̃; 1 where d = 0)."""
    c, labels = connected_components(W > 0, directed=False)
    d = W.sum(1)
    s = np.where(d > 0, np.sqrt(d), 1.0) if normed else np.ones(N)
    P = np.zeros((N, N))
    for i in range(c):
        z = np.where(labels == i, s, 0.0)
        P += np.outer(z, z) / (z @ z)
    return P


@pytest.mark.parametrize("method", ["dense", "krylov"])
@pytest.mark.parametrize("laplacian", ["combinatorial", "normalized"])
@pytest.mark.parametrize("scale, beta", [(1e6, 1e4), (1e6, 1e8), (1.0, 1e10)])
def test_diffusion_with_huge_beta_is_the_null_space_projector(method, laplacian, scale, beta):
    # e^{−βλ₂} = 0 for every β here: K is P. Computed, the zero eigenvalues are noise of
    # size 1e-16‖L‖ (‖L‖ ~ 1e7): e^{−βθ} was 5e-6 off (dense), and Lanczos lost 1% of P
    # (β = 1e8) with an error estimate that passed
    graph, W = _graph(scale)
    ref = _null_projector(W, laplacian == "normalized")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        K = DiffusionKernel(beta, laplacian=laplacian, method=method)(graph)
        got = K.to_dense().detach().numpy()
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-13)


@pytest.mark.parametrize("method", ["dense", "krylov"])
@pytest.mark.parametrize("laplacian", ["combinatorial", "normalized"])
def test_regularized_laplacian_with_tiny_eps_is_null_projector_over_eps_plus_pinv(method,
                                                                                   laplacian):
    # CG on L + εI had condition ‖L‖/ε = 1e15: it stopped at max_iter with a warning and
    # 6e-4 off; on V − PV it meets only λ₂ + ε
    graph, W = _graph(1e6)
    normed = laplacian == "normalized"
    L = csgraph_laplacian(W, normed=normed)
    eps = 1e-8
    ref = _null_projector(W, normed) / eps + np.linalg.pinv(L, rcond=1e-10, hermitian=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = RegularizedLaplacian(eps, laplacian=laplacian, method=method)(graph)
        got = got.to_dense().detach().numpy()
    # the O(ε) term: ε‖L⁺‖² ≤ 1e-8 · (1/λ₂)² is far below the tolerance; between
    # components (exact 0) rounding of the 1/ε-sized entries is allowed
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-14 * np.abs(ref).max())


def test_krylov_diffusion_gradient_in_beta_matches_dense_with_deflation():
    # the null-space part PV does not depend on β: the gradient comes from V − PV alone
    graph, _ = _graph(1.0)
    V = torch.randn(N, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    grads = []
    for method in ("dense", "krylov"):
        k = DiffusionKernel(0.7, method=method)
        (k(graph) @ V).square().sum().backward()
        grads.append(k.raw_beta.grad.item())
    assert grads[1] == pytest.approx(grads[0], rel=1e-9)
