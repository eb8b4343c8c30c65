import numpy as np
import pytest
import torch
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import RBF as SkRBF

import torchkern
from torchkern import GaussianProcessRegressor


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)
    noise = rng.uniform(0.01, 0.5, n)
    return X, y, noise, rng.uniform(-3, 3, (10, 2))


@pytest.mark.parametrize("normalize_y", [False, True])
@pytest.mark.parametrize("method", ["cholesky", "cg"])
def test_per_sample_noise_equals_sklearn_alpha_array(method, normalize_y):
    X, y, noise, Xt = _data()
    sk = SkGPR(SkRBF(1.3), alpha=noise, optimizer=None, normalize_y=normalize_y).fit(X, y)
    m, s = sk.predict(Xt, return_std=True)
    _, c = sk.predict(Xt, return_cov=True)
    gp = GaussianProcessRegressor(torchkern.RBF(1.3), noise=torch.tensor(noise),
                                  method=method, normalize_y=normalize_y, tol=1e-12,
                                  random_state=0).fit(X, y)
    mm, ss = gp.predict(Xt, return_std=True)
    _, cc = gp.predict(Xt, return_cov=True)
    np.testing.assert_allclose(np.asarray(mm), m, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(ss), s, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(cc), c, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(gp.noise_), noise, rtol=0)
    lml = float(gp.log_marginal_likelihood())
    if method == "cholesky":
        assert lml == pytest.approx(sk.log_marginal_likelihood_value_, rel=1e-10)
    else:  # SLQ on A whitened by L Lᵀ + diag(noise), of full rank here: exact
        assert gp.log_marginal_likelihood_std_error() < 1e-8
        assert lml == pytest.approx(sk.log_marginal_likelihood_value_, abs=1e-6)
    # the scalar noise is not what was fitted
    assert not np.allclose(np.asarray(GaussianProcessRegressor(
        torchkern.RBF(1.3), noise=float(noise.mean())).fit(X, y).predict(Xt)), m, atol=1e-6)


def test_per_sample_noise_two_targets_and_list():
    X, y, noise, Xt = _data(seed=1)
    Y = np.c_[y, np.cos(X[:, 1])]
    sk = SkGPR(SkRBF(0.9), alpha=noise, optimizer=None).fit(X, Y)
    gp = GaussianProcessRegressor(torchkern.RBF(0.9), noise=list(noise)).fit(X, Y)
    np.testing.assert_allclose(np.asarray(gp.predict(Xt)), sk.predict(Xt), rtol=1e-8,
                               atol=1e-10)
    assert float(gp.log_marginal_likelihood()) == pytest.approx(
        sk.log_marginal_likelihood_value_, rel=1e-10)


def test_per_sample_noise_bad_input():
    X, y, noise, _ = _data(n=20)
    with pytest.raises(ValueError, match=r"noise must be a float or have shape \(20,\), got "
                                         r"\(19,\)"):
        GaussianProcessRegressor(noise=noise[:-1]).fit(X, y)
    with pytest.raises(ValueError, match="noise must be finite and >= 0"):
        GaussianProcessRegressor(noise=-noise).fit(X, y)
    with pytest.raises(ValueError, match="noise must be > 0 with method='cg'"):
        GaussianProcessRegressor(noise=np.r_[0.0, noise[1:]], method="cg").fit(X, y)
    with pytest.raises(ValueError, match="noise_prior needs a learned noise"):
        GaussianProcessRegressor(noise=noise, noise_prior=torch.distributions.Gamma(
            1.1, 0.05)).fit(X, y, optimize=True)
    fixed = torchkern.RBF(1.0)
    fixed.requires_grad_(False)
    with pytest.raises(ValueError, match="kernel's hyperparameters only"):
        GaussianProcessRegressor(fixed, noise=noise).fit(X, y, optimize=True)


def _reachable_kernel_inputs(root):
    """Every KernelInput reachable from ``root`` through object references (not root)."""
    import gc
    import types

    from torchkern.inputs import KernelInput
    seen, stack, found = {id(root)}, list(gc.get_referents(root)), []
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(o))
        if isinstance(o, KernelInput):
            found.append(o)
        stack.extend(gc.get_referents(o))
    return found


@pytest.mark.parametrize("estimator", ["SVC", "SVR"])
def test_graph_support_vectors_hold_only_the_support_graphs(estimator):
    from torch_geometric.data import Data

    from torchkern.graphs import WeisfeilerLehman
    rng = np.random.default_rng(0)
    graphs, y = [], []
    for _ in range(80):
        n = int(rng.integers(4, 20))
        ei = torch.tensor(rng.integers(0, n, (2, 2 * n)))
        graphs.append(Data(x=torch.tensor(rng.integers(0, 3, (n, 1))),
                           edge_index=torch.cat([ei, ei.flip(0)], 1), num_nodes=n))
        y.append(float(n > 11))
    est = getattr(torchkern, estimator)(kernel=WeisfeilerLehman(n_iter=2), C=0.1).fit(graphs, y)
    sv = est.support_vectors_
    n_sv = int(est.support_.numel())
    assert len(sv) == n_sv == int(est.n_support_.sum()) < 80
    # the support graphs only: no other (e.g. the whole training) set behind them
    assert [len(o) for o in _reachable_kernel_inputs(sv)] == []
    # the decision function is Σ dual_coef k(x, sv) + b over the support graphs of the
    # training list (dense reference from the kernel on the support graphs themselves)
    K = WeisfeilerLehman(n_iter=2)(graphs[:15], [graphs[int(i)] for i in est.support_])
    ref = K.to_dense() @ torch.as_tensor(est.dual_coef_[0], dtype=torch.float64) \
        + float(est.intercept_[0])
    out = est.decision_function(graphs[:15]) if estimator == "SVC" else est.predict(graphs[:15])
    np.testing.assert_allclose(np.asarray(out), ref.numpy(), rtol=1e-10, atol=1e-10)


def test_per_sample_noise_nan_names_the_entry():
    X, y, noise, _ = _data(n=20)
    noise[5] = np.nan
    with pytest.raises(ValueError, match=r"noise\[5\] = nan"):
        GaussianProcessRegressor(noise=noise).fit(X, y)


def test_bad_sample_weight_names_the_entry():
    # check_sample_weight (which the GP's per-sample noise now shares) names the first bad
    # entry; it said only "sample_weight must be finite and >= 0"
    X, y, _, _ = _data(n=20)
    w = np.ones(20)
    w[3] = -1.0
    with pytest.raises(ValueError, match=r"sample_weight must be finite and >= 0, got "
                                         r"sample_weight\[3\] = -1\.0"):
        torchkern.KernelRidge(alpha=0.1).fit(X, y, sample_weight=w)


@pytest.mark.parametrize("spec", ["lml", {"objective": "map"}, "auto", "loo", "gcv",
                                  {"objective": "holdout"}, {}])
def test_per_sample_noise_learn_kernel_refused_naming_noise(spec):
    # 'lml' / 'map' would replace the array by a learned scalar; 'loo', 'gcv', 'holdout'
    # (and 'auto', {} = 'loo') were refused as "the estimator's alpha is array([0.05...,"
    # naming alpha and printing the whole array
    X, y, noise, _ = _data(n=20)
    gp = GaussianProcessRegressor(torchkern.RBF(1.0), noise=noise)
    match = r"per-sample noise \(an array of shape \(20,\)\).*objective='alignment'"
    with pytest.raises(ValueError, match=match):
        gp.fit(X, y, learn_kernel=spec)
    with pytest.raises(ValueError, match=match):
        torchkern.learning.learn_kernel(gp, X, y, **({"objective": spec}
                                                     if isinstance(spec, str) else spec))


def test_per_sample_noise_standalone_learn_kernel_keeps_the_array():
    # learn_kernel(gp, ..., objective='lml') set gp.noise to the learned scalar (1e-5);
    # 'alignment' learns the kernel and keeps the array
    X, y, noise, _ = _data(n=20)
    gp = GaussianProcessRegressor(torchkern.RBF(1.0), noise=np.full(20, 0.1))
    with pytest.raises(ValueError, match="would replace the per-sample noise"):
        torchkern.learning.learn_kernel(gp, X, y, objective="lml")
    np.testing.assert_array_equal(gp.noise, np.full(20, 0.1))
    torchkern.learning.learn_kernel(gp, X, y, objective="alignment")
    np.testing.assert_array_equal(np.asarray(gp.noise_), np.full(20, 0.1))


def test_learn_kernel_array_alpha_message_names_alpha_without_the_array():
    X, y, _, _ = _data(n=20)
    est = torchkern.KernelRidge(torchkern.RBF(1.0), alpha=np.full(20, 0.1))
    with pytest.raises(ValueError, match=r"alpha must be a float, got an array of shape "
                                         r"\(20,\)$"):
        torchkern.learning.learn_kernel(est, X, y, objective="loo")


def test_per_sample_noise_optimize_learns_the_kernel_as_sklearn():
    # scikit-learn keeps an alpha array fixed and learns the kernel: the same optimum
    from sklearn.gaussian_process.kernels import ConstantKernel
    g = np.random.default_rng(0)
    X = g.uniform(-3, 3, (80, 2))
    noise = g.uniform(0.01, 0.3, 80)
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + np.sqrt(noise) * g.standard_normal(80)
    sk = SkGPR(ConstantKernel() * SkRBF(1.0), alpha=noise, random_state=0).fit(X, y)
    gp = GaussianProcessRegressor(1.0 * torchkern.RBF(1.0), noise=noise).fit(X, y,
                                                                            optimize=True)
    assert float(gp.log_marginal_likelihood()) == pytest.approx(
        sk.log_marginal_likelihood_value_, rel=1e-8)
    theta = np.exp(sk.kernel_.theta)
    assert float(gp.kernel_.outputscale.detach()) == pytest.approx(theta[0], rel=1e-4)
    assert float(gp.kernel_.base.lengthscale.detach()) == pytest.approx(theta[1], rel=1e-4)
    np.testing.assert_array_equal(np.asarray(gp.noise_), noise)
    Xt = g.uniform(-3, 3, (5, 2))
    np.testing.assert_allclose(np.asarray(gp.predict(Xt)), sk.predict(Xt), rtol=1e-5,
                               atol=1e-7)


def test_svc_break_ties_as_sklearn():
    from sklearn.svm import SVC as SkSVC
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(size=(20, 2)) + [0, 2], rng.normal(size=(20, 2)) + [2, -1],
              rng.normal(size=(20, 2)) + [-2, -1]]
    y = np.repeat([0, 1, 2], 20)
    Q = rng.uniform(-4, 4, (4000, 2))
    ours = torchkern.SVC(torchkern.RBF(1.0), tol=1e-8, break_ties=True).fit(X, y)
    ref = SkSVC(gamma=0.5, tol=1e-8, break_ties=True).fit(X, y)
    np.testing.assert_array_equal(np.asarray(ours.predict(Q)), ref.predict(Q))
    # the tied votes (a cycle of three pairwise wins) are where it differs from the vote
    votes = SkSVC(gamma=0.5, tol=1e-8).fit(X, y).predict(Q)
    assert (ref.predict(Q) != votes).sum() > 0
    with pytest.raises(ValueError, match="break_ties must be False"):
        torchkern.SVC(torchkern.RBF(1.0), break_ties=True,
                      decision_function_shape="ovo").fit(X, y).predict(Q[:3])
    with pytest.raises(TypeError, match="break_ties"):
        torchkern.SVC(torchkern.RBF(1.0), break_ties="yes").fit(X, y)


def test_per_sample_noise_cg_log_likelihood_equals_sklearn():
    # CG was preconditioned at the mean variance: its SLQ log p(y) was off by 0.24 with a
    # standard error of 0.30 (n = 200, 3-D); L Lᵀ + diag(noise) whitens A to ~I
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (200, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    noise = rng.uniform(0.01, 0.5, 200)
    sk = SkGPR(SkRBF(1.0), alpha=noise, optimizer=None).fit(X, y)
    gp = GaussianProcessRegressor(torchkern.RBF(1.0), noise=noise, method="cg", tol=1e-10,
                                  random_state=0).fit(X, y)
    assert gp.log_marginal_likelihood_std_error() < 1e-8
    assert float(gp.log_marginal_likelihood()) == pytest.approx(
        sk.log_marginal_likelihood_value_, abs=1e-6)


def test_pivoted_cholesky_per_sample_lam_against_dense():
    from torchkern.linalg import PivotedCholesky
    rng = np.random.default_rng(3)
    X = torch.tensor(rng.normal(size=(40, 2)))
    K = torchkern.RBF(0.7)(X).to_dense()
    lam = torch.tensor(rng.uniform(0.05, 2.0, 40))
    P = PivotedCholesky(K, 6, lam)
    M = P.L @ P.L.T + torch.diag(lam)
    R = torch.tensor(rng.normal(size=(40, 3)))
    torch.testing.assert_close(P(R), torch.linalg.solve(M, R), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(P(R[:, 0]), torch.linalg.solve(M, R[:, 0]), rtol=1e-10,
                               atol=1e-12)
    assert float(P.logdet()) == pytest.approx(float(torch.linalg.slogdet(M)[1]), rel=1e-12)
    # a factor S of M⁻¹ = S Sᵀ: Sᵀ M S = I, so that log det(Sᵀ A S) = log det A − log det M
    S = P.inv_sqrt(torch.eye(40, dtype=torch.float64))
    torch.testing.assert_close(P.inv_sqrt_t(M @ S), torch.eye(40, dtype=torch.float64),
                               rtol=0, atol=1e-10)
    torch.testing.assert_close(S.T, P.inv_sqrt_t(torch.eye(40, dtype=torch.float64)),
                               rtol=0, atol=1e-12)
    # with_lam to a per-sample ridge equals building it
    torch.testing.assert_close(PivotedCholesky(K, 6, 0.3).with_lam(lam)(R), P(R),
                               rtol=1e-12, atol=1e-12)
    bad = lam.clone()
    bad[3] = 0.0
    with pytest.raises(ValueError, match=r"lam must be > 0, got lam\[3\] = 0\.0"):
        PivotedCholesky(K, 6, bad)
    with pytest.raises(ValueError, match=r"lam must be a float or have shape \(40,\)"):
        PivotedCholesky(K, 6, lam[:-1])


def test_svc_pickled_before_break_ties_predicts():
    # an SVC pickled before break_ties existed raised AttributeError in predict
    import pickle
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
    svc = torchkern.SVC(torchkern.RBF(1.0)).fit(X, y)
    expected = np.asarray(svc.predict(X))
    del svc.__dict__["break_ties"]
    old = pickle.loads(pickle.dumps(svc))
    np.testing.assert_array_equal(np.asarray(old.predict(X)), expected)
