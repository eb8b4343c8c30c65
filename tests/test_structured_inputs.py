"""Estimators on a structured (non-vector) kernel input equal the same estimators with
kernel="precomputed" on its Gram matrix, computed here by brute force.

The test-only kernel compares strings over "ACGT": k(s, t) = the number of positions p
with s_p = t_p (p < min(|s|, |t|)) — the inner product of one-hot (position, letter)
features, so positive semi-definite. Its Gram matrix is a lazy FeatureKernelMatrix, its
input a KernelInput built from a Python list of strings; the estimators see only the
input protocol (length, take, dtype, device).
"""
import warnings

import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV, cross_val_score

import torchkern as tk
from torchkern.approx import Nystroem
from torchkern.gram import FeatureKernelMatrix
from torchkern.inputs import KernelInput
from torchkern.kernels.structured import StructuredKernel

from tests._invariants import assert_close_up_to_sign

ALPHABET = "ACGT"


class Strings(KernelInput):
    """Strings as an (n, L) int64 tensor of letter codes, padded with −1."""

    def __init__(self, codes: torch.Tensor, dtype=torch.float64):
        self.codes = codes
        self.dtype = dtype
        self.device = codes.device

    def __len__(self):
        return self.codes.shape[0]

    def take(self, idx):
        return Strings(self.codes[idx.to(self.device)], self.dtype)

    @classmethod
    def concat(cls, parts):
        L = max(p.codes.shape[1] for p in parts)
        pad = [torch.nn.functional.pad(p.codes, (0, L - p.codes.shape[1]), value=-1) for p in parts]
        return Strings(torch.cat(pad), parts[0].dtype)

    def _move(self, device):
        self.codes = self.codes.to(device)


class PositionMatch(StructuredKernel):
    """k(s, t) = #{p : s_p = t_p}, as one-hot (position, letter) features."""

    def __init__(self, max_len: int = 12):
        super().__init__()
        self.max_len = max_len

    def check_input(self, X, name="X", **kw):
        if isinstance(X, Strings):
            return X
        if not isinstance(X, (list, tuple)) or not all(isinstance(s, str) for s in X):
            raise TypeError(f"{name} must be a list of strings or Strings, got {type(X).__name__}")
        if not X:
            raise ValueError(f"{name} is empty")
        codes = torch.full((len(X), self.max_len), -1, dtype=torch.long)
        for i, s in enumerate(X):
            codes[i, :len(s)] = torch.tensor([ALPHABET.index(c) for c in s])
        return Strings(codes)

    def _features(self, X: Strings):
        c = X.codes[:, :self.max_len]
        phi = torch.zeros(len(X), self.max_len, len(ALPHABET), dtype=X.dtype, device=X.device)
        phi.scatter_(2, c.clamp_min(0)[:, :, None], (c >= 0).to(X.dtype)[:, :, None])
        return phi.reshape(len(X), -1)

    def _gram(self, X, Y):
        return FeatureKernelMatrix(self._features(X), None if Y is None else self._features(Y))


def _strings(n, seed):
    """Random strings of length 6–10; class 1 strings favour 'A' in their first four letters."""
    rng = np.random.default_rng(seed)
    out, y = [], []
    for _ in range(n):
        label = int(rng.integers(2))
        length = int(rng.integers(6, 11))
        p = np.full((length, 4), 0.25)
        if label:
            p[:4] = [0.55, 0.15, 0.15, 0.15]
        out.append("".join(ALPHABET[rng.choice(4, p=row)] for row in p))
        y.append(label)
    return out, np.array(y)


def _gram(S, T):
    """The brute-force reference: count equal letters at equal positions."""
    return torch.tensor([[float(sum(a == b for a, b in zip(s, t))) for t in T] for s in S],
                        dtype=torch.float64)


@pytest.fixture(scope="module")
def data():
    train, y = _strings(60, seed=0)
    test, _ = _strings(25, seed=1)
    return train, y, test, _gram(train, train), _gram(test, train)


def _close(a, b, atol=1e-8):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                               rtol=0, atol=atol)


def test_kernel_gram_equals_brute_force(data):
    train, _, test, K, Kt = data
    k = PositionMatch()
    assert isinstance(k(train), FeatureKernelMatrix)
    _close(k(train).to_dense(), K, atol=0)
    _close(k(test, train, backend="dense").to_dense(), Kt, atol=0)


@pytest.mark.parametrize("backend", [None, "blocked"])
def test_svc_and_svr_equal_precomputed(data, backend):
    train, y, test, K, Kt = data
    kw = dict(C=1.0, tol=1e-8)
    ours = tk.SVC(PositionMatch(), backend=backend, **kw).fit(train, y)
    ref = tk.SVC("precomputed", **kw).fit(K, y)
    assert np.array_equal(ours.support_, ref.support_)
    assert len(ours.support_vectors_) == len(ref.support_)
    assert not hasattr(ours, "n_features_in_")
    _close(ours.decision_function(test), ref.decision_function(Kt), atol=1e-6)
    assert (ours.predict(test) == ref.predict(Kt)).all()
    z = torch.tensor(y * 2.0 - 1) + 0.1 * torch.arange(len(y), dtype=torch.float64) / len(y)
    svr = tk.SVR(PositionMatch(), C=2.0, epsilon=0.1, tol=1e-8, backend=backend).fit(train, z)
    svr_ref = tk.SVR("precomputed", C=2.0, epsilon=0.1, tol=1e-8).fit(K, z)
    _close(svr.predict(test), svr_ref.predict(Kt), atol=1e-6)


@pytest.mark.parametrize("solver", ["cholesky", "cg", "nystrom"])
def test_kernel_ridge_equals_precomputed(data, solver):
    train, y, test, K, Kt = data
    z = torch.tensor(y, dtype=torch.float64)
    kw = dict(alpha=0.5, solver=solver, tol=1e-12, random_state=0,
              n_centers=20 if solver == "nystrom" else None)
    ours = tk.KernelRidge(PositionMatch(), **kw).fit(train, z)
    ref = tk.KernelRidge("precomputed", **kw).fit(K, z)
    _close(ours.predict(test), ref.predict(Kt))
    if solver == "nystrom":
        assert np.array_equal(ours.center_indices_, ref.center_indices_)
        assert len(ours.X_fit_) == 20
    lazy = tk.KernelRidge(PositionMatch(), backend="blocked", **kw).fit(train, z)
    _close(lazy.predict(test), ref.predict(Kt))


def test_kernel_logistic_regression_exact_and_nystrom(data):
    train, y, test, K, Kt = data
    ours = tk.KernelLogisticRegression(PositionMatch(), C=2.0, tol=1e-10).fit(train, y)
    ref = tk.KernelLogisticRegression("precomputed", C=2.0, tol=1e-10).fit(K, y)
    _close(ours.decision_function(test), ref.decision_function(Kt), atol=1e-7)
    # Nyström on m centers is exactly kernel logistic regression with the Nyström kernel
    # K_nm K_mm⁺ K_mn (linear logistic regression on the features K_nm K_mm^{-1/2}).
    nys = tk.KernelLogisticRegression(PositionMatch(), C=2.0, tol=1e-10, n_centers=15,
                                      random_state=0).fit(train, y)
    c = np.asarray(nys.centers_)
    pinv = torch.linalg.pinv(K[c][:, c], hermitian=True)
    Knys, Kt_nys = K[:, c] @ pinv @ K[c], Kt[:, c] @ pinv @ K[c]
    ref_nys = tk.KernelLogisticRegression("precomputed", C=2.0, tol=1e-10).fit(Knys, y)
    _close(nys.decision_function(test), ref_nys.decision_function(Kt_nys), atol=1e-6)


def test_kernel_pca_equals_precomputed(data):
    train, _, test, K, Kt = data
    ours = tk.KernelPCA(PositionMatch(), n_components=4)
    ref = tk.KernelPCA("precomputed", n_components=4)
    # components up to sign (simple eigenvalues: each is defined up to its sign), one sign
    # per component for training and test points
    assert_close_up_to_sign(np.vstack([ours.fit_transform(train), ours.transform(test)]),
                            np.vstack([ref.fit_transform(K), ref.transform(Kt)]), rtol=0, atol=1e-8)
    lazy = tk.KernelPCA(PositionMatch(), n_components=3, eigen_solver="randomized",
                        backend="blocked", random_state=0).fit(train)
    _close(lazy.eigenvalues_, ref.eigenvalues_[:3], atol=1e-7)
    with pytest.raises(ValueError, match="vector inputs"):
        tk.KernelPCA(PositionMatch(), n_components=2, fit_inverse_transform=True).fit(train)


@pytest.mark.parametrize("selection", ["uniform", "greedy"])
def test_nystroem_features_equal_the_projection(data, selection):
    train, _, test, K, Kt = data
    ny = Nystroem(PositionMatch(), 12, center_selection=selection, random_state=0).fit(train)
    z = np.asarray(ny.component_indices_)
    pinv = torch.linalg.pinv(K[z][:, z], hermitian=True)
    P, Pt = ny.transform(train), ny.transform(test)
    _close(P @ P.T, K[:, z] @ pinv @ K[z])
    _close(Pt @ P.T, Kt[:, z] @ pinv @ K[z])
    assert isinstance(ny.components_, Strings) and len(ny.components_) == 12
    with pytest.raises(ValueError, match="kmeans"):
        Nystroem(PositionMatch(), 12, center_selection="kmeans").fit(train)


def test_cross_validation_and_grid_search_on_a_list(data):
    train, y, test, K, Kt = data
    ours = cross_val_score(tk.SVC(PositionMatch()), train, y, cv=4)
    ref = cross_val_score(tk.SVC("precomputed"), np.asarray(K), y, cv=4)
    _close(ours, ref, atol=0)
    grid = {"C": [0.1, 1.0, 10.0]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gs = GridSearchCV(tk.SVC(PositionMatch()), grid, cv=3).fit(train, y)
    gs_ref = GridSearchCV(tk.SVC("precomputed"), grid, cv=3).fit(np.asarray(K), y)
    _close(gs.cv_results_["mean_test_score"], gs_ref.cv_results_["mean_test_score"], atol=0)
    assert gs.best_params_ == gs_ref.best_params_
    assert (gs.predict(test) == gs_ref.predict(np.asarray(Kt))).all()
    assert gs.cv_results_["mean_test_score"].max() > 0.6


def test_wrong_kind_of_input_is_a_clear_error(data):
    train, y, _, _, _ = data
    svc = tk.SVC(PositionMatch()).fit(train, y)
    with pytest.raises(TypeError, match="list of strings"):
        svc.predict(torch.zeros(3, 2))
    with pytest.raises(TypeError, match="kernel on vectors"):
        tk.SVC(tk.RBF()).fit(svc.support_vectors_, y[:len(svc.support_)])
    with pytest.raises(TypeError):
        tk.approx.RandomFourierFeatures(PositionMatch(), 10)
