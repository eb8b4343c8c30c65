"""Sweep s18 of the string kernels: attributes set after construction, checked or
honoured; one-number hyperparameters."""
import itertools
from collections import Counter

import numpy as np
import pytest
import torch

from torchkern.sequences import LocalAlignment, Mismatch, Spectrum, Substring

S = ["ACGT", "AAC", "GGT", "TTAG"]


def _mismatch_brute_force(x, y, k, m, letters):
    """Σ_u φ_u(x) φ_u(y), φ_u = #k-mers of the string within Hamming distance m of u."""
    def phi(s):
        c = Counter()
        for i in range(len(s) - k + 1):
            for u in itertools.product(letters, repeat=k):
                if sum(a != b for a, b in zip(s[i:i + k], u)) <= m:
                    c[u] += 1
        return c
    px, py = phi(x), phi(y)
    return float(sum(px[u] * py[u] for u in px))


def test_mismatch_alphabet_set_after_construction_is_the_one_used():
    # the Hamming balls kept the constructor's |A| = 4: K(ACGT, ACGT) read 37, not 129
    k = Mismatch(k=2, m=1)
    k.alphabet = "protein"
    letters = "ACDEFGHIKLMNPQRSTVWY"
    ref = torch.tensor([[_mismatch_brute_force(a, b, 2, 1, letters) for b in S] for a in S],
                       dtype=torch.float64)
    torch.testing.assert_close(k(S).to_dense(), ref)


@pytest.mark.parametrize("make, attr, value, match", [
    (lambda: Spectrum(2), "k", 0, "k"),               # RuntimeError naming nothing
    (lambda: Spectrum(2), "k", 2.5, "k"),             # TypeError on slice indices
    (lambda: Mismatch(2, 1), "m", -1, "m"),           # silently a zero Gram matrix
    (lambda: Substring(2), "k", 0, "k"),              # silently values
    (lambda: Substring(2), "k", -2, "k"),             # RuntimeError naming nothing
    (lambda: LocalAlignment(), "gap_open", -5.0, "gap_open"),   # silently values
])
@pytest.mark.parametrize("call", ["gram", "diag"])
def test_string_kernel_attributes_set_after_construction_are_checked(make, attr, value,
                                                                     match, call):
    k = make()
    setattr(k, attr, value)
    with pytest.raises(ValueError, match=match):
        k(S).to_dense() if call == "gram" else k.diag(S)


@pytest.mark.parametrize("make, name", [
    (lambda v: Substring(2, lam=v), "lam"),
    (lambda v: LocalAlignment(beta=v), "beta"),
])
def test_decay_and_inverse_temperature_must_be_one_number(make, name):
    # two values were stored; the first call then failed in float() naming nothing
    with pytest.raises(ValueError, match=name):
        make(torch.tensor([0.5, 1.0]))


@pytest.mark.parametrize("codes, lengths, name", [
    (torch.tensor([0.5, 1.7, 2.2]), torch.tensor([3]), "codes"),   # read as "ACG"
    (torch.tensor([True, False]), torch.tensor([2]), "codes"),     # read as "CA"
    (torch.tensor([0, 1, 2]), torch.tensor([1.5, 1.6]), "lengths"),
])
def test_sequence_set_codes_and_lengths_must_be_integers(codes, lengths, name):
    from torchkern.sequences import SequenceSet
    with pytest.raises(TypeError, match=name):
        SequenceSet(codes, lengths, "ACGT")


def test_sequence_set_from_lists_of_codes():
    # a list raised AttributeError ('list' object has no attribute 'long')
    from torchkern.sequences import SequenceSet
    S = SequenceSet([0, 1, 2, 3, 3], [3, 2], "ACGT")
    assert S.strings() == ["ACG", "TT"]
    torch.testing.assert_close(Spectrum(1)(S).to_dense(), Spectrum(1)(["ACG", "TT"]).to_dense())


def test_local_alignment_set_params_keeps_a_custom_substitution_matrix():
    # the rebuild took the default: BLOSUM62 replaced the matrix silently (K(ACCA, ACCA)
    # 5.8e5 instead of 421)
    scores = torch.tensor([[2.0, -1.0], [-1.0, 3.0]])
    X = ["ACCA", "CA", "AAC"]
    k = LocalAlignment(beta=0.5, substitution=("AC", scores), gap_open=1.0, gap_extend=0.5)
    k.set_params(gap_open=2.0)
    ref = LocalAlignment(beta=0.5, substitution=("AC", scores), gap_open=2.0, gap_extend=0.5)
    torch.testing.assert_close(k(X).to_dense(), ref(X).to_dense())
    k = LocalAlignment(beta=0.5).set_params(log=True)     # the named matrix folds case
    torch.testing.assert_close(k(["acd"]).to_dense(),
                               LocalAlignment(0.5, log=True)(["ACD"]).to_dense())


def test_local_alignment_substitution_set_after_construction_is_the_one_used():
    # la.substitution = ... was stored and ignored: BLOSUM62 stayed (K(ACCA, ACCA) 5.7e5,
    # not 352)
    import math
    from tests.sequences.test_unseen_s15 import _la_log_brute
    scores = [[2.0, -1.0], [-1.0, 3.0]]
    X = ["ACCA", "CA", "AAC"]
    k = LocalAlignment(beta=0.5)
    k.substitution = ("AC", torch.tensor(scores))
    ref = torch.tensor([[math.exp(_la_log_brute(x, y, "AC", scores, 0.5, 11.0, 1.0))
                         for y in X] for x in X], dtype=torch.float64)
    torch.testing.assert_close(k(X).to_dense(), ref)
    assert k.substitution[0] == "AC"
    with pytest.raises(ValueError, match="substitution"):
        k.substitution = "pam250"
    k.substitution = "blosum62"        # back to the named matrix, which folds case
    torch.testing.assert_close(k(["acd"]).to_dense(), LocalAlignment(0.5)(["ACD"]).to_dense())


@pytest.mark.parametrize("codes", [[], np.zeros(0), torch.zeros(0), torch.zeros(2, 0)])
def test_sequence_set_of_empty_strings_from_empty_codes(codes):
    # np.asarray([]) is float64: 'codes must be a tensor of integers, got dtype float64'
    from torchkern.sequences import SequenceSet
    S = SequenceSet(codes, [0, 0], "ACGT")
    assert S.strings() == ["", ""]
    torch.testing.assert_close(Spectrum(1)(S).to_dense(), torch.zeros(2, 2, dtype=torch.float64))


def test_sequence_set_integer_message_names_the_type_given():
    from torchkern.sequences import SequenceSet
    with pytest.raises(TypeError, match=r"codes must .*integers.*got a list of dtype"):
        SequenceSet([0.5, 1.5], [2], "ACGT")
