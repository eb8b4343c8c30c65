"""SequenceSet and encode: codes, the KernelInput protocol, and errors."""
import numpy as np
import pytest
import torch

from torchkern.inputs import KernelInput, concat, take
from torchkern.sequences import SequenceSet, encode
from torchkern.sequences._encode import ALPHABETS, as_sequences


def test_encode_codes_lengths_and_padding():
    S = encode(["ACGT", "", "gat"], "dna")
    assert isinstance(S, KernelInput) and len(S) == 3 and S.shape == (3,)
    assert S.alphabet == "ACGT" and S.dtype == torch.float64
    assert S.lengths.tolist() == [4, 0, 3]
    # codes are positions in the alphabet; lower case read as upper case; -1 pads
    assert S.codes.tolist() == [[0, 1, 2, 3], [-1, -1, -1, -1], [2, 0, 3, -1]]
    assert S.strings() == ["ACGT", "", "GAT"]


def test_encode_named_and_custom_alphabets():
    assert encode(["ACGU"], "rna").codes.tolist() == [[0, 1, 2, 3]]
    P = encode(["WYAC"], "protein")
    assert P.codes.tolist() == [[ALPHABETS["protein"].index(c) for c in "WYAC"]]
    # a custom alphabet is case-sensitive, in the order given
    assert encode(["baB"], "abB").codes.tolist() == [[1, 0, 2]]
    # None: Unicode code points, any character
    assert encode(["né"], None).codes.tolist() == [[ord("n"), ord("é")]]


def test_letter_outside_alphabet_names_sequence_and_letter():
    with pytest.raises(ValueError, match=r"seqs\[2\].*'N'.*ACGT"):
        encode(["ACGT", "CC", "ACNT"], "dna")
    with pytest.raises(ValueError, match=r"X\[1\].*'B'"):
        as_sequences(["AAC", "CBD"], "protein", "X")
    with pytest.raises(ValueError, match="empty"):
        encode([], "dna")
    with pytest.raises(TypeError, match="list of strings"):
        encode("ACGT", "dna")
    with pytest.raises(TypeError, match=r"seqs\[1\]"):
        encode(["ACGT", 3], "dna")
    with pytest.raises(ValueError, match="repeats"):
        encode(["AB"], "ABA")
    with pytest.raises(TypeError, match="list of strings or a SequenceSet"):
        as_sequences(torch.zeros(3, 2), "dna")


def test_take_concat_to_and_compatibility():
    seqs = ["ACGTAC", "A", "", "GGT", "TTTTTTTT"]
    S = encode(seqs, "dna")
    idx = torch.tensor([4, 0, 0, 2])
    T = take(S, idx)
    assert T.strings() == [seqs[i] for i in idx.tolist()]
    assert S[1:3].strings() == seqs[1:3] and S[1:3].max_length == 1   # padding trimmed
    mask = np.array([True, False, True, False, True])
    assert S[mask].strings() == [s for s, keep in zip(seqs, mask) if keep]
    C = concat([S[[3]], S[[4, 1]]])
    assert C.strings() == ["GGT", "TTTTTTTT", "A"] and C.codes.shape == (3, 8)
    assert S.to(dtype=torch.float32).dtype == torch.float32
    with pytest.raises(ValueError, match="alphabet"):
        S.check_compatible(encode(["ACGU"], "rna"))
    with pytest.raises(ValueError, match="alphabet"):
        concat([S, encode(["ACGU"], "rna")])


def test_reencoding_between_alphabets():
    S = encode(["GATTACA", ""], "dna")
    assert as_sequences(S, "dna") is S
    R = as_sequences(S, "protein")                    # DNA letters are amino-acid letters
    assert R.alphabet == ALPHABETS["protein"] and R.strings() == ["GATTACA", ""]
    assert as_sequences(S, None).codes[0, :3].tolist() == [ord(c) for c in "GAT"]
    with pytest.raises(ValueError, match=r"X\[0\].*'T'.*ACGU"):
        as_sequences(S, "rna", "X")
    assert isinstance(as_sequences(np.array(["AC", "G"]), "dna"), SequenceSet)
