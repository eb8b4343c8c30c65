"""MultipleKernel's fixed weights; fit_kernel's convergence report."""
import math

import pytest
import torch

import torchkern as tk
from torchkern.learning import MultipleKernel


def _X():
    return torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("init", [[0, 0], [0.0, -0.0], torch.zeros(2)])
def test_multiple_kernel_refuses_all_zero_fixed_weights(init):
    # was accepted: the kernel was 0 everywhere (a singular Gram, every prediction 0)
    with pytest.raises(ValueError, match="init: the fixed weights are all 0"):
        MultipleKernel([tk.RBF(), tk.Linear()], weights="fixed", init=init)
    k = MultipleKernel([tk.RBF(), tk.Linear()], weights="fixed", init=[1.0, 1.0])
    with pytest.raises(ValueError, match="eta: the fixed weights are all 0"):
        k.set_weights([0.0, 0.0])


@pytest.mark.parametrize("mode, init", [("fixed", [1.0, -1.0]), ("fixed", [math.nan, 1.0]),
                                        ("fixed", [math.inf, 1.0]), ("simplex", [0.0, 1.0]),
                                        ("nonneg", [1.0, -2.0])])
def test_multiple_kernel_refuses_negative_or_nan_weights_by_name(mode, init):
    with pytest.raises(ValueError, match=r"init: weights must be finite and >=? 0"):
        MultipleKernel([tk.RBF(), tk.Linear()], weights=mode, init=init)


def test_multiple_kernel_fixed_weights_with_a_zero():
    X = _X()
    k = MultipleKernel([tk.RBF(), tk.Linear()], weights="fixed", init=[0.0, 2.0])
    want = 2.0 * X @ X.T
    torch.testing.assert_close(k(X, backend="dense").to_dense(), want)


def _target_fit():
    # ||c K_l(X) - 2 K_0.7(X)||^2 / ||2 K_0.7||^2: optimum c = 2, l = 0.7, loss 0
    X = torch.randn(20, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    T = 2.0 * tk.RBF(0.7)(X, backend="dense").to_dense().detach()
    k = 1.0 * tk.RBF(1.0)
    return k, lambda: ((k(X, backend="dense").to_dense() - T) ** 2).sum() / (T ** 2).sum()


def test_fit_kernel_adam_with_tiny_steps_is_a_stall_not_convergence():
    from torchkern.learning import fit_kernel
    from torchkern.linalg import ConvergenceWarning

    # lr=1e-6: each step lowers the loss by < tol, so patience stopped the run after 10
    # steps and called it converged at outputscale 1.00001 (the optimum is 2)
    k, obj = _target_fit()
    with pytest.warns(ConvergenceWarning, match="adam did not converge: .* a stall"):
        res = fit_kernel(obj, k, optimizer="adam", lr=1e-6, max_iter=200)
    assert not res.converged and "largest projected gradient entry" in res.reason
    assert abs(res.hyperparameters["outputscale"] - 1.0) < 1e-3
    # a step size that reaches the optimum: converged, and there
    k, obj = _target_fit()
    res = fit_kernel(obj, k, optimizer="adam", lr=0.02, max_iter=2000)
    assert res.converged
    assert abs(res.hyperparameters["outputscale"] - 2.0) < 2e-3
    assert abs(res.hyperparameters["base.lengthscale"] - 0.7) < 1e-3
    # L-BFGS-B on the same objective agrees with the closed form to its gtol
    k, obj = _target_fit()
    res = fit_kernel(obj, k)
    assert res.converged
    assert abs(res.hyperparameters["outputscale"] - 2.0) < 1e-4
    assert abs(res.hyperparameters["base.lengthscale"] - 0.7) < 1e-4


def test_multiple_kernel_pairs_of_structured_kernels_use_each_terms_pairs():
    # MultipleKernel.pairs on structured terms took the diagonal of the combined k(X, Y):
    # every term's n x n Gram, where each term's own pairs may be O(n)
    import random

    from torchkern.sequences import Spectrum

    class PerPair(Spectrum):
        """A Spectrum kernel whose pairs are one 1 x 1 Gram per pair; records its Grams."""
        shapes = []

        def _counts(self, X, Y):
            PerPair.shapes.append((len(X), len(X if Y is None else Y)))
            return super()._counts(X, Y)

        def pairs(self, X, Y):
            return torch.cat([Spectrum.pairs(self, [x], [y]) for x, y in zip(X, Y)])

    rng = random.Random(0)
    X = ["".join(rng.choice("ACGT") for _ in range(12)) for _ in range(15)]
    Y = ["".join(rng.choice("ACGT") for _ in range(12)) for _ in range(15)]
    for k in (MultipleKernel([PerPair(3), PerPair(2, normalize=True)], weights="fixed",
                             init=[0.3, 2.0]),
              MultipleKernel([PerPair(3), PerPair(2)]),
              PerPair(3) + 0.5 * PerPair(2)):
        want = k(X, Y, backend="dense").to_dense().diagonal().detach()
        PerPair.shapes.clear()
        got = k.pairs(X, Y).detach()
        assert set(PerPair.shapes) == {(1, 1)}, PerPair.shapes
        torch.testing.assert_close(got, want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("kw, match", [
    (dict(tol=math.inf), "tol must be None or a finite float >= 0"),
    (dict(gtol=math.inf), "gtol must be a finite float >= 0"),
    (dict(tol=math.inf, optimizer="adam"), "tol must be None or a finite float >= 0"),
])
def test_fit_kernel_refuses_infinite_tolerances(kw, match):
    # an infinite tol or gtol stopped at the start and reported converged
    from torchkern.learning import fit_kernel
    k, obj = _target_fit()
    with pytest.raises(ValueError, match=match):
        fit_kernel(obj, k, **kw)


def test_multiple_kernel_kernels_and_init_shapes_by_name():
    # MultipleKernel(RBF()) said "'RBF' object is not iterable"; init=[[0.5, 0.5]] was
    # read as its flattening
    with pytest.raises(TypeError, match="kernels must be a non-empty sequence .* got one RBF"):
        MultipleKernel(tk.RBF())
    with pytest.raises(ValueError, match=r"init must be a 1-D sequence of weights, got "
                                         r"shape \(1, 2\)"):
        MultipleKernel([tk.RBF(), tk.Linear()], init=[[0.5, 0.5]])


def test_learn_kernel_blames_y_not_the_gram_for_a_wrong_y():
    # the message read "the objective is not finite or not defined (a Gram matrix not
    # positive definite) at the initial hyperparameters ...: y has 5 rows but 12 were
    # expected": the Gram was fine
    from torchkern.learning import learn_kernel
    X = torch.randn(12, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="objective is not defined at the initial") as e:
        learn_kernel(tk.KernelRidge(tk.RBF()), X, X[:5, 0], "loo")
    assert "positive definite" not in str(e.value) and "y has 5 rows" in str(e.value)


def test_multiple_kernel_simplex_set_weights_of_huge_weights():
    # set_weights([1e308, 1e308]) on the simplex: Σ η overflowed, the weights were NaN
    k = MultipleKernel([tk.RBF(), tk.Linear()])
    k.set_weights([1e308, 1e308])
    torch.testing.assert_close(k.weights.detach(), torch.tensor([0.5, 0.5], dtype=torch.float64))
    k.set_weights([1.0, 3.0])
    torch.testing.assert_close(k.weights.detach(), torch.tensor([0.25, 0.75], dtype=torch.float64))


@pytest.mark.parametrize("c", [1e200, 1e-200])
def test_alignment_and_gcv_do_not_depend_on_the_kernels_scale(c):
    # outputscale 1e200: ‖K_c‖²_F overflowed and the alignment read 0.0; 1e-200: it
    # underflowed ("the kernel's centered Gram matrix on X is zero"); gcv(c·k, c·alpha)
    # was 0/0 = NaN (‖c‖² and tr(A⁻¹)² both underflowed)
    from torchkern.learning import gcv, kernel_alignment
    X = torch.randn(20, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = X[:, 0] ** 2 + X[:, 1]  # real targets, used as they are
    K = torch.exp(-torch.cdist(X, X) ** 2 / 2)
    H = torch.eye(20, dtype=torch.float64) - 1.0 / 20
    Kc, yc = H @ K @ H, y - y.mean()
    want = (yc @ Kc @ yc) / (Kc.norm() * (yc @ yc))
    got = kernel_alignment(c * tk.RBF(), X, y)
    torch.testing.assert_close(got.detach(), want, rtol=1e-10, atol=0)
    Ainv = torch.linalg.inv(K + 0.1 * torch.eye(20, dtype=torch.float64))
    want = 20 * ((Ainv @ y) ** 2).sum() / Ainv.trace() ** 2
    got = gcv(c * tk.RBF(), X, y, 0.1 * c)
    torch.testing.assert_close(got.detach(), want, rtol=1e-8, atol=0)


@pytest.mark.parametrize("c", [1e200, 1e-200])
def test_mmd_test_power_of_a_huge_or_tiny_outputscale(c):
    # 1e200 * RBF: (8 eps kmax)**2 raised Python's OverflowError and h**2 was inf; J is
    # MMD²_u / σ̂ of the unit kernel (λ/c² negligible). 1e-200 * RBF: c MMD²_u / √λ
    # (c²σ̂² = 1e-400 negligible against λ = 1e-8)
    from torchkern.learning import mmd_test_power
    g = torch.Generator().manual_seed(0)
    X = torch.randn(20, 3, dtype=torch.float64, generator=g)
    Z = torch.randn(20, 3, dtype=torch.float64, generator=g) + 0.5
    k = lambda A, B: torch.exp(-torch.cdist(A, B) ** 2 / 2)  # noqa: E731
    Kxx, Kzz, Kxz = k(X, X), k(Z, Z), k(X, Z)
    H = Kxx + Kzz - Kxz - Kxz.T
    n = 20  # Gretton et al. (2012) eq. 3: within-sample sums off the diagonal
    mmd2 = ((Kxx.sum() - Kxx.trace() + Kzz.sum() - Kzz.trace()) / (n * (n - 1))
            - 2 * Kxz.sum() / n ** 2)
    var = 4 * ((H.sum(1) ** 2).sum() / n ** 3 - (H.sum() / n ** 2) ** 2)
    got = mmd_test_power(c * tk.RBF(), X, Z)
    want = mmd2 / var.sqrt() if c > 1 else c * mmd2 / math.sqrt(1e-8)
    torch.testing.assert_close(got.detach(), want, rtol=1e-10, atol=0)


_MAX_ITER_0 = r"max_iter must be an int with 1 <= max_iter, got 0"


@pytest.mark.filterwarnings("ignore::torchkern.linalg.ConvergenceWarning")
@pytest.mark.parametrize("name", ["gcv", "loo_error", "log_marginal_likelihood",
                                  "kernel_ridge_predict"])
def test_cg_objectives_refuse_zero_iterations_by_name(name):
    # max_iter=0 left c = (K + αI)⁻¹y at 0: gcv was NaN (0/0), loo_error 0.0 (a perfect
    # score), kernel_ridge_predict zeros
    import torchkern.learning as L
    X = torch.randn(20, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = X[:, 0] ** 2
    fn = getattr(L, name)
    call = {"kernel_ridge_predict": lambda **kw: fn(tk.RBF(), X, y, X, 0.1, solver="cg", **kw),
            "log_marginal_likelihood": lambda **kw: fn(tk.RBF(), X, y, 0.1, method="cg", **kw)
            }.get(name, lambda **kw: fn(tk.RBF(), X, y, 0.1, method="cg", **kw))
    with pytest.raises(ValueError, match=_MAX_ITER_0):
        call(max_iter=0)
    assert math.isfinite(float(call(max_iter=1).detach().sum()))  # one step is taken


def test_estimators_refuse_zero_cg_iterations_by_name():
    # the GP's constant mean was μ = 0/0 ("K @ V: V contains NaN"); KernelRidge predicted 0
    X = torch.randn(20, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = X[:, 0] ** 2
    gp = tk.GaussianProcessRegressor(tk.RBF(), mean="constant", method="cg", max_iter=0)
    with pytest.raises(ValueError, match=_MAX_ITER_0):
        gp.fit(X, y)
    with pytest.raises(ValueError, match=_MAX_ITER_0):
        tk.KernelRidge(tk.RBF(), solver="cg", max_iter=0).fit(X, y)


class _RefusedGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        raise ValueError("the backward refused")


@pytest.mark.parametrize("optimizer", ["lbfgs", "adam"])
def test_fit_kernel_says_when_only_the_gradient_is_refused(optimizer):
    # a finite objective whose backward raised was reported "not finite ... its value is
    # 0.53"
    from torchkern.learning import fit_kernel
    k = tk.RBF(0.5)
    obj = lambda: _RefusedGradient.apply((k.lengthscale - 0.5) ** 2 + 0.53)  # noqa: E731
    with pytest.raises(ValueError, match=r"the objective's gradient could not be computed at "
                                         r"the initial hyperparameters .*\(its value is "
                                         r"0\.53\): the backward refused") as e:
        fit_kernel(obj, k, optimizer=optimizer)
    assert isinstance(e.value.__cause__, ValueError)
