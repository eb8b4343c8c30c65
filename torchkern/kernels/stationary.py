r"""Stationary kernels: functions of the scaled distance r = ‖(x − y) / ℓ‖.

With ``ard_dims=d`` the lengthscale is a vector ℓ ∈ ℝ^d_+ and (x − y)/ℓ is taken
coordinate-wise (automatic relevance determination). All are evaluated in O(n·m·d) time
and, through the lazy backends, O(n + m) memory.
"""
import math

import torch

from ._ops import EXP_ZERO, fsum, inplace_ok, log1p, safe_sqrt, sqdist, sqdist_exact
from .base import Kernel, StationaryKernel, _Lengthscale

__all__ = ["RBF", "Laplacian", "Matern", "RationalQuadratic", "InverseMultiquadric", "Periodic"]


class RBF(StationaryKernel):
    r"""Gaussian (squared-exponential) kernel.

    .. math:: k(x, y) = \exp\!\left(-\frac{\lVert x - y\rVert^2}{2\ell^2}\right)

    scikit-learn's ``rbf_kernel(gamma)`` is the same kernel with γ = 1/(2ℓ²). Its
    spectral density is Gaussian (Bochner's theorem; Rasmussen and Williams 2006, "Gaussian
    Processes for Machine Learning", §4.2.1).

    Parameters
    ----------
    lengthscale : float or Tensor of shape (d,)
    ard_dims : int, optional
        Number of input dimensions when one lengthscale per dimension is learned.

    Examples
    --------
    >>> import torch, torchkern
    >>> k = torchkern.RBF(lengthscale=0.5)
    >>> K = k(torch.randn(100, 3))
    >>> (K @ torch.ones(100)).shape
    torch.Size([100])
    """

    def _radial_profile(self):
        return "gauss" if type(self)._k is RBF._k else None

    def _k(self, x, y):
        d2 = sqdist(x, y, center=False)  # centred by StationaryKernel
        if inplace_ok(d2):  # a fresh torch block outside autograd: no temporaries
            return d2.mul_(-0.5).exp_()
        return (d2 * -0.5).exp()


class Laplacian(StationaryKernel):
    r"""Laplacian kernel :math:`k(x, y) = \exp(-\lVert x - y\rVert_2 / \ell)`.

    This is the Matérn kernel with ν = 1/2 (note the Euclidean, not ℓ₁, norm).
    """

    fast_sqdist = False

    def _radial_profile(self):
        return "laplace" if type(self)._k is Laplacian._k else None

    def _k(self, x, y):
        # differences bounded where e^{-r} is 0 (EXP_ZERO): a zero gradient, not ∞·0 = NaN,
        # where x − y overflows
        return (-safe_sqrt(sqdist_exact(x, y, bound=EXP_ZERO))).exp()


class Matern(StationaryKernel):
    r"""Matérn kernel with smoothness ν ∈ {1/2, 3/2, 5/2}.

    .. math::
        k_{1/2} = e^{-r},\quad k_{3/2} = (1 + \sqrt3 r)e^{-\sqrt3 r},\quad
        k_{5/2} = (1 + \sqrt5 r + \tfrac53 r^2)e^{-\sqrt5 r},\qquad r = \lVert x-y\rVert/\ell

    Equal to scikit-learn's ``gaussian_process.kernels.Matern(length_scale, nu)``.
    """

    def __init__(self, nu: float = 1.5, lengthscale=1.0, ard_dims=None):
        if nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"nu must be 0.5, 1.5 or 2.5, got {nu!r}")
        super().__init__(lengthscale, ard_dims)
        self.nu = nu

    fast_sqdist = False

    def extra_repr(self):
        return f"nu={self.nu}, " + super().extra_repr()

    def _radial_profile(self):
        if type(self)._k is not Matern._k:
            return None
        return {0.5: "laplace", 1.5: "matern32", 2.5: "matern52"}[self.nu]

    def _k(self, x, y):
        # exact differences: under a square root the fast form loses accuracy at r ≈ 0;
        # r bounded where e^{-r} is 0 (EXP_ZERO): past it (1 + s)e^{-s} was ∞·0 = NaN;
        # so are the differences, whose gradient was ∞·0 = NaN where x − y overflowed
        r = safe_sqrt(sqdist_exact(x, y, bound=EXP_ZERO), upper=EXP_ZERO)
        if self.nu == 0.5:
            return (-r).exp()
        if self.nu == 1.5:
            s = r * math.sqrt(3.0)
            return (s + 1.0) * (-s).exp()
        s = r * math.sqrt(5.0)
        return (s + s * s * (1.0 / 3.0) + 1.0) * (-s).exp()


class RationalQuadratic(StationaryKernel):
    r"""Rational quadratic kernel, a scale mixture of Gaussians.

    .. math:: k(x, y) = \left(1 + \frac{\lVert x - y\rVert^2}{2\alpha\ell^2}\right)^{-\alpha}

    Equal to scikit-learn's ``RationalQuadratic(length_scale, alpha)``; α → ∞ gives the RBF.
    """

    heavy_tail = True

    def __init__(self, lengthscale=1.0, alpha=1.0, ard_dims=None):
        super().__init__(lengthscale, ard_dims)
        self.register_hyperparameter("alpha", alpha, scalar=True)

    def _params(self, like):
        # α at most half the dtype's largest value, so that 2α is finite (2α = ∞ made K
        # = 1 everywhere); past it RQ equals the RBF to working precision
        return (self._param("alpha", like).clamp(max=torch.finfo(like.dtype).max / 2),)

    def _k(self, x, y, alpha):
        # log1p: with log(1 + u), u = d²/(2α) < ε for large α and K was 1 everywhere
        # (float32, α = 1e5: off by 5e-3; α = 1e8: by 0.997)
        return (log1p(sqdist(x, y, center=False) / (alpha * 2.0)) * (-alpha)).exp()


class InverseMultiquadric(StationaryKernel):
    r"""Inverse multiquadric kernel :math:`k(x, y) = (\lVert x - y\rVert^2/\ell^2 + c^2)^{-1/2}`.

    Positive definite for every c > 0 (a scale mixture of Gaussians).
    """

    heavy_tail = True
    # c² past float32's normal range: c = 1e-30 made k(x, x) = 1/√0 = ∞ (it is 1e30),
    # c = 1e30 made every entry 1/√∞ = 0 (they are ≈ 1e-30)
    squared_hyperparameters = ("c",)

    def __init__(self, lengthscale=1.0, c=1.0, ard_dims=None):
        super().__init__(lengthscale, ard_dims)
        self.register_hyperparameter("c", c, scalar=True)

    def _params(self, like):
        return (self._param("c", like),)

    def _k(self, x, y, c):
        # differentiated by differences: the fast form's gradient 2(a_i Σ_j G_ij −
        # Σ_j G_ij b_j) cancels where G_ii = −1/(2c³) at x = y dwarfs the other terms
        # (float64, c = 1e-10: the gradient in X and ℓ was 0); 2 G_ij (a_i − b_j) does not
        exact = not (inplace_ok(x) and inplace_ok(y))
        return ((sqdist_exact(x, y) if exact else sqdist(x, y, center=False)) + c * c).rsqrt()


class Periodic(_Lengthscale, Kernel):
    r"""Periodic (exp-sine-squared) kernel, one period per axis.

    .. math:: k(x, y) = \exp\!\left(-2\sum_{k=1}^d \frac{\sin^2(\pi (x_k - y_k) / p)}{\ell_k^2}\right)

    In one dimension this is scikit-learn's ``ExpSineSquared(length_scale=ℓ,
    periodicity=p)``, exp(−2 sin²(π|x − y|/p)/ℓ²). In d > 1 it is the product of the
    one-dimensional kernels (as GPyTorch's): the variant with the Euclidean norm ‖x − y‖
    inside the sine is not positive definite for d ≥ 2 (it fails the eigenvalue test).
    ``ard_dims`` gives one lengthscale per axis.
    """

    def __init__(self, lengthscale=1.0, period=1.0, ard_dims=None):
        Kernel.__init__(self)
        self._init_lengthscale(lengthscale, ard_dims)
        self.register_hyperparameter("period", period)

    def _check_input(self, X, name):
        self._check_ard(X, name)
        p = self.period.numel()
        if p != 1 and p != X.shape[1]:
            raise ValueError(f"{name} has {X.shape[1]} features but Periodic has {p} periods "
                             f"(period must be a float or have one entry per feature)")

    def _inputs(self, X):
        # each coordinate modulo its period (fmod is exact): the same kernel, whose
        # differences then neither overflow (∞ made sin NaN) nor lose the phase (at
        # |x| = 1e200, sin(π(x − y)/p) of the rounded product was any number in [−1, 1])
        return torch.fmod(X, self.period.to(dtype=X.dtype, device=X.device))

    def _params(self, like):
        return (self._param("lengthscale", like), self._param("period", like))

    def _k(self, x, y, lengthscale, period):
        # sin/ℓ, squared: sin²/ℓ² was 0/0 = NaN at x = y where ℓ² underflows (float32,
        # ℓ < 1e-19)
        s = ((x - y) * math.pi / period).sin() / lengthscale
        return (fsum(s * s) * -2.0).exp()
