r"""Infinite-width kernels of fully connected networks: the NNGP and the NTK.

A network of ``depth`` hidden layers, each a Dense layer followed by the activation φ, and a
Dense readout, has at infinite width Gaussian outputs with covariance K (the NNGP kernel;
Neal 1996, Lee et al. 2018) and trains under gradient flow as kernel regression with the
neural tangent kernel Θ (Jacot, Gabriel and Hongler 2018). Both follow from one recursion
over the layers on the triple (K(x, x), K(y, y), K(x, y)).
"""
from __future__ import annotations

import math

from .._validation import check_positive, is_int
from ..kernels._ops import SQRT_EPS, dot, fdim, fsum, is_torch, sqdist, sqdist_exact
from ..kernels.base import Kernel

__all__ = ["NTK", "NNGP"]

_ACTIVATIONS = ("relu", "erf")
# Up to this input dimension ReLU kernels take ‖x − y‖² from exact differences (a repeated
# input gets θ = 0 exactly); above it from the matrix-product form, which costs no
# (block, m, d) temporaries but leaves the angle of near-identical inputs at ~1e-8.
_EXACT_DIFF_MAX_DIM = 32
_PARAMETERIZATIONS = ("ntk", "standard")
# Added to the variance scale qx + qy before dividing by it (0 for a zero input without
# bias); representable in float32.
_TINY = 1e-30


def _arccos(qx, qy, c, t, S):
    r"""The arc-cosine kernels of orders 1 and 0 (Cho and Saul 2009, "Kernel methods for
    deep learning", NIPS) of a centred Gaussian pair (u, v) with variances qx, qy and
    covariance c: J₁ = E relu(u)relu(v) = (s + (π − θ)c)/(2π) and
    J₀ = E 1[u > 0]1[v > 0] = (π − θ)/(2π), with θ = atan2(s, c) and
    s = √(qx·qy − c²) = √(qx·qy) sin θ. Returns (J₁, J₀, θ, s).

    The caller gives t = s²/S², in whatever form cancels least for its inputs, and the
    scale S > 0 (about qx + qy; its value where qx = qy = 0 does not matter). Torch
    tensors and the Triton tracer take the same arithmetic (relu, sqrt, atan2, sin).

    √t has a floor (1e-15, as safe_sqrt) relative to S: on the diagonal of k(X) s ≡ 0,
    and √'s infinite slope there made every gradient NaN; on s itself the floor set
    θ ≥ atan2(1e-15, c), 2e-4 off in the NTK for inputs of norm 1e-6 (and t ~ q²
    underflows in float32 for q < 1e-19). The floor gives θ = π/2 where s = c = 0, a unit
    of variance 0 (a zero input without bias), as neural-tangents'
    ``_arctan2(0, 0, fill_zero=π/2)``: J₀ = 1/4, J₁ = 0 there. s is √(qx·qy) sin θ with
    √(qx·qy) taken as r/√(r + ε) (r = qx·qy − ε): 0 at a zero variance (the floored s
    gave J₁ = 1.6e-16·S there, so c ≠ 0 = qx in the next layer and θ = 1.31 there), and
    consistent with θ where the floor sets it (an exact s bent the next layer's angle by
    1e-3).

    At a zero variance θ = π/2 is a convention (the kernel is not continuous there: the
    angle of x → 0 depends on its direction), and so is its gradient: 0, as torch's for
    sign(0). c enters atan2 times min(1, r/ε), which is 0 there and 1 wherever
    qx·qy ≥ 2ε·S² (norm ratios above 1.4e-15, where the angle's resolution is √ε
    anyway); through atan2(√ε·S, c) at c = 0 the angle's slope was −1/(√ε·S): gradients
    of 1e14 at x = 0 where Θ⁰ ≠ 0 (the standard parameterization with ``bias_std=0``)."""
    r, gate = _product_floor(qx, qy, S)
    theta = (((t - SQRT_EPS).relu() + SQRT_EPS).sqrt() * S).atan2(c * gate)
    s = theta.sin() * (r / (r + SQRT_EPS).sqrt() * S)
    rest = theta * -1.0 + math.pi  # π − θ
    return (s + rest * c) * (0.5 / math.pi), rest * (0.5 / math.pi), theta, s


def _product_floor(qx, qy, S):
    """(r, min(1, r/ε)) with r = relu(qx·qy/S² − ε): see :func:`_arccos`."""
    r = (qx / S * (qy / S) - SQRT_EPS).relu()
    return r, (r * (-1.0 / SQRT_EPS) + 1.0).relu() * -1.0 + 1.0


def _relu(qx, qy, c, e):
    r"""(E φ(u)², E φ(v)², E φ(u)φ(v), E (φ(u) − φ(v))², E φ'(u)φ'(v)) for φ = ReLU and
    (u, v) centred Gaussian with variances qx, qy, covariance c and e = E (u − v)²: the
    arc-cosine kernels of :func:`_arccos`.

    s² = qx·qy − c² is written through e,
    s² = (qy(qx·e − (qx − c)²) + qx(qy·e − (qy − c)²))/(qx + qy), and e carried through
    the layers as e' = e/2 + (θc − s)/π: near the diagonal this keeps the relative
    accuracy that qx·qy − c² (or arccos of a rounded cosine) loses to cancellation, a
    repeated input has θ = 0 exactly, and gradients stay finite there."""
    # In units of S = qx + qy, so that :func:`_arccos`'s √ floor is relative to the
    # inputs' scale.
    S = qx + qy + _TINY
    if not is_torch(qx) and type(qx).__module__.startswith("pykeops"):
        return _relu_keops(qx, qy, c, e, S)
    a, b, e_s = qx / S, qy / S, e / S
    u, v = (qx - c) / S, (qy - c) / S
    # qx·qy − c² = qx·e − (qx − c)² = qy·e − (qy − c)², averaged with weights qy and qx:
    # the form with the smaller variance cancels to ε·qx·qy, the other (ε·qy²) enters
    # weighted by qx/qy. Near the diagonal all terms are O(e·q). The symmetric form
    # e(2(qx + qy) − e) − (qx − qy)² cancelled to ε·qy² for qx ≪ qy: the angle of x = a·y
    # was off by ~1e-8/a (NTK(1e-6·y, y) 3e-3 from 1e-6·NTK(y, y) without bias).
    t = (b * (a * e_s - u * u) + a * (b * e_s - v * v)) / (a + b + _TINY)
    j1, j0, theta, s = _arccos(qx, qy, c, t, S)
    e_out = e * 0.5 + (theta * c - s) * (1.0 / math.pi)
    return qx * 0.5, qy * 0.5, j1, e_out, j0


def _relu_keops(qx, qy, c, e, S):
    """:func:`_relu` for KeOps, whose formulas are trees without shared subexpressions:
    every use of a layer's c and e repeats the previous layer's whole formula. The
    weighted s² above uses them about 3 times as often per layer, which made the depth-3
    NTK's formula 8.8 million characters (1.7 million here, 1.9 with the zero-variance
    gate of :func:`_arccos`; depth 2: 0.57 against 0.19 million, 69 s to compile on the
    CPU against 16 s). Here 4s² = e(2(qx + qy) − e) −
    (qx − qy)², which cancels to ε·qy² where qx ≪ qy: the angle of parallel inputs of
    norm ratio a is off by about 1e-8/a (NTK(1e-6·y, y) 3e-3 from 1e-6·NTK(y, y) without
    bias, 4e-6 at a = 1e-3); equal to the form above to rounding elsewhere. E φφ takes s
    without the √ floor (r/√(r + ε)): 0 at a zero variance, as above."""
    e_s, d_s = e / S, (qx - qy) / S
    r = ((e_s * ((qx + qy) / S * 2.0 - e_s) - d_s * d_s) * 0.25 - SQRT_EPS).relu()
    root = (r + SQRT_EPS).sqrt()
    theta = (root * S).atan2(c * _product_floor(qx, qy, S)[1])  # θ' = 0 at a zero variance
    rest = theta * -1.0 + math.pi  # π − θ
    s = r / root * S
    e_out = e * 0.5 + (theta * c - s) * (1.0 / math.pi)
    return qx * 0.5, qy * 0.5, (s + rest * c) * (0.5 / math.pi), e_out, rest * (0.5 / math.pi)


def _erf(qx, qy, c, e=None):
    r"""The same for φ = erf (Williams 1997): E φ(u)φ(v) = (2/π) arcsin(2c/√((1+2qx)(1+2qy)))
    and E φ'(u)φ'(v) = (4/π)/√((1+2qx)(1+2qy) − 4c²), arcsin written as atan2 (the
    argument under the root is at least 1 + 2qx + 2qy)."""
    if e is None:
        root = ((qx * 2.0 + 1.0) * (qy * 2.0 + 1.0) - c * c * 4.0).sqrt()
    else:
        # (1 + 2qx)(1 + 2qy) − 4c² = 1 + 2(qx + qy) + 4(qx qy − c²), the last term through
        # e = E (u − v)² as for ReLU: the product form cancels to ε·q² near the diagonal
        # (0.4% off in float32 for inputs of pixel scale, q ~ 1e4)
        four_s2 = (e * ((qx + qy) * 2.0 - e) - (qx - qy) ** 2).relu()
        root = ((qx + qy) * 2.0 + 1.0 + four_s2).sqrt()
    ax = qx.atan2((qx + 0.25).sqrt()) * (2.0 / math.pi)
    ay = qy.atan2((qy + 0.25).sqrt()) * (2.0 / math.pi)
    return (ax, ay, (c * 2.0).atan2(root) * (2.0 / math.pi), None,
            (4.0 / math.pi) / root)


def _check_stds(weight_std, bias_std):
    """One σ_w > 0 and one σ_b >= 0 (or None) for every layer: a vector was stored as an
    ARD hyperparameter and failed deep in the recursion."""
    check_positive(weight_std, "weight_std")
    if bias_std is not None:
        check_positive(bias_std, "bias_std", allow_zero=True)


def _check_structure(depth, activation, parameterization, width, ntk):
    """The constructor's structural arguments, checked again at every evaluation: set as
    attributes after construction (``k.activation = "ReLU"``), a misspelled activation
    silently gave the erf kernel and ``depth=-1`` crashed in the recursion."""
    if not is_int(depth) or depth < 0:
        raise ValueError(f"depth must be an int >= 0 (hidden layers), got {depth!r}")
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {_ACTIVATIONS}, got {activation!r}")
    if parameterization not in _PARAMETERIZATIONS:
        raise ValueError(f"parameterization must be one of {_PARAMETERIZATIONS}, "
                         f"got {parameterization!r}")
    if width is not None and (not is_int(width) or width < 1):
        raise ValueError(f"width must be None or a positive int, got {width!r}")
    if parameterization == "standard" and ntk and depth > 0:
        if width is None:
            raise ValueError(f"the standard-parameterization NTK grows with the hidden "
                             f"width: pass width= (a positive int), got {width!r}")


class _InfiniteMLP(Kernel):
    """Shared arguments and recursion of :class:`NTK` and :class:`NNGP`."""

    _ntk = True

    def __init__(self, depth: int = 1, activation: str = "relu", weight_std=1.0,
                 bias_std=0.0, parameterization: str = "ntk", width: int | None = None):
        super().__init__()
        _check_structure(depth, activation, parameterization, width, self._ntk)
        _check_stds(weight_std, bias_std)
        self.depth, self.activation = depth, activation
        self.parameterization, self.width = parameterization, width
        self.has_bias = bias_std is not None
        self.register_hyperparameter("weight_std", weight_std)
        self.register_hyperparameter("bias_std", 0.0 if bias_std is None else bias_std,
                                     allow_zero=True, learnable=self.has_bias)

    def extra_repr(self):
        text = f"depth={self.depth}, activation={self.activation!r}, "
        if self.parameterization != "ntk":
            text += f"parameterization={self.parameterization!r}, "
        if self.width is not None:
            text += f"width={self.width}, "
        return text + super().extra_repr()

    def _rebuild(self, name, value):
        # the rebuild passes the hyperparameters' values, bias_std = 0.0 for a kernel built
        # with bias_std=None: set_params(depth=2) then added the standard NTK's bias term
        # (1.75 off at depth 2, width 16)
        has_bias = self.has_bias
        super()._rebuild(name, value)
        self.has_bias = has_bias

    def _params(self, like):
        _check_structure(self.depth, self.activation, self.parameterization, self.width,
                         self._ntk)
        return self._param("weight_std", like), self._param("bias_std", like)

    def _k(self, x, y, w_std, b_std):
        w2, b2 = w_std * w_std, b_std * b_std
        standard = self.parameterization == "standard"
        plus = 1.0 if self.has_bias else 0.0  # gradient of f w.r.t. a standard bias
        act = _relu if self.activation == "relu" else _erf
        inv_d = 1.0 / fdim(x)
        # The input "layer": covariances x·y/d, an empty NTK, and width d, and e = E (u − v)²
        # (from exact differences: 0 for a repeated input), which ReLU carries through
        # the layers and erf's first layer uses.
        ax, ay, ac = fsum(x * x) * inv_d, fsum(y * y) * inv_d, dot(x, y) * inv_d
        ae = None
        if self.depth:
            diff = sqdist_exact if fdim(x) <= _EXACT_DIFF_MAX_DIM else sqdist
            ae = diff(x, y) * inv_d
        theta, width = None, fdim(x)
        for layer in range(self.depth + 1):
            if layer:
                ax, ay, ac, ae, dot_c = act(qx, qy, c, e)
                if self._ntk:
                    theta = theta * dot_c
            # Dense(W_std, b_std) (Lee et al. 2019, Appendix; Sohl-Dickstein et al. 2020).
            qx, qy, c = ax * w2 + b2, ay * w2 + b2, ac * w2 + b2
            e = None if ae is None else ae * w2
            if self._ntk:
                if standard:
                    grad = ac * float(width) + plus
                else:
                    grad = c
                theta = grad if theta is None else grad + theta * w2
            width = self.width
        return theta if self._ntk else c


_DOC_ARGS = r"""
    Parameters
    ----------
    depth : int
        Number of hidden layers L (Dense + activation); the readout Dense layer comes on
        top, so ``depth=0`` is a linear model.
    activation : {"relu", "erf"}
    weight_std : float
        σ_w > 0, learnable.
    bias_std : float or None
        σ_b ≥ 0, learnable when positive. ``None`` means layers without bias (as
        neural-tangents' ``b_std=None``); it differs from 0 only for the standard
        parameterization's NTK, where a bias initialized at zero still trains.
    parameterization : {"ntk", "standard"}
        Layer z = (σ_w/√N) W x + σ_b b with W, b ~ N(0, 1) ("ntk", Jacot et al. 2018) or
        z = W x + b with W ~ N(0, σ_w²/N), b ~ N(0, σ_b²) ("standard", Sohl-Dickstein
        et al. 2020), N the layer's input width. The NNGP is the same for both.
    width : int, optional
        Hidden width N; needed only by the standard-parameterization NTK, which grows
        linearly with it.
"""


def _with_parameters(cls):
    """Put the Parameters section both kernels share where ``{args}`` stands."""
    cls.__doc__ = cls.__doc__.replace("{args}", _DOC_ARGS)
    return cls


@_with_parameters
class NNGP(_InfiniteMLP):
    r"""NNGP kernel: the covariance of an infinitely wide fully connected network at
    initialization (Neal 1996; Lee et al. 2018, "Deep neural networks as Gaussian
    processes", ICLR; Matthews et al. 2018).

    With neural-tangents' ``stax.Dense(W_std, b_std)`` convention the recursion is

    .. math::
        K^0(x, y) = \sigma_w^2\,\frac{\langle x, y\rangle}{d} + \sigma_b^2, \qquad
        K^{l}(x, y) = \sigma_w^2\,\mathbb E\,[\varphi(u)\varphi(v)] + \sigma_b^2,

    (u, v) ~ N(0, [[K^{l−1}(x,x), K^{l−1}(x,y)], [·, K^{l−1}(y,y)]]), for l = 1..L; the
    kernel is K^L, that of one output unit (readout included). For ReLU the expectation is
    the arc-cosine kernel (Cho and Saul 2009)
    :math:`\frac{\sqrt{q_x q_y}}{2\pi}(\sin\theta + (\pi - \theta)\cos\theta)`, the angle
    taken as atan2(√(q_x q_y − c²), c); for erf it is
    :math:`\frac2\pi \arcsin\frac{2c}{\sqrt{(1 + 2q_x)(1 + 2q_y)}}` (Williams 1997,
    "Computing with infinite networks", NIPS).
{args}
    Notes
    -----
    The recursion is written once with operations torch and KeOps share, so the dense,
    blocked (O(n + m) memory) and KeOps backends all evaluate it; cost O(n·m·(d + L)).
    Checked against neural-tangents 0.6.5 ``stax.serial(Dense, act, ..., Dense)`` kernels.
    """

    _ntk = False


@_with_parameters
class NTK(_InfiniteMLP):
    r"""Neural tangent kernel of an infinitely wide fully connected network (Jacot,
    Gabriel and Hongler 2018, "Neural tangent kernel: convergence and generalization in
    neural networks", NeurIPS; Arora et al. 2019, "On exact computation with an infinitely
    wide neural net", NeurIPS).

    Along the NNGP recursion K^l of :class:`NNGP` (same arguments), in the NTK
    parameterization

    .. math::
        \Theta^0 = K^0, \qquad
        \Theta^{l} = K^{l} + \sigma_w^2\,\dot K^{l}\,\Theta^{l-1},\qquad
        \dot K^{l}(x, y) = \mathbb E\,[\varphi'(u)\varphi'(v)],

    with :math:`\dot K = (\pi - \theta)/(2\pi)` for ReLU and
    :math:`\frac4\pi\big((1 + 2q_x)(1 + 2q_y) - 4c^2\big)^{-1/2}` for erf; the kernel is
    Θ^L, that of one output unit. In the standard parameterization (Sohl-Dickstein et al.
    2020, "On the infinite width limit of neural networks with a standard
    parameterization") the weight gradients are not rescaled:
    :math:`\Theta^{l} = N_l\,\mathbb E[\varphi\varphi] + 1 + \sigma_w^2 \dot K^l\Theta^{l-1}`
    with N_l the layer's input width (d for the first layer, ``width`` after), the 1 from
    the bias (absent with ``bias_std=None``). These are neural-tangents'
    ``stax.Dense``/``Relu``/``Erf`` kernel rules.
{args}
    Notes
    -----
    One formula for the dense, blocked and KeOps backends (see :class:`NNGP`); cost
    O(n·m·(d + L)), O(n + m) memory when lazy. Gradients reach ``weight_std``,
    ``bias_std`` and the inputs.

    Examples
    --------
    >>> import torch, torchkern
    >>> from torchkern.ntk import NTK
    >>> X = torch.randn(100, 5, dtype=torch.float64)
    >>> K = NTK(depth=2)(X)          # lazy 100 × 100 Gram matrix
    >>> model = torchkern.KernelRidge(NTK(depth=2), alpha=1e-6).fit(X, X[:, 0])
    """
