"""Strings as a kernel input: integer codes on a padded tensor."""
from __future__ import annotations

import numpy as np
import torch

from ..inputs import KernelInput

__all__ = ["ALPHABETS", "SequenceSet", "encode", "as_sequences"]

#: The named alphabets; sequences given in lower case are upper-cased for these.
ALPHABETS = {
    "dna": "ACGT",
    "rna": "ACGU",
    "protein": "ACDEFGHIKLMNPQRSTVWY",
}

_PAD = -1


def _resolve_alphabet(alphabet) -> str | None:
    """The letters of ``alphabet`` (a name or a string of distinct letters); None stays None
    (codes are Unicode code points)."""
    if alphabet is None:
        return None
    if not isinstance(alphabet, str) or not alphabet:
        raise TypeError(f"alphabet must be 'dna', 'rna', 'protein' or a non-empty string of "
                        f"letters, got {alphabet!r}")
    letters = ALPHABETS.get(alphabet, alphabet)
    if len(set(letters)) != len(letters):
        raise ValueError(f"alphabet {alphabet!r} repeats a letter")
    return letters


class SequenceSet(KernelInput):
    """A set of strings encoded over one alphabet: the input of the string kernels.

    Attributes
    ----------
    codes : Tensor of int64, shape (n, L)
        ``codes[i, t]`` is the position in ``alphabet`` of the t-th letter of string i
        (its Unicode code point when ``alphabet`` is None); ``-1`` pads past its length.
        L is the longest length.
    lengths : Tensor of int64, shape (n,)
    alphabet : str or None
        The letters, in code order; None for code points.
    dtype : torch.dtype
        The floating dtype of the Gram matrices computed from this set.
    device : torch.device

    Made by :func:`encode`; indexing (``S[idx]``, ``S.take``), :meth:`concat`, ``len`` and
    ``S.to(device, dtype)`` make it a :class:`~torchkern.inputs.KernelInput`.
    """

    def __init__(self, codes: torch.Tensor, lengths: torch.Tensor, alphabet: str | None,
                 dtype: torch.dtype = torch.float64):
        if codes.dim() != 2 or lengths.shape != (codes.shape[0],):
            raise ValueError(f"codes must be (n, L) and lengths (n,), got {tuple(codes.shape)} "
                             f"and {tuple(lengths.shape)}")
        self.codes, self.lengths, self.alphabet = codes.long(), lengths.long(), alphabet
        self.dtype, self.device = dtype, codes.device

    def __len__(self) -> int:
        return self.codes.shape[0]

    @property
    def max_length(self) -> int:
        return self.codes.shape[1]

    def mask(self) -> torch.Tensor:
        """Boolean (n, L): True at the positions inside each string."""
        pos = torch.arange(self.max_length, device=self.device)
        return pos[None, :] < self.lengths[:, None]

    def take(self, idx: torch.Tensor) -> "SequenceSet":
        idx = idx.to(self.device)
        lengths = self.lengths[idx]
        L = int(lengths.max()) if lengths.numel() else 0
        return SequenceSet(self.codes[idx, :L], lengths, self.alphabet, self.dtype)

    @classmethod
    def concat(cls, parts) -> "SequenceSet":
        parts = list(parts)
        for p in parts[1:]:
            parts[0].check_compatible(p, "parts")
        L = max(p.max_length for p in parts)
        codes = torch.cat([torch.nn.functional.pad(p.codes, (0, L - p.max_length), value=_PAD)
                           for p in parts])
        return cls(codes, torch.cat([p.lengths for p in parts]), parts[0].alphabet,
                   parts[0].dtype)

    def check_compatible(self, other, name: str = "X") -> None:
        super().check_compatible(other, name)
        if other.alphabet != self.alphabet:
            raise ValueError(f"{name} is encoded over the alphabet {other.alphabet!r} but the "
                             f"fitted sequences over {self.alphabet!r}")

    def _move(self, device) -> None:
        self.codes, self.lengths = self.codes.to(device), self.lengths.to(device)

    def strings(self) -> list[str]:
        """The strings back as Python ``str``."""
        codes, lengths = self.codes.cpu().numpy(), self.lengths.cpu().tolist()
        if self.alphabet is None:
            return ["".join(map(chr, codes[i, :n])) for i, n in enumerate(lengths)]
        return ["".join(self.alphabet[c] for c in codes[i, :n]) for i, n in enumerate(lengths)]

    def __repr__(self) -> str:
        return (f"SequenceSet(n={len(self)}, max_length={self.max_length}, "
                f"alphabet={self.alphabet!r}, dtype={self.dtype}, device={self.device})")


def _code_points(seqs, name: str):
    """All letters as one array of code points, and each string's start offset."""
    if isinstance(seqs, (str, bytes)):
        raise TypeError(f"{name} must be a list of strings, got a single {type(seqs).__name__}")
    try:
        seqs = list(seqs)
    except TypeError:
        raise TypeError(f"{name} must be a list of strings, got {type(seqs).__name__}") from None
    for i, s in enumerate(seqs):
        if not isinstance(s, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(s).__name__}")
    if not seqs:
        raise ValueError(f"{name} is empty: it must hold at least one sequence")
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    cps = np.frombuffer("".join(seqs).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    return seqs, cps, lengths


def _map_letters(cps, letters: str, seq_of, name: str) -> np.ndarray:
    """Code points -> positions in ``letters``; a letter outside is a ValueError naming the
    sequence and the letter."""
    table_cp = np.array([ord(c) for c in letters], dtype=np.int64)
    order = np.argsort(table_cp)
    pos = np.searchsorted(table_cp[order], cps).clip(0, len(letters) - 1)
    codes = order[pos]
    bad = table_cp[codes] != cps
    if bad.any():
        t = int(np.argmax(bad))
        i = int(seq_of(t))
        raise ValueError(f"{name}[{i}] holds the letter {chr(cps[t])!r}, which is not in the "
                         f"alphabet {letters!r}")
    return codes


def encode(seqs, alphabet="dna", *, dtype: torch.dtype = torch.float64, device=None) -> SequenceSet:
    """Encode strings as a padded integer tensor: a :class:`SequenceSet`.

    Parameters
    ----------
    seqs : list of str
        The sequences (empty strings are allowed).
    alphabet : {"dna", "rna", "protein"}, str or None
        ``"dna"`` = ACGT, ``"rna"`` = ACGU, ``"protein"`` = the 20 standard amino acids
        ACDEFGHIKLMNPQRSTVWY (for these three, lower-case letters are read as upper case),
        or a string of distinct letters (case-sensitive). None encodes Unicode code points
        (any character; what :class:`~torchkern.sequences.Substring` uses).
    dtype : torch.dtype
        Floating dtype of the Gram matrices computed from the set.
    device : torch.device, optional

    Returns
    -------
    SequenceSet

    Raises
    ------
    ValueError
        if a sequence holds a letter outside the alphabet (the message names the sequence's
        index and the letter), or ``seqs`` is empty.

    Cost: O(total length), one vectorized pass.
    """
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch dtype, got {dtype!r}")
    return _encode(seqs, alphabet, dtype, device, "seqs")


def _encode(seqs, alphabet, dtype, device, name: str) -> SequenceSet:
    letters = _resolve_alphabet(alphabet)
    seqs, cps, lengths = _code_points(seqs, name)
    if alphabet in ALPHABETS:
        upper = (cps >= ord("a")) & (cps <= ord("z"))
        cps = np.where(upper, cps - 32, cps)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    seq_of = lambda t: np.searchsorted(starts, t, side="right") - 1  # noqa: E731
    codes_flat = cps if letters is None else _map_letters(cps, letters, seq_of, name)
    n, L = len(seqs), int(lengths.max())
    codes = np.full((n, L), _PAD, dtype=np.int64)
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(cps.size) - np.repeat(starts, lengths)
    codes[rows, cols] = codes_flat
    return SequenceSet(torch.from_numpy(codes).to(device), torch.from_numpy(lengths).to(device),
                       letters, dtype)


def as_sequences(X, alphabet, name: str = "X") -> SequenceSet:
    """``X`` (a list of strings or a :class:`SequenceSet`) as a SequenceSet over ``alphabet``
    (a name, a string of letters, or None for code points). A SequenceSet over another
    alphabet is re-encoded; a letter outside ``alphabet`` is a ValueError."""
    letters = _resolve_alphabet(alphabet)
    if not isinstance(X, SequenceSet):
        if isinstance(X, torch.Tensor) or (isinstance(X, np.ndarray) and X.dtype.kind in "biufc"):
            raise TypeError(f"{name} must be a list of strings or a SequenceSet, got a "
                            f"{type(X).__name__} of dtype {X.dtype}")
        if isinstance(X, KernelInput):
            raise TypeError(f"{name} must be a list of strings or a SequenceSet, got a "
                            f"{type(X).__name__}")
        return _encode(X, alphabet, torch.float64, None, name)
    if X.alphabet == letters:
        return X
    if len(X) == 0:
        raise ValueError(f"{name} is empty: it must hold at least one sequence")
    # Re-encode: old codes -> code points -> new codes (a lookup over the old alphabet).
    mask = X.mask()
    cps = X.codes if X.alphabet is None else torch.tensor(
        [ord(c) for c in X.alphabet], device=X.device)[X.codes.clamp_min(0)]
    flat = cps[mask].cpu().numpy()
    if letters is None:
        new = flat
    else:
        rows = mask.nonzero()[:, 0].cpu().numpy()
        new = _map_letters(flat, letters, lambda t: rows[t], name)
    codes = torch.full_like(X.codes, _PAD)
    codes[mask] = torch.from_numpy(np.ascontiguousarray(new)).to(X.device)
    return SequenceSet(codes, X.lengths, letters, X.dtype)
