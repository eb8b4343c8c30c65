"""Probability estimates of SVMs: Platt's sigmoid on cross-validated decision values and
pairwise coupling, as LIBSVM computes them (``SVC(probability=True)``).

- :func:`fold_order` — LIBSVM's random order of a binary problem's samples before its
  5-fold cross-validation: a Fisher–Yates shuffle driven by the Mersenne Twister of
  scikit-learn's LIBSVM build, seeded afresh for every binary problem, with Lemire's
  bounded integers (so that scikit-learn's folds, and hence its probabilities, are
  reproduced for the same ``random_state``).
- :func:`fit_sigmoid` — P(y = 1 | f) = 1 / (1 + exp(A f + B)) by Newton's method with
  backtracking on the regularized targets (Platt 1999, "Probabilistic outputs for support
  vector machines"; the algorithm of Lin, Lin and Weng 2007, "A note on Platt's
  probabilistic outputs for support vector machines", Machine Learning 68).
- :func:`couple` — class probabilities from the pairwise ones r_ij by the second method
  of Wu, Lin and Weng 2004 ("Probability estimates for multi-class classification by
  pairwise coupling", JMLR 5): min_p pᵀQp on the simplex, by their fixed-point iteration.
"""
from __future__ import annotations

import numpy as np
import torch

_FOLDS = 5
_MIN_PROB = 1e-7


def libsvm_seed(random_state) -> int:
    """The seed scikit-learn hands LIBSVM for ``random_state`` (an int, None — NumPy's
    global generator —, a NumPy RandomState, or a torch.Generator, from which one int is
    drawn)."""
    if isinstance(random_state, torch.Generator):
        random_state = int(torch.randint(0, 2**31 - 1, (), generator=random_state))
    from sklearn.utils import check_random_state
    return int(check_random_state(random_state).randint(np.iinfo("i").max))


def fold_order(n: int, seed: int) -> np.ndarray:
    """LIBSVM's shuffled order of n samples: for i = 0 … n−1 swap i with i + u_i, u_i
    uniform in [0, n − i) from a 32-bit Mersenne Twister seeded with ``seed`` (Lemire's
    multiply-and-reject bounded integers)."""
    rs = np.random.RandomState(seed)  # MT19937 with the reference init_genrand seeding
    raw = iter(rs.randint(0, 2**32, size=n + 16, dtype=np.uint64).tolist())

    def draw():
        nonlocal raw
        try:
            return next(raw)
        except StopIteration:  # rejections used up the buffer: continue the stream
            raw = iter(rs.randint(0, 2**32, size=64, dtype=np.uint64).tolist())
            return next(raw)

    perm = np.arange(n)
    for i in range(n):
        r = n - i
        m = draw() * r
        low = m & 0xFFFFFFFF
        if low < r:
            t = (2**32 - r) % r
            while low < t:
                m = draw() * r
                low = m & 0xFFFFFFFF
        j = i + (m >> 32)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def fold_bounds(n: int):
    """(begin, end) of the 5 folds over the shuffled order, LIBSVM's i·n/5 split."""
    return [(f * n // _FOLDS, (f + 1) * n // _FOLDS) for f in range(_FOLDS)]


def _nll(f, t, A, B):
    """Σ cross-entropy of targets t against 1/(1 + exp(A f + B)), overflow-free."""
    z = A * f + B
    return float(np.sum(np.where(z >= 0, t * z + np.log1p(np.exp(-np.abs(z))),
                                 (t - 1) * z + np.log1p(np.exp(-np.abs(z))))))


def fit_sigmoid(dec: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(A, B) of P(y = +1 | f) = 1 / (1 + exp(A f + B)) fitted to decision values ``dec``
    and labels ``y`` (±1): Platt's regularized targets (N₊ + 1)/(N₊ + 2) and 1/(N₋ + 2),
    Newton steps on the (A, B) Hessian plus 1e-12 I, backtracking by halves until a
    sufficient decrease (Armijo constant 1e-4), at most 100 iterations, stop when both
    gradient entries are below 1e-5 (Lin, Lin and Weng 2007)."""
    f = np.asarray(dec, dtype=np.float64)
    pos = np.asarray(y) > 0
    n1, n0 = float(pos.sum()), float((~pos).sum())
    t = np.where(pos, (n1 + 1) / (n1 + 2), 1 / (n0 + 2))
    A, B = 0.0, float(np.log((n0 + 1) / (n1 + 1)))
    fval = _nll(f, t, A, B)
    for _ in range(100):
        z = A * f + B
        # p = 1/(1 + e^z), q = 1 − p, evaluated without overflow
        e = np.exp(-np.abs(z))
        p = np.where(z >= 0, e / (1 + e), 1 / (1 + e))
        q = 1 - p
        d2 = p * q
        h11, h22, h21 = 1e-12 + float(f @ (f * d2)), 1e-12 + float(d2.sum()), float(f @ d2)
        d1 = t - p
        g1, g2 = float(f @ d1), float(d1.sum())
        if abs(g1) < 1e-5 and abs(g2) < 1e-5:
            break
        det = h11 * h22 - h21 * h21
        dA, dB = -(h22 * g1 - h21 * g2) / det, -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= 1e-10:
            newA, newB = A + step * dA, B + step * dB
            newf = _nll(f, t, newA, newB)
            if newf < fval + 1e-4 * step * gd:
                A, B, fval = newA, newB, newf
                break
            step /= 2
        else:
            break  # the line search failed: keep the last (A, B)
    return A, B


def sigmoid(dec: torch.Tensor, A, B) -> torch.Tensor:
    """1 / (1 + exp(A f + B)), clipped to [1e-7, 1 − 1e-7] as LIBSVM does."""
    return torch.sigmoid(-(A * dec + B)).clamp(_MIN_PROB, 1 - _MIN_PROB)


def couple(R: torch.Tensor) -> torch.Tensor:
    """Class probabilities (m, k) from pairwise ones: ``R[:, i, j]`` = P(class i | i or j)
    (R[:, j, i] = 1 − R[:, i, j]). Wu, Lin and Weng's second method: the minimizer of
    pᵀQp on the simplex, Q_tt = Σ_{j≠t} r_jt², Q_tj = −r_jt r_tj, by their coordinate
    fixed-point iteration (at most max(100, k) sweeps, stop when max_t |(Qp)_t − pᵀQp| <
    0.005 / k). Two classes run the same iteration, as in scikit-learn's LIBSVM (whose
    results it reproduces): it stops within 0.0025 of the exact p = (r_01, r_10), which
    LIBSVM ≥ 3.23 returns instead."""
    m, k, _ = R.shape
    eye = torch.eye(k, dtype=torch.bool, device=R.device)
    Rt = R.transpose(1, 2)  # Rt[:, t, j] = r_jt
    Q = torch.where(eye, torch.zeros((), dtype=R.dtype, device=R.device), -Rt * R)
    Q = Q + torch.diag_embed((Rt.square() * ~eye).sum(2))
    p = torch.full((m, k), 1.0 / k, dtype=R.dtype, device=R.device)
    active = torch.ones(m, dtype=torch.bool, device=R.device)
    for _ in range(max(100, k)):
        Qp = torch.einsum("mtj,mj->mt", Q, p)  # afresh each sweep, for accuracy
        pQp = (p * Qp).sum(1)
        err = (Qp - pQp[:, None]).abs().amax(1)
        active = active & (err >= 0.005 / k)
        if not bool(active.any()):
            break
        for t in range(k):
            Qtt = Q[:, t, t]
            diff = torch.where(active, (-Qp[:, t] + pQp) / Qtt, torch.zeros_like(pQp))
            p[:, t] = p[:, t] + diff
            pQp = (pQp + diff * (diff * Qtt + 2 * Qp[:, t])) / (1 + diff) / (1 + diff)
            Qp = (Qp + diff[:, None] * Q[:, t, :]) / (1 + diff)[:, None]
            p = p / (1 + diff)[:, None]
    return p
