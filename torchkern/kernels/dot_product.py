r"""Kernels of inner products: linear, polynomial, exponential, arc-cosine."""
import math

from .._validation import is_int
from ..gram import FeatureKernelMatrix
from ._ops import dot, fsum, safe_sqrt
from .base import Kernel

__all__ = ["Linear", "Polynomial", "Exponential", "ArcCosine"]


class Linear(Kernel):
    r"""Linear kernel :math:`k(x, y) = \langle x, y\rangle`.

    Use ``c * Linear()`` for a learnable variance. Under ``backend="auto"`` its lazy Gram
    matrix is :math:`XY^\top` in factored form (:class:`~torchkern.gram.FeatureKernelMatrix`):
    a product costs O((n + m)·d) per column instead of O(n·m·d).
    """

    def _k(self, x, y):
        return dot(x, y)

    def _lazy_matrix(self, X, Y, f, backend):
        if backend == "auto":
            return FeatureKernelMatrix(f.xs[0], f.ys[0])
        return super()._lazy_matrix(X, Y, f, backend)


class Polynomial(Kernel):
    r"""Polynomial kernel :math:`k(x, y) = (\langle x, y\rangle + c)^p`.

    Parameters
    ----------
    degree : int
        p ≥ 1 (fixed).
    offset : float
        c ≥ 0, learnable when positive (c = 0 gives the homogeneous kernel, kept fixed).

    Notes
    -----
    scikit-learn's ``polynomial_kernel(degree=p, gamma=1, coef0=c)`` is the same kernel.
    """

    def __init__(self, degree: int = 2, offset=1.0):
        super().__init__()
        if not is_int(degree) or degree < 1:
            raise ValueError(f"degree must be a positive int, got {degree!r}")
        self.degree = degree
        self.register_hyperparameter("offset", offset, allow_zero=True, scalar=True)

    def extra_repr(self):
        return f"degree={self.degree}, " + super().extra_repr()

    def _params(self, like):
        return (self._param("offset", like),)

    def _k(self, x, y, offset):
        return (dot(x, y) + offset) ** self.degree


class Exponential(Kernel):
    r"""Exponential kernel :math:`k(x, y) = \exp(s\,\langle x, y\rangle)`, s > 0.

    p.d. as the limit of polynomials with positive coefficients (Shawe-Taylor and Cristianini
    2004, "Kernel Methods for Pattern Analysis", §3.4).
    """

    def __init__(self, scale=1.0):
        super().__init__()
        self.register_hyperparameter("scale", scale, scalar=True)

    def _params(self, like):
        return (self._param("scale", like),)

    def _k(self, x, y, scale):
        return (dot(x, y) * scale).exp()


class ArcCosine(Kernel):
    r"""Arc-cosine kernel of Cho & Saul (2009), the kernel of an infinitely wide layer of
    step (order 0), ReLU (order 1) or squared-ReLU (order 2) units.

    .. math::
        k_n(x, y) = \frac1\pi \lVert x\rVert^n \lVert y\rVert^n J_n(\theta),\qquad
        J_0 = \pi - \theta,\;
        J_1 = \sin\theta + (\pi - \theta)\cos\theta,\;
        J_2 = 3\sin\theta\cos\theta + (\pi - \theta)(1 + 2\cos^2\theta)

    with θ the angle between x and y (Cho and Saul 2009, "Kernel methods for deep learning",
    NIPS).

    Computed on the unit vectors x̂, ŷ (the kernel is homogeneous of degree 2n), so data
    of any scale keeps its digits. For orders 1 and 2, θ = atan2(√(1 − ⟨x̂,ŷ⟩²), ⟨x̂,ŷ⟩)
    from one matrix product (J₁ and J₂ are flat at θ = 0, so the cancellation under the
    root costs them nothing), with finite gradients at θ = 0. Order 0 is linear in θ, and
    that form lost half the digits of nearly parallel pairs — its own diagonal read
    1 − 2e-4 in float32, 1 − 9e-9 in float64 —, so it takes θ = 2 atan2(‖x̂ − ŷ‖,
    ‖x̂ + ŷ‖) (Kahan 2006, "How futile are mindless assessments of roundoff in
    floating-point computation?", §12), accurate to rounding at every angle, at the cost
    of the (n, m, d) differences.
    """

    def __init__(self, order: int = 1):
        super().__init__()
        if not is_int(order) or order not in (0, 1, 2):
            raise ValueError(f"order must be 0, 1 or 2, got {order!r}")
        self.order = order

    def extra_repr(self):
        return f"order={self.order}"

    def _k(self, x, y):
        # on the unit vectors u, v (the kernel is homogeneous of degree 2n): sin θ under the
        # root's 1e-30 floor was ‖x‖‖y‖ sin θ, and ‖x‖²‖y‖² overflowed float32 at ‖x‖ ~ 1e10
        # (NaN Gram) and met the floor at ‖x‖ ~ 1e-8 (60 times too large)
        xx, yy = fsum(x * x), fsum(y * y)
        nx, ny = safe_sqrt(xx), safe_sqrt(yy)
        u, v = x / nx, y / ny
        if self.order == 0:
            theta = safe_sqrt(fsum((u - v) ** 2)).atan2(safe_sqrt(fsum((u + v) ** 2))) * 2.0
            return (theta * -1.0 + math.pi) * (1.0 / math.pi)
        c = dot(u, v)  # cos θ
        s = safe_sqrt(fsum(u * u) * fsum(v * v) - c * c)  # sin θ
        rest = s.atan2(c) * -1.0 + math.pi  # π − θ
        if self.order == 1:
            return nx * ny * (s + rest * c) * (1.0 / math.pi)
        return xx * yy * (s * c * 3.0 + rest * (c * c * 2.0 + 1.0)) * (1.0 / math.pi)
