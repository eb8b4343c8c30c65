"""Nyström features: exactness, anchor selection, scikit-learn agreement, memory, errors."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.kernel_approximation import Nystroem as SkNystroem

import torchkern as tk
from torchkern.approx import Nystroem
from torchkern.approx._kmeans import kmeans
from torchkern.gram import FeatureKernelMatrix


def _data(n=300, d=3, seed=0, dtype=torch.float64):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _clustered(seed=0, spread=0.15):
    g = torch.Generator().manual_seed(seed)
    sizes = [150, 100, 60, 40, 20, 10, 10, 5, 3, 2]
    centers = torch.randn(len(sizes), 2, generator=g, dtype=torch.float64) * 8
    labels = torch.cat([torch.full((s,), i) for i, s in enumerate(sizes)])
    return centers[labels] + spread * torch.randn(len(labels), 2, generator=g, dtype=torch.float64)


def _rel_err(P, K):
    return float((P @ P.T - K).norm() / K.norm())


@pytest.mark.parametrize("selection", ["uniform", "greedy"])
def test_all_points_as_anchors_reproduce_K(selection):
    X = _data(200)
    Y = _data(30, seed=1)
    k = tk.Matern(nu=2.5, lengthscale=0.7)
    ny = Nystroem(k, 200, center_selection=selection, random_state=0).fit(X)
    K = k(X).to_dense().detach()
    P = ny.transform(X)
    assert float((P @ P.T - K).abs().max()) < 1e-8
    # New points: ψ(y)ᵀψ(x) is k(y, x) when span{φ(z)} contains every φ(x_i).
    torch.testing.assert_close(ny.kernel_matrix(Y, X).to_dense(), k(Y, X).to_dense().detach(),
                               rtol=0, atol=1e-8)


@pytest.mark.parametrize("selection", ["uniform", "kmeans", "greedy"])
def test_error_decreases_with_components(selection):
    X = _data(300)
    k = tk.RBF(lengthscale=1.0)
    K = k(X).to_dense().detach()
    errs = [_rel_err(Nystroem(k, m, center_selection=selection, random_state=0).fit_transform(X), K)
            for m in (10, 40, 160)]
    assert errs[0] > errs[1] > errs[2] and errs[2] < 0.05, errs


def test_greedy_selection_matches_brute_force():
    # Each pivot maximizes the residual k(x,x) − k_Z(x)ᵀ K_ZZ⁻¹ k_Z(x) (Bach & Jordan 2002, greedy Nyström).
    X = _data(60, 2)
    k = tk.Laplacian(lengthscale=1.0) + 0.1 * tk.Linear()  # unequal diagonal: no ties
    K = k(X, backend="dense").to_dense().detach()
    ny = Nystroem(k, 8, center_selection="greedy").fit(X)
    chosen = []
    for _ in range(8):
        if chosen:
            Kxz = K[:, chosen]
            res = K.diagonal() - (Kxz * torch.linalg.solve(K[chosen][:, chosen], Kxz.T).T).sum(1)
            res[chosen] = -1
        else:
            res = K.diagonal().clone()
        chosen.append(int(res.argmax()))
    assert ny.component_indices_.tolist() == chosen


def test_greedy_and_kmeans_beat_uniform_on_clusters():
    X = _clustered()
    k = tk.RBF(lengthscale=1.0)
    K = k(X).to_dense().detach()
    uniform = [_rel_err(Nystroem(k, 20, random_state=s).fit_transform(X), K) for s in range(5)]
    greedy = _rel_err(Nystroem(k, 20, center_selection="greedy").fit_transform(X), K)
    kmeans_err = _rel_err(Nystroem(k, 20, center_selection="kmeans", random_state=0).fit_transform(X), K)
    # Uniform anchors miss the small clusters; greedy pivots take one point in each first.
    assert greedy < min(uniform), (greedy, uniform)
    assert kmeans_err < min(uniform), (kmeans_err, uniform)


def test_same_features_as_sklearn_up_to_rotation():
    X = _data(300, 4)
    Y = _data(50, 4, seed=1)
    ell = 1.5
    ny = Nystroem(tk.RBF(lengthscale=ell), 40, random_state=0).fit(X)
    Z = np.asarray(ny.components_)
    sk = SkNystroem(kernel="rbf", gamma=1 / (2 * ell**2), n_components=40).fit(Z)  # all 40 anchors
    P, S = np.asarray(ny.transform(Y)), sk.transform(np.asarray(Y))
    np.testing.assert_allclose(P @ P.T, S @ S.T, rtol=0, atol=1e-9)
    # ... and the map from one to the other is orthogonal.
    Q = np.linalg.lstsq(S, P, rcond=None)[0]
    np.testing.assert_allclose(Q.T @ Q, np.eye(40), atol=1e-6)


def test_kmeans_matches_sklearn_inertia():
    from sklearn.cluster import KMeans
    X = _clustered(seed=3, spread=0.8)
    C = kmeans(X, 10, torch.Generator().manual_seed(0), n_init=5, max_iter=300, tol=0.0)
    D = torch.cdist(X, C)
    labels = D.argmin(1)
    # A Lloyd fixed point: every centroid is the mean of its points ...
    for j in range(10):
        torch.testing.assert_close(C[j], X[labels == j].mean(0), rtol=0, atol=1e-6)
    # ... and a good one: within 5% of scikit-learn's best of 10 runs.
    ours = float(D.min(1).values.pow(2).sum())
    ref = KMeans(10, n_init=10, random_state=0).fit(np.asarray(X)).inertia_
    assert ours <= 1.05 * ref


def test_float32_sklearn_api_and_kernel_matrix():
    X = _data(200)
    k = tk.RBF(lengthscale=1.2)
    ny = Nystroem(k, 50, center_selection="kmeans", random_state=0)
    P32 = ny.fit_transform(X.float())
    assert P32.dtype == torch.float32 and ny.normalization_.dtype == torch.float64
    K = k(X).to_dense().detach()
    P64 = Nystroem(k, 50, center_selection="kmeans", random_state=0).fit_transform(X)
    assert abs(_rel_err(P32.double(), K) - _rel_err(P64, K)) < 1e-4
    Km = ny.kernel_matrix(X.float())
    assert isinstance(Km, FeatureKernelMatrix) and Km.shape == (200, 200)
    c = clone(ny)
    assert c.get_params()["n_components"] == 50 and not hasattr(c, "normalization_")
    assert ny.n_components_ == 50 and ny.rank_ <= 50 and ny.components_.shape == (50, 3)
    assert ny.component_indices_ is None
    # The fitted kernel is a copy: changing the user's kernel does not change the features.
    k.lengthscale = 5.0
    torch.testing.assert_close(ny.transform(X.float()), P32)


def test_duplicate_anchors_are_harmless():
    X = torch.cat([_data(20, 2)] * 3)
    k = tk.RBF()
    ny = Nystroem(k, 60, random_state=0).fit(X)
    assert ny.rank_ <= 20
    P = ny.transform(X)
    assert float((P @ P.T - k(X).to_dense().detach()).abs().max()) < 1e-8


def test_never_forms_the_n_by_n_gram():
    code = textwrap.dedent("""
        import resource, torch, torchkern as tk
        from torchkern.approx import Nystroem
        X = torch.randn(30000, 5, dtype=torch.float64)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        P = Nystroem(tk.RBF(lengthscale=2.0), 40, center_selection="greedy").fit_transform(X)
        assert P.shape == (30000, 40)
        print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, after = map(int, out.stdout.split())
    # ru_maxrss is in KiB; the Gram matrix would be 30000² · 8 B = 7.2 GB.
    assert (after - before) * 1024 < 300e6


def test_bad_inputs():
    X = _data(20)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n_components"):
            Nystroem(tk.RBF(), bad).fit(X)
    with pytest.warns(UserWarning, match="n_components=30"):  # as scikit-learn: n used
        assert Nystroem(tk.RBF(), 30).fit(X).n_components_ == 20
    with pytest.raises(ValueError, match="center_selection"):
        Nystroem(tk.RBF(), 5, center_selection="random").fit(X)
    with pytest.raises(ValueError, match="precomputed"):
        Nystroem("precomputed", 5).fit(X)
    with pytest.raises(TypeError, match="kernel"):
        Nystroem(42, 5).fit(X)
    with pytest.raises(ValueError, match="rcond"):
        Nystroem(tk.RBF(), 5, rcond=2.0).fit(X)
    with pytest.raises(NotFittedError):
        Nystroem(tk.RBF(), 5).transform(X)
    ny = Nystroem(tk.RBF(), 5).fit(X)
    with pytest.raises(ValueError, match="X has 2 features"):
        ny.transform(torch.randn(4, 2))
    with pytest.raises(ValueError, match="NaN"):
        Nystroem(tk.RBF(), 5).fit(torch.full((10, 2), float("nan")))
