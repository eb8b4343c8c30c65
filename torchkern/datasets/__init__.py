"""Readers for real data in standard formats, from local paths (never downloads)."""
from .tu import read_tu

__all__ = ["read_tu"]
