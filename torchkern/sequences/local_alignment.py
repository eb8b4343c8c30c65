"""The local alignment kernel of Saigo, Vert, Ueda & Akutsu."""
from __future__ import annotations

import functools
import math
from importlib import resources

import torch

from .._validation import check_bool, check_positive
from ..gram import DenseKernelMatrix, KernelMatrix
from ..kernels.structured import StructuredKernel
from ._encode import SequenceSet, as_sequences
from ._pairs import (cosine_from_logs, decayed_cumsum, pairwise_gram,
                     pairwise_pairs)

__all__ = ["LocalAlignment", "blosum62"]


@functools.lru_cache(maxsize=1)
def _read_blosum62() -> tuple[str, tuple]:
    text = resources.files("torchkern.sequences").joinpath("data", "blosum62").read_text()
    rows = [line.split() for line in text.splitlines() if line.strip() and line[0] != "#"]
    letters = "".join(rows[0])
    return letters, tuple(tuple(int(v) for v in r[1:]) for r in rows[1:])


def blosum62() -> tuple[str, torch.Tensor]:
    """The BLOSUM62 substitution matrix (Henikoff & Henikoff 1992), shipped with torchkern.

    Returns
    -------
    letters : str
        ``"ARNDCQEGHILKMFPSTWYVBZX*"`` (the 20 amino acids, then B = D/N, Z = E/Q, X = any,
        ``*`` = stop), the order of the rows and columns.
    scores : Tensor of shape (24, 24), float64
        Scores in half-bit units (symmetric; 4 for A/A, 11 for W/W).
    """
    letters, rows = _read_blosum62()
    return letters, torch.tensor(rows, dtype=torch.float64)


def local_alignment_pairs(xc, xl, yc, yl, scores, go: float, ge: float) -> torch.Tensor:
    r"""log(K_LA(x_p, y_p) − 1) for P pairs at once (codes (P, Lx), (P, Ly), lengths (P,)):
    the log of the sum over the non-empty alignments (−inf for an empty string), from
    which log K_LA = log(1 + e^T) and, where the empty alignment's 1 swamps the rest
    (every score very negative), log log K_LA ≈ T still.

    ``scores`` = β S over the alphabet's codes, ``go`` = β·gap_open, ``ge`` = β·gap_extend.
    Saigo et al.'s recursion, one row i of x at a time for all pairs and all positions j
    of y, with M, X, Y the weights of the alignments that end in a match at (i, j), in a
    gap in x, in a gap in y:
    M(i, j) = e^{βS(x_i, y_j)} (1 + M + X + Y)(i-1, j-1),
    X(i, j) = e^{-go} M(i-1, j) + e^{-ge} X(i-1, j),
    Y(i, j) = Σ_{j' < j} e^{-go - ge (j - 1 - j')} (M + X)(i, j') (a decayed cumulative sum
    along j), and K − 1 = Σ_{i, j} M(i, j).

    Two evaluations, float64 inside: rows rescaled to a common per-pair scale (plain
    products and sums; used when a bound on the ratio of the largest to the smallest
    nonzero weight shows that none can leave the float64 range), otherwise in log space
    (logaddexp, logcumsumexp; any length)."""
    Lx, Ly = xc.shape[1], yc.shape[1]
    xc, yc = xc.clamp_min(0), yc.clamp_min(0)
    s_max, s_min = max(float(scores.max()), 0.0), min(float(scores.min()), 0.0)
    # log(largest / smallest nonzero weight), the empty prefix "1" among them: ≤ 2^(Lx+Ly)
    # alignments of score ≤ max S⁺ per aligned pair, against e^{min S⁻} times the longest
    # gaps.
    span = s_max * min(Lx, Ly) - s_min + 2 * go + (Lx + Ly) * (math.log(2) + ge)
    # log of the largest intermediate above a row's top: e^{βS} times (1 + M + X + Y) ≤ 4
    # tops, plus X, summed over ≤ Ly terms that the decayed cumulative sum weights by up
    # to e^{-go + min(Ly ge, _CUMSUM_SCALE)}.
    peak = (s_max + math.log(6 * Ly)
            + max(0.0, min((Ly - 1) * ge, _CUMSUM_SCALE) - go))
    scaled = span < _SCALED_SPAN and _TOP + peak < _LOG_MAX
    rows = _la_scaled_rows if scaled else _la_log_rows
    return rows(xc, xl, yc, yl, scores, go, ge)


# The scaled evaluation puts each row's largest weight (the empty prefix's included) at
# e^597 and lets λ^{-t} in the decayed cumulative sums reach e^100: weights spanning up to
# e^1300 stay above e^-703; a row's intermediates may reach e^709 (float64's largest).
_TOP, _CUMSUM_SCALE, _SCALED_SPAN = 597.0, 100.0, 1300.0
_LOG_MAX = 709.0


def _la_scaled_rows(xc, xl, yc, yl, scores, go, ge):
    P, Lx = xc.shape
    Ly = yc.shape[1]
    dev, f64 = xc.device, torch.float64
    # e^{βS(x_i, y_j)}, zero outside the strings: M vanishes there (nothing valid reads
    # it: the DP only looks back), so a row's Σ_j M needs no mask.
    inside = ((torch.arange(Lx, device=dev) < xl[:, None])[:, :, None]
              & (torch.arange(Ly, device=dev) < yl[:, None])[:, None, :])
    E = scores.exp()[xc[:, :, None], yc[:, None, :]] * inside            # (P, Lx, Ly)
    M = torch.zeros(P, Ly, dtype=f64, device=dev)
    X, Y = M.clone(), M.clone()
    s = torch.zeros(P, 1, dtype=f64, device=dev)          # stored = true weight · e^{-s}
    total = torch.full((P,), -math.inf, dtype=f64, device=dev)    # log(K − 1)
    a_open, a_ext = math.exp(-go), math.exp(-ge)
    one_segment = Ly * ge <= _CUMSUM_SCALE
    t = torch.arange(Ly, dtype=f64, device=dev)
    up, down = a_open * a_ext ** -t, a_ext ** t            # Y by one cumsum if it fits
    for i in range(int(xl.max())):
        one = torch.exp(-s)                                # the empty prefix, "1"
        before = torch.cat([one, (M + X + Y)[:, :-1] + one], 1)
        X = a_open * M + a_ext * X
        M = E[:, i] * before
        if one_segment:
            Z = ((M + X) * up).cumsum(1) * down
        else:
            Z = decayed_cumsum(a_open * (M + X), a_ext, 1, _CUMSUM_SCALE)
        Y = torch.cat([torch.zeros_like(s), Z[:, :-1]], 1)
        total = torch.logaddexp(total, M.sum(1).log() + s[:, 0])
        # The top includes the empty prefix e^{-s}: where every alignment weighs far less
        # than 1 (negative scores, large β), a top of M, X, Y alone sent e^{-s} past e^709.
        top = torch.maximum(torch.maximum(M.amax(1), X.amax(1)), Y.amax(1))[:, None]
        shift = _TOP - torch.maximum(top.log(), -s)
        scale = shift.exp()
        M, X, Y, s = M * scale, X * scale, Y * scale, s - shift
    return total


def _la_log_rows(xc, xl, yc, yl, scores, go, ge):
    P, Lx = xc.shape
    Ly = yc.shape[1]
    dev, f64 = xc.device, torch.float64
    inside_y = torch.arange(Ly, device=dev) < yl[:, None]
    ramp = torch.arange(Ly, device=dev, dtype=f64) * ge
    neg = torch.full((P, 1), -math.inf, dtype=f64, device=dev)
    zero = torch.zeros(P, 1, dtype=f64, device=dev)
    M = X = Y = torch.full((P, Ly), -math.inf, dtype=f64, device=dev)
    total = torch.full((P,), -math.inf, dtype=f64, device=dev)
    for i in range(Lx):
        # log(1 + e^M + e^X + e^Y) at (i-1, j-1)
        before = torch.logaddexp(torch.logaddexp(M, X), Y)
        before = torch.logaddexp(zero, torch.cat([neg, before[:, :-1]], 1))
        M_new = scores[xc[:, i, None], yc] + before
        X = torch.logaddexp(M - go, X - ge)
        M = M_new
        feed = torch.logaddexp(M, X) - go + ramp
        Y = torch.cat([neg, feed.logcumsumexp(1)[:, :-1] - ramp[:-1]], 1)
        live = inside_y & (i < xl)[:, None]
        total = torch.logaddexp(total, M.masked_fill(~live, -math.inf).logsumexp(1))
    return total


class LocalAlignment(StructuredKernel):
    r"""The local alignment (LA) kernel of Saigo, Vert, Ueda & Akutsu (2004).

    .. math::
        K_{LA}^{(\beta)}(x, y) = \sum_{\pi \in \Pi(x, y)} \exp\big(\beta\, s(x, y, \pi)\big),

    the sum over all local alignments π of x and y (the empty one included, which adds 1)
    of the exponentiated Smith-Waterman score s: substitution scores S(x_i, y_j) of the
    aligned pairs minus an affine cost g(n) = gap_open + gap_extend·(n − 1) for each gap
    of n ≥ 1 letters. The Smith-Waterman score max_π s is the β → ∞ limit of
    (1/β) log K_LA.

    Which output is positive definite:

    - ``log=False`` (K_LA itself) is p.d. whenever the letter kernel exp(β S(a, b)) is
      (Saigo et al. 2004; Vert, Saigo & Akutsu 2004): so for BLOSUM62 over the 20 amino
      acids (checked numerically for β = 0.05 to 2; with the ambiguity codes B, Z, X, *
      it fails for β ≤ 0.1). With ``normalize=True``, K_LA(x, y)/√(K_LA(x, x) K_LA(y, y)),
      computed in log space so it never overflows, is p.d. likewise.
    - ``log=True`` returns (1/β) log K_LA, the variant used in practice because K_LA
      spans hundreds of orders of magnitude (diagonal dominance); with ``normalize=True``,
      log K(x, y)/√(log K(x, x) log K(y, y)), taken from the logs of the logs so that it
      stays exact where every alignment weighs far less than the empty one and log K
      underflows. These are **not** guaranteed p.d.: Saigo
      et al. shift the spectrum of the Gram matrix (subtract its smallest eigenvalue from
      the diagonal) before using it in an SVM.

    Parameters
    ----------
    beta : float
        β > 0 (Saigo et al. use 0.5 with BLOSUM62, gap_open 11, gap_extend 1).
    substitution : "blosum62" or (str, array of shape (n_letters, n_letters))
        The letters and their symmetric substitution scores. The alphabet is its letters;
        another letter in a sequence is a ValueError. With "blosum62" lower-case letters
        are read as upper case; a (letters, scores) pair is case-sensitive.
    gap_open, gap_extend : float
        Costs (≥ 0) of a gap's first letter and of each further one.
    log : bool
    normalize : bool

    Notes
    -----
    Computed by the dynamic programme of Saigo et al. in log space (logsumexp), with
    float64 inside: :math:`O(|x| \cdot |y|)` per pair, vectorized over tiles of pairs of similar
    lengths and over the positions of one string; the loop runs over the positions of the
    other. ``log=False`` without ``normalize`` raises a ValueError when K_LA exceeds the
    output dtype's range (long sequences, large β). The Gram matrix is dense.

    References
    ----------
    H. Saigo, J.-P. Vert, N. Ueda, T. Akutsu. Protein homology detection using string
    alignment kernels. Bioinformatics 20(11):1682-1689, 2004.

    J.-P. Vert, H. Saigo, T. Akutsu. Local alignment kernels for biological sequences. In
    Kernel Methods in Computational Biology, MIT Press, 2004.

    S. Henikoff, J. G. Henikoff. Amino acid substitution matrices from protein blocks.
    PNAS 89(22):10915-10919, 1992 (BLOSUM62).
    """

    def __init__(self, beta: float = 0.5, substitution="blosum62", gap_open: float = 11.0,
                 gap_extend: float = 1.0, log: bool = False, normalize: bool = False):
        super().__init__()
        check_positive(beta, "beta")   # one β: a tensor of two was stored, then float() failed
        self.register_hyperparameter("beta", beta, learnable=False)
        check_positive(gap_open, "gap_open", allow_zero=True)
        check_positive(gap_extend, "gap_extend", allow_zero=True)
        self.gap_open, self.gap_extend = float(gap_open), float(gap_extend)
        self.substitution = substitution
        self.log, self.normalize = check_bool(log, "log"), check_bool(normalize, "normalize")

    @property
    def substitution(self):
        """``"blosum62"`` or the ``(letters, scores)`` pair in use; setting it checks the
        matrix and derives the alphabet (``la.substitution = ('AC', S)`` was ignored: the
        kernel kept BLOSUM62)."""
        return "blosum62" if self._fold_case else (self.letters, self.scores)

    @substitution.setter
    def substitution(self, value) -> None:
        self.letters, self.scores = _substitution(value)
        # BLOSUM62's letters are upper case: lower case is read as upper case, as for the
        # named alphabets; a matrix given as (letters, scores) is case-sensitive.
        self._fold_case = isinstance(value, str)

    def _structural_args(self) -> dict:
        # the substitution matrix is kept as (letters, scores): set_params(gap_open=...)
        # rebuilt the kernel with the default, BLOSUM62 replacing a custom matrix silently
        return {**super()._structural_args(), "substitution": self.substitution}

    def extra_repr(self) -> str:
        return (f"beta={float(self.beta):.4g}, gap_open={self.gap_open:g}, "
                f"gap_extend={self.gap_extend:g}, log={self.log}, normalize={self.normalize}")

    def check_input(self, X, name: str = "X", **kw) -> SequenceSet:
        # attributes set after construction: a negative gap cost silently gave values
        check_positive(self.gap_open, "gap_open", allow_zero=True)
        check_positive(self.gap_extend, "gap_extend", allow_zero=True)
        check_bool(self.log, "log")
        check_bool(self.normalize, "normalize")
        return as_sequences(X, self.letters, name, fold_case=self._fold_case)

    def _log_pairs(self, device):
        beta = float(self.beta)
        return functools.partial(local_alignment_pairs, scores=beta * self.scores.to(device),
                                 go=beta * self.gap_open, ge=beta * self.gap_extend)

    def _gram(self, X: SequenceSet, Y: SequenceSet | None) -> KernelMatrix:
        pairs, f64 = self._log_pairs(X.device), torch.float64
        X64, Y64 = X.to(dtype=f64), None if Y is None else Y.to(dtype=f64)
        T = pairwise_gram(X64, Y64, pairs, _cells, _BUDGET)                   # log(K_LA − 1)
        tx = ty = None
        if self.normalize:
            tx = T.diagonal() if Y is None else pairwise_pairs(X64, None, pairs, _cells, _BUDGET)
            ty = tx if Y is None else pairwise_pairs(Y64, None, pairs, _cells, _BUDGET)
            tx, ty = tx[:, None], ty[None, :]
        return DenseKernelMatrix(self._from_logs(T, tx, ty, X.dtype))

    def _pairs(self, X: SequenceSet, Y: SequenceSet) -> torch.Tensor:
        """k(x_i, y_i) for paired samples: one alignment DP per pair (and per sequence when
        normalizing), O(Σ_i |x_i| |y_i|); the n × n Gram matrix is never computed."""
        pairs, f64 = self._log_pairs(X.device), torch.float64
        X64, Y64 = X.to(dtype=f64), Y.to(dtype=f64)
        T = pairwise_pairs(X64, Y64, pairs, _cells, _BUDGET)                  # log(K_LA − 1)
        tx = ty = None
        if self.normalize:
            tx = pairwise_pairs(X64, None, pairs, _cells, _BUDGET)
            ty = pairwise_pairs(Y64, None, pairs, _cells, _BUDGET)
        return self._from_logs(T, tx, ty, X.dtype)

    def _from_logs(self, T, tx, ty, dtype) -> torch.Tensor:
        """The kernel's values from T = log(K_LA − 1) of the pairs and, when normalizing,
        of the diagonals tx, ty (broadcast against T), in ``dtype``."""
        L = _log1p_exp(T)                                                         # log K_LA
        if self.normalize:
            if self.log:
                # log K(x, y) / √(log K(x, x) log K(y, y)) as exp(ℓ_xy − (ℓ_xx + ℓ_yy)/2)
                # with ℓ = log log K: where every score is very negative, log K ≈ e^T
                # underflows to 0 (β = 200, scores −5: T ≈ −1000) and the quotient of
                # the logs read 0 while the true one is of order 1. 0 with an empty string.
                lxy, lx, ly = _log_log1p_exp(T), _log_log1p_exp(tx), _log_log1p_exp(ty)
                K = cosine_from_logs(lxy, lx, ly, undefined=T)          # symmetric
            else:
                K = torch.exp(L - (_log1p_exp(tx) + _log1p_exp(ty)) / 2)
        elif self.log:
            K = L / float(self.beta)
        else:
            big = float(L.max()) if L.numel() else 0.0
            if big > math.log(torch.finfo(dtype).max):
                raise ValueError(f"LocalAlignment: K_LA reaches e^{big:.0f}, beyond the range of "
                                 f"{dtype}; use log=True, normalize=True or a smaller beta")
            K = torch.exp(L)
        return K.to(dtype)

    def _diag(self, X: SequenceSet) -> torch.Tensor:
        if self.normalize:
            ones = torch.ones(len(X), dtype=X.dtype, device=X.device)
            return (X.lengths > 0).to(X.dtype) if self.log else ones
        d = _log1p_exp(pairwise_pairs(X.to(dtype=torch.float64), None,
                                      self._log_pairs(X.device), _cells, _BUDGET))
        return (d / float(self.beta) if self.log else torch.exp(d)).to(X.dtype)


def _log1p_exp(t: torch.Tensor) -> torch.Tensor:
    """log(1 + e^t), −inf → 0."""
    return torch.logaddexp(t, torch.zeros_like(t))


def _log_log1p_exp(t: torch.Tensor) -> torch.Tensor:
    """log log(1 + e^t) without the underflow of log(1 + e^t) for t ≪ 0: there it is
    t + log(log1p(u)/u), u = e^t, = t − u/2 + O(u²); −inf → −inf."""
    low = t < -30.0
    u = t.clamp_max(-30.0).exp()
    return torch.where(low, t - u / 2, _log1p_exp(t.clamp_min(-30.0)).log())


def _cells(Lx: int, Ly: int) -> int:
    return Lx * Ly + 16 * Ly    # e^{βS} of the pair, and the DP's few live rows


# Each DP step is ~25 torch calls on (pairs, Ly) rows: tiles of ~2^19 elements (a few
# hundred pairs) balance per-call overhead against cache misses (2-core CPU, 1 thread:
# 2^16 and 2^22 were 1.5-2x slower).
_BUDGET = 1 << 19


def _substitution(substitution) -> tuple[str, torch.Tensor]:
    if isinstance(substitution, str):
        if substitution.lower() != "blosum62":
            raise ValueError(f"substitution must be 'blosum62' or a (letters, scores) pair, "
                             f"got {substitution!r}")
        return blosum62()
    try:
        letters, scores = substitution
    except (TypeError, ValueError):
        raise TypeError("substitution must be 'blosum62' or a (letters, scores) pair") from None
    scores = torch.as_tensor(scores, dtype=torch.float64)
    if not isinstance(letters, str) or len(set(letters)) != len(letters):
        raise ValueError("substitution: letters must be a string of distinct letters")
    if scores.shape != (len(letters), len(letters)):
        raise ValueError(f"substitution: scores must have shape ({len(letters)}, "
                         f"{len(letters)}), got {tuple(scores.shape)}")
    if not bool(torch.isfinite(scores).all()) or not torch.equal(scores, scores.T):
        raise ValueError("substitution: scores must be finite and symmetric")
    return letters, scores
