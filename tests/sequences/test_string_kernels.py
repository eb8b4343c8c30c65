"""String kernels against brute-force enumeration of their definitions, exact values from
the papers, positive semi-definiteness, edge cases, and use inside estimators."""
import itertools
import math
import random

import numpy as np
import pytest
import torch

from torchkern.gram import KernelMatrix
from torchkern.sequences import (LocalAlignment, Mismatch, Spectrum, Substring, blosum62,
                                 encode)
from torchkern.sequences._pairs import decayed_cumsum
from torchkern.sequences.mismatch import shared_neighbours

D64 = torch.float64


def _random_strings(n, letters, lo, hi, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(letters) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


def _gram_of_features(features):
    """Σ_u φ_u(x) φ_u(y) over dict features (the definitions, summed directly)."""
    return torch.tensor([[sum(v * g.get(u, 0.0) for u, v in f.items()) for g in features]
                         for f in features], dtype=D64)


def _min_eig(K):
    K = K.to_dense() if isinstance(K, KernelMatrix) else K
    return float(torch.linalg.eigvalsh((K + K.T) / 2).min())


# -- brute-force feature maps ------------------------------------------------------------

def _spectrum_phi(s, k):
    out = {}
    for i in range(len(s) - k + 1):
        out[s[i:i + k]] = out.get(s[i:i + k], 0) + 1
    return out


def _mismatch_phi(s, k, m, letters):
    # every u in A^k: the k-mers of s within Hamming distance m
    kmers = [s[i:i + k] for i in range(len(s) - k + 1)]
    return {"".join(u): sum(sum(a != b for a, b in zip(w, u)) <= m for w in kmers)
            for u in itertools.product(letters, repeat=k)}


def _substring_phi(s, k, lam):
    # every index tuple i_1 < ... < i_k: λ^(i_k - i_1 + 1) on the subsequence it spells
    out = {}
    for idx in itertools.combinations(range(len(s)), k):
        u = "".join(s[i] for i in idx)
        out[u] = out.get(u, 0.0) + lam ** (idx[-1] - idx[0] + 1)
    return out


def _la_brute(x, y, beta, gap_open, gap_extend):
    """Σ over all local alignments (sets of aligned pairs increasing in both strings, the
    empty one included) of exp(β · score), score = substitutions − affine gap costs."""
    letters, S = blosum62()
    S = S.tolist()

    def g(n):
        return 0.0 if n == 0 else gap_open + gap_extend * (n - 1)

    total = 1.0
    for n in range(1, min(len(x), len(y)) + 1):
        for I in itertools.combinations(range(len(x)), n):
            for J in itertools.combinations(range(len(y)), n):
                s = sum(S[letters.index(x[a])][letters.index(y[b])] for a, b in zip(I, J))
                s -= sum(g(I[t + 1] - I[t] - 1) + g(J[t + 1] - J[t] - 1) for t in range(n - 1))
                total += math.exp(beta * s)
    return total


# -- spectrum ----------------------------------------------------------------------------

@pytest.mark.parametrize("k, expected", [(1, 21.0), (2, 10.0), (3, 6.0), (4, 4.0)])
def test_spectrum_exact_values(k, expected):
    K = Spectrum(k=k, alphabet="dna")(["ACGTTTACGA"], ["AGTTTACG"])
    assert K.to_dense().item() == expected


def test_spectrum_3mers_of_a_peptide():
    # CGGSLIAMMWFGV has 13 - 3 + 1 = 11 3-mers, all distinct: K(x, x) = 11
    K = Spectrum(k=3, alphabet="protein")(["CGGSLIAMMWFGV"])
    assert K.diag().item() == 11.0 and K.to_dense().item() == 11.0


def test_spectrum_equals_brute_force_and_stays_lazy():
    X = _random_strings(12, "ACGT", 0, 15, seed=1)
    Y = X[:5] + _random_strings(3, "ACGT", 2, 9, seed=2)
    ref = _gram_of_features([_spectrum_phi(s, 3) for s in X + Y])
    k = Spectrum(k=3)
    K = k(X, Y)
    assert K.backend == "features" and K.shape == (12, 8)
    torch.testing.assert_close(K.to_dense(), ref[:12, 12:], rtol=0, atol=0)
    torch.testing.assert_close(k(X).to_dense(), ref[:12, :12], rtol=0, atol=0)
    V = torch.randn(8, 3, dtype=D64)
    torch.testing.assert_close(K @ V, ref[:12, 12:] @ V)
    torch.testing.assert_close(K.T @ torch.ones(12, dtype=D64), ref[12:, :12].sum(1))
    torch.testing.assert_close(k.diag(X), ref.diag()[:12], rtol=0, atol=0)
    torch.testing.assert_close(K.rows([3, 0]), ref[[3, 0]][:, 12:], rtol=0, atol=0)


def test_spectrum_normalized_is_cosine_with_zero_rows():
    X = ["ACGTAC", "A", "", "ACG", "TTTTT"]
    ref = _gram_of_features([_spectrum_phi(s, 2) for s in X])
    d = ref.diag().sqrt()
    cos = torch.where(d[:, None] * d[None] > 0, ref / (d[:, None] * d[None]), torch.zeros_like(ref))
    torch.testing.assert_close(Spectrum(2, normalize=True)(X).to_dense(), cos)
    assert Spectrum(2, normalize=True).diag(X).tolist() == [1.0, 0.0, 0.0, 1.0, 1.0]


# -- mismatch ----------------------------------------------------------------------------

@pytest.mark.parametrize("letters, k, m", [("ACGT", 3, 1), ("ACGT", 4, 2), ("ACGT", 3, 0),
                                           ("AC", 3, 1), ("ACDEF", 2, 1)])
def test_mismatch_equals_brute_force(letters, k, m):
    X = _random_strings(10, letters, 0, 12, seed=k + 10 * m)
    ref = _gram_of_features([_mismatch_phi(s, k, m, letters) for s in X])
    kern = Mismatch(k=k, m=m, alphabet=letters)
    torch.testing.assert_close(kern(X).to_dense(), ref, rtol=0, atol=0)
    torch.testing.assert_close(kern(X, X[3:7]).to_dense(), ref[:, 3:7], rtol=0, atol=0)
    torch.testing.assert_close(kern.diag(X), ref.diag(), rtol=0, atol=0)
    v = torch.randn(10, dtype=D64)
    torch.testing.assert_close(kern(X) @ v, ref @ v)


def _hamming_ball(w, m, letters):
    """Every word within Hamming distance m of w, once each (enumerated position by
    position: independent of the kernel's block search and its closed-form counts)."""
    out = {w}
    for _ in range(m):
        out |= {v[:p] + a + v[p + 1:] for v in out for p in range(len(w)) for a in letters}
    return out


def _mismatch_phi_by_balls(s, k, m, letters):
    # φ_u(x) = #{k-mers α of x : u in N_m(α)}: each k-mer adds 1 to every word of its ball
    out = {}
    for i in range(len(s) - k + 1):
        for u in _hamming_ball(s[i:i + k], m, letters):
            out[u] = out.get(u, 0) + 1
    return out


@pytest.mark.parametrize("letters, k, m, n, hi", [
    ("ACGT", 3, 1, 12, 14), ("ACGT", 4, 2, 12, 14), ("ACDEFGHIKLMNPQRSTVWY", 3, 1, 10, 12),
    ("ACDEFGHIKLMNPQRSTVWY", 4, 2, 6, 9), ("ACDEFGHIKLMNPQRSTVWY", 5, 2, 3, 8)])
def test_mismatch_equals_hamming_ball_enumeration(letters, k, m, n, hi):
    # shares k-mers on purpose (substrings of one another), so that many pairs of k-mers
    # lie within 2m of each other, across the blocks of the pair search
    base = _random_strings(n, letters, 0, hi, seed=k + 7 * m)
    X = base + [s[1:] + letters[0] for s in base[:n // 2]]
    ref = _gram_of_features([_mismatch_phi_by_balls(s, k, m, letters) for s in X])
    alphabet = "protein" if len(letters) == 20 else letters
    kern = Mismatch(k=k, m=m, alphabet=alphabet)
    torch.testing.assert_close(kern(X).to_dense(), ref, rtol=0, atol=0)
    torch.testing.assert_close(kern(X[::2], X[1::2]).to_dense(), ref[::2, 1::2], rtol=0, atol=0)
    torch.testing.assert_close(kern.diag(X), ref.diag(), rtol=0, atol=0)


def test_mismatch_shared_neighbour_counts_by_enumeration():
    # h(d) = |N_m(u) ∩ N_m(v)| for d_H(u, v) = d, against enumeration of A^k
    for A, k, m in [(4, 3, 1), (4, 4, 2), (5, 3, 1), (3, 5, 2)]:
        words = list(itertools.product(range(A), repeat=k))
        u = (0,) * k
        for d in range(2 * m + 1):
            if d > k:
                continue
            v = (1,) * d + (0,) * (k - d)
            count = sum(sum(a != b for a, b in zip(w, u)) <= m and
                        sum(a != b for a, b in zip(w, v)) <= m for w in words)
            assert shared_neighbours(k, m, A)[d] == count


def test_mismatch_with_m0_is_spectrum():
    X = _random_strings(8, "ACDEFGHIKLMNPQRSTVWY", 3, 20, seed=5)
    torch.testing.assert_close(Mismatch(3, 0, "protein")(X).to_dense(),
                               Spectrum(3, "protein")(X).to_dense())


# -- substring ---------------------------------------------------------------------------

def test_substring_exact_values():
    lam = 0.7
    K = Substring(k=2, lam=lam)(["cat", "car", "bat", "bar"]).to_dense()
    assert K[0, 0].item() == pytest.approx(2 * lam ** 4 + lam ** 6, rel=1e-15)
    assert K[1, 1].item() == pytest.approx(2 * lam ** 4 + lam ** 6, rel=1e-15)
    assert K[0, 1].item() == pytest.approx(lam ** 4, rel=1e-15)
    assert K[0, 3].item() == 0.0


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("lam", [0.5, 1.0])
def test_substring_equals_brute_force(k, lam):
    X = _random_strings(10, "abc", 0, 8, seed=k)
    ref = _gram_of_features([_substring_phi(s, k, lam) for s in X])
    kern = Substring(k=k, lam=lam)
    torch.testing.assert_close(kern(X).to_dense(), ref, rtol=1e-13, atol=0)
    torch.testing.assert_close(kern(X[:4], X).to_dense(), ref[:4], rtol=1e-13, atol=0)
    torch.testing.assert_close(kern.diag(X), ref.diag(), rtol=1e-13, atol=0)


def test_substring_long_strings_take_segmented_sums():
    # λ^-(p+q) would overflow float64 here: the segmented decayed sums must agree with
    # the definition on short strings and stay finite on long ones.
    lam = 1e-3
    X = _random_strings(6, "ab", 1, 7, seed=3)
    ref = _gram_of_features([_substring_phi(s, 2, lam) for s in X])
    torch.testing.assert_close(Substring(2, lam)(X).to_dense(), ref, rtol=1e-12, atol=0)
    long = _random_strings(3, "ab", 150, 200, seed=4)
    K = Substring(2, 0.05, normalize=True)(long).to_dense()
    assert bool(torch.isfinite(K).all()) and torch.allclose(K.diag(), torch.ones(3, dtype=D64))


def test_decayed_cumsum_against_loop():
    b = torch.rand(3, 50, dtype=D64)
    for lam in (0.3, 1.0, 2.5):
        ref = torch.zeros_like(b)
        for t in range(50):
            ref[:, t] = b[:, t] + (lam * ref[:, t - 1] if t else 0)
        torch.testing.assert_close(decayed_cumsum(b, lam, 1, max_log_scale=5.0), ref)


# -- local alignment ---------------------------------------------------------------------

@pytest.mark.parametrize("beta, gap_open, gap_extend", [(0.5, 11.0, 1.0), (0.3, 2.0, 0.5),
                                                        (1.0, 0.0, 0.0)])
def test_local_alignment_equals_sum_over_alignments(beta, gap_open, gap_extend):
    X = _random_strings(6, "ARNDCQW", 0, 4, seed=int(10 * beta))
    ref = torch.tensor([[_la_brute(a, b, beta, gap_open, gap_extend) for b in X] for a in X],
                       dtype=D64)
    kw = dict(gap_open=gap_open, gap_extend=gap_extend)
    K = LocalAlignment(beta, **kw)
    torch.testing.assert_close(K(X).to_dense(), ref, rtol=1e-12, atol=0)
    torch.testing.assert_close(K(X[:2], X).to_dense(), ref[:2], rtol=1e-12, atol=0)
    torch.testing.assert_close(K.diag(X), ref.diag(), rtol=1e-12, atol=0)
    d = ref.diag().sqrt()
    torch.testing.assert_close(LocalAlignment(beta, normalize=True, **kw)(X).to_dense(),
                               ref / d[:, None] / d[None], rtol=1e-12, atol=0)
    torch.testing.assert_close(LocalAlignment(beta, log=True, **kw)(X).to_dense(),
                               ref.log() / beta, rtol=1e-12, atol=1e-12)
    ld = ref.diag().log()
    norm_log = torch.where(ld[:, None] * ld[None] > 0, ref.log() / (ld[:, None] * ld[None]).sqrt(),
                           torch.zeros_like(ref))
    torch.testing.assert_close(LocalAlignment(beta, log=True, normalize=True, **kw)(X).to_dense(),
                               norm_log, rtol=1e-12, atol=1e-12)


def test_local_alignment_scaled_and_log_space_evaluations_agree(monkeypatch):
    import torchkern.sequences.local_alignment as la
    X = _random_strings(8, "ACDEFGHIKLMNPQRSTVWY", 5, 40, seed=7)
    direct = LocalAlignment(0.5, log=True)(X).to_dense()
    monkeypatch.setattr(la, "_SCALED_SPAN", -1.0)        # force the log-space DP
    torch.testing.assert_close(LocalAlignment(0.5, log=True)(X).to_dense(), direct,
                               rtol=1e-12, atol=0)


def test_local_alignment_long_sequences_stay_in_range():
    X = _random_strings(3, "ACDEFGHIKLMNPQRSTVWY", 80, 90, seed=8)
    X.append(X[0])
    K = LocalAlignment(2.0, normalize=True)(X).to_dense()     # log space, K_LA ~ e^900
    assert bool(torch.isfinite(K).all()) and K[0, 3].item() == pytest.approx(1.0, rel=1e-12)
    assert _min_eig(K) > -1e-12
    with pytest.raises(ValueError, match="log=True"):
        LocalAlignment(2.0)(X[:1])


def test_blosum62_published_values():
    letters, S = blosum62()
    assert letters == "ARNDCQEGHILKMFPSTWYVBZX*" and S.shape == (24, 24)
    assert torch.equal(S, S.T)
    at = lambda a, b: S[letters.index(a), letters.index(b)].item()  # noqa: E731
    pairs = [("A", "A"), ("W", "W"), ("C", "C"), ("W", "C"), ("E", "Z")]
    assert [at(a, b) for a, b in pairs] == [4, 11, 9, -2, 4]
    # the letter kernel exp(βS) over the 20 amino acids is p.d. (LA kernel p.d.)
    assert float(torch.linalg.eigvalsh(torch.exp(0.5 * S[:20, :20])).min()) > 0


# -- shared properties -------------------------------------------------------------------

def test_grams_are_psd():
    dna = _random_strings(30, "ACGT", 0, 25, seed=11)
    prot = _random_strings(20, "ACDEFGHIKLMNPQRSTVWY", 3, 30, seed=12)
    for K in (Spectrum(3)(dna), Mismatch(3, 1)(dna), Substring(3, 0.6)(dna),
              Spectrum(2, normalize=True)(dna), LocalAlignment(0.5, normalize=True)(prot)):
        assert _min_eig(K) > -1e-10 * max(1.0, float(K.diag().max()))


def test_edge_cases_empty_and_short_strings():
    X = ["", "AC", "ACGTACGT"]
    for kern in (Spectrum(3), Mismatch(3, 1), Substring(3, 0.5)):
        K = kern(X).to_dense()
        assert K[0].abs().sum() == 0 and K[1].abs().sum() == 0    # no k-mers / 3-subsequences
        assert K[2, 2] > 0
        assert kern(["", ""]).to_dense().abs().sum() == 0          # nothing to count at all
    # the empty alignment: K_LA(x, "") = 1
    assert LocalAlignment(0.5)([""], ["ACW"]).to_dense().item() == 1.0
    assert LocalAlignment(0.5).diag(["", "A"]).tolist() == [1.0, pytest.approx(1 + math.e ** 2)]
    with pytest.raises(ValueError, match=r"X\[1\].*'N'"):
        Spectrum(3)(["ACGT", "ACNT"])
    with pytest.raises(ValueError, match=r"Y\[0\].*'J'"):
        LocalAlignment(0.5)(["ACW"], ["J"])


def test_bad_hyperparameters():
    with pytest.raises(ValueError, match="k must be an int"):
        Spectrum(0)
    with pytest.raises(ValueError, match="m must be an int"):
        Mismatch(3, 4)
    with pytest.raises(ValueError, match="too long"):
        Mismatch(40, 1, "protein")  # Spectrum codes long k-mers by rank; Mismatch decodes them
    with pytest.raises(ValueError, match="lam"):
        Substring(2, -0.5)
    with pytest.raises(ValueError, match="gap_open"):
        LocalAlignment(0.5, gap_open=-1)
    with pytest.raises(ValueError, match="symmetric"):
        LocalAlignment(0.5, substitution=("AB", [[1, 0], [2, 1]]))
    with pytest.raises(TypeError, match="alphabet"):
        Spectrum(3, alphabet=3)


def test_encoded_input_and_alphabet_agreement():
    seqs = _random_strings(6, "ACGT", 2, 10, seed=13)
    S = encode(seqs, "dna")
    torch.testing.assert_close(Spectrum(2)(S).to_dense(), Spectrum(2)(seqs).to_dense())
    # a SequenceSet over another alphabet is re-encoded, not misread
    torch.testing.assert_close(Spectrum(2, "protein")(S).to_dense(), Spectrum(2)(seqs).to_dense())
    torch.testing.assert_close(Substring(2, 0.5)(S).to_dense(), Substring(2, 0.5)(seqs).to_dense())
    assert Spectrum(2)(encode(seqs, "dna", dtype=torch.float32)).dtype == torch.float32


def test_svc_on_strings_matches_precomputed_gram():
    from sklearn.svm import SVC as SkSVC
    from torchkern.supervised import SVC
    rng = random.Random(0)
    pos = ["".join(rng.choice("KKRLLW") for _ in range(rng.randint(8, 16))) for _ in range(30)]
    neg = ["".join(rng.choice("DEGSTA") for _ in range(rng.randint(8, 16))) for _ in range(30)]
    X, y = pos + neg, torch.tensor([1] * 30 + [0] * 30)
    kern = Spectrum(2, "protein", normalize=True)
    model = SVC(kernel=kern, C=1.0, tol=1e-6).fit(X[::2], y[::2])
    sk = SkSVC(kernel="precomputed", C=1.0, tol=1e-6)
    sk.fit(kern(X[::2]).to_dense().numpy(), y[::2].numpy())
    ref = sk.decision_function(kern(X[1::2], X[::2]).to_dense().numpy())
    np.testing.assert_allclose(np.asarray(model.decision_function(X[1::2])), ref, atol=1e-4)
