import itertools
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from sklearn.base import clone

import torchkern
from torchkern.approx import Nystroem
from torchkern.stats import HSICTest, MMDTest, hsic, mmd2

LS = 0.9


def gram_np(A, B, ls=LS):
    return np.exp(-((A[:, None, :] - B[None, :, :]) ** 2).sum(-1) / (2 * ls**2))


def mmd2_np(X, Y, estimator):
    Kxx, Kyy, Kxy = gram_np(X, X), gram_np(Y, Y), gram_np(X, Y)
    n, m = len(X), len(Y)
    if estimator == "biased":
        return Kxx.mean() + Kyy.mean() - 2 * Kxy.mean()
    return ((Kxx.sum() - np.trace(Kxx)) / (n * (n - 1))
            + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1)) - 2 * Kxy.mean())


def assert_same_sets(got, ref, tol=1e-12):
    got, ref = np.asarray(got), np.asarray(ref)
    assert np.abs(got[:, None] - ref[None, :]).min(1).max() < tol  # every draw is a split
    assert np.abs(ref[:, None] - got[None, :]).min(1).max() < tol  # every split was drawn


@pytest.mark.parametrize("estimator", ["unbiased", "biased"])
def test_mmd_null_is_the_statistic_of_relabelled_splits(estimator):
    # n = 3, m = 4: the 35 ways of choosing which 3 of the 7 pooled points form "X".
    g = torch.Generator().manual_seed(7)
    X = torch.randn(3, 2, generator=g, dtype=torch.float64)
    Y = torch.randn(4, 2, generator=g, dtype=torch.float64) + 0.7
    k = torchkern.RBF(LS)
    P = 3000
    res = MMDTest(k, n_permutations=P, estimator=estimator, random_state=0).test(X, Y)
    assert res.statistic.item() == pytest.approx(mmd2(X, Y, k, estimator).item(), rel=1e-12)
    assert res.null_distribution.shape == (P,)

    Z = torch.cat([X, Y]).numpy()
    splits = []
    for idx in itertools.combinations(range(7), 3):
        rest = [i for i in range(7) if i not in idx]
        splits.append(mmd2_np(Z[list(idx)], Z[rest], estimator))
    splits = np.array(splits)
    assert_same_sets(res.null_distribution.numpy(), splits)

    # The p-value estimates the exact permutation p-value (uniform over the 35 splits).
    exact = (splits >= res.statistic.item() - 1e-12).mean()
    assert res.p_value == pytest.approx(exact, abs=4 * np.sqrt(exact * (1 - exact) / P) + 2 / P)
    assert res.reject == (res.p_value <= 0.05)


def test_mmd_test_is_calibrated_under_the_null():
    # 200 repetitions under H0 (n = m = 200, d = 5), 200 permutations each, default
    # median-heuristic kernel: the rejection rate at α = 0.05 must be near 0.05.
    g = torch.Generator().manual_seed(8)
    rejections = 0
    for rep in range(200):
        X = torch.randn(200, 5, generator=g, dtype=torch.float64)
        Y = torch.randn(200, 5, generator=g, dtype=torch.float64)
        rejections += MMDTest(n_permutations=200, random_state=rep).test(X, Y).reject
    assert 0.02 <= rejections / 200 <= 0.09


def test_mmd_test_has_power_against_a_mean_shift():
    g = torch.Generator().manual_seed(9)
    rejections = 0
    for rep in range(50):
        X = torch.randn(300, 5, generator=g, dtype=torch.float64)
        Y = torch.randn(300, 5, generator=g, dtype=torch.float64)
        Y[:, 0] += 0.5
        rejections += MMDTest(n_permutations=200, random_state=rep).test(X, Y).reject
    assert rejections / 50 > 0.9


def test_mmd_test_lazy_backend_matches_dense(monkeypatch):
    monkeypatch.setattr(torchkern.config, "block_memory_mb", 0.01)
    g = torch.Generator().manual_seed(10)
    X = torch.randn(40, 3, generator=g, dtype=torch.float64)
    Y = torch.randn(30, 3, generator=g, dtype=torch.float64) + 0.3
    k = torchkern.RBF(1.2)
    dense = MMDTest(k, n_permutations=100, random_state=3, backend="dense").test(X, Y)
    lazy = MMDTest(k, n_permutations=100, random_state=3, backend="blocked").test(X, Y)
    torch.testing.assert_close(lazy.null_distribution, dense.null_distribution,
                               rtol=1e-10, atol=1e-13)
    assert lazy.p_value == dense.p_value


def test_mmd_test_float32_matches_float64():
    g = torch.Generator().manual_seed(11)
    X = torch.randn(100, 2, generator=g, dtype=torch.float64)
    Y = torch.randn(100, 2, generator=g, dtype=torch.float64) + 0.2
    k = torchkern.RBF(1.0)
    r64 = MMDTest(k, n_permutations=200, random_state=0).test(X, Y)
    r32 = MMDTest(k, n_permutations=200, random_state=0).test(X.float(), Y.float())
    assert r32.statistic.dtype == torch.float32
    torch.testing.assert_close(r32.null_distribution.double(), r64.null_distribution,
                               rtol=0, atol=1e-6)


def hsic_np(K, L, estimator):
    n = len(K)
    if estimator == "biased":
        H = np.eye(n) - 1.0 / n
        return np.trace(K @ H @ L @ H) / n**2
    total = 0.0
    tuples = list(itertools.permutations(range(n), 4))
    for i, j, q, r in tuples:
        total += K[i, j] * L[i, j] + K[i, j] * L[q, r] - 2 * K[i, j] * L[i, q]
    return total / len(tuples)


@pytest.mark.parametrize("estimator", ["biased", "unbiased"])
def test_hsic_null_is_the_statistic_of_repaired_samples(estimator):
    # n = 5: the 120 re-pairings of y with x.
    g = torch.Generator().manual_seed(12)
    X = torch.randn(5, 2, generator=g, dtype=torch.float64)
    Y = X[:, :1] ** 2 + 0.2 * torch.randn(5, 1, generator=g, dtype=torch.float64)
    kx, ky = torchkern.RBF(LS), torchkern.RBF(0.5)
    P = 3000
    res = HSICTest(kx, ky, n_permutations=P, estimator=estimator, random_state=0).test(X, Y)
    assert res.statistic.item() == pytest.approx(hsic(X, Y, kx, ky, estimator).item(), rel=1e-12)

    K = gram_np(X.numpy(), X.numpy(), LS)
    L = gram_np(Y.numpy(), Y.numpy(), 0.5)
    perms = [list(p) for p in itertools.permutations(range(5))]
    ref = np.array([hsic_np(K, L[np.ix_(p, p)], estimator) for p in perms])
    assert_same_sets(res.null_distribution.numpy(), ref)


def test_hsic_test_is_calibrated_under_independence():
    g = torch.Generator().manual_seed(13)
    rejections = 0
    for rep in range(200):
        X = torch.randn(100, 2, generator=g, dtype=torch.float64)
        Y = torch.randn(100, 1, generator=g, dtype=torch.float64)
        rejections += HSICTest(n_permutations=200, random_state=rep).test(X, Y).reject
    assert 0.02 <= rejections / 200 <= 0.09


@pytest.mark.parametrize("estimator", ["biased", "unbiased"])
def test_hsic_test_detects_a_nonlinear_dependence(estimator):
    # y = x² + noise is uncorrelated with x, yet dependent.
    g = torch.Generator().manual_seed(14)
    rejections = 0
    for rep in range(30):
        X = torch.randn(100, 1, generator=g, dtype=torch.float64)
        Y = X**2 + torch.randn(100, 1, generator=g, dtype=torch.float64)
        rejections += HSICTest(n_permutations=200, estimator=estimator,
                               random_state=rep).test(X, Y).reject
    assert rejections / 30 > 0.9


def hsic_closed_form_np(K, L, estimator):
    """tr(KHLH)/n², or Song et al. (2012, eq. 5) on the zero-diagonal matrices."""
    n = len(K)
    if estimator == "biased":
        H = np.eye(n) - 1.0 / n
        return np.trace(K @ H @ L @ H) / n**2
    K, L = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    one = np.ones(n)
    return (np.trace(K @ L) + (one @ K @ one) * (one @ L @ one) / ((n - 1) * (n - 2))
            - 2.0 / (n - 2) * (one @ K @ L @ one)) / (n * (n - 3))


@pytest.mark.parametrize("estimator", ["biased", "unbiased"])
def test_nystrom_with_every_point_as_a_center_is_the_exact_test(estimator):
    # m = n: Φ_XΦ_Xᵀ = K up to round-off; the permutations are the same draws (same seed).
    g = torch.Generator().manual_seed(16)
    X = torch.randn(60, 2, generator=g, dtype=torch.float64)
    Y = X[:, :1] ** 2 + torch.randn(60, 1, generator=g, dtype=torch.float64)
    kw = dict(n_permutations=300, estimator=estimator, random_state=3)
    exact = HSICTest(method="exact", **kw).test(X, Y)
    ny = HSICTest(method="nystrom", n_features=60, **kw).test(X, Y)
    scale = exact.null_distribution.abs().max().item()
    assert ny.statistic.item() == pytest.approx(exact.statistic.item(), rel=1e-8)
    torch.testing.assert_close(ny.null_distribution, exact.null_distribution,
                               rtol=1e-8, atol=1e-9 * scale)
    assert ny.p_value == exact.p_value


@pytest.mark.parametrize("estimator", ["biased", "unbiased"])
def test_nystrom_statistic_is_hsic_of_the_approximate_grams(estimator):
    # m < n: every draw must be the estimator on the dense low-rank Grams ΦΦᵀ, ΨΨᵀ
    # (uncentered: the feature form centers them, the unbiased U-statistic must not care).
    # The Nyström centers come from the generator after the P permutations (documented).
    n, m, P, seed = 40, 12, 30, 5
    g = torch.Generator().manual_seed(17)
    X = torch.randn(n, 2, generator=g, dtype=torch.float64)
    Y = torch.sin(2 * X[:, :1]) + 0.3 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    kx, ky = torchkern.RBF(LS), torchkern.RBF(0.5)
    res = HSICTest(kx, ky, n_permutations=P, estimator=estimator, random_state=seed,
                   method="nystrom", n_features=m).test(X, Y)

    gen = torch.Generator().manual_seed(seed)
    perms = [torch.randperm(n, generator=gen).numpy() for _ in range(P)]
    Phi = Nystroem(kx, n_components=m, random_state=gen).fit(X).transform(X).numpy()
    Psi = Nystroem(ky, n_components=m, random_state=gen).fit(Y).transform(Y).numpy()
    K, L = Phi @ Phi.T, Psi @ Psi.T
    assert np.abs(K - gram_np(X.numpy(), X.numpy())).max() > 1e-4  # a real approximation
    stat = hsic_closed_form_np(K, L, estimator)
    null = [hsic_closed_form_np(K, L[np.ix_(p, p)], estimator) for p in perms]
    assert res.statistic.item() == pytest.approx(stat, rel=1e-10)
    np.testing.assert_allclose(res.null_distribution.numpy(), null, rtol=1e-9,
                               atol=1e-12 * np.abs(null).max())


def test_nystrom_test_is_calibrated_under_independence():
    g = torch.Generator().manual_seed(18)
    rejections = 0
    for rep in range(200):
        X = torch.randn(200, 2, generator=g, dtype=torch.float64)
        Y = torch.randn(200, 1, generator=g, dtype=torch.float64)
        rejections += HSICTest(n_permutations=200, random_state=rep, method="nystrom",
                               n_features=50).test(X, Y).reject
    assert 0.02 <= rejections / 200 <= 0.09


@pytest.mark.parametrize("estimator", ["biased", "unbiased"])
def test_nystrom_test_detects_a_nonlinear_dependence(estimator):
    g = torch.Generator().manual_seed(19)
    rejections = 0
    for rep in range(30):
        X = torch.randn(200, 1, generator=g, dtype=torch.float64)
        Y = X**2 + torch.randn(200, 1, generator=g, dtype=torch.float64)
        rejections += HSICTest(n_permutations=200, estimator=estimator, random_state=rep,
                               method="nystrom", n_features=50).test(X, Y).reject
    assert rejections / 30 > 0.9


def test_method_auto_and_n_features():
    g = torch.Generator().manual_seed(20)
    X = torch.randn(2001, 1, generator=g, dtype=torch.float64)
    Y = X + torch.randn(2001, 1, generator=g, dtype=torch.float64)
    t = HSICTest(n_permutations=20, random_state=0)
    assert t.test(X[:30], Y[:30]).statistic.item() == pytest.approx(
        hsic(X[:30], Y[:30], t.kernel_x_, t.kernel_y_).item(), rel=1e-12)
    assert t.method_ == "exact" and t.n_features_ is None
    assert t.test(X, Y).reject and t.method_ == "nystrom" and t.n_features_ == 100
    t = HSICTest(n_permutations=5, random_state=0, method="nystrom", n_features=500)
    t.test(X[:30], Y[:30])
    assert t.n_features_ == 30  # capped at n


def test_nystrom_float32_matches_float64():
    # Linear kernels: Nyström is exact (rank d) in both dtypes, so the comparison sees only
    # the float32 products. (With an RBF the two dtypes keep different numbers of K_ZZ
    # eigenvalues — rcond scales with eps — hence different features.)
    g = torch.Generator().manual_seed(21)
    X = torch.randn(500, 2, generator=g, dtype=torch.float64)
    Y = X[:, :1] + torch.randn(500, 3, generator=g, dtype=torch.float64)
    t = HSICTest(torchkern.Linear(), torchkern.Linear(), n_permutations=100, random_state=0,
                 method="nystrom", n_features=40)
    r64, r32 = t.test(X, Y), t.test(X.float(), Y.float())
    assert r32.statistic.dtype == torch.float32
    torch.testing.assert_close(r32.null_distribution.double(), r64.null_distribution,
                               rtol=1e-4, atol=1e-4 * r64.null_distribution.abs().max().item())


NYSTROM_MEMORY_CODE = textwrap.dedent("""
    import json, time
    import torch
    from torchkern.stats import HSICTest

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))

    torch.set_num_threads(1)
    n = {n}
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 2, generator=g)
    Y = X[:, :1] ** 2 + torch.randn(n, 1, generator=g)
    HSICTest(n_permutations=2, random_state=0, method="nystrom").test(X[:500], Y[:500])
    with open("/proc/self/clear_refs", "w") as f:  # reset the peak-RSS mark (VmHWM)
        f.write("5")
    base = status("VmRSS")
    t = time.time()
    test = HSICTest(n_permutations=20, random_state=0)
    res = test.test(X, Y)
    peak = status("VmHWM")
    print(json.dumps(dict(extra=peak - base, seconds=time.time() - t, method=test.method_,
                          m=test.n_features_, stat=res.statistic.item(), p=res.p_value)))
""")


def test_nystrom_test_at_100k_points_allocates_no_gram_matrix():
    # n = 100,000 (d = 2, float32): one n × n float32 Gram matrix is 40 GB. The Nyström
    # test holds two n × 100 feature matrices (40 MB each) and one gathered row chunk
    # (≤ 2²² entries).
    n = 100_000
    # glibc raises its mmap threshold after each large free, so freed blocks stay in the
    # heap and the peak RSS depended on the order of allocations (160 to 310 MB across
    # machines for the same code); a fixed threshold returns every large block on free and
    # the peak RSS is the peak of live memory.
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    out = subprocess.run([sys.executable, "-c", NYSTROM_MEMORY_CODE.format(n=n)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["method"] == "nystrom" and res["m"] == 100, res
    assert res["p"] == pytest.approx(1 / 21), res  # y = x² + noise: strongly dependent
    # Measured: 109 MB (the two feature matrices, 76 MB; 21 permutations, 17 MB; one
    # gathered chunk, 16 MB). Before the features were written in place and their float64
    # sums taken by row chunks it was 197 MB (a concatenated copy and a float64 copy).
    assert res["extra"] < 160 * 2**20, res  # < 0.4 % of n² float32


def test_reproducible_and_clonable():
    g = torch.Generator().manual_seed(15)
    X = torch.randn(30, 2, generator=g, dtype=torch.float64)
    Y = torch.randn(30, 2, generator=g, dtype=torch.float64)
    t = MMDTest(n_permutations=50, random_state=4)
    a, b = t.test(X, Y), clone(t).test(X, Y)
    assert torch.equal(a.null_distribution, b.null_distribution) and a.p_value == b.p_value
    assert isinstance(t.kernel_, torchkern.RBF)
    h = HSICTest(n_permutations=50, random_state=4)
    assert torch.equal(h.test(X, Y).null_distribution, clone(h).test(X, Y).null_distribution)
    assert clone(h).get_params()["n_permutations"] == 50


def test_bad_input():
    X = torch.randn(10, 2)
    with pytest.raises(ValueError, match="same number of features"):
        MMDTest().test(X, torch.randn(10, 3))
    with pytest.raises(ValueError, match="n_permutations"):
        MMDTest(n_permutations=0).test(X, X)
    with pytest.raises(ValueError, match="alpha"):
        MMDTest(alpha=1.5).test(X, X)
    with pytest.raises(ValueError, match="estimator"):
        MMDTest(estimator="linear").test(X, X)
    with pytest.raises(ValueError, match="at least 2"):
        MMDTest().test(X, X[:1])
    with pytest.raises(ValueError, match="same number of"):
        HSICTest().test(X, torch.randn(9, 1))
    with pytest.raises(ValueError, match="at least 4"):
        HSICTest(estimator="unbiased").test(X[:3], X[:3])
    with pytest.raises(TypeError, match="kernel_x"):
        HSICTest(kernel_x="rbf").test(X, X)
    with pytest.raises(ValueError, match="method"):
        HSICTest(method="fast").test(X, X)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="n_features"):
            HSICTest(method="nystrom", n_features=bad).test(X, X)
