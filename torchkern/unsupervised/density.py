"""Kernel density estimation and Nadaraya–Watson kernel regression."""
from __future__ import annotations

import math
import warnings

import torch
from sklearn.base import RegressorMixin

from .._estimator import Estimator, check_fitted, is_precomputed, kernel_matrix, resolve_kernel
from ..inputs import check_fitted_input, check_input, check_precomputed, n_features
from .._validation import as_tensor, as_vector, check_positive, check_sample_weight
from ..kernels import RBF, Laplacian
from ..kernels._ops import center, fast_form_dtype, sqdist, sqdist_exact
from ..supervised._common import r2_score
from ._common import check_int, generator, randn

__all__ = ["KernelDensity", "NadarayaWatson"]

_KINDS = {"gaussian": "gaussian", "laplacian": "laplacian", "exponential": "laplacian",
          "tophat": "tophat", "epanechnikov": "epanechnikov", "linear": "linear",
          "cosine": "cosine"}
_COMPACT = ("tophat", "epanechnikov", "linear", "cosine")
# Entries of one (query block × training block) tile of log-kernel values.
_TILE = 1 << 22


def _log_ball(d):
    """log of the volume of the unit ball of R^d, π^{d/2} / Γ(d/2 + 1)."""
    return 0.5 * d * math.log(math.pi) - math.lgamma(d / 2 + 1)


def _log_unit_mass(kind, d):
    r"""log ∫_{R^d} k(u) du for the unit-bandwidth profile k (V_d the unit ball's volume,
    |S^{d−1}| = d V_d the unit sphere's area; r = ‖u‖):

    gaussian exp(−r²/2): (2π)^{d/2}; laplacian exp(−r): |S^{d−1}| Γ(d);
    tophat 1[r<1]: V_d; epanechnikov (1 − r²)₊: V_d · 2/(d+2);
    linear (1 − r)₊: V_d / (d+1); cosine cos(πr/2)1[r<1]: |S^{d−1}| ∫₀¹ r^{d−1}cos(πr/2)dr
    (``_log_cosine_moment``).
    """
    if kind == "gaussian":
        return 0.5 * d * math.log(2 * math.pi)
    log_sphere = math.log(d) + _log_ball(d)
    if kind == "laplacian":
        return log_sphere + math.lgamma(d)
    if kind == "tophat":
        return _log_ball(d)
    if kind == "epanechnikov":
        return _log_ball(d) + math.log(2 / (d + 2))
    if kind == "linear":
        return _log_ball(d) - math.log(d + 1)
    return _log_cosine_moment(d) + log_sphere


def _log_cosine_moment(d):
    r"""log ∫₀¹ r^{d−1} cos(πr/2) dr. With s = 1 − r it is ∫₀¹ (1−s)^{d−1} sin(πs/2) ds;
    the sine's Taylor series and the Beta integrals ∫₀¹(1−s)^{d−1}s^m ds = m!(d−1)!/(m+d)!
    give Σ_{j≥0} (−1)^j (π/2)^{2j+1} (d−1)!/(d+2j+1)!, whose terms fall by the factor
    (π/2)²/((d+2j+2)(d+2j+3)) ≤ 0.21: no cancellation, full precision for every d.
    (scikit-learn's recurrence, by parts from r = 0, cancels for large odd d and for even
    d stops at 2/π where the last term is 2/π − 4/π²: its cosine density does not
    integrate to 1 for even d.)"""
    total, t, j = 1.0, 1.0, 0
    while t > 1e-17 * total:
        t *= (math.pi / 2) ** 2 / ((d + 2 * j + 2) * (d + 2 * j + 3))
        total += t if j % 2 else -t
        j += 1
    return math.log(math.pi / 2) - math.log(d) - math.log(d + 1) + math.log(total)


def _log_profile(kind, d2):
    """log k(u) from d2 = ‖u‖² (unit bandwidth) of the gaussian or laplacian kernel."""
    return -0.5 * d2 if kind == "gaussian" else -d2.sqrt()


def _log_compact(kind, dist, h):
    """log k(dist/h) of a compactly supported kernel from the distances themselves, as
    scikit-learn evaluates it: −inf unless dist < h (the support test decides between
    −inf and a finite value near the boundary, so it is made on the same numbers)."""
    inside = dist < h
    dist = torch.where(inside, dist, 0.0)  # no log of a negative number outside
    # the operations in scikit-learn's order: near the boundary 1 − r² cancels, and a
    # different rounding of r² moved log k by 0.06 there
    if kind == "tophat":
        g = torch.zeros_like(dist)
    elif kind == "epanechnikov":
        g = torch.log1p(-(dist * dist) / (h * h))
    elif kind == "linear":
        g = torch.log1p(-dist / h)
    else:  # cosine
        g = torch.cos(0.5 * math.pi * dist / h).log()
    return g.masked_fill_(~inside, -math.inf)


# The log density takes −‖x − x_i‖²/2 (or −‖x − x_i‖) itself, so the squared distances
# must be far more accurate than a Gram entry (``_ops.FAST_FORM_MAX_ROUNDOFF``): the fast
# form is used (in float64) while its round-off stays below 2^-40 (a log-density error of
# 5e-13, or 1e-6 for the square root at coincident points), i.e. for data within ~45
# bandwidths of their mean; farther spread data are compared by exact differences.
_MAX_ROUNDOFF = 2.0 ** -40
# The laplacian kernel, of ‖u‖ (not ‖u‖²), takes a square root, which turns that
# round-off δ into δ/(2r): pairs closer than sqrt(_NEAR) (in bandwidths) are recomputed
# by exact differences, keeping the error below 4e-12 (it was 1e-10 at r = 0.005). That
# radius is for δ = _MAX_ROUNDOFF; it shrinks with the data's own round-off ε·s
# (``_near``), so that a bandwidth wide against the spread does not make every pair near.
_NEAR = 2.0 ** -6


def _near(Q, T):
    """The squared radius (in bandwidths) within which the fast form's round-off
    ε·(max‖q‖² + max‖t‖²) moves √d2 by more than ``_NEAR`` allows at ``_MAX_ROUNDOFF``."""
    s = float((Q * Q).sum(1).max() + (T * T).sum(1).max())
    return _NEAR * min(1.0, torch.finfo(torch.float64).eps * s / _MAX_ROUNDOFF) ** 2


def _sqdist(A, B, exact):
    """‖a − b‖² of every pair of rows of A and B: the fast form (A and B centred), or the
    sum of squared differences."""
    if exact:
        return sqdist_exact(A[:, None, :], B[None, :, :])[..., 0]
    return sqdist(A[:, None, :], B[None, :, :], center=False)[..., 0]


def _refine_near(d2, q, t, radius2):
    """Overwrite the entries of d2 below ``radius2`` by exact sums of squared differences,
    at most ``_TILE`` / d pairs at a time: gathered where few, else the whole tile (a
    bandwidth wide against the data's spread makes nearly every pair near, and gathering
    them cost about 10 times the fast form)."""
    near = d2 < radius2
    count = int(near.sum())
    step = max(1, _TILE // q.shape[1])
    if count > d2.numel() // 8:
        rows = max(1, step // t.shape[0])
        for s in range(0, q.shape[0], rows):
            d2[s:s + rows] = _sqdist(q[s:s + rows], t, True)
        return d2
    if count:
        i, j = near.nonzero(as_tuple=True)
        for s in range(0, count, step):
            a, b = i[s:s + step], j[s:s + step]
            d2[a, b] = (q[a] - t[b]).square().sum(1)
    return d2


def _log_kernel_sum(Q, T, logw, kind, radius=None):
    r"""log Σ_i exp(log w_i + log k(q − t_i)) for every row q of Q, evaluated in tiles with
    a log-sum-exp per tile, so that far-away points neither underflow nor materialize an
    m × n matrix (k the unit profile of ``kind``, ``_log_profile``). Q and T are centred (and
    scaled); distances as exact as scikit-learn's: the fast form in float64 where its
    round-off is below ``_MAX_ROUNDOFF``, exact differences otherwise (in tiles of
    ``_TILE`` / d pairs). With ``radius`` h (the compactly supported kernels, whose
    support test a rounding moves: −inf or a finite value), Q and T are the data
    themselves, the distances exact differences and the kernel ``_log_compact`` of them,
    as scikit-learn computes it. O(m n d) time, O(tile) memory."""
    m, n = Q.shape[0], T.shape[0]
    exact = radius is not None or fast_form_dtype(Q, T, _MAX_ROUNDOFF) is None
    tile = max(1, _TILE // Q.shape[1]) if exact else _TILE
    tb = max(1, min(n, tile // max(1, min(m, 1024))))
    qb = max(1, min(m, tile // tb))
    refine = not exact and kind == "laplacian"
    radius2 = _near(Q, T) if refine else None
    out = torch.empty(m, dtype=Q.dtype, device=Q.device)
    for s in range(0, m, qb):
        q = Q[s:s + qb]
        parts = []
        for t in range(0, n, tb):
            d2 = _sqdist(q, T[t:t + tb], exact)
            if radius is not None:
                g = _log_compact(kind, d2.sqrt(), radius)
            else:
                if refine:
                    d2 = _refine_near(d2, q, T[t:t + tb], radius2)
                g = _log_profile(kind, d2)
            parts.append(torch.logsumexp(logw[None, t:t + tb] + g, dim=1))
        out[s:s + qb] = torch.logsumexp(torch.stack(parts, 1), dim=1)
    return out


class KernelDensity(Estimator):
    r"""Kernel density estimate with scikit-learn's kernels.

    .. math:: \hat p(x) = \frac{1}{\sum_i w_i}\sum_{i=1}^n w_i\,
              \frac{1}{Z_d\,\prod_k h_k}\,k\big(\lVert (x - x_i)/h\rVert\big)

    with the unit profiles k(r) and their masses :math:`Z_d = \int_{\mathbb R^d} k(\lVert
    u\rVert)\,du` (:math:`V_d = \pi^{d/2}/\Gamma(d/2+1)` the volume of the unit ball,
    :math:`|S^{d-1}| = d\,V_d`):

    - gaussian :math:`e^{-r^2/2}`, :math:`Z_d = (2\pi)^{d/2}`;
    - laplacian (scikit-learn's "exponential") :math:`e^{-r}`,
      :math:`Z_d = |S^{d-1}|\,\Gamma(d)`;
    - tophat :math:`1[r<1]`, :math:`Z_d = V_d`;
    - epanechnikov :math:`(1-r^2)_+`, :math:`Z_d = 2V_d/(d+2)`;
    - linear :math:`(1-r)_+`, :math:`Z_d = V_d/(d+1)`;
    - cosine :math:`\cos(\pi r/2)\,1[r<1]`,
      :math:`Z_d = |S^{d-1}|\int_0^1 r^{d-1}\cos(\pi r/2)\,dr` (exact for every d;
      scikit-learn's equals it for odd d ≲ 11 and is wrong for even d, where its
      density does not integrate to 1)

    (Silverman 1986, "Density Estimation for Statistics and Data Analysis", ch. 4; the
    conventions — h the radius of the support — are scikit-learn's ``KernelDensity``).

    ``score_samples`` is evaluated in the log domain: log-kernel values in tiles of at
    most 4M entries, combined by log-sum-exp, so points far from every training point get
    their (very negative) log density instead of log 0. (The lazy Gram matrix computes
    k, not log k, so this estimator works on the data directly; KeOps' ``logsumexp``
    reduction would be the GPU-scale analogue.)

    Parameters
    ----------
    kernel : str, RBF or Laplacian
        "gaussian", "laplacian", "exponential", "tophat", "epanechnikov", "linear" or
        "cosine". A torchkern ``RBF``/``Laplacian`` instance gives the bandwidth(s) by its
        lengthscale (ARD allowed: h_k per dimension) and ``bandwidth`` is ignored.
        "exponential" is a synonym of "laplacian" (scikit-learn's name). The compactly
        supported kernels (tophat, epanechnikov, linear, cosine) are names only: no
        torchkern kernel object exists for them. Where every training point of positive
        weight is h or farther, their density is 0 and ``score_samples`` gives −inf (as
        scikit-learn's).
    bandwidth : float, "scott" or "silverman"
        h (string kernels), or scikit-learn's rule of thumb from n and d: "scott"
        n^(−1/(d+4)), "silverman" (n(d+2)/4)^(−1/(d+4)) (they assume data of unit scale).

    Attributes
    ----------
    bandwidth_ : float or Tensor (d,)
        The h used (per feature for an ARD kernel).
    X_fit_ : Tensor (n, d)
    sample_weight_ : Tensor (n,)
        The weights, normalized to sum to one.

    Notes
    -----
    Cost: O(m n d) for m query points, O(n) memory beyond the tiles.

    Examples
    --------
    >>> import torch, torchkern
    >>> kde = torchkern.KernelDensity(bandwidth=0.5).fit(torch.randn(100, 2, dtype=torch.float64))
    >>> kde.score_samples(torch.zeros(1, 2, dtype=torch.float64)).shape
    torch.Size([1])
    """

    def __init__(self, kernel="gaussian", bandwidth=1.0):
        self.kernel = kernel
        self.bandwidth = bandwidth

    def _bandwidth(self, n, d):
        """h from ``bandwidth``: a positive number, or scikit-learn's rules of thumb
        (Scott 1992: n^(−1/(d+4)); Silverman 1986: (n(d+2)/4)^(−1/(d+4)), for data of
        unit scale, as scikit-learn computes them)."""
        bw = self.bandwidth
        if isinstance(bw, str):
            if bw == "scott":
                return n ** (-1 / (d + 4))
            if bw == "silverman":
                return (n * (d + 2) / 4) ** (-1 / (d + 4))
            raise ValueError(f"bandwidth must be a positive float, 'scott' or 'silverman', "
                             f"got {bw!r}")
        check_positive(bw, "bandwidth")
        return float(bw)

    def _resolve(self, X):
        n, d = X.shape
        k = self.kernel
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"kernel must be one of {sorted(_KINDS)} or an RBF/Laplacian "
                                 f"kernel, got {k!r}")
            h = torch.as_tensor(self._bandwidth(n, d), dtype=X.dtype, device=X.device)
            return _KINDS[k], h.expand(d)
        if type(k) is RBF or type(k) is Laplacian:
            h = k.lengthscale.detach().to(dtype=X.dtype, device=X.device).reshape(-1)
            if h.numel() not in (1, d):
                raise ValueError(f"the kernel has {h.numel()} lengthscales but X has {d} features")
            return ("gaussian" if type(k) is RBF else "laplacian"), h.expand(d)
        raise TypeError(f"kernel must be one of {sorted(_KINDS)}, or a torchkern "
                        f"RBF/Laplacian kernel, got {type(k).__name__}")

    def fit(self, X, y=None, sample_weight=None):
        """Store the training points and their (normalized) weights."""
        X = as_tensor(X, "X", allow_1d=False)
        kind, h = self._resolve(X)
        if sample_weight is None:
            w = torch.full((X.shape[0],), 1.0 / X.shape[0], dtype=X.dtype, device=X.device)
        else:
            w = check_sample_weight(sample_weight, X.shape[0], dtype=X.dtype, device=X.device)
            w = w / w.sum()
        self.X_fit_ = X
        self.sample_weight_ = w
        self._kind, self._h = kind, h
        if isinstance(self.kernel, str):
            self.bandwidth_ = self._bandwidth(*X.shape)
        else:  # a kernel's lengthscale(s)
            self.bandwidth_ = float(h[0]) if bool((h == h[0]).all()) else h.clone()
        self._log_norm = -float(h.log().sum()) - _log_unit_mass(kind, X.shape[1])
        self.n_features_in_ = X.shape[1]
        return self

    def score_samples(self, X):
        """Log density log p̂(x) of each row of X, shape (m,)."""
        check_fitted(self, "X_fit_")
        X = check_fitted_input(None, X, self.X_fit_, estimator=self)
        with torch.no_grad():
            # In float64, centred (exact for offset data) before the bandwidth division:
            # an offset of 1e4 in float32 cost 5.3 in log density, 1e8 in float64 3.7.
            f64 = torch.float64
            logw = self.sample_weight_.to(f64).log()
            if self._kind in _COMPACT:
                # the support test ‖x − x_i‖ < h on the data themselves, as scikit-learn
                # (centred and scaled, points at exactly h fell inside by a rounding)
                s = _log_kernel_sum(X.to(f64), self.X_fit_.to(f64), logw, self._kind,
                                    radius=self.bandwidth_)
            else:
                Q, T = center(X.to(f64), self.X_fit_.to(f64))
                h = self._h.to(f64)
                s = _log_kernel_sum(Q / h, T / h, logw, self._kind)
        return (s + self._log_norm).to(X.dtype)

    def score(self, X, y=None):
        """Total log-likelihood Σ log p̂(x) of the rows of X."""
        return float(self.score_samples(X).sum())

    def sample(self, n_samples=1, random_state=None):
        """Draw from the estimate: a training point (by weight) plus kernel noise —
        h ⊙ N(0, I) (gaussian), or h ⊙ r·u with u uniform on the sphere and
        r ~ Gamma(d, 1) (laplacian: the radial density ∝ r^{d−1}e^{−r}) or r = U^{1/d},
        U ~ Uniform(0, 1) (tophat: uniform in the ball of radius h). The epanechnikov,
        linear and cosine kernels (which scikit-learn cannot sample) draw r with density
        ∝ r^{d−1}k(r) on [0, 1) by rejection from the tophat's: r = U^{1/d} is kept with
        probability k(r) ≤ 1, so a draw costs Z_tophat / Z_k proposals on average
        ((d + 2)/2 for epanechnikov, d + 1 for linear)."""
        check_fitted(self, "X_fit_")
        check_int(n_samples, "n_samples", 0)
        if n_samples == 0:  # an empty (0, d) draw, as scikit-learn's
            return self.X_fit_[:0].clone()
        gen = generator(random_state)
        X, d = self.X_fit_, self.X_fit_.shape[1]
        idx = torch.multinomial(self.sample_weight_.cpu().to(torch.float64), n_samples,
                                replacement=True, generator=gen).to(X.device)
        noise = randn((n_samples, d), X.dtype, X.device, gen)
        if self._kind != "gaussian":
            u = noise / noise.norm(dim=1, keepdim=True)
            if self._kind == "laplacian":
                e = torch.rand((n_samples, d), generator=gen, dtype=torch.float64)
                r = (-torch.log1p(-e)).sum(1, keepdim=True)
            else:
                r = self._compact_radii(n_samples, d, gen)
            noise = r.to(X.dtype).to(X.device) * u
        return X[idx] + self._h * noise


    def _compact_radii(self, n, d, gen):
        """n radii with density ∝ r^{d−1}k(r) on [0, 1): r = U^{1/d} (the tophat's), kept
        with probability k(r) for the other compact kernels (rejection sampling; the
        acceptance rate is the ratio of the kernels' masses)."""
        def proposals(m):
            return torch.rand((m, 1), generator=gen, dtype=torch.float64) ** (1 / d)
        if self._kind == "tophat":
            return proposals(n)
        rate = math.exp(_log_unit_mass(self._kind, d) - _log_unit_mass("tophat", d))
        kept, count = [], 0
        while count < n:
            r = proposals(math.ceil(1.1 * (n - count) / rate) + 16)
            keep = torch.rand(r.shape, generator=gen, dtype=torch.float64).log() \
                < _log_compact(self._kind, r, 1.0)
            kept.append(r[keep].reshape(-1, 1))
            count += kept[-1].shape[0]
        return torch.cat(kept)[:n]

class NadarayaWatson(RegressorMixin, Estimator):
    r"""Nadaraya–Watson kernel regression (local constant smoother).

    .. math:: \hat y(x) = \frac{\sum_i k(x, x_i)\,y_i}{\sum_i k(x, x_i)}

    Both sums are *one* lazy product :math:`k(X_{new}, X)\,[\,y,\ \mathbf 1\,]` — a
    ratio of two kernel density estimates. A point whose weights all vanish (far from
    every training point) gets the training mean, with a warning.

    Parameters
    ----------
    kernel : Kernel, "precomputed" or None
        Nonnegative kernel; default ``RBF()``. With ``"precomputed"``, ``predict`` takes
        the (m, n) Gram matrix against the training points.
    backend : str or None
        Gram-matrix backend (``None`` = ``torchkern.config``).

    Notes
    -----
    Cost: one (m × n) by (n × (r + 1)) product, O(m n d) kernel evaluations, O(m + n)
    memory on the lazy backends.

    Examples
    --------
    >>> import torch, torchkern
    >>> X = torch.rand(100, 1, dtype=torch.float64)
    >>> nw = torchkern.NadarayaWatson(torchkern.RBF(0.1)).fit(X, X[:, 0] ** 2)
    >>> nw.predict(X[:3]).shape
    torch.Size([3])
    """

    def __init__(self, kernel=None, *, backend=None):
        self.kernel = kernel
        self.backend = backend

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X, y):
        """Store the training pairs (X (n, d), y (n,) or (n, r))."""
        kernel = resolve_kernel(self.kernel)
        X = check_input(kernel, X)
        n = X.shape[0]
        y = as_vector(y, "y", n=n, device=X.device)
        y = y.to(X.dtype if X.dtype.is_floating_point else torch.get_default_dtype())
        self.kernel_ = kernel
        self.X_fit_ = X
        self.y_fit_ = y
        if not is_precomputed(kernel) and n_features(X) is not None:
            self.n_features_in_ = n_features(X)
        return self

    @torch.no_grad()
    def predict(self, X):
        """ŷ(x) for each row of X, shape (m,) or (m, r) like y."""
        check_fitted(self, "X_fit_")
        if is_precomputed(self.kernel_):
            K = kernel_matrix(self.kernel_, check_precomputed(X, self.y_fit_.shape[0]))
        else:
            X = check_fitted_input(self.kernel_, X, self.X_fit_, estimator=self)
            K = kernel_matrix(self.kernel_, X, self.X_fit_, backend=self.backend)
        Y = self.y_fit_.reshape(self.y_fit_.shape[0], -1).to(K.dtype)
        with torch.no_grad():
            S = K @ torch.cat([Y, torch.ones_like(Y[:, :1])], 1)
        num, den = S[:, :-1], S[:, -1:]
        bad = ~(den > 0)
        if bool(bad.any()):
            warnings.warn(f"NadarayaWatson: {int(bad.sum())} point(s) have zero total kernel "
                          f"weight; they get the training mean", RuntimeWarning, stacklevel=2)
        # a total weight below tiny/eps: the weights that count (≥ eps · total) may be
        # subnormal, holding fewer digits than the dtype's
        info = torch.finfo(K.dtype)
        weak = (den > 0) & (den < info.tiny / info.eps)
        if bool(weak.any()):
            warnings.warn(f"NadarayaWatson: {int(weak.sum())} point(s) have a total kernel "
                          f"weight below {info.tiny / info.eps:.1e}, where the weights are "
                          f"subnormal numbers of fewer digits: their predictions lose "
                          f"precision (a wider kernel, or float64 data)", RuntimeWarning,
                          stacklevel=2)
        out = torch.where(bad, Y.mean(0, keepdim=True), num / torch.where(bad, 1.0, den))
        return out[:, 0] if self.y_fit_.dim() == 1 else out

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R² of the predictions, weighted by
        ``sample_weight`` and averaged over outputs (scikit-learn's ``r2_score``; a
        constant y gives 1 if predicted exactly, else 0)."""
        return r2_score(y, self.predict(X), sample_weight)
