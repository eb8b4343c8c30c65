"""Readers for sequence files: FASTA, and labelled sequences in scikit-learn's bundled-CSV
layout (the layout of the antimicrobial-peptide sets shipped in ``modlamp/data``)."""
from __future__ import annotations

import csv
import io
import os

import torch

__all__ = ["read_fasta", "read_sequence_csv"]


def _read_text(path) -> str:
    """The file as UTF-8 text (a byte-order mark dropped); bytes that are not UTF-8 are a
    ValueError naming the file, the line and the column."""
    with open(os.fspath(path), "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - data.rfind(b"\n", 0, e.start)
        raise ValueError(f"{path}: line {line}, column {column}: byte 0x{data[e.start]:02x} "
                         f"is not UTF-8 text ({e.reason}); convert the file to UTF-8 (or "
                         f"ASCII)") from None


def read_fasta(path) -> tuple[list[str], list[str]]:
    """Read a FASTA file.

    Each record is a header line ``>name description`` followed by sequence lines, which
    are joined (whitespace removed). Blank lines and ``;`` comment lines are skipped.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    names : list of str
        The header lines without the ``>``.
    sequences : list of str

    Raises
    ------
    ValueError
        if the file holds no record, sequence text comes before the first header, or bytes
        are not UTF-8 text (the message gives the file and the line number).
    """
    names, chunks = [], []
    for lineno, line in enumerate(io.StringIO(_read_text(path), newline=None), 1):
        line = line.strip()
        if not line or line.startswith(";"):
            continue
        if line.startswith(">"):
            names.append(line[1:].strip())
            chunks.append([])
        elif not names:
            raise ValueError(f"{path}: line {lineno} holds sequence text before the first "
                             f"'>' header; is this a FASTA file?")
        else:
            chunks[-1].append("".join(line.split()))
    if not names:
        raise ValueError(f"{path}: no FASTA record (no line starts with '>')")
    return names, ["".join(c) for c in chunks]


def read_sequence_csv(path) -> tuple[list[str], torch.Tensor, list[str]]:
    """Read labelled sequences in scikit-learn's bundled-CSV layout.

    The first line is ``n_samples, n_features, name_0, name_1, ...`` (the class names);
    each following line is ``sequence, label`` with an integer label indexing the class
    names. This is the layout of the data sets shipped in ``modlamp/data`` (e.g.
    ``AMPvsUniProt.csv``: 5,200 peptides, 2,600 of each class).

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    sequences : list of str
    y : Tensor of int64, shape (n,)
    target_names : list of str

    Raises
    ------
    ValueError
        if the header is malformed, a row does not hold a sequence and an integer label in
        range, the number of rows differs from the header's count, or bytes are not UTF-8
        text (the message gives the file and the line number).
    """
    text = io.StringIO(_read_text(path), newline="")
    reader = csv.reader(text)
    # (line number, cells) of the non-blank rows: messages name the file's own line
    numbered = [(reader.line_num, [c.strip() for c in r]) for r in reader]
    numbered = [(i, r) for i, r in numbered if any(r)]
    rows = [r for _, r in numbered]
    if not rows or len(rows[0]) < 3 or not rows[0][0].isdigit():
        raise ValueError(f"{path}: the first line must be 'n_samples, n_features, "
                         f"class names...', got {rows[0] if rows else 'an empty file'}")
    n, names = int(rows[0][0]), rows[0][2:]
    sequences, labels = [], []
    for lineno, r in numbered[1:]:
        if len(r) < 2 or not r[1].lstrip("-").isdigit() or not 0 <= int(r[1]) < len(names):
            raise ValueError(f"{path}: line {lineno} must be 'sequence, label' with a label "
                             f"in 0..{len(names) - 1}, got {r}")
        sequences.append(r[0])
        labels.append(int(r[1]))
    if len(sequences) != n:
        raise ValueError(f"{path}: the header announces {n} sequences, the file holds "
                         f"{len(sequences)}")
    return sequences, torch.tensor(labels, dtype=torch.long), names
