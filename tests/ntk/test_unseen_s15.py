"""NTKs on unusual but valid networks and inputs, against brute force (per-sample autograd
Jacobians, summed by hand) and neural-tangents 0.6.5 (tests/ntk/references.npz)."""
import copy
import os

import numpy as np
import pytest
import torch
from torch import nn

from torchkern.ntk import NNGP, NTK, EmpiricalNTK, Erf, empirical_ntk, infinite_width

D64 = torch.float64


class _SharedSubmodule(nn.Module):
    """One Linear reachable as ``a`` and ``b`` (applied twice)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = self.a
        self.out = nn.Linear(3, 2)

    def forward(self, x):
        return self.out(torch.tanh(self.b(torch.tanh(self.a(x)))))


class _TiedParameter(nn.Module):
    """One weight held by two Linears, a buffer, and a frozen bias."""

    def __init__(self):
        super().__init__()
        self.a, self.c, self.out = nn.Linear(3, 3), nn.Linear(3, 3), nn.Linear(3, 2)
        self.c.weight = self.a.weight
        self.register_buffer("scale", torch.tensor(1.5))
        self.out.bias.requires_grad_(False)

    def forward(self, x):
        return self.out(torch.tanh(self.c(torch.tanh(self.a(x)))) * self.scale)


def _brute_ntk(net, X, Y):
    """(1/o) Σ_a ⟨∂f_a(x)/∂θ, ∂f_a(y)/∂θ⟩ from torch.autograd.grad, one output at a time."""
    params = [p for p in net.parameters() if p.requires_grad]

    def jac(x):
        out = net(x[None]).reshape(-1)
        return torch.stack([torch.cat([g.reshape(-1) for g in
                                       torch.autograd.grad(out[a], params, retain_graph=True)])
                            for a in range(out.numel())])

    JX, JY = [jac(x) for x in X], [jac(y) for y in Y]
    return torch.stack([torch.stack([(a * b).sum() / a.shape[0] for b in JY]) for a in JX])


@pytest.mark.parametrize("make", [_SharedSubmodule, _TiedParameter])
def test_empirical_ntk_of_tied_weights_equals_autograd_and_leaves_the_network_alone(make):
    # functional_call's weight tying left detached tensors in place of a shared
    # submodule's parameters: the network lost them (parameters(), autograd), and the
    # next NTK of it, missing them, was 0.7 off
    torch.manual_seed(0)
    net = make().to(D64)
    X, Y = torch.randn(5, 3, dtype=D64), torch.randn(4, 3, dtype=D64)
    ref = _brute_ntk(copy.deepcopy(net), X, Y).detach()
    before = dict(net.named_parameters(remove_duplicate=False))
    for _ in range(2):                                   # a second call sees the same net
        for method in ("jacobian", "vjp-jvp"):
            torch.testing.assert_close(empirical_ntk(net, X, Y, method=method), ref,
                                       rtol=1e-12, atol=1e-13)
        K = EmpiricalNTK(net)(X, Y, backend="blocked")     # matrix-free products
        V = torch.randn(4, 2, dtype=D64)
        torch.testing.assert_close(K @ V, ref @ V, rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(K.rows(torch.tensor([1, 3])), ref[[1, 3]], rtol=1e-12,
                                   atol=1e-13)
    after = dict(net.named_parameters(remove_duplicate=False))
    assert after.keys() == before.keys()
    assert all(after[k] is before[k] and isinstance(after[k], nn.Parameter) for k in before)
    # the network still trains: every parameter gets a gradient
    net(X).sum().backward()
    assert all(p.grad is not None for p in net.parameters() if p.requires_grad)


# -- analytic kernels at tiny input scales -------------------------------------------------

_REF = np.load(os.path.join(os.path.dirname(__file__), "references.npz"))
_X1, _X2 = torch.tensor(_REF["X1"]), torch.tensor(_REF["X2"])
_W_STD = float(_REF["W_STD"])


@pytest.mark.parametrize("scale", [1e-6, 1e-8, 1e-12])
def test_relu_kernels_of_tiny_inputs_match_neural_tangents(scale):
    # Without bias the ReLU network is homogeneous: K(aX, aY) = a² K(X, Y), neural-tangents'
    # b_std=None kernels at scale 1 (references.npz). safe_sqrt's absolute floor 1e-15 on
    # ‖x‖‖y‖ sin θ bent the angle: the NTK was 2e-4 off at a = 1e-6, 130% at 1e-8
    X, Y = scale * _X1, scale * _X2
    net = nn.Sequential(nn.Linear(4, 7, bias=False), nn.ReLU(), nn.Linear(7, 7, bias=False),
                        nn.ReLU(), nn.Linear(7, 1, bias=False))
    for kind, cls in (("ntk", NTK), ("nngp", NNGP)):
        ref = torch.tensor(_REF[f"{kind}_relu_ntk_d2_nobias"]) * scale ** 2
        kernels = (cls(2, "relu", weight_std=_W_STD, bias_std=None),
                   infinite_width(net, kind=kind, weight_std=_W_STD))
        for k in kernels:
            torch.testing.assert_close(k(X, Y).to_dense(), ref, rtol=1e-6, atol=0)
        got32 = kernels[0](X.float(), Y.float()).to_dense()
        torch.testing.assert_close(got32, ref.float(), rtol=1e-4, atol=0)


def test_erf_kernels_of_large_inputs_in_float32_match_neural_tangents():
    # Inputs of pixel scale (first-layer variances ~3e5): (1 + 2qx)(1 + 2qy) − 4c² cancels
    # to ε·q² near the diagonal; in float32 the NTK was 16% off. Through e = E (u − v)²
    # from exact differences it keeps float32's accuracy (references from
    # tests/ntk/make_unseen_references.py; neural-tangents' own float64 product form is
    # good to ~1e-10 here)
    # infinite_width of the same torch network (10% off in float32) runs the layers up to
    # its first erf in float64
    ref_file = np.load(os.path.join(os.path.dirname(__file__), "unseen_references.npz"))
    X = torch.tensor(ref_file["X"])
    net = nn.Sequential(nn.Linear(10, 7), Erf(), nn.Linear(7, 7), Erf(), nn.Linear(7, 1))
    for kind, cls in (("ntk", NTK), ("nngp", NNGP)):
        ref = torch.tensor(ref_file[f"{kind}_erf_d2"])
        for k in (cls(2, "erf", weight_std=1.3, bias_std=0.1),
                  infinite_width(net, kind=kind, weight_std=1.3, bias_std=0.1)):
            for backend in ("dense", "blocked"):
                torch.testing.assert_close(k(X, backend=backend).to_dense(), ref, rtol=1e-8,
                                           atol=0)
                got32 = k(X.float(), backend=backend).to_dense()
                assert got32.dtype == torch.float32
                torch.testing.assert_close(got32.double(), ref, rtol=0,
                                           atol=2e-6 * float(ref.abs().max()))
            assert k.diag(X.float()).dtype == torch.float32
