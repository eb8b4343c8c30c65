"""KernelMatrix: every operation of every representation against its dense counterpart."""
import pytest
import torch

import torchkern as tk
from torchkern.gram import (DenseKernelMatrix, FeatureKernelMatrix, FormulaKernelMatrix,
                            OperatorKernelMatrix)

X = torch.randn(45, 3, dtype=torch.float64)
Y = torch.randn(31, 3, dtype=torch.float64)
PHI_X = torch.randn(45, 6, dtype=torch.float64)
PHI_Y = torch.randn(31, 6, dtype=torch.float64)


def _dense_ref(kind):
    if kind == "features":
        return PHI_X @ PHI_Y.T
    return tk.Matern(2.5, 0.8)(X, Y, backend="dense").to_dense().detach()


def _make(kind):
    k = tk.Matern(2.5, 0.8)
    if kind == "dense":
        return k(X, Y, backend="dense")
    if kind in ("blocked", "keops"):
        return k(X, Y, backend=kind)
    if kind == "features":
        return FeatureKernelMatrix(PHI_X, PHI_Y)
    if kind == "sparse-features":
        return FeatureKernelMatrix(PHI_X.to_sparse(), PHI_Y.to_sparse())
    if kind == "operator":
        A = _dense_ref("dense")
        return OperatorKernelMatrix(lambda V: A @ V, A.shape, A.dtype, A.device,
                                    rmatmul=lambda V: A.T @ V)
    raise ValueError(kind)


KINDS = ["dense", "blocked", "features", "sparse-features", "operator"]


def _ref(kind):
    return _dense_ref("features" if "features" in kind else "dense")


@pytest.mark.parametrize("kind", KINDS)
def test_operations_match_dense(kind):
    K, A = _make(kind), _ref(kind)
    assert K.shape == tuple(A.shape) and K.dtype == A.dtype and K.device == A.device
    V = torch.randn(A.shape[1], 3, dtype=torch.float64)
    v = torch.randn(A.shape[1], dtype=torch.float64)
    torch.testing.assert_close((K @ V).detach(), A @ V)
    torch.testing.assert_close((K @ v).detach(), A @ v)
    U = torch.randn(A.shape[0], 2, dtype=torch.float64)
    torch.testing.assert_close((K.T @ U).detach(), A.T @ U)
    torch.testing.assert_close(K.to_dense().detach(), A)
    idx = torch.tensor([3, 0, 17])
    torch.testing.assert_close(K.rows(idx).detach(), A[idx])
    torch.testing.assert_close(K.cols(idx).detach(), A[:, idx])
    torch.testing.assert_close(K.submatrix(idx, [1, 2]).detach(), A[idx][:, [1, 2]])
    torch.testing.assert_close(K.diag().detach(), torch.diagonal(A))
    torch.testing.assert_close(K.sum(0).detach(), A.sum(0))
    blocks = list(K.row_blocks(10))
    assert [b[0] for b in blocks] == [0, 10, 20, 30, 40]
    torch.testing.assert_close(torch.cat([b[2] for b in blocks]).detach(), A)
    torch.testing.assert_close(((2.0 * K + K) @ V).detach(), 3 * A @ V)


@pytest.mark.parametrize("kind", ["dense", "blocked", "operator"])
def test_shift_and_center_stay_lazy_and_exact(kind):
    k = tk.Matern(2.5, 0.8)
    if kind == "operator":
        A0 = k(X, backend="dense").to_dense().detach()
        K = OperatorKernelMatrix(lambda V: A0 @ V, A0.shape, A0.dtype, A0.device)
    else:
        K = k(X, backend=kind)
    A = K.to_dense().detach()
    n = A.shape[0]
    V = torch.randn(n, 2, dtype=torch.float64)
    lam = torch.rand(n, dtype=torch.float64)
    S = K.add_diag(0.3)
    torch.testing.assert_close((S @ V).detach(), (A + 0.3 * torch.eye(n, dtype=A.dtype)) @ V)
    torch.testing.assert_close(K.add_diag(lam).to_dense().detach(), A + torch.diag(lam))
    torch.testing.assert_close(K.add_diag(lam).rows([2, 5]).detach(), (A + torch.diag(lam))[[2, 5]])
    torch.testing.assert_close(S.diag().detach(), torch.diagonal(A) + 0.3)
    H = torch.eye(n, dtype=A.dtype) - 1.0 / n
    C = K.centered()
    torch.testing.assert_close((C @ V).detach(), H @ A @ H @ V)
    torch.testing.assert_close(C.diag().detach(), torch.diagonal(H @ A @ H))
    torch.testing.assert_close(C.rows([1, 4]).detach(), (H @ A @ H)[[1, 4]])


def test_centering_new_points_uses_training_means():
    k = tk.RBF(1.0)
    Ktr = k(X).to_dense().detach()
    Kte = k(Y, X).to_dense().detach()
    n = X.shape[0]
    # Explicit feature-space formula: <φ(y) − μ, φ(x_j) − μ>
    ref = Kte - Kte.mean(1, keepdim=True) - Ktr.mean(0, keepdim=True) + Ktr.mean()
    C_train = k(X, backend="blocked").centered()
    C = k(Y, X, backend="blocked").centered(col_mean=C_train.col_mean, mean=C_train.mean)
    V = torch.randn(n, 2, dtype=torch.float64)
    torch.testing.assert_close((C @ V).detach(), ref @ V)
    torch.testing.assert_close(C.to_dense().detach(), ref)


def test_matmul_rejects_bad_operands():
    K = tk.RBF()(X, backend="blocked")
    with pytest.raises(ValueError, match="V must have shape"):
        K @ torch.randn(3, dtype=torch.float64)
    with pytest.raises(TypeError, match="dtype"):
        K @ torch.randn(45)
    with pytest.raises(ValueError, match="square"):
        tk.RBF()(X, Y).add_diag(1.0)
    with pytest.raises(ValueError, match="lam"):
        tk.RBF()(X).add_diag(torch.ones(3))


def test_auto_backend_chooses_by_size(monkeypatch):
    assert isinstance(tk.RBF()(X), DenseKernelMatrix)
    monkeypatch.setattr(tk.config, "dense_max_entries", 100)
    K = tk.RBF()(X)
    assert isinstance(K, FormulaKernelMatrix) and K.backend == "blocked"


def test_set_backend_and_context_manager():
    assert tk.get_backend() == "auto"
    with tk.use_backend("blocked"):
        assert tk.RBF()(X).backend == "blocked"
        assert tk.RBF()(X, backend="dense").backend == "dense"
    assert tk.get_backend() == "auto"
    tk.set_backend("dense")
    try:
        assert tk.RBF()(X).backend == "dense"
    finally:
        tk.set_backend("auto")
    with pytest.raises(ValueError, match="backend"):
        tk.set_backend("gpu")
    with pytest.raises(ValueError, match="backend"):
        tk.RBF()(X, backend="fast")


def test_keops_failure_falls_back_to_blocked_with_one_warning(monkeypatch):
    import torchkern.gram as gram

    def broken(formula):
        raise RuntimeError("g++ not found")

    monkeypatch.setattr(gram, "_keops_lazy", broken)
    monkeypatch.setattr(gram, "_KEOPS_STATE", {"checked": True, "error": None, "warned": False})
    monkeypatch.setattr(tk.config, "dense_max_entries", 100)
    monkeypatch.setattr(tk.config, "keops_on_cpu", True)
    V = torch.randn(45, dtype=torch.float64)
    K = tk.RBF()(X)
    assert K.backend == "keops"
    with pytest.warns(gram.KeOpsFallbackWarning, match="g\\+\\+ not found"):
        out = K @ V
    torch.testing.assert_close(out, tk.RBF()(X, backend="dense").to_dense().detach() @ V)
    # later auto choices go straight to blocked, silently
    assert tk.RBF()(X).backend == "blocked"
    with pytest.raises(RuntimeError, match="g\\+\\+"):
        tk.RBF()(X, backend="keops") @ V  # an explicit request is not silently replaced


def test_keops_backend_rows_and_diag_are_plain_torch():
    # rows/diag of a KeOps matrix need no compilation: they evaluate the formula in torch
    K = tk.RBF(0.8)(X, backend="keops")
    A = tk.RBF(0.8)(X, backend="dense").to_dense().detach()
    torch.testing.assert_close(K.rows([0, 5]).detach(), A[[0, 5]])
    torch.testing.assert_close(K.diag().detach(), torch.diagonal(A))


def test_keops_cuda_probe_reports_a_failing_child_process(monkeypatch):
    # The probe runs a KeOps CUDA reduction in a child process; where that fails (here:
    # no GPU, or a KeOps build that crashes) it returns the reason instead of crashing us.
    import torchkern.gram as gram

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the failure path needs a machine without it")
    reason = gram._probe_keops_cuda()
    assert reason is not None and "child process" in reason and "exit code 1" in reason
    monkeypatch.setattr(gram, "_KEOPS_STATE", {"checked": True, "error": None, "warned": False})
    assert not gram.keops_available("cuda")
    assert gram.keops_unavailable_reason("cuda") == reason
    assert gram.keops_available("cpu")


def test_reused_training_gram_is_stored_when_it_fits(monkeypatch):
    # Estimators that multiply their Gram many times ask kernel_matrix(..., reuse=True):
    # under "auto" it is materialized within config.materialize_max_bytes, lazy beyond.
    from torchkern._estimator import kernel_matrix
    from torchkern.gram import DenseKernelMatrix

    X = torch.randn(300, 3, dtype=torch.float64)
    monkeypatch.setattr(tk.config, "dense_max_entries", 100)
    assert kernel_matrix(tk.RBF(), X).backend == "blocked"
    K = kernel_matrix(tk.RBF(), X, reuse=True)
    assert isinstance(K, DenseKernelMatrix)
    torch.testing.assert_close(K.to_dense(), tk.RBF()(X, backend="blocked").to_dense())
    monkeypatch.setattr(tk.config, "materialize_max_bytes", 300 * 300 * 8 - 1)
    assert kernel_matrix(tk.RBF(), X, reuse=True).backend == "blocked"
    monkeypatch.setattr(tk.config, "materialize_max_bytes", 300 * 300 * 8)
    assert kernel_matrix(tk.RBF(), X, reuse=True).backend == "dense"
    # an explicit backend, as argument or as the global default, is obeyed
    assert kernel_matrix(tk.RBF(), X, reuse=True, backend="blocked").backend == "blocked"
    with tk.use_backend("blocked"):
        assert kernel_matrix(tk.RBF(), X, reuse=True).backend == "blocked"


def test_rows_cols_and_submatrix_take_slices_with_negative_steps():
    # K.rows(slice(None, None, -1)) raised "step must be greater than zero" (a tensor's
    # slicing), while the structured inputs' indices (inputs.as_index) took such slices.
    X = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    K = tk.RBF()(X, backend="blocked")
    D = ((X[:, None] - X[None]) ** 2).sum(-1).mul(-0.5).exp()
    torch.testing.assert_close(K.rows(slice(None, None, -1)), D.flip(0), rtol=1e-14, atol=0)
    torch.testing.assert_close(K.cols(slice(5, 0, -2)), D[:, [5, 3, 1]], rtol=1e-14, atol=0)
    torch.testing.assert_close(K.submatrix(slice(4, None, -3), slice(1, 3)), D[[4, 1]][:, 1:3],
                               rtol=1e-14, atol=0)
    assert K.rows(slice(4, 2)).shape == (0, 6)  # an empty slice
