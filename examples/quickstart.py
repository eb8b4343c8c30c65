"""torchkern quick start: learn a kernel's lengthscale by gradient, then fit kernel ridge
regression on a lazy Gram matrix and compare with the exact dense solution.

    python examples/quickstart.py
"""
import math

import torch

import torchkern as tk

torch.manual_seed(0)

# A noisy 2-D regression problem.
n = 3000
X = torch.rand(n, 2, dtype=torch.float64) * 4 - 2
f = lambda X: torch.sin(2 * X[:, 0]) * torch.cos(X[:, 1])  # noqa: E731
y = f(X) + 0.1 * torch.randn(n, dtype=torch.float64)
Xtest = torch.rand(1000, 2, dtype=torch.float64) * 4 - 2

# 1) A kernel is an nn.Module; k(X) is a lazy Gram matrix.
k = tk.RBF(lengthscale=1.0)
K = k(X, backend="blocked")  # nothing of size n × n is stored
print(K)

# 2) Learn the lengthscale by gradient of the GP marginal likelihood.
gp = tk.GaussianProcessRegressor(kernel=k, noise=0.01)
gp.fit(X[:1000], y[:1000], optimize=True, n_iter=60, lr=0.1)
ell = gp.kernel_.lengthscale.item()
print(f"learned lengthscale: {ell:.3f}, noise variance: {gp.noise_:.4f}")

# 3) Kernel ridge regression, exact (Cholesky) and matrix-free (preconditioned CG).
for solver in ("cholesky", "cg", "nystrom"):
    krr = tk.KernelRidge(kernel=tk.RBF(ell), alpha=1e-2, solver=solver, n_centers=500,
                         random_state=0).fit(X, y)
    rmse = (krr.predict(Xtest) - f(Xtest)).pow(2).mean().sqrt().item()
    print(f"KernelRidge(solver={solver!r:>10}): test RMSE {rmse:.4f}")
assert math.isfinite(rmse)
