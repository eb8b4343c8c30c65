"""String kernels for biological sequences.

Inputs are lists of Python strings or a :class:`SequenceSet` made by :func:`encode` (the
int64 letter codes of all strings packed one after the other, and their lengths, on any
device).

- :class:`Spectrum` — k-mer counts (Leslie et al. 2002), sparse features.
- :class:`Mismatch` — k-mers up to m mismatches (Leslie et al. 2004), sparse features.
- :class:`Substring` — gap-weighted subsequences (Lodhi et al. 2002), batched DP.
- :class:`LocalAlignment` — the local alignment kernel (Saigo et al. 2004), batched DP in
  log space; :func:`blosum62` is the substitution matrix it uses by default.
"""
from ._encode import SequenceSet, encode
from .local_alignment import LocalAlignment, blosum62
from .mismatch import Mismatch
from .spectrum import Spectrum
from .substring import Substring

__all__ = ["SequenceSet", "encode", "Spectrum", "Mismatch", "Substring",
           "LocalAlignment", "blosum62"]
