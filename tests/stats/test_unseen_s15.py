"""Unusual-but-valid inputs to torchkern.stats, against independent references (dense
NumPy/SciPy sums, brute force)."""
import numpy as np
import pytest
from scipy.spatial.distance import cdist

import torchkern as tk
from torchkern.stats import witness


def _rbf(A, B, ls):
    return np.exp(-cdist(A, B, "sqeuclidean") / (2 * ls**2))


def test_normalized_witness_of_one_empirical_distribution_is_refused():
    """Y a permutation of X (or X itself): μ̂_P − μ̂_Q = 0, and f/‖f‖ was NaN (refused as
    'weights contains NaN', naming no argument) or rounding noise amplified by 1/√(1e-18)
    and returned silently. A small but real witness (a shift of 1e-3) is still
    normalized: the dense f/√(wᵀKw) from NumPy."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 2))
    for Y in (X, X[::-1].copy()):
        with pytest.raises(ValueError, match="witness of X and Y is zero"):
            witness(X, Y, tk.RBF(1.0), normalize=True)
    Y = X + 1e-3
    Z = rng.normal(size=(4, 2))
    P = np.r_[X, Y]
    w = np.r_[np.full(5, 1 / 5), np.full(5, -1 / 5)]
    expected = _rbf(Z, P, 1.0) @ w / np.sqrt(w @ _rbf(P, P, 1.0) @ w)
    f = witness(X, Y, tk.RBF(1.0), normalize=True)
    np.testing.assert_allclose(np.asarray(f(Z).detach()), expected, rtol=1e-7)
    assert float(f.norm()) == pytest.approx(1.0, rel=1e-7)


def test_dtype_mismatches_name_the_arguments():
    """Mixed float32/float64 inputs were refused in terms of the internal names ('X and
    Y' for a mean embedding's query Z, 'K and L' for hsic's X and Y)."""
    import torch
    from torchkern.stats import hsic, mean_embedding
    X = torch.randn(6, 2, dtype=torch.float64)
    k = tk.RBF(1.0)
    mu = mean_embedding(X, k)
    with pytest.raises(TypeError, match="Z has dtype torch.float32"):
        mu(X.float())
    with pytest.raises(TypeError, match="embeddings' points have dtypes"):
        mu.inner(mean_embedding(X.float(), k))
    with pytest.raises(TypeError, match="X and Y must have the same dtype"):
        hsic(X.float(), X, k, tk.RBF(1.0))


def test_default_kernel_of_a_constant_sample_names_it():
    """A constant Y has no median-heuristic bandwidth: the error named no sample. With a
    kernel given the test runs: HSIC of a constant sample is 0 for every pairing, so
    p = 1 (brute force: every statistic ties)."""
    from torchkern.stats import HSICTest, MMDTest
    rng = np.random.default_rng(0)
    X, Yc = rng.normal(size=(10, 2)), np.ones((10, 1))
    with pytest.raises(ValueError, match="^Y: .*pass kernel_y="):
        HSICTest(n_permutations=5, random_state=0).test(X, Yc)
    with pytest.raises(ValueError, match=r"^X and Y \(pooled\): .*pass kernel="):
        MMDTest(n_permutations=5, random_state=0).test(np.ones((3, 2)), np.ones((4, 2)))
    res = HSICTest(tk.RBF(1.0), tk.RBF(1.0), n_permutations=20, random_state=0).test(X, Yc)
    assert float(res.statistic) == pytest.approx(0.0, abs=1e-15)
    assert res.p_value == 1.0


def test_float32_dot_product_statistics_far_from_the_origin_warn():
    """Linear-kernel MMD² is ‖mean X − mean Y‖² and linear HSIC_b is ‖Cov(X, Y)‖²_F
    (closed forms, float64 NumPy). On float32 data 2000 from the origin the Gram entries
    (~4·10⁶) round by ~0.25 and the statistics came out 3–23% (MMD; by the BLAS's summation
    order) and 0.03–0.3% (HSIC) off, silently; now a RuntimeWarning says so. Centered, the same data warn nothing and
    agree to float32 precision."""
    import warnings

    import torch
    from torchkern.stats import MMDTest, hsic, mmd2
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3)) * [3, 1, 0.3]
    Y = rng.normal(size=(100, 3)) * [3, 1, 0.3] + 0.1
    Yh = X[:, :1] + rng.normal(size=(100, 1))
    mmd_ref = ((X.mean(0) - Y.mean(0)) ** 2).sum()
    Xc, Yc = X - X.mean(0), Yh - Yh.mean(0)
    hsic_ref = ((Xc.T @ Yc / 100) ** 2).sum()
    f32 = np.float32
    far = (X + 2000).astype(f32), (Y + 2000).astype(f32), (Yh + 2000).astype(f32)
    with pytest.warns(RuntimeWarning, match="mmd2: the float32 Gram"):
        m = float(mmd2(far[0], far[1], tk.Linear(), "biased"))
    assert abs(m / mmd_ref - 1) > 1e-2
    with pytest.warns(RuntimeWarning) as rec:
        h = float(hsic(far[0], far[2], tk.Linear(), tk.Linear()))
    assert {str(w.message)[:8] for w in rec} == {"hsic (K)", "hsic (L)"}
    assert abs(h / hsic_ref - 1) > 1e-4
    with pytest.warns(RuntimeWarning, match="MMDTest: the float32 Gram"):
        MMDTest(tk.Linear(), n_permutations=5, random_state=0).test(
            torch.as_tensor(far[0]), torch.as_tensor(far[1]))
    shift = X.mean(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        m = float(mmd2((X - shift).astype(f32), (Y - shift).astype(f32), tk.Linear(), "biased"))
        h = float(hsic(Xc.astype(f32), Yc.astype(f32), tk.Linear(), tk.Linear()))
    assert m == pytest.approx(mmd_ref, rel=1e-4)
    assert h == pytest.approx(hsic_ref, rel=1e-5)


def test_witness_and_mean_embedding_of_strings_equal_kmer_count_sums():
    """mmd2 took any kernel input but mean_embedding and witness only (n, d) arrays:
    strings were refused ('X must hold numbers'). The witness of two sets of strings
    under the 3-spectrum kernel against brute force: k(s, t) = Σ_u c_u(s) c_u(t) over
    the 3-mer counts (collections.Counter)."""
    from collections import Counter

    from torchkern.stats import mean_embedding, mmd2
    X = ["ACGTACGT", "ACGGGT", "TTTACG", "GATTACA"]
    Y = ["GGGCCC", "ACGTTT", "CCCGGGA"]
    Z = ["ACGTAC", "GGGCCCGGG", "TTTT"]

    def counts(s):
        return Counter(s[i:i + 3] for i in range(len(s) - 2))

    def k(s, t):
        a, b = counts(s), counts(t)
        return sum(a[u] * b[u] for u in a)

    expected = [np.mean([k(x, z) for x in X]) - np.mean([k(y, z) for y in Y]) for z in Z]
    kern = tk.sequences.Spectrum(3)
    f = witness(X, Y, kern)
    np.testing.assert_allclose(np.asarray(f(Z).detach()), expected, rtol=1e-12)
    P, w = X + Y, np.r_[np.full(4, 1 / 4), np.full(3, -1 / 3)]
    sq = sum(w[i] * w[j] * k(P[i], P[j]) for i in range(7) for j in range(7))
    assert float(f.norm()) ** 2 == pytest.approx(sq, rel=1e-12)
    assert float(mmd2(X, Y, kern, "biased")) == pytest.approx(sq, rel=1e-12)
    mu = mean_embedding(X, kern)
    assert float(mu.inner(mean_embedding(Y, kern))) == pytest.approx(
        np.mean([[k(x, y) for y in Y] for x in X]), rel=1e-12)
    g = witness(X, Y, kern, normalize=True)
    np.testing.assert_allclose(np.asarray(g(Z).detach()), np.array(expected) / np.sqrt(sq),
                               rtol=1e-12)
