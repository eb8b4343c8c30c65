"""ReLU NTK / NNGP at a zero input (gradients), the one arc-cosine helper both the analytic
kernels and ``infinite_width`` call, and bad inputs of ``torchkern.ntk``."""
import math

import mpmath
import pytest
import torch
from torch import nn

from torchkern.ntk import (NNGP, NTK, EmpiricalNTK, analytic, empirical_ntk,
                           infinite_width, module)

D, WIDTH, W_STD = 4, 16, 1.3
G = torch.Generator().manual_seed(17)
Y = torch.randn(3, D, generator=G, dtype=torch.float64)
ZERO = torch.zeros(1, D, dtype=torch.float64)
ORDINARY = torch.tensor([[0.7, -0.4, 0.2, 1.1]], dtype=torch.float64)


def _mlp(depth, slope, bias=True):
    layers, d = [], D
    for _ in range(depth):
        layers += [nn.Linear(d, WIDTH, bias=bias), nn.LeakyReLU(slope) if slope else nn.ReLU()]
        d = WIDTH
    return nn.Sequential(*layers, nn.Linear(d, 1, bias=bias)).double()


def _kernels(depth, b_std):
    """(kind, parameterization, slope, kernel) of the analytic MLP kernels and
    infinite_width of the same network."""
    out = []
    for param in ("ntk", "standard"):
        for kind, cls in (("ntk", NTK), ("nngp", NNGP)):
            out.append((kind, param, 0.0, cls(depth, weight_std=W_STD, bias_std=b_std,
                                              parameterization=param, width=WIDTH)))
            for slope in (0.0, 0.1):
                net = _mlp(depth, slope, bias=b_std is not None)
                out.append((kind, param, slope,
                            infinite_width(net, param, kind=kind, weight_std=W_STD,
                                           bias_std=b_std or 0.0)))
    return out


def _input_grad(k, x):
    x = x.clone().requires_grad_()
    (g,) = torch.autograd.grad(k(x, Y, backend="dense").to_dense().sum(), x)
    return g


def _central(f, x, h=1e-6):
    g = torch.zeros_like(x)
    for i in range(x.numel()):
        step = torch.zeros_like(x)
        step.view(-1)[i] = h
        g.view(-1)[i] = (f(x + step) - f(x - step)) / (2 * h)
    return g


def _check_hyper_grads(k, x, where):
    params = [p for p in k.parameters() if p.requires_grad]
    loss = lambda: k(x, Y, backend="dense").to_dense().sum()  # noqa: E731
    for p, g in zip(params, torch.autograd.grad(loss(), params)):
        with torch.no_grad():
            p += 1e-6
            up = float(loss().detach())
            p -= 2e-6
            down = float(loss().detach())
            p += 1e-6
        assert abs(float(g) - (up - down) / 2e-6) < 1e-7 * max(1.0, abs(float(g))), where


def test_gradients_at_a_zero_input():
    w2, ysum = W_STD ** 2, Y.sum(0, keepdim=True)
    for b_std in (0.4, 0.0, None):
        for depth in (1, 2, 3):
            for kind, param, slope, k in _kernels(depth, b_std):
                where = (b_std, kind, param, slope, depth)
                g = _input_grad(k, ZERO)
                if b_std:
                    # σ_b > 0: every variance is ≥ σ_b², the kernel is smooth at x = 0
                    ref = _central(lambda x: float(k(x, Y, backend="dense").to_dense()
                                                   .sum().detach()), ZERO)
                    assert torch.allclose(g, ref, rtol=1e-7, atol=1e-8), where
                else:
                    # Without bias a zero input has variance 0 in every layer; the angle
                    # to it is π/2 by convention with gradient 0, so ∂/∂x goes only
                    # through c, with dE[φφ]/dc = E[φ'φ'] = κ = ((1 + a)/2)², a the
                    # LeakyReLU slope:
                    #   NNGP:                  w^{2(L+1)} κ^L y/d
                    #   NTK, ntk param.:       (L + 1)(w² κ)^L w² y/d
                    #   NTK, standard param.:  g_L, g_0 = y, g_l = N(w²κ)^l y/d + w²κ g_{l−1}
                    # It was 1.2e14 for the standard NTK with bias_std=0 (Θ⁰ = 1 there):
                    # atan2(√ε·S, c) has the slope 1/(√ε·S) at c = 0.
                    kappa = ((1 + slope) / 2) ** 2
                    if kind == "nngp":
                        ref = w2 ** (depth + 1) * kappa ** depth * ysum / D
                    elif param == "ntk":
                        ref = (depth + 1) * (w2 * kappa) ** depth * w2 * ysum / D
                    else:
                        ref = ysum.clone()
                        for layer in range(1, depth + 1):
                            ref = WIDTH * (w2 * kappa) ** layer * ysum / D + w2 * kappa * ref
                    assert torch.allclose(g, ref, rtol=1e-12, atol=0), where
                # to the hyperparameters, at the zero input and beside an ordinary one
                _check_hyper_grads(k, torch.cat([ZERO, Y[:1]]), where)


def test_keops_form_has_the_same_zero_variance_gradient():
    # analytic._relu_keops on torch tensors (the same arithmetic KeOps compiles): at a unit
    # of variance 0 dE[φ'φ']/dc = 0 and dE[φφ]/dc = 1/4, as the other backends.
    qx = torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64)
    qy = torch.tensor([1.5, 0.0, 1.0], dtype=torch.float64)
    c = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    e = qx + qy
    S = qx + qy + analytic._TINY
    for out in (analytic._relu_keops(qx, qy, c, e, S), analytic._relu(qx, qy, c, e)):
        (g0,) = torch.autograd.grad(out[4].sum(), c, retain_graph=True)
        (g1,) = torch.autograd.grad(out[2].sum(), c)
        assert torch.equal(g0[:2], torch.zeros(2, dtype=torch.float64)), g0
        assert torch.allclose(g1[:2], torch.full((2,), 0.25, dtype=torch.float64),
                              rtol=1e-15, atol=0), g1
        # an ordinary pair (θ = π/2 between orthogonal units of variance 2 and 1)
        assert math.isclose(float(g0[2]), 1 / (2 * math.pi * math.sqrt(2.0)), rel_tol=1e-12)


# --------------------------------------------------------------------------------------
# One arc-cosine helper (analytic._arccos) for NTK/NNGP and infinite_width
# --------------------------------------------------------------------------------------

def _pairs():
    """x, y in R^5: random, unequal norms (1e-3, 1e3), near-parallel and near-antiparallel
    (angles 1e-7 from 0 and π, where the cosine is ±1 to rounding), exactly parallel."""
    g = torch.Generator().manual_seed(3)
    X = torch.randn(6, 5, generator=g, dtype=torch.float64)
    Yr = torch.randn(6, 5, generator=g, dtype=torch.float64)
    noise = torch.randn(6, 5, generator=g, dtype=torch.float64)
    xs = [X, X * 1e-3, X, X, X, X]
    ys = [Yr, Yr * 1e3, 2.0 * X + 1e-7 * noise, -0.5 * X + 1e-7 * noise, 3.0 * X, -X]
    return torch.cat(xs), torch.cat(ys)


def _cho_saul(x, y):
    """J₁ = ‖x‖‖y‖(sin θ + (π − θ)cos θ)/(2π) and J₀ = (π − θ)/(2π) (Cho and Saul 2009)
    and s² = ‖x‖²‖y‖² sin²θ in 50-digit arithmetic."""
    mpmath.mp.dps = 50
    j1, j0, s2 = [], [], []
    for a, b in zip(x.tolist(), y.tolist()):
        a, b = [mpmath.mpf(v) for v in a], [mpmath.mpf(v) for v in b]
        na = mpmath.sqrt(sum(v * v for v in a))
        nb = mpmath.sqrt(sum(v * v for v in b))
        cos = sum(u * v for u, v in zip(a, b)) / (na * nb)
        theta = mpmath.acos(max(-1, min(1, cos)))
        j1.append(float(na * nb * (mpmath.sin(theta) + (mpmath.pi - theta) * cos)
                        / (2 * mpmath.pi)))
        j0.append(float((mpmath.pi - theta) / (2 * mpmath.pi)))
        s2.append(float((na * nb * mpmath.sin(theta)) ** 2))
    return tuple(torch.tensor(v, dtype=torch.float64) for v in (j1, j0, s2))


def test_arccos_helper_and_both_callers_match_cho_and_saul():
    x, y = _pairs()
    qx, qy, c = (x * x).sum(1), (y * y).sum(1), (x * y).sum(1)
    e = ((x - y) ** 2).sum(1)
    ref1, ref0, s2 = _cho_saul(x, y)
    scale = (qx * qy).sqrt()
    # J₁ relative to ‖x‖‖y‖; J₀ = (π − θ)/(2π) absolute: the angle of (near-)parallel and
    # antiparallel pairs is resolved to about √ε_float64 (measured ≤ 2.3e-9, at x ∥ 3x)
    _, _, j1, _, j0 = analytic._relu(qx, qy, c, e)
    assert ((j1 - ref1).abs() / scale).max() < 1e-15
    assert (j0 - ref0).abs().max() < 5e-9
    # infinite_width's ReLU and LeakyReLU(0.2) (t = qx·qy/S² − (c/S)²)
    m1, m0 = module._Leaky(0.0)(qx, qy, c)
    assert ((m1 - ref1).abs() / scale).max() < 1e-15
    assert (m0 - ref0).abs().max() < 5e-9
    l1, l0 = module._Leaky(0.2)(qx, qy, c)
    assert ((l1 - (0.2 * c + 0.64 * ref1)).abs() / scale).max() < 1e-15
    assert (l0 - (0.2 + 0.64 * ref0)).abs().max() < 5e-9
    # the helper itself, given the exact t = s²/S²
    S = qx + qy
    t = s2 / (S * S)
    h1, h0, theta, s = analytic._arccos(qx, qy, c, t, S)
    assert ((h1 - ref1).abs() / scale).max() < 1e-14
    assert torch.allclose(theta, math.pi - 2 * math.pi * ref0, rtol=0, atol=1e-12)
    assert torch.allclose(s, scale * theta.sin(), rtol=1e-12, atol=0)


# --------------------------------------------------------------------------------------
# Bad inputs
# --------------------------------------------------------------------------------------

def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2)).double()


X3 = torch.randn(5, 3, generator=G, dtype=torch.float64)


@pytest.mark.parametrize("call,arg", [
    (lambda net, Z: empirical_ntk(net, Z), "x1"),
    (lambda net, Z: EmpiricalNTK(net)(Z, backend="dense"), "X"),
    (lambda net, Z: EmpiricalNTK(net)(Z, backend="blocked"), "X"),
    (lambda net, Z: EmpiricalNTK(net).diag(Z), "X"),
    (lambda net, Z: EmpiricalNTK(net).pairs(Z, Z), "X"),
])
def test_empirical_ntk_of_inputs_the_model_does_not_take(call, arg):
    # was torch's "mat1 and mat2 shapes cannot be multiplied" (the operator path:
    # at the first product, far from the call)
    with pytest.raises(ValueError, match=rf"^{arg} of sample shape \(5,\) does not fit the "
                                         rf"model.*mat1 and mat2"):
        call(_net(), torch.randn(4, 5, dtype=torch.float64))


def test_empirical_ntk_pairs_of_different_sample_shapes():
    with pytest.raises(ValueError, match="X and Y must have the same sample shape"):
        EmpiricalNTK(_net()).pairs(X3, torch.randn(5, 4, dtype=torch.float64))


@pytest.mark.parametrize("layer,name", [(nn.Dropout(0.3), "Dropout"),
                                        (nn.BatchNorm1d(8), "BatchNorm1d")])
def test_empirical_ntk_refuses_random_or_batch_dependent_layers(layer, name):
    # train mode: vmap refused dropout's random draw ("randomness error mode"), batch norm
    # raised "Expected more than 1 value per channel when training", both from inside
    # torch.func; batch norm without running statistics normalizes by the batch in eval
    # mode too
    net = nn.Sequential(nn.Linear(3, 8), layer, nn.ReLU(), nn.Linear(8, 1)).double()
    for call in (lambda: empirical_ntk(net, X3), lambda: EmpiricalNTK(net)(X3).to_dense()):
        with pytest.raises(ValueError, match=rf"layer 1 \({name}\).*model.eval\(\)"):
            call()
    # in eval mode it is the network's deterministic function: Θ = J Jᵀ by autograd
    net.eval()
    J = torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(
        net(x[None]).sum(), list(net.parameters()))]) for x in X3])
    assert torch.allclose(empirical_ntk(net, X3), J @ J.T, rtol=1e-12, atol=1e-12)
    if name == "BatchNorm1d":
        stateless = nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8, track_running_stats=False),
                                  nn.Linear(8, 1)).double().eval()
        with pytest.raises(ValueError, match=r"layer 1 \(BatchNorm1d\)"):
            empirical_ntk(stateless, X3)
    # dropout with p = 0 is the identity in either mode
    plain = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.0), nn.Linear(8, 1)).double()
    J = torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(
        plain(x[None]).sum(), list(plain.parameters()))]) for x in X3])
    assert torch.allclose(empirical_ntk(plain, X3), J @ J.T, rtol=1e-12, atol=1e-12)


def test_empirical_ntk_refuses_rrelu_in_training_mode():
    # random slopes in training mode: vmap's "randomness error mode" from inside torch.func
    net = nn.Sequential(nn.Linear(3, 8), nn.RReLU(), nn.Linear(8, 1)).double()
    with pytest.raises(ValueError, match=r"layer 1 \(RReLU\).*nn\.LeakyReLU"):
        empirical_ntk(net, X3)


@pytest.mark.parametrize("make", [
    lambda **kw: NTK(2, **kw), lambda **kw: NNGP(2, **kw),
    lambda **kw: infinite_width(_mlp(2, 0.0), **kw),
])
@pytest.mark.parametrize("kw,arg", [({"weight_std": [1.0, 2.0]}, "weight_std"),
                                    ({"bias_std": [0.1, 0.2]}, "bias_std")])
def test_infinite_width_kernels_take_one_std_for_all_layers(make, kw, arg):
    # a vector was stored as an ARD hyperparameter; the kernel then failed in the
    # recursion with torch's "expand(...): the number of sizes provided (2) must be
    # greater or equal to the number of dimensions" (or "shape '[]' is invalid")
    with pytest.raises(ValueError, match=rf"^{arg} must be a single number"):
        make(**kw)
    # a 0-d tensor or a one-entry list is one number
    k = make(weight_std=torch.tensor(1.3, dtype=torch.float64), bias_std=[0.2])
    ref = make(weight_std=1.3, bias_std=0.2)
    assert torch.equal(k(Y).to_dense(), ref(Y).to_dense())


def _small():
    return nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 1)).double()


@pytest.mark.parametrize("first", ["ntk", "standard"])
def test_parameterize_twice_is_parameterize_once(first):
    # A second call wrote its weights into the computed copy of the first call's
    # parametrized weight (lost) and stacked another scale: σ_w/√N and σ_b applied twice
    # (ntk twice: the empirical NTK's bias entries 0.0625 instead of σ_b² = 0.25). Then
    # "standard" also works from an "ntk" module (plain weights again).
    from torchkern.ntk import parameterize
    once = parameterize(_small(), "ntk", weight_std=2.0, bias_std=0.5, random_state=1)
    twice = parameterize(parameterize(_small(), first, weight_std=3.0, bias_std=0.1,
                                      random_state=4),
                         "ntk", weight_std=2.0, bias_std=0.5, random_state=1)
    assert torch.equal(once(X3), twice(X3))
    assert torch.allclose(empirical_ntk(once, X3), empirical_ntk(twice, X3), rtol=1e-14,
                          atol=0)
    assert [n for n, _ in once.named_parameters()] == [n for n, _ in twice.named_parameters()]
    plain = parameterize(twice, "standard", random_state=1)
    ref = parameterize(_small(), "standard", random_state=1)
    assert torch.equal(plain(X3), ref(X3))
    assert [n for n, _ in plain.named_parameters()] == [n for n, _ in ref.named_parameters()]


def test_parameterize_arguments():
    from torch.nn.utils import parametrize as P

    from torchkern.ntk import parameterize

    class Double(nn.Module):
        def forward(self, w):
            return 2 * w

    net = _small()
    P.register_parametrization(net[0], "weight", Double())
    with pytest.raises(ValueError, match="has a parametrization of its weight"):
        parameterize(net)
    # int("a"): "invalid literal for int() with base 10"; 2.5 was read as the seed 2
    for bad in ("a", 2.5):
        with pytest.raises(TypeError, match="^random_state must be None, an int, a torch.Generator"):
            parameterize(_small(), random_state=bad)
    a = parameterize(_small(), random_state=7)
    b = parameterize(_small(), random_state=torch.Generator().manual_seed(7))
    assert torch.equal(a(X3), b(X3))


def test_infinite_width_predict_targets_without_columns():
    from torchkern.ntk import infinite_width_predict
    # an (n, 0) prediction came back silently
    with pytest.raises(ValueError, match=r"^y_train must have at least one column"):
        infinite_width_predict(NTK(1), X3, X3[:, :0], X3)


def test_infinite_width_refuses_values_past_the_dtypes_range():
    # x·y/d = 1e400 overflows: the Gram matrix came back NaN silently (the analytic NTK
    # and every other kernel refuse it)
    k = infinite_width(_mlp(2, 0.0, bias=False), kind="nngp")
    for call in (lambda Z: k(Z, backend="dense").to_dense(),
                 lambda Z: k(Z, backend="blocked") @ torch.ones(3, dtype=torch.float64),
                 lambda Z: k.diag(Z)):
        with pytest.raises(ValueError, match="kernel values are not finite"):
            call(Y * 1e200)
    # large but representable: the ReLU NNGP without bias is homogeneous of degree 2
    big = k(Y * 1e100).to_dense()
    assert torch.allclose(big / 1e200, k(Y).to_dense(), rtol=1e-13, atol=0)


@pytest.mark.parametrize("act", [nn.GELU, nn.Tanh, nn.Sigmoid])
def test_quadrature_activations_at_a_zero_input_have_finite_exact_gradients(act):
    # Smooth φ: K(x, y) = E φ(wᵀx)φ(wᵀy) is smooth at x = 0 even without bias. There
    # u ≡ 0 and the quadrature's √q_x had an infinite slope (times dq = 0: NaN), so every
    # gradient of a Gram matrix with a zero input was NaN, the hyperparameters' included;
    # and the quadrature does not see c there, whose derivative is Price's E φ'(u)φ'(v).
    net = nn.Sequential(nn.Linear(D, 8), act(), nn.Linear(8, 8), act(),
                        nn.Linear(8, 1)).double()
    # tanh at order 128: the default order-64 rule is 1.5e-6 off in this derivative
    # (poles near the real axis), 8e-11 at 128 (central differences' own error at 1e-5)
    order = 128 if act is nn.Tanh else 64
    for kind in ("ntk", "nngp"):
        for param in ("ntk", "standard"):
            k = infinite_width(net, param, kind=kind, weight_std=1.3, bias_std=0.0,
                               quadrature_order=order)
            # x = 0 and an ordinary input (no zero-variance unit: the plain quadrature)
            for x0 in (ZERO, ORDINARY):
                g = _input_grad(k, x0)
                ref = _central(lambda x: float(k(x, Y, backend="dense").to_dense().sum()
                                               .detach()), x0, h=1e-5)
                # (central differences of sums of order 1 carry ~1e-11 of rounding)
                assert float((g - ref).abs().max()) < 1e-9 * max(
                    1.0, float(ref.abs().max())), (kind, param, float(x0.abs().sum()))
            X = torch.cat([ZERO, Y])
            p = k.raw_weight_std
            (gp,) = torch.autograd.grad(k(X).to_dense().sum(), [p])
            with torch.no_grad():
                p += 1e-6
                up = float(k(X).to_dense().sum())
                p -= 2e-6
                down = float(k(X).to_dense().sum())
                p += 1e-6
            assert abs(float(gp) - (up - down) / 2e-6) < 1e-7 * abs(float(gp)), (kind, param)


def test_infinite_width_reads_a_module_placed_twice_twice():
    # named_children() yields a shared module once: Sequential(l1, act, l2, act, l3) was
    # read as l1, act, l2, l3 (one ReLU), 0 instead of 0.04 at an antiparallel pair
    e1 = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    X, Z = torch.cat([e1, Y]), torch.cat([-e1, ORDINARY])
    act = nn.ReLU()
    shared = nn.Sequential(nn.Linear(D, WIDTH), act, nn.Linear(WIDTH, WIDTH), act,
                           nn.Linear(WIDTH, 1)).double()
    for kind, cls in (("ntk", NTK), ("nngp", NNGP)):
        for param in ("ntk", "standard"):
            k = infinite_width(shared, param, kind=kind, weight_std=W_STD, bias_std=0.1)
            ref = infinite_width(_mlp(2, 0.0), param, kind=kind, weight_std=W_STD,
                                 bias_std=0.1)
            exact = cls(2, weight_std=W_STD, bias_std=0.1, parameterization=param,
                        width=WIDTH)
            K = k(X, Z).to_dense()
            assert torch.allclose(K, ref(X, Z).to_dense(), rtol=1e-13, atol=0), (kind, param)
            assert torch.allclose(K, exact(X, Z).to_dense(), rtol=1e-12, atol=1e-15), \
                (kind, param)
            assert float(K[0, 0].detach()) > 1e-3


def test_infinite_width_diag_and_pairs_refuse_values_past_the_dtypes_range():
    # k(Z, backend="blocked").diag() and k.pairs(Z, Z) came back [nan, nan, nan] silently
    k = infinite_width(_mlp(2, 0.0, bias=False), kind="nngp")
    Z = Y * 1e200
    for call in (lambda: k(Z, backend="blocked").diag(),
                 lambda: k(Z, Y, backend="blocked").diag(),
                 lambda: k.pairs(Z, Z)):
        with pytest.raises(ValueError, match="kernel values are not finite"):
            call()
    # representable inputs: the diagonal and the pairs are the dense matrix's
    K = k(Y).to_dense()
    assert torch.allclose(k(Y, backend="blocked").diag(), K.diagonal(), rtol=1e-14, atol=0)
    assert torch.allclose(k.pairs(Y, Y), K.diagonal(), rtol=1e-14, atol=0)


def test_empirical_ntk_refuses_rrelu_in_eval_mode_with_advice_that_works():
    # vmap has no rule for aten::rrelu_with_noise in either mode: the advice model.eval()
    # still ended in torch's "vmap: we do not yet support aten::rrelu_with_noise"
    rrelu = nn.RReLU(0.1, 0.3)
    net = nn.Sequential(nn.Linear(3, 8), rrelu, nn.Linear(8, 1)).double().eval()
    for call in (lambda: empirical_ntk(net, X3), lambda: EmpiricalNTK(net)(X3).to_dense()):
        with pytest.raises(ValueError,
                           match=r"layer 1 \(RReLU\).*nn\.LeakyReLU\(\(lower \+ upper\) / 2\)"):
            call()
    # the advice: the same function in eval mode, whose NTK is J Jᵀ by autograd
    x = torch.randn(5, 8, dtype=torch.float64)
    leaky = nn.LeakyReLU((rrelu.lower + rrelu.upper) / 2)
    assert torch.equal(leaky(x), rrelu(x))
    net[1] = leaky
    J = torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(
        net(x[None]).sum(), list(net.parameters()))]) for x in X3])
    assert torch.allclose(empirical_ntk(net, X3), J @ J.T, rtol=1e-12, atol=1e-12)


def test_empirical_ntk_product_runs_no_extra_probe_forward():
    # n_outputs ran a one-sample forward at every K @ V (besides the vjp and jvp passes)
    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.probes = _net(), 0

        def forward(self, x):
            self.probes += x.shape[0] == 1
            return self.body(x)

    net = Counting()
    X = torch.randn(6, 3, dtype=torch.float64)
    K = EmpiricalNTK(net)(X, backend="blocked")
    V = torch.randn(6, 2, dtype=torch.float64)
    before = net.probes
    KV = K @ V
    assert net.probes == before
    assert torch.allclose(KV, empirical_ntk(net, X) @ V, rtol=1e-10, atol=1e-12)
