"""Regularized kernel canonical correlation analysis."""
from __future__ import annotations

import math
import warnings

import torch
from sklearn.base import TransformerMixin

from .._estimator import Estimator, check_fitted, is_precomputed, kernel_matrix, resolve_kernel
from ..inputs import check_fitted_input, check_input, check_precomputed, n_features
from .._progress import progress_bar
from .._validation import check_positive
from ._common import cheap_trace, check_int, generator, warn_if_centering_cancels

__all__ = ["KernelCCA"]

_F64 = torch.float64

# Eigenvalues of a centered Gram (or of W) below this many units of n·ε·max K_ii are
# rounding of its entries (ε of the Gram's dtype), dropped from the features
_ROUNDING_UNITS = 4


def _inv_sqrt_psd(C, rel_eps=1e-12, floor=0.0):
    """C^{-1/2} of a symmetric p.s.d. matrix (pseudo-inverse beyond ``rel_eps``·λ_max
    and ``floor``)."""
    w, V = torch.linalg.eigh((C + C.T) / 2)
    keep = w > max(rel_eps * float(w.abs().max()), floor)
    return (V[:, keep] / w[keep].sqrt()) @ V[:, keep].T


class _View:
    """Centered finite-dimensional features Φ (n × r) of one view with ΦΦᵀ ≈ K̃.

    Exact (``n_centers=None``): Φ = UΛ^{1/2} from the eigendecomposition of the centered
    Gram K̃ = UΛUᵀ (eigenvalues below 1e-10·λ_max dropped); a new point has features
    Λ^{-1/2}Uᵀ k̃(X, x) (equal to Φ's rows on the training points). O(n³) time, O(n²)
    memory.

    Nyström (``n_centers=m``): φ(x) = W^{-1/2} k(Z, x) − mean over the training points,
    W = k(Z, Z), Z = m random training points (Williams and Seeger 2001, "Using the
    Nyström method to speed up kernel machines", NIPS). O(n m² + m³) time, O(n m) memory.
    """

    def __init__(self, kernel, X, n_centers, gen, backend, name):
        self.kernel, self.backend, self.name = kernel, backend, name
        n = X.shape[0]
        with torch.no_grad():
            if n_centers is None:
                if is_precomputed(kernel):
                    X = check_precomputed(X, name=name, square=True)
                K = kernel_matrix(kernel, X, backend=backend, name=name)
                Kc = K.centered()
                trace = cheap_trace(K)
                if trace is not None:
                    warn_if_centering_cancels(trace, Kc.mean, n, K.dtype,
                                              f"KernelCCA (view {name})")
                w, U = torch.linalg.eigh(Kc.to_dense().to(_F64))
                # eigenvalues at the rounding level of K's entries are noise: kept, they
                # are directions the whitening R^{-1/2} blows up and that correlate with
                # anything (float32 linear views: 95 noise features, ρ₃ 0.74 for 0.064).
                # Measured: rounding eigenvalues reach 1.8 units of n·ε·max K_ii (linear
                # kernel, float32 and float64, offsets 0 to 10⁴), signals kept at 4.6
                scale = float(K.diag().abs().max())  # O(n) beside the O(n³) eigh
                floor = _ROUNDING_UNITS * n * torch.finfo(K.dtype).eps * scale
                keep = w > max(1e-10 * float(w.abs().max()), floor)
                w, U = w[keep], U[:, keep]
                self.col_mean, self.mean = Kc.col_mean.detach(), Kc.mean.detach()
                self.proj = U / w.sqrt()  # n × r: k̃(x, X) @ proj = φ(x)
                self.X, self.centers = X, None
                self.phi = U * w.sqrt()
            else:
                if is_precomputed(kernel):
                    raise ValueError("n_centers needs a kernel, not 'precomputed'")
                idx = torch.randperm(n, generator=gen)[:n_centers].to(X.device)
                self.centers = X[idx]
                W = kernel_matrix(kernel, self.centers, backend="dense").to_dense()
                m = W.shape[0]
                warn_if_centering_cancels(W.diagonal().sum(dtype=_F64),
                                          float(W.sum(dtype=_F64)) / m**2, m, W.dtype,
                                          f"KernelCCA (view {name}, Nyström centers)")
                floor = (_ROUNDING_UNITS * m * torch.finfo(W.dtype).eps
                         * float(W.diagonal().abs().max()))  # rounding level, as above
                self.proj = _inv_sqrt_psd(W.to(_F64), 1e-10, floor)
                F = self._raw(X)
                self.feat_mean = F.mean(0)
                self.phi = F - self.feat_mean

    def _raw(self, X):
        C = kernel_matrix(self.kernel, X, self.centers, backend=self.backend, name=self.name)
        # in float64: a float32 product of K(X, Z) with the rank-r projection rounds in all
        # m columns, and the centering leaves that rounding as m − r noise features
        # (float32 linear views 100 spreads off the origin: ρ₃ 0.50 for 0.064)
        return C.to_dense().to(_F64) @ self.proj

    def features(self, X):
        """Centered features of new data (validated against the fitted view)."""
        with torch.no_grad():
            if self.centers is not None:
                X = check_fitted_input(self.kernel, X, self.centers, self.name, "KernelCCA",
                                       allow_1d=self.name == "Y")
                return self._raw(X).to(_F64) - self.feat_mean
            if is_precomputed(self.kernel):
                X = check_precomputed(X, self.X.shape[0], self.name)
            else:
                X = check_fitted_input(self.kernel, X, self.X, self.name, "KernelCCA",
                                       allow_1d=self.name == "Y")
            K = kernel_matrix(self.kernel, X, self.X, backend=self.backend, name=self.name)
            Kc = K.centered(col_mean=self.col_mean, mean=self.mean)
            return (Kc @ self.proj.to(K.dtype)).to(_F64)


def _stage(bar, what, previous_done=True):
    """Show the stage ``what`` on the fit's bar, counting the previous stage as done."""
    if bar is not None:
        bar.update(int(previous_done))
        bar.set_postfix_str(what)


class KernelCCA(TransformerMixin, Estimator):
    r"""Kernel canonical correlation analysis, τ-regularized (Hardoon, Szedmak and
    Shawe-Taylor 2004, Neural Computation 16(12); Bach and Jordan 2002, JMLR).

    Finds f_a ∈ H_a, f_b ∈ H_b, :math:`f_a = \sum_i\alpha_i k_a(x_i,\cdot)`, maximizing
    :math:`\alpha^\top\tilde K_a\tilde K_b\beta` subject to

    .. math:: (1-\tau)\,\alpha^\top\tilde K_a^2\alpha + \tau\,\alpha^\top\tilde K_a\alpha = 1

    and the same for β (τ = ``reg``; the :math:`\alpha^\top K\alpha = \lVert
    f\rVert^2_{\mathcal H}` term removes the spurious perfect correlations of the
    unregularized problem). With centered features Φ_a (ΦΦᵀ = K̃_a), u = Φ_aᵀα, the
    problem becomes a ridge CCA in feature coordinates:
    :math:`\max u^\top C_{ab}v` s.t. :math:`u^\top R_a u = v^\top R_b v = 1`,
    :math:`C_{ab} = \Phi_a^\top\Phi_b`, :math:`R_a = (1-\tau)\Phi_a^\top\Phi_a + \tau I`,
    solved by the SVD of :math:`R_a^{-1/2}C_{ab}R_b^{-1/2} = PSQ^\top`:
    :math:`u_j = R_a^{-1/2}p_j`, :math:`v_j = R_b^{-1/2}q_j`, correlations
    :math:`\rho_j = S_{jj}`. Subsequent pairs are R-orthogonal to the previous ones.

    Parameters
    ----------
    kernel_x, kernel_y : Kernel, "precomputed" or None
        Kernels of the two views (default ``RBF()``). ``"precomputed"``: ``fit`` takes
        the Gram matrices, ``transform`` the (m, n) Gram matrices against training.
    n_components : int
    reg : float in [0, 1]
        τ. With linear kernels and τ → 0 the correlations are those of classical CCA.
        The penalty is not scale-free: τI competes with the eigenvalues of K̃ (which grow
        with n).
    n_centers : int or None
        None: exact (eigendecomposition of each n × n centered Gram, O(n³)). An int m:
        Nyström features from m random training points per view, O(n m²).
    backend : str or None
        Gram-matrix backend (``None`` = ``torchkern.config``).
    random_state : None, int or torch.Generator
        Choice of the Nyström centers.
    verbose : bool
        A progress bar over the fit's three stages (features of X, features of Y, the
        SVD), naming the stage under way; it stays on screen when the fit ends.

    Attributes
    ----------
    canonical_correlations_ : Tensor (n_components,)
        The *regularized* canonical correlations ρ_j = u_jᵀC_ab v_j on the training data
        (normalization u_jᵀR_a u_j = 1); for τ > 0 they are below the plain correlations
        of the training projections, and equal them as τ → 0.
    x_weights_, y_weights_ : Tensor (r_a, k), (r_b, k)
        u and v in the views' feature coordinates.

    Notes
    -----
    Cost: O(n³) exact; O(n m² + m³) with ``n_centers=m``; ``transform`` of t points
    one (t × n) (exact) or (t × m) (Nyström) kernel product per view.

    Examples
    --------
    >>> import torch, torchkern
    >>> z = torch.rand(200, 1, dtype=torch.float64)
    >>> X, Y = torch.cat([z.cos(), z.sin()], 1), z ** 2
    >>> cca = torchkern.KernelCCA(n_components=1, reg=0.1).fit(X, Y)
    >>> U, V = cca.transform(X, Y)
    """

    def __init__(self, kernel_x=None, kernel_y=None, n_components=2, *, reg=0.1,
                 n_centers=None, backend=None, random_state=None, verbose=False):
        self.kernel_x = kernel_x
        self.kernel_y = kernel_y
        self.n_components = n_components
        self.reg = reg
        self.n_centers = n_centers
        self.backend = backend
        self.random_state = random_state
        self.verbose = verbose

    @torch.no_grad()
    def fit(self, X, y):
        """Fit on paired views X (n, p) and y (n, q) — the second view, named ``y`` as
        scikit-learn's CCA names it (or their Gram matrices)."""
        Y = y
        kx = resolve_kernel(self.kernel_x, "kernel_x")
        ky = resolve_kernel(self.kernel_y, "kernel_y")
        X, Y = check_input(kx, X, "X"), check_input(ky, Y, "Y", allow_1d=True)
        n = X.shape[0]
        if n < 2:
            raise ValueError(f"KernelCCA needs at least 2 samples, got n_samples = {n}")
        if Y.shape[0] != n:
            raise ValueError(f"X and Y must have the same number of samples, got {n} and "
                             f"{Y.shape[0]}")
        check_positive(self.reg, "reg", allow_zero=True)
        tau = float(self.reg)
        if not 0 <= tau <= 1:
            raise ValueError(f"reg must be in [0, 1], got {self.reg!r}")
        if self.n_centers is not None:
            check_int(self.n_centers, "n_centers", 1, n)
        k = check_int(self.n_components, "n_components", 1, n)
        gen = generator(self.random_state)
        how = "exact" if self.n_centers is None else f"Nyström, m={self.n_centers}"
        bar = progress_bar(self.verbose, 3, "KernelCCA", unit="stage")
        _stage(bar, f"features of X ({how}, n={n})", previous_done=False)
        self._vx = _View(kx, X, self.n_centers, gen, self.backend, "X")
        _stage(bar, f"features of Y ({how}, n={n})")
        self._vy = _View(ky, Y, self.n_centers, gen, self.backend, "Y")
        _stage(bar, "SVD of the whitened cross-covariance")
        Pa, Pb = self._vx.phi, self._vy.phi
        if k > min(Pa.shape[1], Pb.shape[1]):
            raise ValueError(f"n_components={k} exceeds the rank of the views' features "
                             f"({Pa.shape[1]}, {Pb.shape[1]})")

        def ridge(P):
            return (1 - tau) * (P.T @ P) + tau * torch.eye(P.shape[1], dtype=_F64,
                                                           device=P.device)

        Ma, Mb = _inv_sqrt_psd(ridge(Pa)), _inv_sqrt_psd(ridge(Pb))
        P, S, Qh = torch.linalg.svd(Ma @ (Pa.T @ Pb) @ Mb)
        self.x_weights_ = Ma @ P[:, :k]
        self.y_weights_ = Mb @ Qh.T[:, :k]
        self.canonical_correlations_ = S[:k].to(X.dtype)
        if bar is not None:
            bar.set_postfix_str(f"done: ρ₁ = {float(S[0]):.4g}")
            bar.update(1)
            bar.close()
        self.kernel_x_, self.kernel_y_ = kx, ky
        if not is_precomputed(kx) and n_features(X) is not None:
            self.n_features_in_ = n_features(X)
        self._dtype = X.dtype
        return self

    @torch.no_grad()
    def transform(self, X, y=None):
        r"""Canonical variates :math:`f_{a,j}(x) = \tilde\varphi_a(x)^\top u_j` (and
        :math:`f_{b,j}(y)`); returns U (m, k), or (U, V) when the second view y is given."""
        Y = y
        check_fitted(self, "x_weights_")
        U = (self._vx.features(X) @ self.x_weights_).to(self._dtype)
        if Y is None:
            return U
        V = (self._vy.features(Y) @ self.y_weights_).to(self._dtype)
        if V.shape[0] != U.shape[0]:
            raise ValueError(f"X and Y must have the same number of samples, got "
                             f"{U.shape[0]} and {V.shape[0]}")
        return U, V

    def score(self, X, y):
        """Mean over components of the Pearson correlation of the canonical variates of
        (X, Y) — e.g. on held-out pairs (at least 2).

        A variate that is constant on these pairs up to rounding (its centered norm at
        most 16·√m units of its largest magnitude, e.g. X one point repeated) has no
        correlation: that component's is NaN, with a ``RuntimeWarning`` (SciPy's
        ``pearsonr`` convention), instead of the correlation of rounding noise."""
        U, V = self.transform(X, y)
        m = U.shape[0]
        if m < 2:
            raise ValueError(f"score needs at least 2 pairs (X, y) to correlate, got {m}")
        U, V = U.to(_F64), V.to(_F64)
        Uc, Vc = U - U.mean(0), V - V.mean(0)
        nu, nv = Uc.norm(dim=0), Vc.norm(dim=0)
        eps = torch.finfo(self._dtype).eps
        flat = ((nu <= 16 * eps * m ** 0.5 * U.abs().amax(0))
                | (nv <= 16 * eps * m ** 0.5 * V.abs().amax(0)))
        corr = (Uc * Vc).sum(0) / (nu * nv)
        if bool(flat.any()):
            which = flat.nonzero().flatten().tolist()
            warnings.warn(f"KernelCCA.score: canonical variate(s) {which} are constant on "
                          f"these {m} pairs: their correlation is undefined (NaN)",
                          RuntimeWarning, stacklevel=3)
            corr = torch.where(flat, torch.full_like(corr, math.nan), corr)
        return float(corr.mean())
