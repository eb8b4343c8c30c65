"""Bad input to the non-graph API gets a clear error that names the argument.

Each case was found by a sweep of the public API (kernels, estimators, objectives,
statistics, approximations, solvers) with NaN, wrong shapes, wrong types and out-of-range
hyperparameters; before its fix it returned a result silently, returned NaN or raised an
error from deep inside torch or NumPy that did not say which argument was wrong.
"""
import numpy as np
import pytest
import torch

import torchkern as tk
from torchkern import learning, supervised, unsupervised
from torchkern.approx import Nystroem

_G = torch.Generator().manual_seed(0)
X = torch.randn(10, 3, generator=_G, dtype=torch.float64)
Y_REG = X[:, 0] + 0.1 * torch.randn(10, generator=_G, dtype=torch.float64)
Y_CLS = torch.tensor([0, 1] * 5)


def _gram():
    return tk.RBF()(X, backend="dense").to_dense().detach()


# -- hyperparameters that are not real numbers: None, strings, bools, complex ----------
_NOT_REAL = [None, "a", True, np.bool_(False), 1j]


@pytest.mark.parametrize("value", _NOT_REAL, ids=repr)
@pytest.mark.parametrize("make,arg,y", [
    (lambda v: supervised.KernelRidge(alpha=v), "alpha", Y_REG),
    (lambda v: supervised.KernelLogisticRegression(C=v), "C", Y_CLS),
    (lambda v: supervised.SVC(C=v), "C", Y_CLS),
    (lambda v: supervised.SVC(tol=v), "tol", Y_CLS),
    (lambda v: supervised.SVR(epsilon=v), "epsilon", Y_REG),
    (lambda v: supervised.GaussianProcessRegressor(noise=v), "noise", Y_REG),
    (lambda v: unsupervised.KernelPCA(n_components=2, fit_inverse_transform=True, alpha=v),
     "alpha", None),
    (lambda v: unsupervised.KernelDensity(bandwidth=v), "bandwidth", None),
    (lambda v: unsupervised.KernelKMeans(n_clusters=2, tol=v), "tol", None),
    (lambda v: unsupervised.KernelCCA(n_components=1, reg=v), "reg", Y_REG[:, None]),
])
def test_estimator_hyperparameter_not_a_real_number(make, arg, y, value):
    est = make(value)
    with pytest.raises((TypeError, ValueError), match=rf"\b{arg}\b"):
        est.fit(X) if y is None else est.fit(X, y)


@pytest.mark.parametrize("value", ["a", True, 1j], ids=repr)
def test_nystroem_rcond_not_a_real_number(value):  # (None is its default)
    with pytest.raises(TypeError, match="rcond must be a real number"):
        Nystroem(tk.RBF(), 4, rcond=value).fit(X)


@pytest.mark.parametrize("value", _NOT_REAL, ids=repr)
@pytest.mark.parametrize("make,arg", [
    (lambda v: tk.RBF(v), "lengthscale"),
    (lambda v: tk.RationalQuadratic(alpha=v), "alpha"),
    (lambda v: tk.ScaleKernel(tk.RBF(), v), "outputscale"),
    (lambda v: setattr(tk.RBF(), "lengthscale", v), "lengthscale"),
])
def test_kernel_hyperparameter_not_a_real_number(make, arg, value):
    with pytest.raises(TypeError, match=rf"{arg} must be a real number"):
        make(value)


@pytest.mark.parametrize("value", [None, "a", True])
@pytest.mark.parametrize("call,arg", [
    (lambda v: learning.log_marginal_likelihood(tk.RBF(), X, Y_REG, v), "noise"),
    (lambda v: learning.loo_error(tk.RBF(), X, Y_REG, v), "alpha"),
    (lambda v: learning.gcv(tk.RBF(), X, Y_REG, v), "alpha"),
    (lambda v: learning.kernel_ridge_predict(tk.RBF(), X, Y_REG, X, v), "alpha"),
    (lambda v: learning.sgpr_bound(tk.RBF(), X, Y_REG, X[:3], v), "noise"),
    (lambda v: learning.nystrom_complexity_reg(tk.RBF(), X, Y_REG, X[:3], v), "penalty"),
])
def test_objective_regularizer_not_a_real_number(call, arg, value):
    with pytest.raises(TypeError, match=rf"{arg} must be a real number"):
        call(value)


def test_ard_lengthscale_set_with_the_wrong_number_of_entries():
    k = tk.RBF(ard_dims=3)
    with pytest.raises(ValueError, match="lengthscale must be a float or have 3 entries, got 2"):
        k.lengthscale = [1.0, 2.0]
    k.lengthscale = [1.0, 2.0, 4.0]  # the right number of entries still works
    assert torch.allclose(k.lengthscale, torch.tensor([1.0, 2.0, 4.0], dtype=k.lengthscale.dtype))


@pytest.mark.parametrize("make,match", [
    (lambda: tk.ArcCosine(True), "order"),
    (lambda: tk.ArcCosine(1.0), "order"),
    (lambda: tk.SumKernel(), "at least one kernel"),
    (lambda: tk.ProductKernel(), "at least one kernel"),
    (lambda: tk.RBF(active_dims="a"), "active_dims"),
])
def test_kernel_constructor_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# -- flags must be bools: bool("no") is True ----------------------------------------------
@pytest.mark.parametrize("make,arg,y", [
    (lambda v: supervised.SVC(probability=v), "probability", Y_CLS),
    (lambda v: supervised.KernelLogisticRegression(fit_intercept=v), "fit_intercept", Y_CLS),
    (lambda v: supervised.GaussianProcessRegressor(normalize_y=v), "normalize_y", Y_REG),
    (lambda v: unsupervised.SpectralClustering(n_clusters=2, normalized=v), "normalized", None),
    (lambda v: unsupervised.KernelPCA(n_components=2, fit_inverse_transform=v),
     "fit_inverse_transform", None),
])
def test_flags_must_be_bools(make, arg, y):
    est = make("no")
    with pytest.raises(TypeError, match=rf"{arg} must be a bool"):
        est.fit(X) if y is None else est.fit(X, y)


def test_kernel_alignment_centered_must_be_a_bool():
    with pytest.raises(TypeError, match="centered must be a bool"):
        learning.kernel_alignment(tk.RBF(), X, Y_CLS, centered="no")


# -- tol = inf gave NaN coefficients ------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: supervised.KernelRidge(solver="cg", tol=float("inf")),
    lambda: supervised.GaussianProcessRegressor(method="cg", tol=float("inf")),
])
def test_infinite_tol(make):
    with pytest.raises(ValueError, match="tol must be .*finite"):
        make().fit(X, Y_REG)


# -- an unknown backend is refused even where the fit would not use it --------------------
def test_unknown_backend_refused_by_name():
    # n = 10: the fit solves by Cholesky on a dense Gram matrix and never read backend=
    with pytest.raises(ValueError, match="backend must be one of"):
        supervised.KernelRidge(backend="bogus").fit(X, Y_REG)


# -- complex targets: the imaginary part was dropped silently -----------------------------
@pytest.mark.parametrize("make,y", [
    (supervised.KernelRidge, Y_REG), (supervised.GaussianProcessRegressor, Y_REG),
    (supervised.SVR, Y_REG), (unsupervised.NadarayaWatson, Y_REG),
    (supervised.SVC, Y_CLS), (supervised.KernelLogisticRegression, Y_CLS),
])
def test_complex_targets(make, y):
    with pytest.raises(ValueError, match=r"\by must be real|\by must hold real"):
        make().fit(X, y.to(torch.complex128) + 1j)


# -- objectives: y=None, X_test and centres of the wrong width, NaN labels ----------------
@pytest.mark.parametrize("call", [
    lambda: learning.log_marginal_likelihood(tk.RBF(), X, None, 0.1),
    lambda: learning.loo_error(tk.RBF(), X, None, 0.1),
    lambda: learning.gcv(tk.RBF(), X, None, 0.1),
    lambda: learning.kernel_ridge_predict(tk.RBF(), X, None, X, 0.1),
    lambda: learning.sgpr_bound(tk.RBF(), X, None, X[:3], 0.1),
    lambda: learning.kernel_alignment(tk.RBF(), X, None),
])
def test_objective_without_targets(call):
    with pytest.raises(ValueError, match="requires y to be passed"):
        call()


def test_objective_inputs_named():
    with pytest.raises(ValueError, match="X_test has 2 features"):
        learning.kernel_ridge_predict(tk.RBF(), X, Y_REG, X[:, :2], 0.1)
    with pytest.raises(ValueError, match="centers has 2 features"):
        learning.sgpr_bound(tk.RBF(), X, Y_REG, X[:3, :2], 0.1)
    with pytest.raises(ValueError, match="jitter must be finite and >= 0"):
        learning.sgpr_bound(tk.RBF(), X, Y_REG, X[:3], 0.1, jitter=-1.0)
    with pytest.raises(ValueError, match="reg must be finite and >= 0"):
        learning.mmd_test_power(tk.RBF(), X, X + 1, reg=-1.0)
    y = Y_REG.clone()
    y[0] = float("nan")
    with pytest.raises(ValueError, match="y contains NaN"):
        learning.kernel_alignment(tk.RBF(), X, y)


# -- a precomputed Gram matrix must be symmetric ------------------------------------------
@pytest.mark.parametrize("make,y", [
    (lambda: supervised.KernelRidge(kernel="precomputed"), Y_REG),
    (lambda: supervised.SVC(kernel="precomputed"), Y_CLS),
    (lambda: supervised.SVR(kernel="precomputed"), Y_REG),
    (lambda: supervised.KernelLogisticRegression(kernel="precomputed"), Y_CLS),
    (lambda: unsupervised.KernelPCA(n_components=2, kernel="precomputed"), None),
    (lambda: unsupervised.KernelKMeans(n_clusters=2, kernel="precomputed"), None),
    (lambda: unsupervised.SpectralClustering(n_clusters=2, kernel="precomputed"), None),
])
def test_precomputed_gram_must_be_symmetric(make, y):
    K = _gram()
    K[0, 1] += 0.5
    with pytest.raises(ValueError, match="X must be a symmetric Gram matrix"):
        make().fit(K) if y is None else make().fit(K, y)
    # symmetric up to float32 rounding is accepted
    K32 = _gram().float()
    K32[0, 1] += 1e-7
    make().fit(K32) if y is None else make().fit(K32, y)


# -- NaN inside a Gram matrix or operator given directly: NaN came out --------------------
def _with_nan(K):
    K = K.clone()
    K[1, 2] = float("nan")
    return K


@pytest.mark.parametrize("call,arg", [
    (lambda K: tk.stats.mmd2_unbiased(_with_nan(K), K, K), "Kxx"),
    (lambda K: tk.stats.mmd2_biased(K, K, _with_nan(K)), "Kxy"),
    (lambda K: tk.stats.hsic_biased(K, _with_nan(K)), "L"),
    (lambda K: tk.linalg.trace(_with_nan(K)), "A"),
    (lambda K: tk.linalg.eigsh(_with_nan(K), 2), "A"),
    (lambda K: tk.linalg.PivotedCholesky(_with_nan(K), 3, 1e-3), "K"),
])
def test_nan_in_a_given_matrix(call, arg):
    with pytest.raises(ValueError, match=rf"^{arg} contains NaN"):
        call(_gram())


def test_mean_embedding_weights_must_be_finite():
    w = torch.full((10,), 0.1, dtype=torch.float64)
    w[3] = float("nan")
    with pytest.raises(ValueError, match="weights contains NaN"):
        tk.stats.KernelMeanEmbedding(X, w, tk.RBF())


def test_trace_num_probes_checked_where_the_diagonal_is_exact():
    with pytest.raises(ValueError, match="num_probes"):
        tk.linalg.trace(_gram(), num_probes=0)


# -- neural tangent kernels ---------------------------------------------------------------
_NET = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(),
                           torch.nn.Linear(4, 1)).double()


@pytest.mark.parametrize("width", [0, -1, True, 2.5, "a"], ids=repr)
def test_ntk_width(width):
    # width was stored (and shown in the repr) but never checked under the NTK
    # parameterization
    with pytest.raises(ValueError, match="width must be None or a positive int"):
        tk.ntk.NTK(2, width=width)


@pytest.mark.parametrize("kw,arg", [
    ({"weight_std": -1.0}, "weight_std"), ({"weight_std": float("nan")}, "weight_std"),
    ({"weight_std": True}, "weight_std"), ({"bias_std": "a"}, "bias_std"),
])
def test_parameterize_stds(kw, arg):
    with pytest.raises((TypeError, ValueError), match=arg):
        tk.ntk.parameterize(torch.nn.Linear(3, 2), **kw)


@pytest.mark.parametrize("kw,arg", [
    ({"reg": True}, "reg"), ({"reg": "a"}, "reg"), ({"learning_rate": True, "t": 1.0},
                                                    "learning_rate"),
    ({"t": True}, "t"), ({"compute_cov": "no"}, "compute_cov"),
])
def test_infinite_width_predict_arguments(kw, arg):
    with pytest.raises((TypeError, ValueError), match=rf"^{arg} must"):
        tk.ntk.infinite_width_predict(tk.ntk.NTK(1), X, Y_REG, X, **kw)


def test_infinite_width_predict_test_points_of_the_wrong_width():
    with pytest.raises(ValueError, match="X_test has 2 features"):
        tk.ntk.infinite_width_predict(tk.ntk.NTK(1), X, Y_REG, X[:, :2])


def test_infinite_width_kernel_refuses_complex_inputs():
    # the imaginary part was dropped with only torch's cast warning
    with pytest.raises(ValueError, match="X must be real"):
        tk.ntk.infinite_width(_NET)(X.to(torch.complex128))


# -- estimators' inputs -------------------------------------------------------------------
@pytest.mark.parametrize("make", [supervised.SimpleMKL, supervised.EasyMKL, supervised.AverageMKL,
                                  supervised.FHeuristic, supervised.CKA])
def test_mkl_estimators_refuse_1d_data(make):
    # were read as n samples of one feature; every other estimator refuses a 1-D X
    with pytest.raises(ValueError, match="X must be a 2-D array"):
        make([tk.RBF(), tk.Linear()]).fit(X[:, 0], Y_CLS)


def test_spectral_clustering_on_float16_data():
    # the eigensolver raised "A must have dtype float32 or float64"; now the float32 result
    half = X.to(torch.float16)
    got = unsupervised.SpectralClustering(n_clusters=2, random_state=0).fit(half).labels_
    want = unsupervised.SpectralClustering(n_clusters=2, random_state=0).fit(
        half.to(torch.float32)).labels_
    assert torch.equal(got, want)


def test_kernel_kmeans_says_when_it_did_not_converge():
    from torchkern.linalg import ConvergenceWarning
    Z = torch.randn(60, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=1"):
        unsupervised.KernelKMeans(n_clusters=4, max_iter=1, n_init=1, tol=0.0,
                                  random_state=0).fit(Z)


@pytest.mark.parametrize("make,y", [
    (supervised.KernelRidge, Y_REG), (supervised.SVC, Y_CLS), (supervised.SVR, Y_REG),
    (supervised.KernelLogisticRegression, Y_CLS), (unsupervised.KernelDensity, None),
])
def test_sample_weight_true_is_not_a_weight(make, y):
    # True was read as the weight 1.0 for every sample
    with pytest.raises(TypeError, match="sample_weight must be None, a float or an array"):
        make().fit(X, y, sample_weight=True) if y is not None else \
            make().fit(X, sample_weight=True)


def test_ragged_nested_list():
    with pytest.raises(ValueError, match="X must be a rectangular array of numbers"):
        supervised.KernelRidge().fit([[1.0, 2.0], [3.0]], [1.0, 2.0])


@pytest.mark.parametrize("kw", [{"return_std": "yes"}, {"return_cov": "no"}])
def test_gp_predict_flags(kw):
    gp = supervised.GaussianProcessRegressor().fit(X, Y_REG)
    arg = next(iter(kw))
    with pytest.raises(TypeError, match=f"{arg} must be a bool"):
        gp.predict(X, **kw)


def test_feature_kernel_dtype_mismatch_and_nan_features():
    net = torch.nn.Linear(3, 2).double()
    with pytest.raises(TypeError, match="X has dtype torch.float32 but feature_map's"):
        tk.FeatureKernel(net, tk.RBF())(X.float()).to_dense()  # was torch's matmul error
    # features that are NaN (here: every entry <= 10 becomes NaN): the Gram matrix was NaN
    nan_net = torch.nn.Sequential(torch.nn.Linear(3, 2).double(),
                                  torch.nn.Threshold(10.0, float("nan")))
    with pytest.raises(ValueError, match="feature_map gave NaN or infinity on X"):
        tk.FeatureKernel(nan_net, tk.RBF())(X)


@pytest.mark.parametrize("codes,lengths,match", [
    (torch.tensor([[0, 1, 9], [2, 3, 0]]), torch.tensor([3, 2]), r"codes must lie in \[0, 4\)"),
    (torch.tensor([[0, -2, 1]]), torch.tensor([3]), r"codes must lie in \[0, 4\)"),
    (torch.tensor([0, 1, 2]), torch.tensor([4, -1]), "lengths must be >= 0"),
])
def test_sequence_set_codes_outside_the_alphabet(codes, lengths, match):
    # a code 9 over the 4 letters of DNA gave k-mer numbers of no k-mer, silently
    with pytest.raises(ValueError, match=match):
        tk.sequences.SequenceSet(codes, lengths, "ACGT")


@pytest.mark.parametrize("value,error", [(True, TypeError), ("a", TypeError),
                                         (float("nan"), ValueError), (0.0, ValueError)])
def test_class_weight_values(value, error):
    # True was the weight 1.0; 'a' raised float()'s error without naming class_weight
    with pytest.raises(error, match=r"class_weight\[0\] must be"):
        supervised.SVC(class_weight={0: value}).fit(X, Y_CLS)


@pytest.mark.parametrize("make,arg,y", [
    (lambda: supervised.SVC(C=torch.tensor([1.0, 2.0])), "C", Y_CLS),
    (lambda: supervised.KernelLogisticRegression(C=[1.0, 2.0]), "C", Y_CLS),
    (lambda: unsupervised.KernelDensity(bandwidth=[1.0, 2.0]), "bandwidth", None),
])
def test_scalar_hyperparameter_given_an_array(make, arg, y):
    # were broadcasting errors or float()'s TypeError, naming no argument
    with pytest.raises(ValueError, match=rf"^{arg} must be a single number, got shape \(2,\)"):
        make().fit(X) if y is None else make().fit(X, y)


@pytest.mark.parametrize("idx,match", [
    ([0.5], "idx must hold integers"),  # X[[0.5]] read row 0
    ([70, 1], r"idx holds indices outside \[0, 10\)"),
    ("a", "idx must be an int, a slice, a boolean mask or integer indices"),
])
def test_take_checks_indices_of_tensor_inputs(idx, match):
    from torchkern.inputs import take
    with pytest.raises(IndexError, match=match):
        take(X, idx)
    rows = torch.tensor([True, False] * 5)
    assert torch.equal(take(X, rows), X[rows])
    assert torch.equal(take(X, [-1, 2]), X[[9, 2]])


def test_concat_of_inputs_of_different_widths():
    from torchkern.inputs import concat
    with pytest.raises(ValueError, match="inputs of different widths"):
        concat([X, X[:, :2]])  # was torch.cat's size error
    assert torch.equal(concat([X[:4], X[4:]]), X)


# -- a lazy product that is not finite ----------------------------------------------------
@pytest.mark.parametrize("backend", ["dense", "blocked"])
def test_kernel_matrix_product_with_nan_in_v_names_v(backend):
    V = torch.ones(10, 2, dtype=torch.float64)
    V[3, 1] = float("nan")
    with pytest.raises(ValueError, match=r"K @ V: V contains NaN"):
        tk.RBF()(X, backend=backend) @ V
    K = tk.RBF()(X, backend=backend)
    V[3, 1] = 1.0
    want = K.to_dense() @ V  # a finite V: the product as before
    torch.testing.assert_close(K @ V, want)


def test_kernel_matrix_product_that_overflows_says_so():
    # a subnormal lengthscale: the scaled inputs are infinite, the kernel values NaN
    K = tk.RBF(lengthscale=1e-320)(X, backend="blocked")
    with pytest.raises(ValueError, match=r"the product is not finite"):
        K @ torch.ones(10, dtype=torch.float64)


def test_dense_pieces_of_a_kernel_matrix_that_overflows_say_so():
    # A subnormal lengthscale: the scaled inputs are ±∞ (row 2, zero, stays 0), their
    # differences ∞ − ∞ NaN; every dense piece refuses it, as the product does (they gave
    # NaN). (Matérn past the dtype's range is 0, not NaN: tests/kernels/
    # test_overflow_and_fast_form.py.)
    Xz = X.clone()
    Xz[2] = 0.0
    k = tk.Matern(nu=1.5, lengthscale=1e-320)
    with pytest.raises(ValueError, match=r"the kernel values are not finite"):
        k(Xz, backend="dense")  # the dense backend evaluates at once
    K = k(Xz, backend="blocked")
    for piece in (K.to_dense, lambda: K.rows([0, 1]), lambda: K.submatrix([0], [0, 2])):
        with pytest.raises(ValueError, match=r"the kernel values are not finite"):
            piece()
    assert float(K.submatrix([2], [2])) == 1.0  # a finite piece: k(x, x) = 1
