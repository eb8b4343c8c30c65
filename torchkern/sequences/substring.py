"""The gap-weighted subsequence ("substring") kernel of Lodhi et al."""
from __future__ import annotations

import functools
import math

import torch

from ..gram import DenseKernelMatrix, KernelMatrix
from ..kernels.structured import StructuredKernel
from .._validation import check_bool, check_int
from ._encode import SequenceSet, _resolve_alphabet, as_sequences
from ._pairs import decayed_cumsum, pairwise_diag, pairwise_gram

__all__ = ["Substring"]


def substring_pairs(xc, xl, yc, yl, k: int, lam: float, dtype) -> torch.Tensor:
    """K_k(x_p, y_p) for P pairs at once (codes (P, Lx), (P, Ly), lengths (P,)).

    Lodhi et al.'s recursion over prefixes, with K'_0 = 1:
    K''_i(sa, tb) = λ K''_i(sa, t) + [a = b] λ² K'_{i-1}(s, t) and
    K'_i(sa, t) = λ K'_i(s, t) + K''_i(sa, t), i.e.
    K'_i(x[:p], y[:q]) = Σ_{p' ≤ p, q' ≤ q} λ^{(p - p') + (q - q')} T_i(p', q') with
    T_i(p, q) = [x_p = y_q] λ² K'_{i-1}(x[:p-1], y[:q-1]), and K_k = Σ_{p, q} T_k(p, q).
    Each level is thus a 2-D decayed cumulative sum of the previous one. In the variables
    λ^{-(p+q)} T_i the decay disappears: a level is two plain cumulative sums and one
    product with the match matrix (float64 inside; long strings whose λ^{-(p+q)} would leave
    the float64 range take segmented decayed sums instead). Level i only needs positions
    ≥ i, so the grids shrink by one per level."""
    P, Lx = xc.shape
    Ly = yc.shape[1]
    dev = xc.device
    inside_x = torch.arange(Lx, device=dev) < xl[:, None]
    inside_y = torch.arange(Ly, device=dev) < yl[:, None]
    match = (xc[:, :, None] == yc[:, None, :]) & inside_x[:, :, None] & inside_y[:, None, :]
    if (Lx + Ly) * abs(math.log(lam)) < 200:
        E = match.to(torch.float64)
        px = lam ** -torch.arange(1, Lx + 1, dtype=torch.float64, device=dev)
        py = lam ** -torch.arange(1, Ly + 1, dtype=torch.float64, device=dev)
        T = E * (lam ** 2 * px[:, None] * py[None, :])          # λ^{-(p+q)} T_1
        for i in range(1, k):
            C = T.cumsum(1).cumsum(2)
            T = E[:, i:, i:] * C[:, :-1, :-1]                    # λ^{-(p+q)} T_{i+1}
        return (T / (px[k - 1:, None] * py[None, k - 1:])).sum((1, 2)).to(dtype)
    T = match.to(dtype) * lam ** 2
    for i in range(1, k):
        kp = decayed_cumsum(decayed_cumsum(T, lam, 2), lam, 1)  # K'_i on positions ≥ i
        T = T.new_zeros(0) if T.shape[1] <= 1 or T.shape[2] <= 1 else (
            match[:, i:, i:].to(dtype) * lam ** 2 * kp[:, :-1, :-1])
    return T.sum((1, 2)) if T.numel() else torch.zeros(P, dtype=dtype, device=dev)


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
        Decay λ > 0 (λ ≤ 1 in practice: gaps are penalized).
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
    a DP).

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
        self.register_hyperparameter("lam", lam, learnable=False)
        self.normalize = check_bool(normalize, "normalize")

    def extra_repr(self) -> str:
        return (f"k={self.k}, lam={float(self.lam):.4g}, normalize={self.normalize}"
                + ("" if self.alphabet is None else f", alphabet={self.alphabet!r}"))

    def check_input(self, X, name: str = "X", **kw) -> SequenceSet:
        return as_sequences(X, self.alphabet, name)

    def _pairs(self, dtype):
        return functools.partial(substring_pairs, k=self.k, lam=float(self.lam), dtype=dtype)

    def _gram(self, X: SequenceSet, Y: SequenceSet | None) -> KernelMatrix:
        return DenseKernelMatrix(pairwise_gram(X, Y, self._pairs(X.dtype), _cells))

    def _diag(self, X: SequenceSet) -> torch.Tensor:
        return pairwise_diag(X, self._pairs(X.dtype), _cells)


def _cells(Lx: int, Ly: int) -> int:
    return 4 * Lx * Ly
