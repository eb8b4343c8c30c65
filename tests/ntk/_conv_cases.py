"""The networks of the stored convolutional references, written once as specs that
``make_conv_references.py`` turns into neural-tangents ``stax`` layers and the tests into
torch modules.

A spec is a list of layers:

- ``("conv", out, k, stride, padding)`` — 2-D convolution, k × k filter, padding "SAME" or
  "VALID" in JAX's sense (torch: ``padding="same"`` at stride 1; at stride 2 JAX pads the
  extra row and column at the end, which torch writes as ``ZeroPad2d`` + a VALID conv);
- ``("conv1", out, k, stride, padding)`` — the same in 1-D;
- ``("act", name)`` — relu, leaky (slope 0.1), erf, gelu, tanh, sigmoid;
- ``("avgpool", k)``, ``("gap",)``, ``("flatten",)``, ``("dense", out)``;
- ``("res", body)`` — x + body(x).
"""
import torch
from torch import nn

from torchkern.ntk import Erf, Residual

W_STD, B_STD = 1.3, 0.4
C = 3  # hidden channels (only the standard-parameterization NTK depends on them)

CASES = {
    # name: (spec, parameterization, input) with input "img" (n, 1, 8, 8) or "seq" (n, 2, 32)
    "c1_relu_flat": ([("conv", C, 3, 1, "SAME"), ("act", "relu"), ("flatten",),
                      ("dense", 1)], "ntk", "img"),
    "c2_relu_gap": ([("conv", C, 3, 1, "SAME"), ("act", "relu"), ("conv", C, 3, 1, "VALID"),
                     ("act", "relu"), ("gap",), ("dense", 1)], "ntk", "img"),
    "c2_relu_gap_std": ([("conv", C, 3, 1, "SAME"), ("act", "relu"),
                         ("conv", C, 3, 1, "VALID"), ("act", "relu"), ("gap",),
                         ("dense", 1)], "standard", "img"),
    "c3_mixed_flat": ([("conv", C, 3, 1, "SAME"), ("act", "erf"), ("conv", C, 3, 2, "VALID"),
                       ("act", "leaky"), ("conv", C, 3, 1, "SAME"), ("act", "relu"),
                       ("flatten",), ("dense", 1)], "ntk", "img"),
    "c2_stride2_same": ([("conv", C, 3, 2, "SAME"), ("act", "relu"), ("conv", C, 3, 2, "SAME"),
                         ("act", "relu"), ("flatten",), ("dense", 1)], "ntk", "img"),
    "c1_leaky_flat": ([("conv", C, 3, 1, "VALID"), ("act", "leaky"), ("flatten",),
                       ("dense", 1)], "ntk", "img"),
    "c1_erf_gap": ([("conv", C, 3, 1, "SAME"), ("act", "erf"), ("gap",), ("dense", 1)],
                   "ntk", "img"),
    "c1_gelu_flat": ([("conv", C, 3, 1, "SAME"), ("act", "gelu"), ("flatten",),
                      ("dense", 1)], "ntk", "img"),
    "c1_tanh_flat": ([("conv", C, 3, 1, "SAME"), ("act", "tanh"), ("flatten",),
                      ("dense", 1)], "ntk", "img"),
    "c1_sigmoid_flat": ([("conv", C, 3, 1, "SAME"), ("act", "sigmoid"), ("flatten",),
                         ("dense", 1)], "ntk", "img"),
    "c2_avgpool_std": ([("conv", C, 3, 1, "SAME"), ("act", "relu"), ("avgpool", 2),
                        ("conv", C, 3, 1, "SAME"), ("act", "relu"), ("flatten",),
                        ("dense", 1)], "standard", "img"),
    "c2_residual_gap": ([("conv", C, 3, 1, "SAME"),
                         ("res", [("act", "relu"), ("conv", C, 3, 1, "SAME")]),
                         ("act", "relu"), ("gap",), ("dense", 1)], "ntk", "img"),
    "c1_dense_head": ([("conv", C, 3, 1, "VALID"), ("act", "relu"), ("flatten",),
                       ("dense", 4), ("act", "relu"), ("dense", 1)], "ntk", "img"),
    "conv1d_gap": ([("conv1", C, 3, 1, "SAME"), ("act", "relu"), ("conv1", C, 3, 2, "VALID"),
                    ("act", "relu"), ("gap",), ("dense", 1)], "ntk", "seq"),
}
# Cases also stored for kernel_fn(X1, None): the symmetric Gram, diagonal included.
SELF_CASES = ("c2_relu_gap", "c3_mixed_flat")


def _jax_same_pads(n, k, s):
    out = -(-n // s)
    total = max((out - 1) * s + k - n, 0)
    return total // 2, total - total // 2


def torch_net(spec, shape):
    """The torch module of ``spec`` for samples of ``shape`` ((C, H, W) or (C, L))."""
    layers, nd = [], len(shape) - 1
    acts = {"relu": nn.ReLU, "leaky": lambda: nn.LeakyReLU(0.1), "erf": Erf, "gelu": nn.GELU,
            "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}

    def out_shape():
        with torch.no_grad():
            return tuple(nn.Sequential(*layers)(torch.zeros(1, *shape)).shape[1:])

    for layer in spec:
        kind = layer[0]
        if kind in ("conv", "conv1"):
            _, out, k, s, pad = layer
            Conv = nn.Conv2d if nd == 2 else nn.Conv1d
            ch, *size = out_shape()
            if pad == "SAME" and s == 1:
                layers.append(Conv(ch, out, k, padding="same"))
            elif pad == "SAME":
                pads = [_jax_same_pads(n, k, s) for n in size]
                flat = [p for lo_hi in reversed(pads) for p in lo_hi]
                layers.append((nn.ZeroPad2d if nd == 2 else nn.ZeroPad1d)(tuple(flat)))
                layers.append(Conv(ch, out, k, stride=s))
            else:
                layers.append(Conv(ch, out, k, stride=s))
        elif kind == "act":
            layers.append(acts[layer[1]]())
        elif kind == "avgpool":
            layers.append((nn.AvgPool2d if nd == 2 else nn.AvgPool1d)(layer[1]))
        elif kind == "gap":
            layers += [(nn.AdaptiveAvgPool2d if nd == 2 else nn.AdaptiveAvgPool1d)(1),
                       nn.Flatten()]
        elif kind == "flatten":
            layers.append(nn.Flatten())
        elif kind == "dense":
            layers.append(nn.Linear(out_shape()[0], layer[1]))
        elif kind == "res":
            layers.append(Residual(torch_net(layer[1], out_shape())))
        else:
            raise ValueError(kind)
    return nn.Sequential(*layers)
