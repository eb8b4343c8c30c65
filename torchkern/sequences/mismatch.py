"""The (k, m)-mismatch kernel: k-mer counts up to m substitutions."""
from __future__ import annotations

import math

import torch

from .._validation import check_int
from ._encode import SequenceSet
from .spectrum import CountKernelMatrix, Spectrum, check_kmer_size

__all__ = ["Mismatch"]


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


def _blocks(k: int, m: int) -> list[range]:
    """Positions 0..k-1 cut into 2m + 1 contiguous blocks, so that two k-mers at Hamming
    distance ≤ 2m agree on at least one whole block (pigeonhole); one empty block (every
    pair) when 2m ≥ k, where every pair is within 2m."""
    if 2 * m >= k:
        return [range(0)]
    edges = [round(b * k / (2 * m + 1)) for b in range(2 * m + 2)]
    return [range(edges[b], edges[b + 1]) for b in range(2 * m + 1)]


def shared_neighbour_matrix(kmers: torch.Tensor, k: int, m: int, A: int, dtype,
                            max_pairs: int = 1 << 20) -> torch.Tensor:
    """The sparse (U, U) matrix G_uv = |N_m(u) ∩ N_m(v)| = h(d_H(u, v)) over the sorted
    distinct k-mer codes ``kmers`` (zero beyond distance 2m).

    The pairs within distance 2m are found without enumerating any Hamming ball: cut the
    positions into 2m + 1 blocks; such a pair agrees exactly on some block, so it is among
    the pairs that share the letters of a block — for each block, the k-mers sorted by
    those letters and every pair within a run of equal keys (each unordered pair once, in
    chunks of ``max_pairs``).
    A pair is kept at the first block it agrees on and weighted by the closed-form h(d)
    (:func:`shared_neighbours`), as in the sorting-based mismatch-kernel algorithms of
    Kuksa, Huang & Pavlovic (2008). Cost: the number of candidate pairs, at most
    (2m + 1) U min(U, |A|^(k - ⌊k/(2m+1)⌋)); never |A|^k or a ball."""
    dev, U = kmers.device, kmers.numel()
    weight = torch.tensor(shared_neighbours(k, m, A), dtype=dtype, device=dev)
    powers = A ** torch.arange(k - 1, -1, -1, device=dev)
    digits = kmers[:, None] // powers % A                                    # (U, k)
    small = next(t for t in (torch.int8, torch.int16, torch.int32, torch.long)
                 if A <= torch.iinfo(t).max)
    blocks = _blocks(k, m)
    empty = torch.zeros(0, dtype=torch.long, device=dev)
    flats, dists = [empty], [empty.to(torch.int8)]
    for b, block in enumerate(blocks):
        pos = list(block)
        key = (digits[:, pos] * powers[k - len(pos):]).sum(1) if pos else torch.zeros_like(kmers)
        key, order = torch.sort(key)
        sorted_digits = digits[order].to(small)
        _, size = torch.unique_consecutive(key, return_counts=True)
        # Sorted k-mer t pairs with t' = t..(end of its run): each unordered pair once.
        width = size.cumsum(0).repeat_interleave(size) - torch.arange(U, device=dev)
        cum = width.cumsum(0)
        s = 0
        while s < U:                                    # chunks of sorted k-mers
            e = int(torch.searchsorted(cum, int(cum[s] - width[s]) + max_pairs, right=True))
            e = max(e, s + 1)
            w = width[s:e]
            i = torch.arange(s, e, device=dev).repeat_interleave(w)
            j = i + torch.arange(i.numel(), device=dev) - (w.cumsum(0) - w).repeat_interleave(w)
            same = sorted_digits[i] == sorted_digits[j]  # (pairs, k)
            d = k - same.sum(1)
            keep = d <= 2 * m
            for earlier in blocks[:b]:                  # counted at an earlier block
                keep &= ~same[:, list(earlier)].all(1)
            u, v, d = order[i[keep]], order[j[keep]], d[keep].to(torch.int8)
            off = u != v                                # G is symmetric: both orders
            flats += [u * U + v, v[off] * U + u[off]]
            dists += [d, d[off]]
            s = e
    # One sort of the flat index gives the coalesced (row-major) layout.
    flat = torch.cat(flats)
    del flats
    flat, order = torch.sort(flat)
    values = weight[torch.cat(dists)[order].long()]
    del order
    index = torch.empty(2, flat.numel(), dtype=torch.long, device=dev)
    torch.div(flat, U, rounding_mode="floor", out=index[0])
    torch.remainder(flat, U, out=index[1])
    return torch.sparse_coo_tensor(index, values, (U, U), check_invariants=False,
                                   is_coalesced=True)


def paired_mismatch(phi_x: torch.Tensor, phi_y: torch.Tensor, kmers: torch.Tensor, k: int,
                    m: int, A: int, max_pairs: int = 1 << 20) -> torch.Tensor:
    """K(x_i, y_i) for each row i of the coalesced sparse counts Φ_X, Φ_Y (n, U) over the
    sorted k-mer codes ``kmers``: Σ φ_u(x_i) φ_v(y_i) h(d_H(u, v)) over the k-mers u of
    x_i and v of y_i, h the closed-form :func:`shared_neighbours` — G_uv for only the
    pairs that meet in a pair of sequences. O(k Σ_i U_i V_i) time (U_i, V_i: the distinct
    k-mers of x_i and y_i), in chunks of ``max_pairs`` k-mer pairs."""
    dev, dtype, n = phi_x.device, phi_x.dtype, phi_x.shape[0]
    h = torch.tensor(shared_neighbours(k, m, A), dtype=dtype, device=dev)
    weight = torch.zeros(k + 1, dtype=dtype, device=dev)      # d > 2m: no shared word
    weight[:min(k, 2 * m) + 1] = h[:k + 1]
    letters = kmers[:, None] // A ** torch.arange(k - 1, -1, -1, device=dev) % A   # (U, k)
    (rx, ux), cx = phi_x.indices(), phi_x.values()
    (ry, uy), cy = phi_y.indices(), phi_y.values()
    ny = torch.bincount(ry, minlength=n)
    y_start = ny.cumsum(0) - ny
    width = ny[rx]                         # each k-mer of x_i meets every k-mer of y_i
    cum = width.cumsum(0)
    out = torch.zeros(n, dtype=dtype, device=dev)
    s = 0
    while s < rx.numel():
        e = max(s + 1, int(torch.searchsorted(cum, int(cum[s] - width[s]) + max_pairs,
                                              right=True)))
        w = width[s:e]
        t = torch.arange(s, e, device=dev).repeat_interleave(w)
        j = (y_start[rx[t]] + torch.arange(t.numel(), device=dev)
             - (w.cumsum(0) - w).repeat_interleave(w))
        d = (letters[ux[t]] != letters[uy[j]]).sum(1)
        out.index_add_(0, rx[t], cx[t] * cy[j] * weight[d])
        s = e
    return out


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
        As for :class:`Spectrum` (the named alphabets read lower case as upper case), but
        not None: the Hamming balls range over :math:`A^k`, so :math:`|A|` must be finite.
    normalize : bool

    Notes
    -----
    Φ(x) = c(x) N with c(x) the k-mer counts of x and N the incidence of k-mers and the
    words of their Hamming balls, so K(X, Y) = C_X G C_Yᵀ with G = N Nᵀ:
    :math:`G_{uv} = |N_m(u) \cap N_m(v)| = h(d_H(u, v))` depends only on the distance of u
    and v and vanishes beyond 2m (h is a closed-form count). G is built over the distinct
    k-mers U that occur, from the pairs within distance 2m: cut the k positions into
    2m + 1 blocks; such a pair agrees on a whole block, so sorting the k-mers by each
    block's letters and pairing those with equal keys finds every pair (kept at its first
    agreeing block; Kuksa, Huang & Pavlovic 2008 count mismatch pairs by such sorts). No
    Hamming ball and no word of :math:`A^k` is enumerated: the cost is the number of
    candidate pairs, at most :math:`(2m+1)\, U \min(U, |A|^{k - \lfloor k/(2m+1) \rfloor})` — proteins,
    k = 5, m = 2, 800 k-mers: 0.16 million candidates where a ball of radius 2m holds
    723,901 words per k-mer. The Gram matrix is a lazy sparse product (``K @ V`` costs three
    sparse products; the n × m matrix is formed only when asked for); G has
    :math:`\sum_{d \le 2m}` (pairs at distance d) entries, dense-ish when 2m is close to k.
    ``pairs`` and ``diag`` take G_uv for only the k-mer pairs u, v that meet in a pair of
    sequences (O(k U_x U_y) per pair, U_x the distinct k-mers of x) where that is cheaper
    than G over every distinct k-mer.

    References
    ----------
    C. Leslie, E. Eskin, A. Cohen, J. Weston, W. S. Noble. Mismatch string kernels for
    discriminative protein classification. Bioinformatics 20(4):467-476, 2004.

    P. Kuksa, P.-H. Huang, V. Pavlovic. Scalable algorithms for string kernels with inexact
    matching. Advances in Neural Information Processing Systems 21 (NIPS), 2008.
    """

    def __init__(self, k: int = 3, m: int = 1, alphabet="dna", normalize: bool = False):
        if alphabet is None:
            raise ValueError("Mismatch needs a finite alphabet ('dna', 'rna', 'protein' or a "
                             "string of letters), got None: φ_u(x) ranges over every word u "
                             "of A^k, so the kernel's values depend on |A|")
        super().__init__(k, alphabet, normalize)
        check_kmer_size(self.k, self._letters)  # k-mers decoded from base-|A| codes
        self.m = check_int(m, "m", 0, self.k)

    def _check_args(self) -> None:
        super()._check_args()
        if self.alphabet is None:
            raise ValueError("Mismatch needs a finite alphabet ('dna', 'rna', 'protein' or a "
                             "string of letters), got None")
        check_kmer_size(self.k, self._letters)
        check_int(self.m, "m", 0, self.k)

    def extra_repr(self) -> str:
        return f"k={self.k}, m={self.m}, alphabet={self.alphabet!r}, normalize={self.normalize}"

    def _rowwise(self, phi_x, phi_y, kmers, X: SequenceSet) -> torch.Tensor:
        # The cheaper of G over all U distinct k-mers (its candidate pairs, then a dense
        # row of U per sequence) and G_uv for the k-mer pairs of each pair of sequences
        # alone: many short peptides have U ~ n distinct k-mers (2,000 pairs, k = 4,
        # m = 1: a G of 65 million entries, 26 s, against 0.3 s); few long DNA strings
        # share most of a small U.
        A, U, k, m = len(X.alphabet), kmers.numel(), self.k, self.m
        blocks = _blocks(k, m)      # candidates: k-mers that agree on a block's letters
        shortest = min(len(b) for b in blocks)
        g_cost = len(blocks) * U * min(U, A ** (k - shortest)) + phi_x.shape[0] * U
        rows = phi_x.shape[0]
        nx = torch.bincount(phi_x.indices()[0], minlength=rows)
        ny = torch.bincount(phi_y.indices()[0], minlength=rows)
        if g_cost < k * int((nx * ny).sum()):
            G = self._middle(kmers, X)
            return CountKernelMatrix(phi_x, phi_y, G).diag()
        return paired_mismatch(phi_x, phi_y, kmers, k, m, A)

    def _middle(self, kmers: torch.Tensor, X: SequenceSet) -> torch.Tensor:
        # |A| of the codes themselves: an alphabet set after construction (protein for dna)
        # left the constructor's |A| = 4 here, and the Hamming-ball sizes were wrong
        return shared_neighbour_matrix(kmers, self.k, self.m, len(X.alphabet), X.dtype)
