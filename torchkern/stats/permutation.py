r"""Permutation tests: the MMD two-sample test and the HSIC independence test.

Under the null hypothesis the labels (which sample a point came from; which y goes with
which x) are exchangeable, so the statistic recomputed on relabelled data gives draws of
its null distribution (Gretton et al. 2012, "A kernel two-sample test", JMLR 13). The
p-value is (1 + #{null draws ≥ observed}) / (1 + P) for P permutations, which keeps the
test's level at most α for any P (Phipson and Smyth 2010, "Permutation p-values should
never be zero", Stat. Appl. Genet. Mol. Biol. 9(1)).
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from sklearn.base import BaseEstimator

from .._validation import is_int, is_real
from ..inputs import check_input, concat
from ..approx import Nystroem
from ..kernels import RBF
from ._common import (check_kernel, check_samples, generator, randperm,
                      warn_if_centering_cancels)
from .bandwidth import median_heuristic

__all__ = ["PermutationTestResult", "MMDTest", "HSICTest"]


class PermutationTestResult(NamedTuple):
    """Outcome of a permutation test.

    Attributes
    ----------
    statistic : Tensor
        The observed statistic (0-d).
    p_value : float
        (1 + #{null ≥ statistic}) / (1 + n_permutations) (Phipson and Smyth 2010,
        "Permutation p-values should never be zero"). A permuted statistic equal to the
        observed one up to the rounding of the arithmetic (16 units of the working
        precision times a bound on one statistic's rounding error) counts as ≥: ties,
        which discrete data and duplicate points make common, keep the test at its level.
    reject : bool
        ``p_value <= alpha``: the null hypothesis is rejected at level α.
    null_distribution : Tensor of shape (n_permutations,)
        The statistic on each permuted data set.
    """

    statistic: torch.Tensor
    p_value: float
    reject: bool
    null_distribution: torch.Tensor


def _check_test_params(est, estimators):
    P = est.n_permutations
    if not is_int(P) or P < 1:
        raise ValueError(f"n_permutations must be a positive int, got {P!r}")
    if not (is_real(est.alpha) and 0 < est.alpha < 1):
        raise ValueError(f"alpha must be a float in (0, 1), got {est.alpha!r}")
    if est.estimator not in estimators:
        raise ValueError(f"estimator must be one of {estimators}, got {est.estimator!r}")


# Tie tolerance of the p-value, in units of the rounding unit of the arithmetic times the
# size of the terms the statistics are summed from (_tie_tolerance).
_TIE_ULPS = 16


def _tie_tolerance(dtype, scale: float) -> float:
    """Absolute tolerance under which a permuted statistic counts as equal to the observed
    one: ``_TIE_ULPS`` rounding units of ``dtype`` times ``scale``, the size of the
    rounding error of one statistic (each caller says how it bounds it). Labellings that
    give the same statistic in exact arithmetic — the observed labelling drawn again,
    swapped duplicate points, discrete data — came out of the products up to a unit of
    that size apart, so an exact ``>=`` dropped some of them and the p-value came out too
    small, the test too liberal (scipy's ``permutation_test`` compares with a relative
    tolerance for the same reason). The tolerance stays far below the spread of the null
    distribution (below 10⁻³ of its standard deviation in float32 at N = 5,000)."""
    return _TIE_ULPS * torch.finfo(dtype).eps * float(scale)


def _result(stats: torch.Tensor, alpha: float, dtype, tie_tol: float = 0.0
            ) -> PermutationTestResult:
    """stats[0] is the observed statistic, stats[1:] the permuted ones (float64); a
    permuted statistic within ``tie_tol`` below the observed one counts as a tie (≥)."""
    stat, null = stats[0], stats[1:]
    p = (1 + int((null >= stat - tie_tol).sum())) / (1 + null.numel())
    return PermutationTestResult(stat.to(dtype), p, bool(p <= alpha), null.to(dtype))


def _median_rbf(X, Y, gen, name, param):
    """The default kernel: an RBF with the median-heuristic lengthscale of X (pooled with
    Y), its failure (every point the same) naming the sample and the parameter to pass."""
    try:
        return RBF(lengthscale=median_heuristic(X, Y, random_state=gen))
    except ValueError as err:
        raise ValueError(f"{name}: {err}; pass {param}= explicitly") from None


# ------------------------------------------------------------------------------------
# MMD
# ------------------------------------------------------------------------------------

def _mmd_from_products(U, S, diag, n, m, estimator, chunk=64):
    r"""MMD² of every labelling from one product U = K [1, s_0, ..., s_P].

    Column p of S is the signed weight vector s = a/n − (1 − a)/m of the labelling
    a ∈ {0, 1}^N (a_i = 1: point i is in the first sample), so sᵀKs is the biased
    estimate with no cancellation of large sums. The unbiased one adds the diagonal
    corrections S_XX/(n²(n−1)) − T_X/(n(n−1)) + (same for Y), with S_XX = aᵀKa,
    T_X = Σ_{i∈X} K_ii; Ka = (Ks + K1/m)/(1/n + 1/m) comes from the same product.
    """
    f64 = torch.float64
    r = U[:, 0].to(f64)
    total, d = r.sum(), diag.to(f64)
    c = 1.0 / n + 1.0 / m
    out = []
    for j in range(1, U.shape[1], chunk):
        Us, Ss = U[:, j:j + chunk].to(f64), S[:, j:j + chunk].to(f64)
        biased = (Ss * Us).sum(0)
        if estimator == "biased":
            out.append(biased)
            continue
        A = (Ss > 0).to(f64)
        ra = r @ A                                  # 1ᵀK a
        sxx = ((A * Us).sum(0) + ra / m) / c        # aᵀK a
        syy = total - 2.0 * ra + sxx                # bᵀK b, b = 1 − a
        tx = d @ A
        ty = d.sum() - tx
        out.append(biased + sxx / (n * n * (n - 1)) - tx / (n * (n - 1))
                   + syy / (m * m * (m - 1)) - ty / (m * (m - 1)))
    return torch.cat(out)


class MMDTest(BaseEstimator):
    r"""Two-sample test of H0: P = Q with the MMD and a permutation null.

    The pooled sample Z = [X; Y] (N = n + m points) is relabelled P times. Instead of
    one Gram matrix per permutation, all labellings are columns of one (N, P + 2) matrix
    S of signed weights (s_i = 1/n on the first sample, −1/m on the second; plus the
    observed labelling and a column of ones), and the lazy Gram matrix is applied to it
    once: U = K_ZZ S. Each statistic is then a column-wise quadratic form sᵀKs (the
    biased estimate) plus, for the unbiased estimate, diagonal corrections computed from
    the same product (the U-statistic of Gretton et al. 2012, eq. 3).

    Cost: one pass over the N² kernel entries and O(N²·P) flops for the product, with
    O(N·P) memory (O(N·(d + P)) with a lazy backend — never N × N); the "auto" backend
    picks dense below 4·10⁶ entries.

    Parameters
    ----------
    kernel : Kernel, optional
        Default: ``RBF(lengthscale=median_heuristic(X, Y))`` on the pooled sample (which
        keeps the test exact: the bandwidth does not depend on the labels).
    n_permutations : int, default 500
    alpha : float, default 0.05
    estimator : {"unbiased", "biased"}, default "unbiased"
    random_state : None, int or torch.Generator
        Draws the permutations (and the median-heuristic subsample).
    backend : str, optional
        Backend of K_ZZ (``"dense"``, ``"blocked"``, ``"keops"``, ``"auto"``).

    Attributes
    ----------
    kernel_ : Kernel
        The kernel used by the last call to :meth:`test`.

    Examples
    --------
    >>> import torch
    >>> from torchkern.stats import MMDTest
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(200, 2, generator=g, dtype=torch.float64)
    >>> Y = torch.randn(200, 2, generator=g, dtype=torch.float64) + 1.0
    >>> MMDTest(n_permutations=200, random_state=0).test(X, Y).reject
    True
    """

    def __init__(self, kernel=None, n_permutations=500, alpha=0.05, estimator="unbiased",
                 random_state=None, backend=None):
        self.kernel = kernel
        self.n_permutations = n_permutations
        self.alpha = alpha
        self.estimator = estimator
        self.random_state = random_state
        self.backend = backend

    def test(self, X, Y) -> PermutationTestResult:
        """Run the test on X ∼ P (n, d) and Y ∼ Q (m, d).

        Returns
        -------
        PermutationTestResult
            ``statistic`` (the MMD² estimate), ``p_value``, ``reject``,
            ``null_distribution``.
        """
        _check_test_params(self, ("unbiased", "biased"))
        kernel = None if self.kernel is None else check_kernel(self.kernel)
        X, Y = check_samples(X, Y, kernel=kernel)
        n, m = X.shape[0], Y.shape[0]
        if self.estimator == "unbiased" and (n < 2 or m < 2):
            raise ValueError(f"the unbiased MMD estimator needs at least 2 samples in X and "
                             f"in Y, got {n} and {m}")
        gen = generator(self.random_state)
        if kernel is None:
            kernel = _median_rbf(X, Y, gen, "X and Y (pooled)", "kernel")
        self.kernel_ = kernel
        N, P = n + m, self.n_permutations
        with torch.no_grad():
            Z = concat([X, Y])
            K = kernel(Z.detach() if isinstance(Z, torch.Tensor) else Z, backend=self.backend)
            member = torch.zeros(N, P + 1, dtype=torch.bool, device=Z.device)
            member[:n, 0] = True
            for p in range(1, P + 1):
                member[randperm(N, gen, Z.device)[:n], p] = True
            S = torch.empty(N, P + 2, dtype=Z.dtype, device=Z.device)
            S[:, 0] = 1.0
            S[:, 1:] = -1.0 / m
            S[:, 1:][member] = 1.0 / n
            del member
            U = K @ S
            diag = K.diag()
            warn_if_centering_cancels(diag.sum(dtype=torch.float64),
                                      float(U[:, 0].sum(dtype=torch.float64)) / N**2, N,
                                      U.dtype, "MMDTest")
            stats = _mmd_from_products(U, S, diag, n, m, self.estimator)
            # sᵀKs from U = KS in U's dtype: |k(z, z')| <= max k(z, z) (a positive definite
            # kernel), rounding errors of U's N-term sums grow like √N, and ‖s‖² = 1/n + 1/m
            # (measured spread of equal statistics: ≤ 1 unit of max k at N = 10, 0.2 at 350,
            # 0.002 in float32 at 6,000; this scale: 1.3, 0.2, 0.05)
            tie_tol = _tie_tolerance(U.dtype, float(diag.abs().max()) * N ** 0.5
                                     * (1.0 / n + 1.0 / m))
        return _result(stats, self.alpha, X.dtype, tie_tol)


# ------------------------------------------------------------------------------------
# HSIC
# ------------------------------------------------------------------------------------

_METHODS = ("auto", "exact", "nystrom")

# "auto" switches to the Nyström test above this many samples. Measured on one core of
# the 2-core CI machine (d = 2, float64, P = 100): exact 4.5 s at n = 2000 and 35–70 s at
# n = 5000 (its permutations are memory-bound n × n gathers; four float64 n × n matrices,
# 800 MB at 5000), Nyström with m = 100 0.3 s and 0.65 s, statistic equal to 3 digits.
_AUTO_EXACT_MAX_N = 2000

# Default number of Nyström centers per kernel (capped at n).
_DEFAULT_FEATURES = 100


class HSICTest(BaseEstimator):
    r"""Independence test of H0: X ⫫ Y with HSIC and a permutation null.

    Pairing is broken by permuting the y-sample: HSIC(K, Π L Πᵀ); the p-value counts the
    permuted statistics at least as large as the observed one. Two ways to compute them:

    ``method="exact"``
        Dense Gram matrices. Since ΠH = HΠ, the centered L̃ = HLH is permuted directly,
        so each null draw of the biased statistic is Σ_ij K̃_ij L̃_{π(i)π(j)}/n² =
        Σ_ij K̃[:, π⁻¹]_ij L̃[π, :]_ij/n²; the unbiased one (Song et al. 2012) permutes the
        zero-diagonal L and its row sums likewise. Permutations are evaluated in batches
        of gathered copies (≤ 4·10⁶ entries each). Cost: O(n²) memory and
        O(n²·(d_x + d_y) + P·n²) time.
    ``method="nystrom"``
        The large-scale test of Zhang, Filippi, Gretton and Sejdinovic (2018, §3.2):
        Nyström features Φ (n × m_x) of k and Ψ (n × m_y) of l
        (:class:`torchkern.approx.Nystroem`, m uniform centers each), so K ≈ ΦΦᵀ and
        L ≈ ΨΨᵀ. With the columns centered (Φ̃ = HΦ, so HKH ≈ Φ̃Φ̃ᵀ),

        .. math::
            \widehat{\mathrm{HSIC}}_b = \frac{1}{n^2}\,
            \mathrm{tr}(\tilde\Phi\tilde\Phi^\top\tilde\Psi\tilde\Psi^\top)
            = \frac{1}{n^2}\,\|\tilde\Phi^\top\tilde\Psi\|_F^2 ,

        and a permutation permutes the rows of Ψ̃: ‖Φ̃ᵀΨ̃[π]‖²_F/n², an m_x × m_y
        product. The unbiased estimator is Song et al.'s U-statistic on the approximate
        Grams ΦΦᵀ, ΨΨᵀ; it is unchanged by centering the features (shifting all feature
        vectors by one constant leaves the U-statistic as it is), and with centered
        features K̃1 = 0, so with a_i = ‖φ̃_i‖², b_i = ‖ψ̃_i‖²

        .. math::
            \widehat{\mathrm{HSIC}}_u = \frac{1}{n(n-3)}\Big[
            \|\tilde\Phi^\top\tilde\Psi\|_F^2 - \frac{n}{n-2}\,a^\top b
            + \frac{(\mathbf 1^\top a)(\mathbf 1^\top b)}{(n-1)(n-2)}\Big].

        The features depend on each sample separately, never on the pairing, so the
        permutation test keeps its level α for any m; a small m costs power, not
        validity. Permutations are drawn and evaluated in batches (gathered rows of Ψ̃,
        one matrix product per row chunk, ≤ 4·10⁶ gathered entries at a time) and never
        stored all at once. Cost: O(n·m·d) kernel evaluations plus O(m³) for the
        features, O(P·n·m_x·m_y) flops for the permutations; memory O(n·(m_x + m_y)) —
        no n × n matrix. Products run in the data's dtype, their sums in float64.
    ``method="auto"`` (default)
        ``"exact"`` for n ≤ 2000, ``"nystrom"`` above (at n = 5000 the exact test takes
        about 100 times longer than the Nyström one with m = 100; docs/stats.md).

    Both methods use the same permutations for the same ``random_state`` (the Nyström
    centers are drawn from the generator after them), so with ``n_features = n`` — the
    Nyström approximation with every point as a center is exact up to round-off — the
    two give the same statistic and null distribution.

    Parameters
    ----------
    kernel_x, kernel_y : Kernel, optional
        Default: ``RBF(lengthscale=median_heuristic(X))`` (and of Y).
    n_permutations : int, default 500
    alpha : float, default 0.05
    estimator : {"biased", "unbiased"}, default "biased"
    random_state : None, int or torch.Generator
        Draws the median-heuristic subsamples, the permutations and the Nyström centers.
    method : {"auto", "exact", "nystrom"}, default "auto"
    n_features : int, optional
        Number of Nyström centers per kernel, m_x = m_y (``method="nystrom"`` only);
        default min(n, 100), and capped at n. The permutations cost grows as m², so
        m = 100 at n = 10⁵ and P = 500 is 5·10¹¹ multiply-adds.

    Attributes
    ----------
    kernel_x_, kernel_y_ : Kernel
        The kernels used by the last call to :meth:`test`.
    method_ : str
        The method used by the last call ("exact" or "nystrom").
    n_features_ : int or None
        The number of Nyström centers per kernel in the last call (None for "exact").

    References
    ----------
    Q. Zhang, S. Filippi, A. Gretton, D. Sejdinovic (2018). Large-scale kernel methods for
    independence testing. Statistics and Computing 28, 113–130.
    L. Song, A. Smola, A. Gretton, J. Bedo, K. Borgwardt (2012). Feature selection via
    dependence maximization. JMLR 13, 1393–1434.

    Examples
    --------
    >>> import torch
    >>> from torchkern.stats import HSICTest
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(20_000, 1, generator=g, dtype=torch.float64)
    >>> Y = X**2 + torch.randn(20_000, 1, generator=g, dtype=torch.float64)
    >>> HSICTest(n_permutations=50, random_state=0, n_features=30).test(X, Y).reject
    True
    """

    def __init__(self, kernel_x=None, kernel_y=None, n_permutations=500, alpha=0.05,
                 estimator="biased", random_state=None, method="auto", n_features=None):
        self.kernel_x = kernel_x
        self.kernel_y = kernel_y
        self.n_permutations = n_permutations
        self.alpha = alpha
        self.estimator = estimator
        self.random_state = random_state
        self.method = method
        self.n_features = n_features

    def test(self, X, Y) -> PermutationTestResult:
        """Run the test on paired samples X (n, d_x) and Y (n, d_y).

        Returns
        -------
        PermutationTestResult
            ``statistic`` (the HSIC estimate), ``p_value``, ``reject``,
            ``null_distribution``.
        """
        _check_test_params(self, ("biased", "unbiased"))
        if self.method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {self.method!r}")
        m = self.n_features
        if m is not None and (not is_int(m) or m < 1):
            raise ValueError(f"n_features must be None or a positive int, got {m!r}")
        kx = None if self.kernel_x is None else check_kernel(self.kernel_x, "kernel_x")
        ky = None if self.kernel_y is None else check_kernel(self.kernel_y, "kernel_y")
        # Row-sharded samples (torchkern.distributed): the other sample's rows paired with
        # this rank's rows (each rank's own, or whole ones in a known order)
        if callable(getattr(X, "align_rows", None)):
            Y = X.align_rows(Y, "Y")
        elif callable(getattr(Y, "align_rows", None)):
            X = Y.align_rows(X, "X")
        X, Y = check_input(kx, X, "X", allow_1d=True), check_input(ky, Y, "Y", allow_1d=True)
        n = X.shape[0]
        if Y.shape[0] != n:
            raise ValueError(f"X and Y must hold the same number of (paired) samples, got "
                             f"{n} and {Y.shape[0]}")
        if isinstance(X, torch.Tensor) and isinstance(Y, torch.Tensor) and Y.dtype != X.dtype:
            raise TypeError(f"X and Y must have the same dtype, got {X.dtype} and {Y.dtype}")
        need = 4 if self.estimator == "unbiased" else 2
        if n < need:
            raise ValueError(f"the {self.estimator} HSIC test needs at least {need} samples, "
                             f"got {n}")
        method = self.method
        if method == "auto":
            method = "exact" if n <= _AUTO_EXACT_MAX_N else "nystrom"
        gen = generator(self.random_state)
        if gen is None and method == "nystrom":
            # The permutations are replayed from a copy of the generator (see below),
            # so the global one is only used to seed a private one.
            gen = torch.Generator().manual_seed(int(torch.randint(2**62, (1,))))
        if kx is None:
            kx = _median_rbf(X, None, gen, "X", "kernel_x")
        if ky is None:
            ky = _median_rbf(Y, None, gen, "Y", "kernel_y")
        self.kernel_x_, self.kernel_y_ = kx, ky
        self.method_ = method
        self.n_features_ = None
        with torch.no_grad():
            X, Y = _detach(X), _detach(Y)
            if method == "exact":
                stats, tie_tol = _exact_hsic_stats(X, Y, kx, ky, self.n_permutations,
                                                   self.estimator, gen)
            else:
                self.n_features_ = min(n, _DEFAULT_FEATURES if m is None else m)
                stats, tie_tol = _nystrom_hsic_stats(X, Y, kx, ky, self.n_permutations,
                                                     self.estimator, gen, self.n_features_)
        return _result(stats, self.alpha, X.dtype, tie_tol)


def _detach(X):
    return X.detach() if isinstance(X, torch.Tensor) else X


def _exact_hsic_stats(X, Y, kx, ky, P, estimator, gen):
    """Observed and permuted HSIC (float64) from the dense Gram matrices, and the tie
    tolerance of their p-value (:func:`_tie_tolerance`)."""
    n, f64 = X.shape[0], torch.float64
    K = kx(X, backend="dense").to_dense()
    L = ky(Y, backend="dense").to_dense()
    for M, name in ((K, "K"), (L, "L")):
        warn_if_centering_cancels(M.diagonal().sum(dtype=f64), float(M.sum(dtype=f64)) / n**2,
                                  n, M.dtype, f"HSICTest ({name})")
    K, L = K.to(f64), L.to(f64)
    perms = torch.stack([torch.arange(n, device=X.device)]
                        + [randperm(n, gen, X.device) for _ in range(P)])
    if estimator == "biased":
        Kc, Lc = _center(K), _center(L)
        tie_tol = _tie_tolerance(f64, Kc.abs().max() * Lc.abs().max())
        return _permuted_frobenius(Kc, Lc, perms) / n**2, tie_tol
    K.fill_diagonal_(0)
    L.fill_diagonal_(0)
    tie_tol = _tie_tolerance(f64, 4 * K.abs().max() * L.abs().max())
    rk, rl = K.sum(1), L.sum(1)
    const = rk.sum() * rl.sum() / ((n - 1) * (n - 2))
    cross = rl[perms] @ rk
    return ((_permuted_frobenius(K, L, perms) + const - 2.0 * cross / (n - 2))
            / (n * (n - 3))), tie_tol


def _nystrom_hsic_stats(X, Y, kx, ky, P, estimator, gen, m, max_entries=2**22):
    """Observed and permuted HSIC (float64) from centered Nyström features, and the tie
    tolerance of their p-value (:func:`_tie_tolerance`): C = Φ̃ᵀΨ̃[π] is summed from
    products in the features' dtype with errors up to a unit of ‖Φ̃‖_F‖Ψ̃‖_F
    (Cauchy–Schwarz), which move ‖C‖²_F by 2‖C‖_F times that; the rest is float64.

    The permutations come first in the generator's stream (as in the exact method) but
    are needed only after the features, which take the centers from the same generator:
    the stream is copied, skipped over P permutations, the centers drawn, and the
    permutations then replayed from the copy batch by batch (O(batch·n) integers alive).
    """
    n, dev = X.shape[0], X.device
    replay = torch.Generator(device=gen.device)
    replay.set_state(gen.get_state())
    for _ in range(P):
        randperm(n, gen, dev)
    F = _centered_features(Nystroem(kx, n_components=m, random_state=gen).fit(X), X)
    G = _centered_features(Nystroem(ky, n_components=m, random_state=gen).fit(Y), Y)
    mx, my = F.shape[1], G.shape[1]
    # Batch of b permutations × r rows: b·r·m_y gathered entries and b·m_x·m_y outputs.
    b = max(1, min(P + 1, max_entries // (n * my), max_entries // (mx * my)))
    r = min(n, max(1, max_entries // (b * my)))
    f64 = torch.float64
    if estimator == "unbiased":
        a = _rows_f64(F, lambda B: B.pow(2).sum(1, dtype=f64))
        c = _rows_f64(G, lambda B: B.pow(2).sum(1, dtype=f64))
    out, done, s_max = [], 0, 0.0
    while done < P + 1:
        bb = min(b, P + 1 - done)
        perms = torch.empty(bb, n, dtype=torch.long, device=dev)   # (bb, n), filled in place
        for i in range(bb):
            perms[i] = torch.arange(n, device=dev) if done + i == 0 else randperm(n, replay, dev)
        C = torch.zeros(mx, bb, my, dtype=f64, device=dev)
        for s in range(0, n, r):
            rows = perms[:, s:s + r].T                              # (r', bb)
            Gp = G[rows.reshape(-1)].view(rows.shape[0], bb * my)   # ψ̃_{π(i)}, i in chunk
            C += (F[s:s + r].T @ Gp).view(mx, bb, my).to(f64)
        S = C.pow(2).sum((0, 2))                                    # ‖Φ̃ᵀΨ̃[π]‖²_F
        s_max = max(s_max, float(S.max()))
        if estimator == "biased":
            out.append(S / n**2)
        else:
            ab = c[perms] @ a                                       # Σ_i a_i b_{π(i)}
            out.append((S - n / (n - 2) * ab + a.sum() * c.sum() / ((n - 1) * (n - 2)))
                       / (n * (n - 3)))
        done += bb
    sq = lambda B: B.pow(2).sum(dtype=f64)[None]  # noqa: E731
    fg = float((_rows_f64(F, sq).sum() * _rows_f64(G, sq).sum()).sqrt())  # ‖Φ̃‖_F‖Ψ̃‖_F
    denom = n**2 if estimator == "biased" else n * (n - 3)
    tie_tol = (_tie_tolerance(F.dtype, 2 * s_max ** 0.5 * fg / denom)
               + _tie_tolerance(f64, 4 * fg * fg / denom))
    return torch.cat(out), tie_tol


def _centered_features(nystroem, Z):
    """Nyström features of Z with their column means removed (HΦ), in Z's dtype."""
    F = nystroem.transform(Z)
    mean = _rows_f64(F, lambda B: B.sum(0, dtype=torch.float64)[None]).sum(0) / F.shape[0]
    return F.sub_(mean.to(F.dtype))   # in place: no copy of F


def _rows_f64(F, fn, rows=2**14):
    """``fn`` (a float64 reduction) applied to row chunks of F, concatenated: torch casts a
    whole float32 tensor to float64 before a ``sum(dtype=float64)``, twice F's memory."""
    return torch.cat([fn(F[s:s + rows]) for s in range(0, F.shape[0], rows)])


def _center(K):
    r = K.mean(1)
    return K - r[:, None] - r[None, :] + r.mean()


def _permuted_frobenius(K, L, perms, max_entries=2**22):
    """Σ_ij K_ij L_{π(i)π(j)} for every row π of ``perms``, in batches.

    With σ = π⁻¹ the sum is Σ_ij K[:, σ]_ij L[π, :]_ij: one column gather of K and one row
    gather of L per permutation, each indexed by n integers (no n² index tensors).
    """
    n = K.shape[0]
    batch = max(1, max_entries // (n * n))
    inverse = perms.argsort(1)
    out = []
    for s in range(0, perms.shape[0], batch):
        p, q = perms[s:s + batch], inverse[s:s + batch]
        b = p.shape[0]
        Kq = K.index_select(1, q.reshape(-1)).view(n, b, n)
        Lp = L.index_select(0, p.reshape(-1)).view(b, n, n)
        out.append(torch.einsum("ibj,bij->b", Kq, Lp))
    return torch.cat(out)
