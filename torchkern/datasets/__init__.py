"""Readers for real data in standard formats, from local paths (never downloads)."""
from .fasta import read_fasta, read_sequence_csv
from .tu import read_tu

__all__ = ["read_tu", "read_fasta", "read_sequence_csv"]
