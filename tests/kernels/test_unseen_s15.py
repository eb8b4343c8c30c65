"""Vector kernels on unusual-but-valid data and hyperparameters, against scipy / dense
references."""
import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

import torchkern as tk

rng = np.random.default_rng(15)
X = rng.normal(size=(30, 3))
Y = rng.normal(size=(20, 3))


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-6), (torch.float64, 1e-14)])
@pytest.mark.parametrize("backend", ["dense", "blocked"])
def test_rational_quadratic_with_large_alpha(dtype, tol, backend):
    # k = (1 + u)^-α = exp(-α log(1 + u)), u = d²/(2αℓ²): log(1 + u) lost u below ε, and
    # the kernel read 1 everywhere (float32: α = 1e5 off by 5e-3, α = 1e8 by 0.997; float64:
    # α = 1e12 by 1e-4, α = 1e16 by 0.67). α → ∞ is the RBF.
    Xt, Yt = torch.tensor(X, dtype=dtype), torch.tensor(Y, dtype=dtype)
    D2 = cdist(Xt.double().numpy(), Yt.double().numpy()) ** 2 / 0.8 ** 2
    for alpha in (1e5, 1e8, 1e16):
        ref = np.exp(-alpha * np.log1p(D2 / (2 * alpha)))
        with torch.no_grad():
            K = tk.RationalQuadratic(0.8, alpha=alpha)(Xt, Yt, backend=backend).to_dense()
        assert np.abs(K.double().numpy() - ref).max() < tol
    np.testing.assert_allclose(ref, np.exp(-D2 / 2), atol=1e-15)  # the RBF limit


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_data_is_computed_in_float32(dtype):
    # In half precision the formulas overflowed (‖x − y‖² > 65504: float16 Matérn NaN at
    # 300 lengthscales, Linear inf) or kept no digits (ArcCosine(1) off by 97 % in float16,
    # 460 % in bfloat16), silently. The data's values are kept; the Gram matrix is float32.
    for spread, k in [(300.0, tk.Matern(1.5, 1.0)), (300.0, tk.Linear()),
                      (1.0, tk.ArcCosine(1)), (1.0, tk.Periodic(1.0, period=2.0))]:
        Xh = torch.tensor(X * spread).to(dtype)
        with torch.no_grad():
            K = k(Xh, backend="blocked").to_dense()
            ref = k.double()(Xh.double(), backend="dense").to_dense()
        assert K.dtype == torch.float32
        err = ((K.double() - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-6, (type(k).__name__, err)
    # a deep kernel's network takes the data in its own (half) dtype; the base kernel's
    # values come in float32
    net = torch.nn.Linear(3, 2).to(dtype)
    Xh = torch.tensor(X).to(dtype)
    K = tk.FeatureKernel(net, tk.RBF(1.0))(Xh).to_dense()
    with torch.no_grad():
        ref = tk.RBF(1.0).double()(net(Xh).double()).to_dense()
    assert K.dtype == torch.float32
    assert (K.detach().double() - ref).abs().max() < 1e-6


def _arccos0_numpy(A, B):
    """1 − θ/π with θ = atan2(‖a × b‖, a·b) in float64 (accurate at every angle; d = 3)."""
    cross = np.linalg.norm(np.cross(A[:, None, :], B[None, :, :]), axis=-1)
    return 1 - np.arctan2(cross, A @ B.T) / np.pi


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-7), (torch.float64, 1e-15)])
def test_arccos_order_0_on_nearly_parallel_points(dtype, tol):
    # k₀ = 1 − θ/π is linear in θ; θ = atan2(√(‖x‖²‖y‖² − ⟨x,y⟩²), ⟨x,y⟩) loses half the
    # digits near θ = 0: the diagonal of k(X) read 1 − 2e-4 in float32, 1 − 9e-9 in float64
    A = np.vstack([X, 1.7 * X + 1e-5 * rng.normal(size=X.shape)])
    At = torch.tensor(A, dtype=dtype)
    with torch.no_grad():
        K = tk.ArcCosine(0)(At, backend="blocked").to_dense().double().numpy()
    assert np.abs(K - _arccos0_numpy(At.double().numpy(), At.double().numpy())).max() < tol
    assert np.abs(np.diag(K) - 1).max() < tol


def test_arccos_keops_gradients_equal_dense():
    # safe_sqrt was √(relu(t) + ε): KeOps differentiates relu by a step equal to 1 at 0,
    # so where ‖x‖²‖y‖² − ⟨x,y⟩² cancels to 0 (the diagonal of k(X)) its gradient was
    # 1/(2√ε) times round-off: KeOps input gradients off by 0.7 % (order 1) and 11 %
    # (order 2) on plain random data. One formula for the three orders.
    k = tk.ArcCosine(0) + tk.ArcCosine(1) + tk.ArcCosine(2)
    Z = torch.tensor(X[:20])
    V = torch.tensor(Y[:20, :2])
    grads = []
    for backend in ("dense", "keops"):
        Zr = Z.clone().requires_grad_(True)
        ((k(Zr, backend=backend) @ V) ** 2).sum().backward()
        grads.append(Zr.grad)
    assert ((grads[1] - grads[0]).norm() / grads[0].norm()) < 1e-10


@pytest.mark.parametrize("scale", [1e-9, 1e9])
def test_arccos_on_data_of_any_scale(scale):
    # k_n(cx, cy) = c^{2n} k_n(x, y). sin θ came from √(‖x‖²‖y‖² − ⟨x,y⟩²) with a 1e-30
    # floor under the root: float32 data of norm ~1e-9 gave Gram matrices 60 times too
    # large, of norm 1e10 NaN (‖x‖²‖y‖² overflowed)
    Xs = torch.tensor(X[:8] * scale, dtype=torch.float32)
    for order in (0, 1, 2):
        with torch.no_grad():
            K = tk.ArcCosine(order)(Xs, backend="blocked").to_dense().double()
            ref = tk.ArcCosine(order).double()(torch.tensor(X[:8]), backend="dense").to_dense()
        ref = ref * scale ** (2 * order)
        assert ((K - ref).abs().max() / ref.abs().max()).item() < 1e-6
