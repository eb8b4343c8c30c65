"""Bad inputs to tk.learning (objectives, fit_kernel / learn_kernel, MKL weights): each
returned NaN or a value silently, or raised an error from inside torch that did not name
the argument, before its fix."""
import numpy as np
import pytest
import torch
from torch.distributions import Gamma

import torchkern as tk
from torchkern import learning

G = torch.Generator().manual_seed(17)
X = torch.randn(12, 3, generator=G, dtype=torch.float64)
Y = X[:, 0] + 0.1 * torch.randn(12, generator=G, dtype=torch.float64)
Y_CLS = torch.tensor([0, 1] * 6)


@pytest.mark.parametrize("call", [
    lambda y: learning.log_marginal_likelihood(tk.RBF(), X, y, 0.1),
    lambda y: learning.log_posterior(tk.RBF(), X, y, 0.1),
    lambda y: learning.loo_error(tk.RBF(), X, y, 0.1),
    lambda y: learning.gcv(tk.RBF(), X, y, 0.1),
    lambda y: learning.kernel_ridge_predict(tk.RBF(), X, y, X, 0.1),
    lambda y: learning.sgpr_bound(tk.RBF(), X, y, X[:3], 0.1),
    lambda y: learning.nystrom_complexity_reg(tk.RBF(), X, y, X[:3], 0.1),
])
def test_objectives_refuse_targets_without_columns(call):
    # y of shape (n, 0): loo_error and gcv returned NaN (0/0), the likelihoods 0 and
    # kernel_ridge_predict an (n, 0) prediction, silently
    with pytest.raises(ValueError, match=r"^y must have at least one column, got shape "
                                         r"\(12, 0\)"):
        call(Y[:, None][:, :0])


@pytest.mark.parametrize("num_probes", [0, -1, 2.5, True])
@pytest.mark.parametrize("objective", [learning.loo_error, learning.gcv])
def test_probe_counts_of_the_matrix_free_estimates(objective, num_probes):
    # 0 gave NaN (gcv silently; loo_error with torch's "degrees of freedom <= 0"
    # warning), -1 torch's "Trying to create tensor with negative dimension"
    with pytest.raises(ValueError, match=r"^num_probes must be an int with 1 <= num_probes"):
        objective(tk.RBF(), X, Y, 0.1, method="cg", num_probes=num_probes)


def _alignment(K, Yt, centered):
    H = np.eye(len(K)) - 1.0 / len(K) if centered else np.eye(len(K))
    Kc, Yc = H @ K @ H, H @ Yt
    T = Yc @ Yc.T
    return (Kc * T).sum() / (np.linalg.norm(Kc) * np.linalg.norm(T))


@pytest.mark.parametrize("centered", [True, False])
def test_alignment_of_a_zero_gram_matrix_is_refused(centered):
    # Linear kernel on zero inputs (centered: also any constant Gram matrix): 0/0 = NaN
    Z = torch.zeros(12, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="Gram matrix on X is zero"):
        learning.kernel_alignment(tk.Linear(), Z, Y, centered=centered)
    if centered:
        with pytest.raises(ValueError, match="centered Gram matrix on X is zero"):
            same = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64).expand(12, 3)
            learning.kernel_alignment(tk.Linear(), same, Y)
    # a nonzero one is the closed form
    got = learning.kernel_alignment(tk.Linear(), X, Y, centered=centered)
    Xn = X.numpy()
    assert abs(float(got) - _alignment(Xn @ Xn.T, Y.numpy()[:, None], centered)) < 1e-13


def test_alignment_checks_a_2d_target_matrix():
    # a 2-D y went to K @ Y unchecked: "K @ V: V contains NaN or infinity"
    Y2 = torch.stack([Y, Y ** 2], 1)
    bad = Y2.clone()
    bad[3, 1] = float("nan")
    with pytest.raises(ValueError, match="^y contains NaN or infinity"):
        learning.kernel_alignment(tk.RBF(), X, bad)
    with pytest.raises(ValueError, match="^y has 5 rows but 12 were expected"):
        learning.kernel_alignment(tk.RBF(), X, Y2[:5])
    K = tk.RBF()(X).to_dense().detach().numpy()
    got = learning.kernel_alignment(tk.RBF(), X, Y2)
    assert abs(float(got) - _alignment(K, Y2.numpy(), True)) < 1e-13


@pytest.mark.parametrize("noise,err,match", [
    (-1.0, ValueError, r"^noise must be finite and > 0"),
    (float("nan"), ValueError, r"^noise must be finite and > 0"),
    ("a", TypeError, r"^noise must be a real number"),
    (torch.tensor([0.1, 0.2]), ValueError, r"^noise must be a scalar"),
])
def test_log_prior_checks_the_noise_variance(noise, err, match):
    # was the distribution's "Expected value argument ... to be within the support" (or
    # float()'s "could not convert string to float"), naming no argument
    with pytest.raises(err, match=match):
        learning.log_prior(tk.RBF(), noise, Gamma(2.0, 3.0))
    got = learning.log_prior(tk.RBF(), torch.tensor(0.3), Gamma(2.0, 3.0))
    assert abs(float(got) - float(Gamma(2.0, 3.0).log_prob(torch.tensor(0.3)))) < 1e-6


def test_fit_kernel_checks_callback_and_objective():
    k = tk.RBF()
    # the callback was called at the first step: "'int' object is not callable"
    with pytest.raises(TypeError, match="^callback must be callable or None, got int"):
        learning.fit_kernel(lambda: learning.loo_error(k, X, Y, 0.1), k, callback=3)
    # an objective that does not involve the parameters: autograd's "element 0 of tensors
    # does not require grad and does not have a grad_fn"
    const = torch.tensor(1.0, dtype=torch.float64)
    for optimizer in ("lbfgs", "adam"):
        with pytest.raises(TypeError, match=r"^objective\(\) does not depend on the "
                                            r"parameters"):
            learning.fit_kernel(lambda: const * 2, k, optimizer=optimizer)


@pytest.mark.parametrize("estimator,y,objective,match", [
    (tk.KernelRidge(), Y[:5], "loo", "y has 5 rows but 12 were expected"),
    (tk.KernelRidge(), Y[:5], "lml", "y has 5 rows but 12 were expected"),
    (tk.SVC(), torch.zeros(12), "alignment", "y is constant"),
])
def test_learn_kernel_says_why_the_objective_is_undefined_at_the_start(estimator, y,
                                                                        objective, match):
    # the objective's own error was read as "not positive definite at this point" and
    # replaced by "the objective is not finite or not defined (a Gram matrix not
    # positive definite)", with no word of y
    with pytest.raises(ValueError, match=rf"at the initial hyperparameters.*: {match}"):
        learning.learn_kernel(estimator, X, y, objective)


def test_multiple_kernel_weights_must_be_numbers():
    # torch.as_tensor's "new(): invalid data type 'str'"
    with pytest.raises(TypeError, match="^init must be a real number"):
        learning.MultipleKernel([tk.RBF(), tk.Linear()], init="ab")
    with pytest.raises(TypeError, match="^eta must be a real number"):
        learning.MultipleKernel([tk.RBF(), tk.Linear()]).set_weights(["a", "b"])


def test_fheuristic_weight_of_a_zero_gram_matrix_is_zero():
    # a zero Gram matrix had the alignment 0/0: every weight was NaN
    grams = [torch.zeros(12, 12, dtype=torch.float64), tk.RBF()(X).to_dense().detach(),
             tk.Linear()(X).to_dense().detach()]
    got = learning.fheuristic_weights(grams, Y_CLS)
    yv = np.where(Y_CLS.numpy() == 1, 1.0, -1.0)
    a = np.array([0.0] + [yv @ K.numpy() @ yv / (12 * np.linalg.norm(K.numpy()))
                          for K in grams[1:]])
    assert np.allclose(got.numpy(), a / a.sum(), rtol=1e-13, atol=0)


@pytest.mark.parametrize("weights", [learning.easymkl_weights, learning.fheuristic_weights,
                                     learning.cka_weights, learning.alignf_weights])
def test_mkl_weights_refuse_an_asymmetric_gram_matrix(weights):
    # read through K v and vᵀK alike, an asymmetric matrix gave weights silently
    K = tk.RBF()(X).to_dense().detach()
    L = tk.Linear()(X).to_dense().detach()
    # (the message named kernel='precomputed', an argument these functions do not have)
    with pytest.raises(ValueError, match=r"^grams\[0\] must be a symmetric Gram matrix "
                                         r"\(the MKL weights read K v and vᵀK alike\)"):
        weights([K + torch.triu(torch.ones_like(K)), L], Y_CLS)
    # symmetric to float32 rounding (blocks, another order of sums) is accepted
    K32 = K.float()
    K32[0, 1] += 1e-7
    got = weights([K32, L.float()], Y_CLS)
    assert torch.allclose(got, weights([K, L], Y_CLS), rtol=0, atol=1e-4)


@pytest.mark.parametrize("y,kw,err,match", [
    # the split indexed y unchecked: torch's "index 13 is out of bounds for dimension 0
    # with size 5", "can't convert np.ndarray of type numpy.str_", and for a string
    # fraction "'<' not supported between instances of 'int' and 'str'"
    (Y[:5], {}, ValueError, r"^y has 5 rows but 12 were expected"),
    (np.array(["a", "b"] * 6), {}, ValueError, r"y must hold numbers"),
    (Y, {"validation_fraction": "a"}, ValueError, r"^validation_fraction must be in \(0, 1\)"),
])
def test_learn_kernel_holdout_checks_its_inputs(y, kw, err, match):
    with pytest.raises(err, match=match):
        learning.learn_kernel(tk.KernelRidge(), X, y, "holdout", **kw)


def test_learn_kernel_holdout_needs_two_samples():
    # one sample: the validation split took it, and the empty training set was reported
    # as "a Gram matrix not positive definite"
    with pytest.raises(ValueError, match="needs a training and a validation sample: n = 1"):
        learning.learn_kernel(tk.KernelRidge(), X[:1], Y[:1], "holdout")
    with pytest.raises(ValueError, match="n = 2 with validation_fraction = 0.9"):
        learning.learn_kernel(tk.KernelRidge(), X[:2], Y[:2], "holdout",
                              validation_fraction=0.9)


def test_kernel_layer_names_its_input_and_centers():
    layer = learning.KernelLayer(tk.RBF(), centers=X[:4])
    # the kernel's checks said "X has 5 features but Y has 3" and "X and Y must have the
    # same dtype", of a layer called with one argument
    with pytest.raises(ValueError, match="^x has 5 features but the layer's centers have 3"):
        layer(torch.randn(2, 5, dtype=torch.float64))
    with pytest.raises(TypeError, match="^x has dtype torch.float32 but the layer's centers"):
        layer(X.float())
    # the right input is the RBF features times the weights, plus the bias
    K = torch.exp(-torch.cdist(X, X[:4]) ** 2 / 2)
    assert torch.allclose(layer(X), K @ layer.weight + layer.bias, rtol=1e-12, atol=1e-14)
    assert torch.allclose(layer.float()(X.float()), (K @ layer.weight.double()).float()
                          + layer.bias, rtol=1e-5, atol=1e-6)


def test_mmd_test_power_with_a_zero_variance_estimate_and_no_reg():
    # Linear kernel on zero samples: MMD² = 0 and σ̂² = 0, 0/√0 = NaN silently
    Z = torch.zeros(12, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"variance estimate .* is 0, .* pass reg > 0"):
        learning.mmd_test_power(tk.Linear(), Z, Z, reg=0.0)
    # X = Y: σ̂² is the rounding of the kernel values, J was MMD²/σ̂ of two roundings (-5e15)
    with pytest.raises(ValueError, match=r"at or below the rounding .* pass reg > 0"):
        learning.mmd_test_power(tk.RBF(), X, X, reg=0.0)
    # reg = 0 on distinct samples is the closed form (Liu et al. 2020, eq. 5)
    Xb = X + 0.5
    got = learning.mmd_test_power(tk.RBF(), X, Xb, reg=0.0)
    k = lambda A, B: np.exp(-((A[:, None] - B[None]) ** 2).sum(-1) / 2)  # noqa: E731
    a, b = X.numpy(), Xb.numpy()
    Kxx, Kyy, Kxy = k(a, a), k(b, b), k(a, b)
    n = len(a)
    mmd2 = ((Kxx.sum() - np.trace(Kxx)) + (Kyy.sum() - np.trace(Kyy))) / (n * (n - 1)) \
        - 2 * Kxy.mean()
    h = (Kxx + Kyy - Kxy - Kxy.T).sum(1)
    var = 4 * ((h ** 2).sum() / n ** 3 - (h.sum() / n ** 2) ** 2)
    assert abs(float(got) - mmd2 / np.sqrt(var)) < 1e-12 * abs(mmd2 / np.sqrt(var))


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
def test_kernel_layer_reads_half_precision_as_float32(half):
    # the dtype check refused x in half precision ("x has dtype torch.float16 but the
    # layer's centers torch.float32"), which the kernels read as float32
    layer = learning.KernelLayer(tk.RBF(), centers=X[:4].float())
    xh = X.to(half)
    out = layer(xh)
    K = torch.exp(-torch.cdist(xh.double(), X[:4].float().double()) ** 2 / 2)
    assert out.dtype == torch.float32
    assert torch.equal(out, layer(xh.float()))
    assert torch.allclose(out.double(), K @ layer.weight.double() + layer.bias.double(),
                          rtol=1e-5, atol=1e-6)
    # real mismatches stay named: float64 or integer x on a float32 layer (integers are
    # read as float64), half-precision x on a float64 layer
    for bad in (X, X.round().long()):
        with pytest.raises(TypeError, match=rf"^x has dtype {bad.dtype} but the layer's "
                                            rf"centers torch.float32"):
            layer(bad)
    with pytest.raises(TypeError, match=rf"^x has dtype {half} but the layer's centers "
                                        rf"torch.float64"):
        learning.KernelLayer(tk.RBF(), centers=X[:4])(xh)
    # integers on a float64 layer are its float64 values
    wide = learning.KernelLayer(tk.RBF(), centers=X[:4])
    assert torch.equal(wide(X.round().long()), wide(X.round()))
