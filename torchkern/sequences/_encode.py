"""Strings as a kernel input: integer codes, packed (all letters one after the other)."""
from __future__ import annotations

import numpy as np
import torch

from ..inputs import KernelInput, as_device, gram_dtype, nonempty_parts

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
        raise TypeError(f"alphabet must be 'dna', 'rna', 'protein', a non-empty string of "
                        f"letters or None, got {alphabet!r}")
    letters = ALPHABETS.get(alphabet, alphabet)
    if len(set(letters)) != len(letters):
        raise ValueError(f"alphabet {alphabet!r} repeats a letter")
    return letters


def _integers(values, name: str) -> torch.Tensor:
    """``values`` (a tensor, array or list) as an integer tensor, else a TypeError naming
    ``name``: float codes were truncated silently (0.5, 1.7, 2.2 read as "ACG"), booleans
    read as 0 and 1, and a list raised AttributeError. Empty ones of any dtype are taken
    (``np.asarray([])`` is float64)."""
    given = type(values).__name__
    if not isinstance(values, torch.Tensor):
        try:
            values = torch.as_tensor(np.asarray(values))
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{name} must be a tensor, array or list of integers, got "
                            f"{given}") from None
    if values.numel() == 0:
        return values.long()
    if values.dtype == torch.bool or values.is_floating_point() or values.is_complex():
        raise TypeError(f"{name} must be a tensor, array or list of integers, got a {given} "
                        f"of dtype {values.dtype}")
    return values


def _starts(lengths: torch.Tensor) -> torch.Tensor:
    """Each string's offset in the packed codes: the exclusive cumulative sum of lengths."""
    return torch.cumsum(lengths, 0) - lengths


class SequenceSet(KernelInput):
    """A set of strings encoded over one alphabet: the input of the string kernels.

    The letters are stored packed, one string after the other, so memory is proportional
    to the total number of letters (one long string among many short ones costs no
    padding).

    Attributes
    ----------
    flat : Tensor of int64, shape (N,)
        The letter codes of all strings concatenated, N = the total length: the position
        of each letter in ``alphabet`` (its Unicode code point when ``alphabet`` is None).
    lengths : Tensor of int64, shape (n,)
    starts : Tensor of int64, shape (n,)
        String i is ``flat[starts[i]:starts[i] + lengths[i]]``.
    alphabet : str or None
        The letters, in code order; None for code points.
    dtype : torch.dtype
        The floating dtype of the Gram matrices computed from this set.
    device : torch.device

    Notes
    -----
    ``codes`` gives the padded (n, L) tensor (``-1`` past each length; built on demand,
    O(n · L) memory) and :meth:`padded` the padded codes of a few strings.
    Made by :func:`encode`; indexing (``S[idx]``, ``S.take``), :meth:`concat`, ``len`` and
    ``S.to(device, dtype)`` make it a :class:`~torchkern.inputs.KernelInput`.
    """

    def __init__(self, codes: torch.Tensor, lengths: torch.Tensor, alphabet: str | None,
                 dtype: torch.dtype = torch.float64):
        codes, lengths = _integers(codes, "codes"), _integers(lengths, "lengths")
        lengths = lengths.long()
        if lengths.dim() != 1:
            raise ValueError(f"lengths must be (n,), got {tuple(lengths.shape)}")
        if codes.dim() == 2:        # padded (n, L): keep the letters inside the lengths
            if codes.shape[0] != lengths.shape[0]:
                raise ValueError(f"codes must be (n, L) and lengths (n,), got "
                                 f"{tuple(codes.shape)} and {tuple(lengths.shape)}")
            if lengths.numel() and int(lengths.max()) > codes.shape[1]:
                raise ValueError(f"lengths must be <= the width of the padded codes "
                                 f"{tuple(codes.shape)}, got a length {int(lengths.max())}")
            pos = torch.arange(codes.shape[1], device=codes.device)
            codes = codes[pos[None, :] < lengths[:, None]]
        elif codes.dim() != 1 or codes.numel() != int(lengths.sum()):
            raise ValueError(f"codes must be packed (total length,) or padded (n, L), got "
                             f"{tuple(codes.shape)} for lengths summing to {int(lengths.sum())}")
        if lengths.numel() and int(lengths.min()) < 0:
            raise ValueError(f"lengths must be >= 0, got a length {int(lengths.min())}")
        codes = codes.long()
        top = len(alphabet) if alphabet is not None else 0x110000  # letters or code points
        if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >= top):
            raise ValueError(f"codes must lie in [0, {top}) (positions in the alphabet "
                             f"{alphabet!r}), got the range [{int(codes.min())}, "
                             f"{int(codes.max())}]")
        self.flat, self.lengths, self.alphabet = codes, lengths, alphabet
        self.starts = _starts(lengths)
        self.dtype, self.device = gram_dtype(dtype), codes.device

    def __len__(self) -> int:
        return self.lengths.shape[0]

    @property
    def max_length(self) -> int:
        return int(self.lengths.max()) if len(self) else 0

    @property
    def codes(self) -> torch.Tensor:
        """The padded (n, L) int64 codes, ``-1`` past each length (L = the longest)."""
        return self.padded(torch.arange(len(self), device=self.device), self.max_length)

    def padded(self, idx: torch.Tensor, L: int) -> torch.Tensor:
        """The codes of the strings ``idx`` as a (len(idx), L) tensor padded with ``-1``
        (longer strings cut at L): O(len(idx) · L)."""
        pos = torch.arange(L, device=self.device)
        inside = pos[None, :] < self.lengths[idx][:, None]
        if self.flat.numel() == 0:
            return torch.full(inside.shape, _PAD, dtype=torch.long, device=self.device)
        at = (self.starts[idx][:, None] + pos).clamp_max(self.flat.numel() - 1)
        return torch.where(inside, self.flat[at], _PAD)

    def mask(self) -> torch.Tensor:
        """Boolean (n, L): True at the positions inside each string."""
        pos = torch.arange(self.max_length, device=self.device)
        return pos[None, :] < self.lengths[:, None]

    def string_index(self) -> torch.Tensor:
        """(N,): the string each packed letter belongs to."""
        return torch.repeat_interleave(torch.arange(len(self), device=self.device), self.lengths)

    def take(self, idx: torch.Tensor) -> "SequenceSet":
        idx = idx.to(self.device)
        lengths = self.lengths[idx]
        # Each kept letter: its string's old start + its offset within the string.
        total = int(lengths.sum())
        offset = torch.arange(total, device=self.device) - torch.repeat_interleave(
            _starts(lengths), lengths, output_size=total)
        at = torch.repeat_interleave(self.starts[idx], lengths, output_size=total) + offset
        return SequenceSet(self.flat[at], lengths, self.alphabet, self.dtype)

    @classmethod
    def concat(cls, parts) -> "SequenceSet":
        parts = nonempty_parts(parts)
        for p in parts[1:]:
            parts[0].check_compatible(p, "parts")
        return cls(torch.cat([p.flat for p in parts]), torch.cat([p.lengths for p in parts]),
                   parts[0].alphabet, parts[0].dtype)

    def check_compatible(self, other, name: str = "X") -> None:
        super().check_compatible(other, name)
        if other.alphabet != self.alphabet:
            raise ValueError(f"{name} is encoded over the alphabet {other.alphabet!r} but the "
                             f"fitted sequences over {self.alphabet!r}")

    def _move(self, device) -> None:
        self.flat, self.lengths = self.flat.to(device), self.lengths.to(device)
        self.starts = self.starts.to(device)

    def strings(self) -> list[str]:
        """The strings back as Python ``str``."""
        flat = self.flat.cpu().numpy()
        text = ("".join(map(chr, flat)) if self.alphabet is None
                else "".join(np.array(list(self.alphabet))[flat]) if flat.size else "")
        ends = np.cumsum(self.lengths.cpu().numpy())
        return [text[e - n:e] for e, n in zip(ends.tolist(), self.lengths.cpu().tolist())]

    def __repr__(self) -> str:
        return (f"SequenceSet(n={len(self)}, max_length={self.max_length}, "
                f"total_length={self.flat.numel()}, alphabet={self.alphabet!r}, "
                f"dtype={self.dtype}, device={self.device})")


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
    """Encode strings as integer codes: a :class:`SequenceSet` (packed, O(total length)).

    Parameters
    ----------
    seqs : list of str
        The sequences (empty strings are allowed).
    alphabet : {"dna", "rna", "protein"}, str or None
        ``"dna"`` = ACGT, ``"rna"`` = ACGU, ``"protein"`` = the 20 standard amino acids
        ACDEFGHIKLMNPQRSTVWY (for these three, lower-case letters are read as upper case),
        or a string of distinct letters (case-sensitive). None encodes Unicode code points
        (any character, case-sensitive).
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
    return _encode(seqs, alphabet, dtype, device, "seqs")


def _folds_case(alphabet) -> bool:
    """Whether lower-case letters are read as upper case: for the named alphabets."""
    return isinstance(alphabet, str) and alphabet in ALPHABETS


def _to_codes(cps: np.ndarray, letters: str | None, fold_case: bool, seq_of, name: str):
    """Code points -> codes over ``letters`` (upper-cased first if ``fold_case``)."""
    if fold_case:
        lower = (cps >= ord("a")) & (cps <= ord("z"))
        cps = np.where(lower, cps - 32, cps)
    return cps if letters is None else _map_letters(cps, letters, seq_of, name)


def _encode(seqs, alphabet, dtype, device, name: str, fold_case: bool | None = None
            ) -> SequenceSet:
    letters = _resolve_alphabet(alphabet)
    device = None if device is None else as_device(device)
    fold_case = _folds_case(alphabet) if fold_case is None else fold_case
    seqs, cps, lengths = _code_points(seqs, name)
    starts = np.cumsum(lengths) - lengths
    seq_of = lambda t: np.searchsorted(starts, t, side="right") - 1  # noqa: E731
    flat = _to_codes(cps, letters, fold_case, seq_of, name)
    return SequenceSet(torch.from_numpy(np.ascontiguousarray(flat)).to(device),
                       torch.from_numpy(lengths).to(device), letters, dtype)


def as_sequences(X, alphabet, name: str = "X", fold_case: bool | None = None) -> SequenceSet:
    """``X`` (a list of strings or a :class:`SequenceSet`) as a SequenceSet over ``alphabet``
    (a name, a string of letters, or None for code points). A SequenceSet over another
    alphabet is re-encoded; a letter outside ``alphabet`` is a ValueError. ``fold_case``
    (default: for the named alphabets) reads lower-case letters as upper case."""
    letters = _resolve_alphabet(alphabet)
    fold_case = _folds_case(alphabet) if fold_case is None else fold_case
    if not isinstance(X, SequenceSet):
        if isinstance(X, torch.Tensor) or (isinstance(X, np.ndarray) and X.dtype.kind in "biufc"):
            raise TypeError(f"{name} must be a list of strings or a SequenceSet, got a "
                            f"{type(X).__name__} of dtype {X.dtype}")
        if isinstance(X, KernelInput):
            raise TypeError(f"{name} must be a list of strings or a SequenceSet, got a "
                            f"{type(X).__name__}")
        return _encode(X, letters, torch.float64, None, name, fold_case)
    if X.alphabet == letters:
        return X
    if len(X) == 0:
        raise ValueError(f"{name} is empty: it must hold at least one sequence")
    # Re-encode: old codes -> code points -> new codes (a lookup over the old alphabet).
    cps = X.flat if X.alphabet is None else torch.tensor(
        [ord(c) for c in X.alphabet], device=X.device)[X.flat]
    seq_of = X.string_index().cpu().numpy()
    new = _to_codes(cps.cpu().numpy(), letters, fold_case, lambda t: seq_of[t], name)
    return SequenceSet(torch.from_numpy(np.ascontiguousarray(new)).to(X.device), X.lengths,
                       letters, X.dtype)
