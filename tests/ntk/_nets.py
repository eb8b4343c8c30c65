"""Small networks for the NTK tests."""
import math

import torch
from torch import nn


class NTKDense(nn.Module):
    """z = (σ_w/√N) W x + σ_b b with W, b ~ N(0, 1): neural-tangents' ``stax.Dense`` in the
    NTK parameterization."""

    def __init__(self, n_in, n_out, weight_std, bias_std, generator):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in, generator=generator,
                                               dtype=torch.float64))
        self.bias = nn.Parameter(torch.randn(n_out, generator=generator, dtype=torch.float64))
        self.scale, self.bias_std = weight_std / math.sqrt(n_in), bias_std

    def forward(self, x):
        return self.scale * x @ self.weight.T + self.bias_std * self.bias


def ntk_mlp(d, width, depth, weight_std=1.0, bias_std=0.0, activation=nn.ReLU, n_out=1,
            seed=0):
    g = torch.Generator().manual_seed(seed)
    layers, n_in = [], d
    for _ in range(depth):
        layers += [NTKDense(n_in, width, weight_std, bias_std, g), activation()]
        n_in = width
    layers.append(NTKDense(n_in, n_out, weight_std, bias_std, g))
    return nn.Sequential(*layers)


def autograd_jacobian(model, X):
    """J(x_i) (n, o, P) by per-sample, per-output ``torch.autograd.grad`` calls: the
    definition, written without torch.func."""
    params = [p for p in model.parameters() if p.requires_grad]

    def jac(x):
        out = model(x[None]).reshape(-1)
        rows = []
        for a in range(out.shape[0]):
            g = torch.autograd.grad(out[a], params, retain_graph=True)
            rows.append(torch.cat([t.reshape(-1) for t in g]))
        return torch.stack(rows)

    return torch.stack([jac(x) for x in X]).detach()


def autograd_ntk(model, X1, X2):
    """Θ(x_i, x'_j) (n, m, o, o) by a double loop over samples of Jacobian products."""
    J1, J2 = autograd_jacobian(model, X1), autograd_jacobian(model, X2)
    return torch.stack([torch.stack([a @ b.T for b in J2]) for a in J1])
