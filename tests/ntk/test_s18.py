"""Sweep s18 of the NTK area: bad arguments refused by name, attributes re-checked."""
import pytest
import torch

from torchkern.ntk import NTK, infinite_width_predict


def _data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(12, 3, dtype=torch.float64, generator=g)
    return X, X[:, 0].clone()


@pytest.mark.parametrize("kw, match", [
    (dict(t=1.0, max_iter=0), "max_iter"),      # was UnboundLocalError in the Lanczos
    (dict(t=1.0, max_iter=1.5), "max_iter"),    # was a TypeError naming nothing
    (dict(t=1.0, tol=-1.0), "tol"),             # was accepted silently
])
def test_infinite_width_predict_refuses_bad_solver_settings_by_name(kw, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        infinite_width_predict(NTK(depth=1), X, y, backend="blocked", **kw)


@pytest.mark.parametrize("attr, value, match", [
    ("activation", "ReLU", "activation"),          # silently gave the erf kernel
    ("depth", -1, "depth"),                        # AttributeError in the recursion
    ("parameterization", "Standard", "parameterization"),   # silently the NTK one
])
@pytest.mark.parametrize("call", ["gram", "diag", "pairs"])
def test_ntk_attributes_set_after_construction_are_checked(attr, value, match, call):
    X, _ = _data()
    k = NTK(depth=1)
    setattr(k, attr, value)
    with pytest.raises(ValueError, match=match):
        {"gram": lambda: k(X).to_dense(), "diag": lambda: k.diag(X),
         "pairs": lambda: k.pairs(X, X)}[call]()



@pytest.mark.parametrize("attr, value", [
    ("kind", "NTK"),                     # silently the NNGP
    ("parameterization", "Standard"),    # silently the NTK parameterization
    ("block_pairs", 0),                  # no check at all
])
@pytest.mark.parametrize("call", ["gram", "diag"])
def test_infinite_width_attributes_set_after_construction_are_checked(attr, value, call):
    from torch import nn
    from torchkern.ntk import infinite_width
    X, _ = _data()
    k = infinite_width(nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1)))
    setattr(k, attr, value)
    with pytest.raises(ValueError, match=attr):
        k(X).to_dense() if call == "gram" else k.diag(X)


def test_infinite_width_quadrature_order_set_after_construction_is_used():
    from torch import nn
    from torchkern.ntk import infinite_width
    X, _ = _data()
    net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    k = infinite_width(net)
    k.quadrature_order = 4          # was ignored: the 64-node rule stayed
    ref = infinite_width(net, quadrature_order=4)
    torch.testing.assert_close(k(X).to_dense(), ref(X).to_dense())


def test_empirical_ntk_kernel_checks_its_arguments():
    from torch import nn
    from torchkern.ntk import EmpiricalNTK
    X, _ = _data()
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    with pytest.raises(ValueError, match="chunk_size"):
        EmpiricalNTK(net, chunk_size=0)        # accepted until the first call
    k = EmpiricalNTK(net)
    k.method = "jac"                           # silently ran the vjp-jvp products
    for call in (lambda: k(X), lambda: k.diag(X), lambda: k.pairs(X, X)):
        with pytest.raises(ValueError, match="method"):
            call()


def test_parameterize_without_a_seed_draws_from_the_global_generator():
    # None was a fixed seed 0: every network of an unseeded ensemble was the same one
    from torch import nn
    from torchkern.ntk import parameterize

    def weights(net):
        return torch.cat([p.detach().reshape(-1) for p in net.parameters()])

    def make():
        return parameterize(nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 1)),
                            "standard", bias_std=0.1)
    torch.manual_seed(3)
    a = make()
    b = make()
    torch.manual_seed(3)
    c = make()
    assert not torch.equal(weights(a), weights(b))
    assert torch.equal(weights(a), weights(c))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_infinite_width_half_precision_inputs_compute_in_float32(dtype):
    # the recursion ran in half precision: 1e-3 (float16) / 4e-3 (bfloat16) off, and a
    # float16 Gram matrix came out
    from torch import nn
    from torchkern.ntk import infinite_width
    g = torch.Generator().manual_seed(1)
    X = (30 * torch.randn(20, 3, generator=g)).to(dtype)
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(),
                        nn.Linear(8, 1))
    k = infinite_width(net, bias_std=0.5)
    K = k(X).to_dense()
    ref = k(X.to(torch.float64)).to_dense()
    assert K.dtype == torch.float32
    torch.testing.assert_close(K.double(), ref, rtol=1e-5, atol=1e-5 * float(ref.abs().max()))


def test_infinite_width_set_params_of_a_constructor_argument():
    # TypeError: __init__() missing 1 required positional argument: 'module'
    from torch import nn
    from torchkern.ntk import infinite_width
    X, _ = _data()
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    k = infinite_width(net, bias_std=0.2).set_params(kind="nngp")
    ref = infinite_width(net, kind="nngp", bias_std=0.2)
    torch.testing.assert_close(k(X).to_dense(), ref(X).to_dense())


@pytest.mark.parametrize("kw", [dict(method="vjp-jvp"), dict(chunk_size=2)])
def test_empirical_ntk_set_params_of_a_constructor_argument(kw):
    # TypeError: __init__() missing 1 required positional argument: 'model'
    from torch import nn
    from torchkern.ntk import EmpiricalNTK, empirical_ntk
    X, _ = _data()
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    k = EmpiricalNTK(net).set_params(**kw)
    assert k.model is net and all(getattr(k, a) == v for a, v in kw.items())
    torch.testing.assert_close(k(X).to_dense(), empirical_ntk(net, X, method="jacobian"))


def test_ntk_set_params_keeps_layers_without_bias():
    # bias_std=None became bias_std=0 in the rebuild: the standard NTK gained its bias term
    X, _ = _data()
    make = NTK
    kw = dict(bias_std=None, parameterization="standard", width=16)
    k = make(depth=1, **kw).set_params(depth=2)
    torch.testing.assert_close(k(X).to_dense(), make(depth=2, **kw)(X).to_dense())


def test_infinite_width_predict_cg_takes_max_iter_zero():
    # t = ∞ on a lazy Gram is CG, which takes max_iter=0 (scipy's cg too): the start x = 0,
    # so a zero prediction, with a ConvergenceWarning; it was refused since the Lanczos
    # check (finite t needs >= 1 step)
    from torchkern.linalg import ConvergenceWarning
    X, y = _data()
    with pytest.warns(ConvergenceWarning):
        out = infinite_width_predict(NTK(depth=1), X, y, backend="blocked", max_iter=0)
    torch.testing.assert_close(out, torch.zeros_like(y))
    with pytest.raises(ValueError, match="max_iter"):
        infinite_width_predict(NTK(depth=1), X, y, backend="blocked", max_iter=-1)


def test_infinite_width_integer_inputs_give_a_float64_gram():
    # integers were read in the default dtype (float32), unlike as_tensor (float64)
    from torch import nn
    from torchkern.ntk import infinite_width
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    k = infinite_width(net, bias_std=0.3)
    Xi = torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 10000001]])
    K = k(Xi).to_dense()
    assert K.dtype == torch.float64
    torch.testing.assert_close(K, k(Xi.to(torch.float64)).to_dense())
