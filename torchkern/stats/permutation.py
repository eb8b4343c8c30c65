r"""Permutation tests: the MMD two-sample test and the HSIC independence test.

Under the null hypothesis the labels (which sample a point came from; which y goes with
which x) are exchangeable, so the statistic recomputed on relabelled data gives draws of
its null distribution (seed 000 L8440–8560, "A statistical test using MMD"). The
p-value is (1 + #{null draws ≥ observed}) / (1 + P) for P permutations, which keeps the
test's level at most α for any P.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from sklearn.base import BaseEstimator

from .._validation import as_tensor
from ..kernels import RBF
from ._common import check_kernel, check_samples, generator, randperm
from .bandwidth import median_heuristic

__all__ = ["PermutationTestResult", "MMDTest", "HSICTest"]


class PermutationTestResult(NamedTuple):
    """Outcome of a permutation test.

    Attributes
    ----------
    statistic : Tensor
        The observed statistic (0-d).
    p_value : float
        (1 + #{null ≥ statistic}) / (1 + n_permutations).
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
    if isinstance(P, bool) or not isinstance(P, int) or P < 1:
        raise ValueError(f"n_permutations must be a positive int, got {P!r}")
    if not (isinstance(est.alpha, (int, float)) and 0 < est.alpha < 1):
        raise ValueError(f"alpha must be a float in (0, 1), got {est.alpha!r}")
    if est.estimator not in estimators:
        raise ValueError(f"estimator must be one of {estimators}, got {est.estimator!r}")


def _result(stats: torch.Tensor, alpha: float, dtype) -> PermutationTestResult:
    """stats[0] is the observed statistic, stats[1:] the permuted ones (float64)."""
    stat, null = stats[0], stats[1:]
    p = (1 + int((null >= stat).sum())) / (1 + null.numel())
    return PermutationTestResult(stat.to(dtype), p, bool(p <= alpha), null.to(dtype))


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
    the same product (see seed 000 L8440–8560 and Gretton et al. 2012, §5).

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
        X, Y = check_samples(X, Y)
        n, m = X.shape[0], Y.shape[0]
        if self.estimator == "unbiased" and (n < 2 or m < 2):
            raise ValueError(f"the unbiased MMD estimator needs at least 2 samples in X and "
                             f"in Y, got {n} and {m}")
        gen = generator(self.random_state)
        if self.kernel is None:
            kernel = RBF(lengthscale=median_heuristic(X, Y, random_state=gen))
        else:
            kernel = check_kernel(self.kernel)
        self.kernel_ = kernel
        N, P = n + m, self.n_permutations
        with torch.no_grad():
            Z = torch.cat([X, Y]).detach()
            K = kernel(Z, backend=self.backend)
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
            stats = _mmd_from_products(U, S, K.diag(), n, m, self.estimator)
        return _result(stats, self.alpha, X.dtype)


# ------------------------------------------------------------------------------------
# HSIC
# ------------------------------------------------------------------------------------

class HSICTest(BaseEstimator):
    r"""Independence test of H0: X ⫫ Y with HSIC and a permutation null.

    Pairing is broken by permuting the y-sample: HSIC(K, Π L Πᵀ). Since ΠH = HΠ, the
    centered L̃ = HLH is permuted directly, so each null draw of the biased statistic is
    Σ_ij K̃_ij L̃_{π(i)π(j)}/n² = Σ_ij K̃[:, π⁻¹]_ij L̃[π, :]_ij/n²; the unbiased one
    (Song et al. 2012) permutes the zero-diagonal L and its row sums likewise.
    Permutations are evaluated in batches of gathered copies (≤ 4·10⁶ entries each).

    Cost: dense Gram matrices, O(n²) memory and O(n²·(d_x + d_y) + P·n²) time — meant
    for n up to a few thousand (n = 2000, P = 500 is 2·10⁹ multiply-adds).

    Parameters
    ----------
    kernel_x, kernel_y : Kernel, optional
        Default: ``RBF(lengthscale=median_heuristic(X))`` (and of Y).
    n_permutations : int, default 500
    alpha : float, default 0.05
    estimator : {"biased", "unbiased"}, default "biased"
    random_state : None, int or torch.Generator

    Attributes
    ----------
    kernel_x_, kernel_y_ : Kernel
        The kernels used by the last call to :meth:`test`.
    """

    def __init__(self, kernel_x=None, kernel_y=None, n_permutations=500, alpha=0.05,
                 estimator="biased", random_state=None):
        self.kernel_x = kernel_x
        self.kernel_y = kernel_y
        self.n_permutations = n_permutations
        self.alpha = alpha
        self.estimator = estimator
        self.random_state = random_state

    def test(self, X, Y) -> PermutationTestResult:
        """Run the test on paired samples X (n, d_x) and Y (n, d_y).

        Returns
        -------
        PermutationTestResult
            ``statistic`` (the HSIC estimate), ``p_value``, ``reject``,
            ``null_distribution``.
        """
        _check_test_params(self, ("biased", "unbiased"))
        X, Y = as_tensor(X, "X"), as_tensor(Y, "Y")
        n = X.shape[0]
        if Y.shape[0] != n:
            raise ValueError(f"X and Y must hold the same number of (paired) samples, got "
                             f"{n} and {Y.shape[0]}")
        if Y.dtype != X.dtype:
            raise TypeError(f"X and Y must have the same dtype, got {X.dtype} and {Y.dtype}")
        need = 4 if self.estimator == "unbiased" else 2
        if n < need:
            raise ValueError(f"the {self.estimator} HSIC test needs at least {need} samples, "
                             f"got {n}")
        gen = generator(self.random_state)
        kx = (RBF(lengthscale=median_heuristic(X, random_state=gen)) if self.kernel_x is None
              else check_kernel(self.kernel_x, "kernel_x"))
        ky = (RBF(lengthscale=median_heuristic(Y, random_state=gen)) if self.kernel_y is None
              else check_kernel(self.kernel_y, "kernel_y"))
        self.kernel_x_, self.kernel_y_ = kx, ky
        f64 = torch.float64
        with torch.no_grad():
            K = kx(X.detach(), backend="dense").to_dense().to(f64)
            L = ky(Y.detach(), backend="dense").to_dense().to(f64)
            perms = torch.stack([torch.arange(n, device=X.device)]
                                + [randperm(n, gen, X.device) for _ in range(self.n_permutations)])
            if self.estimator == "biased":
                Kc, Lc = _center(K), _center(L)
                stats = _permuted_frobenius(Kc, Lc, perms) / n**2
            else:
                K.fill_diagonal_(0)
                L.fill_diagonal_(0)
                rk, rl = K.sum(1), L.sum(1)
                const = rk.sum() * rl.sum() / ((n - 1) * (n - 2))
                cross = rl[perms] @ rk
                stats = ((_permuted_frobenius(K, L, perms) + const - 2.0 * cross / (n - 2))
                         / (n * (n - 3)))
        return _result(stats, self.alpha, X.dtype)


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
