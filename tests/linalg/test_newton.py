"""The kernel Newton step against a dense Newton step with an autograd Hessian."""
import pytest
import torch

from torchkern.linalg.newton import NewtonPreconditioner, NewtonSystem, newton_direction

from .conftest import MatmulOnly, _rbf_gram

F64 = torch.float64


def _loss(Fi, code, c):
    """Per-sample loss: logistic (c = 1, labels ±1 from code) or softmax cross-entropy."""
    if c == 1:
        return torch.nn.functional.softplus(-(2.0 * code - 1) * Fi[0])
    return -torch.log_softmax(Fi, 0)[code]


def _problem(n, c, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 2, generator=g, dtype=F64)
    K = _rbf_gram(X, lengthscale=1.5) + 1e-3 * torch.eye(n, dtype=F64)
    codes = torch.randint(0, max(c, 2), (n,), generator=g)
    A = 0.3 * torch.randn(n, c, generator=g, dtype=F64)
    b = 0.2 * torch.randn(c, generator=g, dtype=F64)
    return K, codes, A, b


def _grad_and_sqrt_hessian(F, codes, c):
    G = torch.stack([torch.autograd.functional.jacobian(lambda f: _loss(f, k, c), Fi)
                     for Fi, k in zip(F, codes)])
    H = torch.stack([torch.autograd.functional.hessian(lambda f: _loss(f, k, c), Fi)
                     for Fi, k in zip(F, codes)])
    lam, V = torch.linalg.eigh(H)
    S = (V * lam.clamp(min=0).sqrt()[:, None, :]) @ V.transpose(1, 2)
    return G, (S[:, 0, :] if c == 1 else S)


@pytest.mark.parametrize("c", [1, 3])
def test_newton_direction_equals_dense_newton_step(c):
    n, C = 14, 2.0
    K, codes, A0, b0 = _problem(n, c, seed=c)
    F = K @ A0 + b0
    G, S = _grad_and_sqrt_hessian(F, codes, c)
    L = torch.linalg.eigh(K)[1][:, -4:] * torch.linalg.eigh(K)[0][-4:].sqrt()  # K ≈ L Lᵀ

    def objective(theta):
        A, b = theta[:n * c].reshape(n, c), theta[n * c:]
        Fv = K @ A + b
        return C * sum(_loss(Fi, k, c) for Fi, k in zip(Fv, codes)) + 0.5 * (A * (K @ A)).sum()

    theta = torch.cat([A0.reshape(-1), b0])
    g = torch.autograd.functional.jacobian(objective, theta)
    H = torch.autograd.functional.hessian(objective, theta)
    ref = theta - torch.linalg.pinv(H, hermitian=True, rtol=1e-12) @ g  # min-norm in b's null shift
    A_ref, b_ref = ref[:n * c].reshape(n, c), ref[n * c:]
    A, b = newton_direction(MatmulOnly(K), F, G, S, C, L, b=b0, tol=1e-13)
    torch.testing.assert_close(A, A_ref, rtol=0, atol=1e-8)
    torch.testing.assert_close(b - b.mean(), b_ref - b_ref.mean(), rtol=0, atol=1e-8)


def test_system_and_preconditioner_equal_dense_matrices():
    n, c, C = 9, 3, 1.7
    K, codes, A0, b0 = _problem(n, c, seed=5)
    _, S = _grad_and_sqrt_hessian(K @ A0 + b0, codes, c)
    Sb = torch.block_diag(*S)  # (n c) × (n c)
    Kc = torch.kron(K, torch.eye(c, dtype=F64))  # K acting on the sample index
    M = torch.eye(n * c, dtype=F64) + C * Sb @ Kc @ Sb
    V = torch.randn(n * c, 2, dtype=F64)
    torch.testing.assert_close(NewtonSystem(K, S, C, c) @ V, M @ V)
    L = torch.randn(n, 3, dtype=F64)
    Lc = torch.kron(L @ L.T, torch.eye(c, dtype=F64))
    P = torch.eye(n * c, dtype=F64) + C * Sb @ Lc @ Sb
    torch.testing.assert_close(NewtonPreconditioner(L, S, C, c)(V), torch.linalg.solve(P, V))
