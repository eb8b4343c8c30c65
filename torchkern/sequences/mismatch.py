"""The (k, m)-mismatch kernel: k-mer counts up to m substitutions."""
from __future__ import annotations

import itertools
import math

import torch

from ..gram import KernelMatrix
from .._validation import check_int
from ._encode import SequenceSet
from .spectrum import CountKernelMatrix, Spectrum

__all__ = ["Mismatch"]


def substitution_patterns(k: int, r: int, A: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The (Q, k) digit offsets that move a k-mer to each member of its Hamming ball of
    radius r exactly once (offset 0 keeps a letter, 1..|A|-1 replace it:
    letter -> (letter + offset) mod |A|), Q = Σ_{d ≤ r} C(k, d)(|A| - 1)^d, and the (Q,)
    Hamming distance each pattern moves by."""
    blocks, dist = [torch.zeros(1, k, dtype=torch.long)], [0]
    for d in range(1, r + 1):
        subs = torch.cartesian_prod(*[torch.arange(1, A)] * d).reshape(-1, d)
        for pos in itertools.combinations(range(k), d):
            block = torch.zeros(subs.shape[0], k, dtype=torch.long)
            block[:, list(pos)] = subs
            blocks.append(block)
            dist += [d] * subs.shape[0]
    return torch.cat(blocks).to(device), torch.tensor(dist, device=device)


def shared_neighbours(k: int, m: int, A: int) -> list[int]:
    """h(d) = |N_m(u) ∩ N_m(v)| for two k-mers at Hamming distance d (d = 0..2m), where
    N_m(u) is the Hamming ball of radius m: count the words w that change a of the k - d
    agreeing positions, keep u's letter at b and v's letter at c of the d differing ones
    and a third letter at the rest, with a + d - b ≤ m and a + d - c ≤ m."""
    h = []
    for d in range(2 * m + 1):
        total = 0
        for a in range(min(k - d, m) + 1):
            for b in range(d + 1):
                for c in range(d - b + 1):
                    if a + d - b <= m and a + d - c <= m:
                        total += (math.comb(k - d, a) * (A - 1) ** a * math.comb(d, b)
                                  * math.comb(d - b, c) * (A - 2) ** (d - b - c))
        h.append(total)
    return h


def shared_neighbour_matrix(kmers: torch.Tensor, k: int, m: int, A: int, dtype,
                            max_elements: int = 1 << 23) -> torch.Tensor:
    """The sparse (U, U) matrix G_uv = |N_m(u) ∩ N_m(v)| over the sorted distinct k-mer
    codes ``kmers``: each k-mer's Hamming ball of radius 2m (vectorized over k-mers ×
    substitution patterns, in chunks) looked up among ``kmers``."""
    dev, U = kmers.device, kmers.numel()
    patterns, dist = substitution_patterns(k, 2 * m, A, dev)
    weight = torch.tensor(shared_neighbours(k, m, A), dtype=dtype, device=dev)[dist]
    powers = A ** torch.arange(k - 1, -1, -1, device=dev)
    # moved[t][letter, offset] = the code contribution of position t after the move.
    letters = torch.arange(A, device=dev)
    moved = [(letters[:, None] + letters[None, :]) % A * p for p in powers]
    # Where a ball code sits among the k-mers: a direct table when |A|^k is small.
    table = None
    if A ** k <= max(1 << 22, 4 * U):
        table = torch.full((A ** k,), -1, dtype=torch.long, device=dev)
        table[kmers] = torch.arange(U, device=dev)
    step = max(1, max_elements // patterns.shape[0])
    empty = torch.zeros(0, dtype=torch.long, device=dev)
    rows, cols, vals = [empty], [empty], [weight[:0]]
    for s in range(0, U, step):
        digits = kmers[s:s + step, None] // powers % A                     # (u, k)
        ball = sum(moved[t][digits[:, t]][:, patterns[:, t]] for t in range(k))  # (u, Q)
        if table is not None:
            where = table[ball]
            hit = where >= 0
        else:
            where = torch.searchsorted(kmers, ball).clamp_max(U - 1)
            hit = kmers[where] == ball
        r, q = hit.nonzero(as_tuple=True)
        rows.append(r + s)
        cols.append(where[r, q])
        vals.append(weight[q])
    # Rows come out in order and without duplicates: one sort of the flat index orders
    # the columns within rows (cheaper than coalesce()).
    flat, order = torch.sort(torch.cat(rows) * U + torch.cat(cols))
    return torch.sparse_coo_tensor(torch.stack([flat // U, flat % U]), torch.cat(vals)[order],
                                   (U, U), check_invariants=False, is_coalesced=True)


class Mismatch(Spectrum):
    r"""The (k, m)-mismatch kernel of Leslie, Eskin, Cohen, Weston & Noble (2004).

    .. math::
        K(x, x') = \sum_{u \in A^k} \phi_u(x)\, \phi_u(x'), \qquad
        \phi_u(x) = \#\{\text{k-mers } \alpha \text{ of } x : d_H(\alpha, u) \le m\},

    with :math:`d_H` the Hamming distance. m = 0 is the spectrum kernel. With
    ``normalize=True`` the cosine K(x, x')/√(K(x, x) K(x', x')).

    Parameters
    ----------
    k : int
        k-mer length.
    m : int
        Number of mismatches allowed, 0 ≤ m ≤ k.
    alphabet : {"dna", "rna", "protein"} or str
    normalize : bool

    Notes
    -----
    Φ(x) = c(x) N with c(x) the k-mer counts of x and N the incidence of k-mers and the
    words of their Hamming balls, so K(X, Y) = C_X G C_Yᵀ with G = N Nᵀ:
    :math:`G_{uv} = |N_m(u) \cap N_m(v)| = h(d_H(u, v))` depends only on the distance of u
    and v and vanishes beyond 2m (h is a closed-form count). G is built over the distinct
    k-mers that occur, by expanding the k-mer index: each one's Hamming ball of radius 2m,
    :math:`Q = \sum_{d \le 2m} \binom{k}{d}(|A| - 1)^d` codes, vectorized over k-mers ×
    substitution patterns, is looked up among them. :math:`|A|^k` is never enumerated. The
    Gram matrix is a lazy sparse product (``K @ V`` costs three sparse products; the n × m
    matrix is formed only when asked for). Proteins, k = 3, m = 1: Q = 1,141 per k-mer.

    References
    ----------
    C. Leslie, E. Eskin, A. Cohen, J. Weston, W. S. Noble. Mismatch string kernels for
    discriminative protein classification. Bioinformatics 20(4):467-476, 2004.
    """

    def __init__(self, k: int = 3, m: int = 1, alphabet="dna", normalize: bool = False):
        super().__init__(k, alphabet, normalize)
        self.m = check_int(m, "m", 0, self.k)

    def extra_repr(self) -> str:
        return f"k={self.k}, m={self.m}, alphabet={self.alphabet!r}, normalize={self.normalize}"

    def _gram(self, X: SequenceSet, Y: SequenceSet | None) -> KernelMatrix:
        phi_x, phi_y, kmers = self._counts(X, Y)
        G = shared_neighbour_matrix(kmers, self.k, self.m, len(self.alphabet), X.dtype)
        return CountKernelMatrix(phi_x, None if Y is None else phi_y, G)
