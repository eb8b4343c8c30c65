"""Issue 21 for the string kernels: lower case under the named alphabets, alphabet=None
(code points), and the packed encoding (one long string among many short ones), against
brute-force k-mer counts (collections.Counter)."""
import json
import random
import subprocess
import sys
import textwrap
from collections import Counter

import pytest
import torch

from torchkern.sequences import LocalAlignment, Mismatch, Spectrum, Substring, encode

D64 = torch.float64


def _counter_gram(X, Y, k):
    """Σ_u φ_u(x) φ_u(y) with φ = collections.Counter of the k-mers (Python strings)."""
    cx = [Counter(s[i:i + k] for i in range(len(s) - k + 1)) for s in X]
    cy = [Counter(s[i:i + k] for i in range(len(s) - k + 1)) for s in Y]
    return torch.tensor([[float(sum(v * b[u] for u, v in a.items())) for b in cy] for a in cx],
                        dtype=D64)


def _random_strings(n, letters, lo, hi, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(letters) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


def _scramble_case(strings, seed):
    rng = random.Random(seed)
    return ["".join(c.lower() if rng.random() < 0.5 else c for c in s) for s in strings]


@pytest.mark.parametrize("kernel", [
    Spectrum(2, alphabet="protein"), Mismatch(2, 1, alphabet="protein"),
    Substring(2, 0.5, alphabet="protein"), LocalAlignment(0.5, log=True),
    Spectrum(3, alphabet="dna"), Mismatch(3, 1, alphabet="rna")], ids=repr)
def test_lower_case_equals_upper_case(kernel):
    letters = {"dna": "ACGT", "rna": "ACGU"}.get(getattr(kernel, "alphabet", None),
                                                 "ACDEFGHIKLMNPQRSTVWY")
    upper = _random_strings(6, letters, 0, 9, seed=3) + [letters[::-1]]
    lower = _scramble_case(upper, seed=4)[:-1] + [letters[::-1].lower()]
    assert lower != upper
    ref = kernel(upper).to_dense()
    torch.testing.assert_close(kernel(lower).to_dense(), ref, rtol=0, atol=0)
    torch.testing.assert_close(kernel(lower, upper[:3]).to_dense(),
                               kernel(upper, upper[:3]).to_dense(), rtol=0, atol=0)


def test_lower_case_spectrum_values_and_custom_alphabets_stay_case_sensitive():
    # "klk" has the 2-mers kl, lk: K = 2; against KLK both match
    assert Spectrum(2, alphabet="protein")(["klk"], ["KLK"]).to_dense().item() == 2.0
    X = ["klkKLK", "lkl"]
    torch.testing.assert_close(Spectrum(2, alphabet="protein")(X).to_dense(),
                               _counter_gram([s.upper() for s in X], [s.upper() for s in X], 2))
    with pytest.raises(ValueError, match=r"X\[0\].*'k'"):
        Spectrum(2, alphabet="ACDEFGHIKLMNPQRSTVWY")(["klk"])
    with pytest.raises(ValueError, match=r"X\[0\].*'k'"):
        LocalAlignment(substitution=("KL", [[1.0, 0.0], [0.0, 1.0]]))(["klk"])
    # the spec survives set_params (the kernel is rebuilt from its arguments)
    k = Spectrum(2, alphabet="protein").set_params(k=1)
    assert k(["klk"]).to_dense().item() == 5.0


@pytest.mark.parametrize("k", [1, 3, 6, 20])
def test_spectrum_code_points_equals_counter(k):
    # any characters, case-sensitive; k = 20 is past any base-|A| code for code points
    letters = "aAbB\u00e9\u4e2d\U0001F600"
    X = _random_strings(9, letters, 0, 30, seed=k) + ["aaaaaaaaaaaaaaaaaaaaaaaa"]
    Y = _random_strings(4, letters[:4], 0, 25, seed=k + 1) + X[:2]
    kern = Spectrum(k, alphabet=None)
    torch.testing.assert_close(kern(X).to_dense(), _counter_gram(X, X, k), rtol=0, atol=0)
    torch.testing.assert_close(kern(X, Y).to_dense(), _counter_gram(X, Y, k), rtol=0, atol=0)
    torch.testing.assert_close(kern.diag(Y), _counter_gram(Y, Y, k).diag(), rtol=0, atol=0)
    # an encoded set over code points, and a DNA set re-encoded to code points
    S = encode(X, None)
    torch.testing.assert_close(kern(S, Y).to_dense(), _counter_gram(X, Y, k), rtol=0, atol=0)
    D = ["ACGTTGCA", "acgt"]
    torch.testing.assert_close(kern(encode(D, "dna")).to_dense(),
                               _counter_gram([s.upper() for s in D], [s.upper() for s in D], k))


def test_mismatch_without_alphabet_is_an_error():
    with pytest.raises(ValueError, match="finite alphabet"):
        Mismatch(3, 1, alphabet=None)


def test_packed_long_and_short_strings_equal_counter():
    long = _random_strings(1, "ACGT", 3000, 3000, seed=5)[0]
    X = [long] + _random_strings(40, "ACGT", 0, 12, seed=6) + ["", "AC"]
    Y = _random_strings(5, "ACGT", 0, 40, seed=7) + [long[1000:1400]]
    S = encode(X, "dna")
    assert S.flat.shape == (sum(map(len, X)),)      # packed: no padding stored
    for k in (1, 3, 5):
        kern = Spectrum(k)
        ref = _counter_gram(X, Y, k)
        K = kern(S, Y)
        torch.testing.assert_close(K.to_dense(), ref, rtol=0, atol=0)
        torch.testing.assert_close(K.rows([0, 3]), ref[[0, 3]], rtol=0, atol=0)
        torch.testing.assert_close(kern.diag(X), _counter_gram(X, X, k).diag(), rtol=0, atol=0)
        # indexing the packed set (CV splits, Nyström centres) keeps the strings
        idx = torch.tensor([3, 0, 0, 41])
        torch.testing.assert_close(kern(S[idx], Y).to_dense(), ref[idx], rtol=0, atol=0)
    assert S[torch.tensor([41, 0, 2])].strings() == [X[41], X[0], X[2]]
    assert S.codes.shape == (len(X), 3000) and S.codes[1, len(X[1]):].eq(-1).all()


MEMORY = textwrap.dedent("""
    import json, random, resource, torch
    from torchkern.sequences import Mismatch, Spectrum
    rng = random.Random(0)
    out = {{}}
    for name, kern, letters in [("spectrum", Spectrum(3, alphabet="protein"), "ACDEFGHIKLMNPQRSTVWY"),
                                ("mismatch", Mismatch(3, 1, alphabet="dna"), "ACGT")]:
        X = ["".join(rng.choice(letters) for _ in range(100_000))] + [
            "".join(rng.choice(letters) for _ in range(10)) for _ in range(2_000)]
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        K = kern(X)
        v = torch.ones(len(X), dtype=torch.float64)
        out[name] = [float((K @ v)[1]), float(K.diag()[0]), float(K.rows([1]).sum())]
        out[name + "_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print(json.dumps(out))
""")


def test_one_long_string_among_short_ones_allocates_no_padding():
    # 100,000 letters + 2,000 strings of 10: padded to the longest, the codes alone took
    # 1.6 GB and the k-mer windows 6.4 GB; packed, memory follows the 120,000 letters.
    # (Mismatch over DNA: its shared-neighbour matrix over the <= 4^3 k-mers is small, so
    # the growth measured is that of the encoding and the counts.)
    res = subprocess.run([sys.executable, "-c", MEMORY.format()], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert r["spectrum_mb"] < 100 and r["mismatch_mb"] < 100, r
    # row 1 (a 10-letter string) against all: K @ 1 is its row sum
    for name in ("spectrum", "mismatch"):
        assert r[name][0] == r[name][2] and r[name][1] > 0, r


def _mismatch_counter_gram(X, Y, k, m, letters):
    """Σ_u φ_u(x) φ_u(y) over u in A^k, φ_u(x) = Σ over the k-mers α of x (a Counter) of
    [d_H(α, u) ≤ m]."""
    import itertools

    def phi(s):
        c = Counter(s[i:i + k] for i in range(len(s) - k + 1))
        return [sum(n for a, n in c.items() if sum(p != q for p, q in zip(a, u)) <= m)
                for u in itertools.product(letters, repeat=k)]
    fx, fy = [phi(s) for s in X], [phi(s) for s in Y]
    return torch.tensor([[float(sum(a * b for a, b in zip(f, g))) for g in fy] for f in fx],
                        dtype=D64)


def test_packed_mismatch_long_and_short_strings_equal_brute_force():
    long = _random_strings(1, "ACG", 1000, 1000, seed=8)[0]
    X = [long] + _random_strings(25, "ACG", 0, 9, seed=9)
    Y = [long[500:700], "acgga", ""] + X[1:4]
    ref = _mismatch_counter_gram(X, [y.upper() for y in Y], 3, 1, "ACG")
    K = Mismatch(3, 1, alphabet="ACG")(X, [y.upper() for y in Y])
    torch.testing.assert_close(K.to_dense(), ref, rtol=0, atol=0)
    torch.testing.assert_close(Mismatch(3, 1, alphabet="ACG").diag(X),
                               _mismatch_counter_gram(X, X, 3, 1, "ACG").diag(), rtol=0, atol=0)
