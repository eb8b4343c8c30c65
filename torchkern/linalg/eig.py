"""Top eigenpairs of a symmetric p.s.d. operator by randomized block Krylov iteration."""
from __future__ import annotations

import torch

from .._threads import num_threads, one_thread
from .._validation import check_int, check_positive
from ._common import _check_operator, _eigh, _generator, _randn

__all__ = ["block_krylov_eigsh"]

_FLOAT64 = torch.float64


class _ResidualProgress:
    """``verbose`` of the eigensolvers: a :class:`~torchkern._progress.ResidualBar` from
    the first residual down to ``tol`` (created at the first step, so that the bar's
    length is the digits the solver has to gain), closed — and kept on screen — by
    :meth:`close`. Callable as ``progress(steps, residual)``; a no-op when not verbose."""

    def __init__(self, verbose, tol, desc):
        self.on = bool(verbose)
        self.desc = verbose if isinstance(verbose, str) else desc
        self.tol, self.bar = tol, None

    def __call__(self, steps, residual):
        if not self.on:
            return
        if self.bar is None:
            from .._progress import ResidualBar
            self.bar = ResidualBar(self.tol, self.desc, start=max(residual, 10 * self.tol))
        self.bar.update(steps, residual)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _orth_against(W, B, generator=None):
    """An orthonormal n × b block orthogonal to span(B) whose span holds the part of span(W)
    outside span(B) (Gram–Schmidt twice, then QR).

    Where W is numerically rank-deficient outside span(B) — the Krylov space of a low-rank
    operator is exhausted, or after a thick restart the Ritz residuals (orthogonal to the
    old search space) span fewer than b directions — a plain QR would return columns made
    of round-off that are *not* orthogonal to B, and the Ritz values would be garbage.
    There the block keeps W's significant left singular vectors, fills up with random
    directions (any orthonormal extension is a valid search space for Rayleigh–Ritz) and
    orthogonalizes again.
    """
    scale = float(W.norm(dim=0).max())
    for _ in range(2):
        W = W - B @ (B.T @ W)
    Q = _cholesky_qr2(W, 1e-6 * scale) if scale > 0 else None
    if Q is not None:  # well conditioned: B-leak ≤ 1e-10
        return Q
    U, sig, _ = torch.linalg.svd(W, full_matrices=False)
    keep = U[:, sig > 1e-10 * max(scale, torch.finfo(W.dtype).tiny)]
    fill = _randn((W.shape[0], W.shape[1] - keep.shape[1]), W.dtype, W.device, generator)
    Q = torch.cat([keep, fill], dim=1)
    for _ in range(2):
        Q = Q - B @ (B.T @ Q)
    return torch.linalg.qr(Q).Q


def _cholesky_qr2(W, min_sigma):
    """The Q factor of a tall W by Cholesky QR, twice (Fukaya et al., "CholeskyQR2: a
    simple and communication-avoiding algorithm", 2014): two n × b products and b × b
    factorizations instead of a Householder QR — several times faster for b ≪ n, and
    orthogonal to round-off when cond(W) ≪ eps^(-1/2). None when W's smallest singular
    value (from the eigenvalues of WᵀW) is ≤ ``min_sigma``."""
    G = W.T @ W
    sig2 = _eigh(G)[0]
    if not float(sig2[0]) > min_sigma ** 2:
        return None
    for _ in range(2):
        R, info = torch.linalg.cholesky_ex(G, upper=True)
        if int(info) != 0:
            return None
        W = torch.linalg.solve_triangular(R, W, upper=True, left=False)
        G = W.T @ W
    return W


def _small_eigh(T):
    """eigh of a small (≤ a few hundred) symmetric matrix, descending (one thread on the
    CPU: multithreaded LAPACK is 5-20× slower at this size)."""
    w, V = _eigh(T)
    return w.flip(0), V.flip(1)


def _block_width(n, k, n_oversamples):
    """b = k + p rounded up to a multiple of 12 (at most n): the CPU GEMM kernels run at
    full speed on such widths — on the 2-core benchmark machine a float64 product with
    24 columns takes half the time of one with 20 or 32."""
    return min(n, -(-(k + n_oversamples) // 12) * 12)


def _ritz(T, Bt, ABt, hi, k):
    """Ritz values θ (all, descending), the rotation S, the top-k Ritz vectors U, their
    products AU and relative residual norms ‖AU − Uθ‖ / max|θ|."""
    theta, S = _small_eigh((T[:hi, :hi] + T[:hi, :hi].T) / 2)
    Sk = S[:, :k].T.contiguous()
    U, AU = (Sk @ Bt[:hi]).T, (Sk @ ABt[:hi]).T
    scale = theta.abs().max().clamp_min(torch.finfo(_FLOAT64).tiny)
    return theta, S, U, AU, (AU - U * theta[:k]).norm(dim=0) / scale


def _ritz_residual(A, theta, U):
    """max_j ‖A u_j − θ_j u_j‖ / max|θ|: the relative residual of Ritz pairs (θ, U) that a
    solver returned, by one product A @ U (the measure block Krylov stops on), for the
    warning of a caller whose solve stopped early."""
    with torch.no_grad():
        AU = (A @ U.to(A.dtype)).to(_FLOAT64)
        U64, th = U.to(_FLOAT64), theta.to(_FLOAT64)
        scale = th.abs().max().clamp_min(torch.finfo(_FLOAT64).tiny)
        return float((AU - U64 * th).norm(dim=0).max() / scale)


def _krylov_iterate(A, Q0, k, tol, max_steps, max_depth, gen, on_step):
    """Block Krylov with Rayleigh–Ritz from the orthonormal start block Q0 (n × b,
    float64), products by A in A's dtype; ``on_step(steps, residual)`` after each.
    Returns (θ, top-k Ritz vectors U, converged, steps).

    On the CPU everything but the products runs on one torch thread (the products get
    the caller's threads): the bookkeeping is tens of short operations on n × b blocks
    per step, and each parallel region among them cost more than its work when another
    process holds a core (n = 8,000 float64, 2 threads, load ~13: 5.6 s of bookkeeping
    with 2 threads against 0.4 s with one, products unchanged)."""
    outer = torch.get_num_threads()
    with one_thread(Q0.device.type == "cpu"):
        return _krylov_loop(A, Q0, k, tol, max_steps, max_depth, gen, on_step, outer)


def _krylov_loop(A, Q0, k, tol, max_steps, max_depth, gen, on_step, outer):
    n, b = Q0.shape
    device, f64 = Q0.device, _FLOAT64
    cap = min(n, max(2, max_depth) * b)
    # Basis and products stored as rows (cap × n): every leading slice is contiguous.
    Bt = torch.empty(cap, n, dtype=f64, device=device)
    ABt = torch.empty(cap, n, dtype=f64, device=device)
    T = torch.zeros(cap, cap, dtype=f64, device=device)
    Bt[:b] = Q0.T
    lo, hi = 0, b  # rows [lo, hi) of Bt still need their products
    converged, steps = False, 0
    while True:
        # a row-major block: a product by a transposed view runs ~15 % slower
        block = Bt[lo:hi].T.to(A.dtype).contiguous()
        with num_threads(outer):
            ABt[lo:hi] = (A @ block).to(f64).T
        steps += 1
        T[:hi, lo:hi] = Bt[:hi] @ ABt[lo:hi].T
        T[lo:hi, :lo] = T[:lo, lo:hi].T
        theta, S, U, AU, res = _ritz(T, Bt, ABt, hi, k)
        converged = bool((res <= tol).all())
        if on_step is not None:
            on_step(steps, float(res.max()))
        if converged or hi >= n or steps >= max_steps:
            converged = converged or hi >= n
            break
        if hi + min(b, n - hi) > cap:
            # thick restart: keep the top b Ritz vectors, whose products are AB S
            Sb = S[:, :b].T.contiguous()
            Bt[:b], ABt[:b] = Sb @ Bt[:hi], Sb @ ABt[:hi]
            T.zero_()
            T[:b, :b] = torch.diag(theta[:b])
            hi = b
        nxt = _orth_against(ABt[hi - b:hi].T, Bt[:hi].T, gen)
        width = min(b, n - hi)
        Bt[hi:hi + width] = nxt[:, :width].T
        lo, hi = hi, hi + width
    return theta, U, converged, steps


def _start_block(n, b, start, device, gen):
    """Orthonormal n × b float64 start block: the columns of ``start`` (if any) filled up
    with Gaussian ones."""
    f64 = _FLOAT64
    if start is None:
        return torch.linalg.qr(_randn((n, b), f64, device, gen)).Q
    if not isinstance(start, torch.Tensor) or start.dim() != 2 or start.shape[0] != n:
        raise ValueError(f"start must be a tensor of shape ({n}, r), got "
                         f"{getattr(start, 'shape', type(start).__name__)}")
    W = start.detach().to(device=device, dtype=f64)[:, :b]
    if not bool(torch.isfinite(W).all()):
        raise ValueError("start contains NaN or inf")
    return _orth_against(torch.cat([W, _randn((n, b - W.shape[1]), f64, device, gen)], 1),
                         torch.zeros(n, 0, dtype=f64, device=device), gen)


def block_krylov_eigsh(A, k, *, n_oversamples=None, tol=None, max_iter=None,
                       random_state=None, max_depth=8, start=None, verbose=False):
    r"""Top-k eigenpairs of a symmetric p.s.d. operator by randomized block Krylov
    iteration with Rayleigh–Ritz.

    Starts from the randomized range finder :math:`Q_0 = \mathrm{orth}(\Omega)`, Ω
    Gaussian with b = k + p columns (p = ``n_oversamples``, default max(10, k); b rounded
    up to a multiple of 12), and grows an orthonormal basis B of the block Krylov space
    :math:`[Q_0, AQ_0, A^2Q_0, \dots]` one block product ``A @ Q_j`` (n × b) per step,
    with full reorthogonalization. After each step the Ritz pairs of
    :math:`T = B^\top AB` (AB the stored products, T grown by one block row per step) are
    checked: done when every wanted residual :math:`\lVert Au_j - \theta_j u_j\rVert \le
    \mathrm{tol}\cdot\theta_1`. When the basis reaches ``max_depth`` blocks it restarts
    from its top b Ritz vectors (thick restart: their products are known, AB·S).

    Each step is *one* block product: on a lazy kernel matrix the kernel is evaluated once
    per step for all b columns, and the Krylov space converges in far fewer steps than
    subspace (power) iteration.

    Parameters
    ----------
    A : torch.Tensor or operator
        Symmetric positive semi-definite (n, n): a tensor or anything with ``shape``,
        ``dtype``, ``device`` and ``A @ V``.
    k : int
        Number of eigenpairs.
    tol : float, optional
        Relative residual; default 1e-8 (float64) or 1e-5 (float32).
    max_iter : int, optional
        Cap on block products, at least 1 (default 200).
    random_state : None, int or torch.Generator
        The Gaussian start block.
    max_depth : int
        Blocks kept before a thick restart.
    start : Tensor (n, r), optional
        Start directions (e.g. a Nyström estimate of the eigenvectors); the first
        min(r, b) columns are used and the block is filled with Gaussian columns.
    verbose : bool or str
        Show a progress bar (tqdm, kept on screen): the digits of relative residual
        gained toward ``tol`` by the worst of the k pairs, and the block products taken.
        A string is the bar's label.

    Returns
    -------
    eigenvalues : Tensor (k,), float64, descending
    eigenvectors : Tensor (n, k), float64
    converged : bool
    steps : int
        Block products taken.

    Notes
    -----
    Cost: one product A·(n × b) per step plus O(n·b²·max_depth) for the
    orthogonalization; O(n·b·max_depth) memory.

    References
    ----------
    N. Halko, P.-G. Martinsson and J. Tropp, "Finding structure with randomness",
    SIAM Review 2011, §4. C. Musco and C. Musco, "Randomized block Krylov methods for
    stronger and faster approximate singular value decomposition", NeurIPS 2015.
    """
    n = _check_operator(A, "A")
    device = torch.device(A.device)
    check_int(k, "k", 1, n)
    if n_oversamples is None:
        n_oversamples = max(10, k)
    check_int(n_oversamples, "n_oversamples", 0)
    b = _block_width(n, k, n_oversamples)
    if tol is None:
        tol = 1e-8 if A.dtype == _FLOAT64 else 1e-5
    check_positive(tol, "tol")
    if max_iter is None:
        max_iter = 200
    check_int(max_iter, "max_iter")  # at least one block product, as eigsh
    check_int(max_depth, "max_depth")
    gen = _generator(random_state)
    Q = _start_block(n, b, start, device, gen)
    progress = _ResidualProgress(verbose, tol, "block Krylov eigensolver")
    try:
        with torch.no_grad():  # the eigenpairs carry no gradients
            theta, U, converged, steps = _krylov_iterate(A, Q, k, tol, max_iter, max_depth,
                                                         gen, progress)
    finally:
        progress.close()
    return theta[:k], U, converged, steps
