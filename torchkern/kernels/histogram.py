r"""Kernels for non-negative data: histograms and the Brownian-motion (min) kernel."""

from ._ops import fdim, felem, fmin, fsum
from .base import Kernel

__all__ = ["Min", "HistogramIntersection", "Chi2"]


class _NonNegative(Kernel):
    def _check_input(self, X, name):
        if bool((X < 0).any()):
            raise ValueError(f"{name} must be non-negative for {type(self).__name__}")


class Min(_NonNegative):
    r"""Min kernel :math:`k(x, y) = \prod_k \min(x_k, y_k)` on ℝ₊^d.

    In one dimension, the covariance of Brownian motion and the Green kernel of the
    Sobolev space H¹₀ on ℝ₊ (Berlinet and Thomas-Agnan 2004, "Reproducing Kernel Hilbert
    Spaces in Probability and Statistics"); a tensor product of those in d > 1.
    """

    def _k(self, x, y):
        out = fmin(felem(x, 0), felem(y, 0))
        for k in range(1, fdim(x)):
            out = out * fmin(felem(x, k), felem(y, k))
        return out


class HistogramIntersection(_NonNegative):
    r"""Histogram intersection kernel :math:`k(x, y) = \sum_k \min(x_k, y_k)` on ℝ₊^d."""

    def _k(self, x, y):
        return fsum(fmin(x, y))


class Chi2(_NonNegative):
    r"""Exponential χ² kernel on histograms.

    .. math:: k(x, y) = \exp\!\left(-\gamma \sum_k \frac{(x_k - y_k)^2}{x_k + y_k}\right)

    with 0/0 read as 0, as scikit-learn's ``chi2_kernel(gamma)``.
    """

    def __init__(self, gamma=1.0):
        super().__init__()
        self.register_hyperparameter("gamma", gamma, scalar=True)

    def _params(self, like):
        return (self._param("gamma", like),)

    def _k(self, x, y, gamma):
        # x_k = y_k = 0 gives 0 / 1e-30 = 0 instead of NaN.
        return (fsum((x - y) ** 2 / (x + y + 1e-30)) * -gamma).exp()
