"""The gap-weighted subsequence ("substring") kernel of Lodhi et al."""
from __future__ import annotations

import functools
import math

import torch

from ..gram import DenseKernelMatrix, KernelMatrix
from ..kernels.structured import StructuredKernel
from .._validation import check_bool, check_int, check_positive
from ._encode import SequenceSet, _resolve_alphabet, as_sequences
from ._pairs import (cosine_from_logs, decayed_cumsum, log_decayed_cumsum,
                     pairwise_gram, pairwise_pairs)

__all__ = ["Substring"]


def substring_pairs(xc, xl, yc, yl, k: int, lam: float, gaps_only: bool = False
                    ) -> torch.Tensor:
    """log K_k(x_p, y_p) for P pairs at once (codes (P, Lx), (P, Ly), lengths (P,)),
    float64, −inf where K_k = 0.

    Lodhi et al.'s recursion over prefixes, with K'_0 = 1:
    K''_i(sa, tb) = λ K''_i(sa, t) + [a = b] λ² K'_{i-1}(s, t) and
    K'_i(sa, t) = λ K'_i(s, t) + K''_i(sa, t), i.e.
    K'_i(x[:p], y[:q]) = Σ_{p' ≤ p, q' ≤ q} λ^{(p - p') + (q - q')} T_i(p', q') with
    T_i(p, q) = [x_p = y_q] λ² K'_{i-1}(x[:p-1], y[:q-1]), and K_k = Σ_{p, q} T_k(p, q).
    Each level is thus a 2-D decayed cumulative sum of the previous one. In the variables
    λ^{-(p+q)} T_i the decay disappears: a level is two plain cumulative sums and one
    product with the match matrix (long strings whose λ^{-(p+q)} would leave the float64
    range take segmented decayed sums instead). Level i only needs positions ≥ i, so the
    grids shrink by one per level. A level is at most Lx·Ly times the previous one's
    largest entry: before that bound passes e^600, the level is divided by its largest
    entry (per pair) and the logs of those factors summed, so K_k ~ C(L, k)², which leaves
    the float64 range (L = 1000, k = 150: 1e360), comes back as its log.

    ``gaps_only`` returns K_k / λ^{2k} = Σ λ^{(gaps in x) + (gaps in y)} instead, each
    common subsequence weighted by λ to its number of skipped letters: ≥ 1 on the diagonal
    of a string of length ≥ k whatever λ, where K_k itself may underflow (λ^{2k} is 1e-40
    for k = 10, λ = 0.01); the cosine normalization is the same for both."""
    P, Lx = xc.shape
    Ly = yc.shape[1]
    dev, f64 = xc.device, torch.float64
    if k > min(Lx, Ly):                       # no pair holds a common k-subsequence
        return torch.full((P,), -math.inf, dtype=f64, device=dev)
    log_scale = torch.zeros(P, dtype=f64, device=dev)
    log_cells = math.log(Lx * Ly)
    inside_x = torch.arange(Lx, device=dev) < xl[:, None]
    inside_y = torch.arange(Ly, device=dev) < yl[:, None]
    match = (xc[:, :, None] == yc[:, None, :]) & inside_x[:, :, None] & inside_y[:, None, :]
    if (Lx + Ly) * abs(math.log(lam)) < 200:
        # T_1's factor: λ², or λ^{2-2k} (gaps_only: the k levels' λ² divided out at once),
        # within e^{±200} as k ≤ (Lx + Ly) / 2.
        first = lam ** 2 if not gaps_only else lam ** (2 - 2 * k)
        E = match.to(f64)
        px = lam ** -torch.arange(1, Lx + 1, dtype=f64, device=dev)
        py = lam ** -torch.arange(1, Ly + 1, dtype=f64, device=dev)
        T = E * (first * px[:, None] * py[None, :])              # λ^{-(p+q)} T_1
        bound, growth = math.log(first) + (Lx + Ly) * max(0.0, -math.log(lam)), log_cells
        for i in range(1, k):
            if bound + growth > _LOG_BOUND:
                T, bound = _rescaled(T, log_scale), 0.0
            C = T.cumsum(1).cumsum(2)
            T = E[:, i:, i:] * C[:, :-1, :-1]                    # λ^{-(p+q)} T_{i+1}
            bound += growth
        if bound + log_cells + (Lx + Ly) * max(0.0, math.log(lam)) > _LOG_BOUND:
            T = _rescaled(T, log_scale)
        return (T / (px[k - 1:, None] * py[None, k - 1:])).sum((1, 2)).log() + log_scale
    if lam > 1:
        return _log_levels(match, k, lam, gaps_only)
    step = 1.0 if gaps_only else lam ** 2                        # one level's λ²
    T = match.to(f64) * step
    bound, growth = 0.0, log_cells + max(0.0, (Lx + Ly) * math.log(lam))
    for i in range(1, k):
        if bound + growth > _LOG_BOUND:
            T, bound = _rescaled(T, log_scale), 0.0
        kp = decayed_cumsum(decayed_cumsum(T, lam, 2), lam, 1)  # K'_i on positions ≥ i
        T = match[:, i:, i:].to(f64) * step * kp[:, :-1, :-1]
        bound += growth
    if bound + log_cells > _LOG_BOUND:
        T = _rescaled(T, log_scale)
    return T.sum((1, 2)).log() + log_scale


_LOG_BOUND = 600.0


def _log_levels(match: torch.Tensor, k: int, lam: float, gaps_only: bool) -> torch.Tensor:
    """log K_k by the same levels as substring_pairs, each held as logs: for λ > 1 on long
    strings. There a decayed sum along a string grows by up to λ^{|x| + |y|} (past e^709
    for λ = 2 and 1,100 letters: inf, then 0 · inf = NaN where a later letter does not
    match), while the entries that later matches keep can be as small as λ^4; rescaling
    a level by its largest entry would flush those to 0."""
    step = 0.0 if gaps_only else 2 * math.log(lam)
    LT = torch.full(match.shape, step, dtype=torch.float64, device=match.device)
    LT = LT.masked_fill(~match, -math.inf)                       # log T_1
    for i in range(1, k):
        LK = log_decayed_cumsum(log_decayed_cumsum(LT, lam, 2), lam, 1)   # log K'_i
        LT = (LK[:, :-1, :-1] + step).masked_fill(~match[:, i:, i:], -math.inf)
    return LT.logsumexp((1, 2))


def _rescaled(T: torch.Tensor, log_scale: torch.Tensor) -> torch.Tensor:
    """T (P, a, b) divided by its largest entry per pair (1 where all are 0), whose log is
    added to ``log_scale`` in place."""
    top = T.amax((1, 2))
    top = torch.where(top > 0, top, torch.ones_like(top))
    log_scale += top.log()
    return T / top[:, None, None]


class Substring(StructuredKernel):
    r"""The gap-weighted subsequence kernel of Lodhi et al. (2002) ("string subsequence
    kernel").

    .. math::
        K(x, x') = \sum_{u \in A^k} \phi_u(x)\, \phi_u(x'), \qquad
        \phi_u(x) = \sum_{\mathbf{i} : x(\mathbf{i}) = u} \lambda^{\,i_k - i_1 + 1},

    over the index tuples i_1 < ... < i_k whose letters spell u: each occurrence of u as
    a (not necessarily contiguous) subsequence counts λ to the power of the length it
    spans. With ``normalize=True`` the cosine K(x, x')/√(K(x, x) K(x', x')).

    Parameters
    ----------
    k : int
        Subsequence length.
    lam : float
        Decay λ > 0. λ < 1 penalizes gaps (Lodhi et al.'s choice), λ = 1 weighs every
        occurrence alike, λ > 1 rewards gaps (still a positive definite kernel: φ_u has
        nonnegative weights); on long strings the latter runs in log space.
    normalize : bool
    alphabet : None, {"dna", "rna", "protein"} or str
        None (default): any character, compared by Unicode code point (case-sensitive).
        A named alphabet or a string of letters checks the letters (and, for the named
        ones, reads lower case as upper case), as :func:`~torchkern.sequences.encode`.

    Notes
    -----
    Computed by Lodhi et al.'s dynamic programme,
    :math:`O(k \cdot |x| \cdot |x'|)` per pair, vectorized over pairs and positions: each of
    its k levels is two cumulative sums along the positions of the two strings, evaluated
    for tiles of pairs of similar lengths at once. The Gram matrix is dense (every entry is
    a DP). The DP runs in float64 whatever the input's dtype and carries log K (each level
    rescaled); with ``normalize=True`` it computes K / λ^{2k} (each common subsequence
    weighted by λ to the number of letters it skips) and normalizes that in log space, so
    the cosine stays exact where K itself underflows (λ^{2k} = 1e-40 for k = 10, λ = 0.01,
    below float32's normal range) or overflows (λ ≈ 1, k = 150, strings of 1,000 letters:
    K ~ 1e360). Without ``normalize``, a K beyond the output dtype's range is a ValueError.

    Exact values (k = 2): K(cat, cat) = 2λ⁴ + λ⁶, K(cat, car) = λ⁴, K(cat, bar) = 0.

    References
    ----------
    H. Lodhi, C. Saunders, J. Shawe-Taylor, N. Cristianini, C. Watkins. Text
    classification using string kernels. Journal of Machine Learning Research
    2:419-444, 2002.
    """

    def __init__(self, k: int = 2, lam: float = 0.5, normalize: bool = False, alphabet=None):
        super().__init__()
        _resolve_alphabet(alphabet)         # checked here; kept as given (a name folds case)
        self.alphabet = alphabet
        self.k = check_int(k, "k", 1)
        check_positive(lam, "lam")     # one λ: a tensor of two was stored, then float() failed
        self.register_hyperparameter("lam", lam, learnable=False)
        self.normalize = check_bool(normalize, "normalize")

    def extra_repr(self) -> str:
        return (f"k={self.k}, lam={float(self.lam):.4g}, normalize={self.normalize}"
                + ("" if self.alphabet is None else f", alphabet={self.alphabet!r}"))

    def check_input(self, X, name: str = "X", **kw) -> SequenceSet:
        # attributes set after construction: k = 0 silently gave values, k = -2 a
        # RuntimeError naming nothing
        check_int(self.k, "k", 1)
        check_bool(self.normalize, "normalize")
        return as_sequences(X, self.alphabet, name)

    def _pair_fn(self):
        return functools.partial(substring_pairs, k=self.k, lam=float(self.lam),
                                 gaps_only=self.normalize)

    def _gram(self, X: SequenceSet, Y: SequenceSet | None) -> KernelMatrix:
        # The DP runs in float64 and, when normalizing, on K / λ^{2k} (see substring_pairs),
        # normalized here before the cast: in float32 (or for tiny λ in float64) K itself
        # underflows to subnormals or 0, and the cosine of those was silently wrong.
        X64, Y64 = X.to(dtype=torch.float64), None if Y is None else Y.to(dtype=torch.float64)
        L = pairwise_gram(X64, Y64, self._pair_fn(), _cells)                         # log K
        if not self.normalize:
            return DenseKernelMatrix(_exp_in_range(L, X.dtype))
        dx = L.diagonal() if Y is None else pairwise_pairs(X64, None, self._pair_fn(), _cells)
        dy = dx if Y is None else pairwise_pairs(Y64, None, self._pair_fn(), _cells)
        # Before, K / √(K(x, x) K(y, y)) of K overflowed to inf / inf = NaN (λ = 1,
        # k = 150, homopolymers of 1,000 letters). 0 where a string is shorter than k.
        K = cosine_from_logs(L, dx[:, None], dy[None, :])                    # symmetric
        return DenseKernelMatrix(K.to(X.dtype))

    def _pairs(self, X: SequenceSet, Y: SequenceSet) -> torch.Tensor:
        """k(x_i, y_i) for paired samples: one DP per pair (and per sequence when
        normalizing), O(k Σ_i |x_i| |y_i|); the n × n Gram matrix is never computed."""
        X64, Y64 = X.to(dtype=torch.float64), Y.to(dtype=torch.float64)
        L = pairwise_pairs(X64, Y64, self._pair_fn(), _cells)                          # log K
        if not self.normalize:
            return _exp_in_range(L, X.dtype)
        dx = pairwise_pairs(X64, None, self._pair_fn(), _cells)
        dy = pairwise_pairs(Y64, None, self._pair_fn(), _cells)
        return cosine_from_logs(L, dx, dy).to(X.dtype)

    def _diag(self, X: SequenceSet) -> torch.Tensor:
        if self.normalize:      # _gram normalized already: the base class scales by 1
            return (X.lengths >= self.k).to(X.dtype)
        return _exp_in_range(pairwise_pairs(X.to(dtype=torch.float64), None, self._pair_fn(),
                                            _cells), X.dtype)


def _exp_in_range(L: torch.Tensor, dtype) -> torch.Tensor:
    big = float(L.max()) if L.numel() else -math.inf
    if big > math.log(torch.finfo(dtype).max):
        raise ValueError(f"Substring: K reaches e^{big:.0f}, beyond the range of {dtype}; use "
                         f"normalize=True, a smaller lam or k")
    return L.exp().to(dtype)


def _cells(Lx: int, Ly: int) -> int:
    return 4 * Lx * Ly
