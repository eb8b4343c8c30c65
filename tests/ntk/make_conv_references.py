"""Generate tests/ntk/conv_references.npz from neural-tangents (run once; not a test).

Environment: the scratch venv of ``make_references.py`` (jax 0.4.30, neural-tangents 0.6.5,
an empty ``neural_tangents.experimental`` registered before the import, float64)::

    PYTHONPATH=. /tmp/ntvenv/bin/python tests/ntk/make_conv_references.py

Inputs: the first 7 scikit-learn digits scaled to [0, 1], as images (n, 1, 8, 8) (X1: 4,
X2: 3) and as sequences (n, 2, 32) (the two halves of each image as two channels); JAX
takes them channels-last. The networks are the specs of ``_conv_cases.CASES`` with
W_std = 1.3, b_std = 0.4 on every layer, ``stax.Dense(1)`` readout. Stored arrays:

- ``{case}_{nngp|ntk}`` — ``kernel_fn(X1, X2, kind)``;
- ``{case}_self_{nngp|ntk}`` for ``SELF_CASES`` — ``kernel_fn(X1, None, kind)``;
- ``ens_{get}_t{t}_mean`` / ``_cov`` — ``predict.gradient_descent_mse_ensemble(kernel_fn,
  XT, YT, learning_rate=0.7, diag_reg=1e-3, diag_reg_absolute_scale=True)`` evaluated with
  ``x_test=X2, get=get, compute_cov=True`` at t in (0.5, 3, None) for the case
  ``c1_relu_flat``, XT the digits 7..14 (8 images), YT (8, 2) standard normal (seed 0).

Tanh and sigmoid have no closed-form kernel in neural-tangents: their references use
``stax.ElementwiseNumerical(fn, deg=300)`` (Gauss–Hermite, converged to ~1e-12 for these
variances).
"""
import os
import sys
import types

import numpy as np

sys.modules["neural_tangents.experimental"] = types.ModuleType("neural_tangents.experimental")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from neural_tangents import predict, stax  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.ntk._conv_cases import B_STD, CASES, SELF_CASES, W_STD  # noqa: E402

DEG = 300


def stax_layers(spec, param):
    acts = {"relu": stax.Relu, "leaky": lambda: stax.LeakyRelu(0.1), "erf": stax.Erf,
            "gelu": lambda: stax.Gelu(approximate=False),
            "tanh": lambda: stax.ElementwiseNumerical(jnp.tanh, DEG),
            "sigmoid": lambda: stax.ElementwiseNumerical(jax.nn.sigmoid, DEG)}
    out = []
    for layer in spec:
        kind = layer[0]
        if kind == "conv":
            _, ch, k, s, pad = layer
            out.append(stax.Conv(ch, (k, k), (s, s), pad, W_std=W_STD, b_std=B_STD,
                                 parameterization=param))
        elif kind == "conv1":
            _, ch, k, s, pad = layer
            out.append(stax.Conv(ch, (k,), (s,), pad, W_std=W_STD, b_std=B_STD,
                                 dimension_numbers=("NWC", "WIO", "NWC"),
                                 parameterization=param))
        elif kind == "act":
            out.append(acts[layer[1]]())
        elif kind == "avgpool":
            k = layer[1]
            out.append(stax.AvgPool((k, k), (k, k), "VALID"))
        elif kind == "gap":
            out.append(stax.GlobalAvgPool())
        elif kind == "flatten":
            out.append(stax.Flatten())
        elif kind == "dense":
            out.append(stax.Dense(layer[1], W_STD, B_STD, parameterization=param))
        elif kind == "res":
            body = stax.serial(*stax_layers(layer[1], param))
            out.append(stax.serial(stax.FanOut(2), stax.parallel(stax.Identity(), body),
                                   stax.FanInSum()))
    return out


def inputs():
    D = load_digits().data / 16.0
    img = D.reshape(-1, 1, 8, 8)
    seq = D.reshape(-1, 2, 32)
    return img, seq


def channels_last(X):
    return np.transpose(X, (0, 2, 3, 1)) if X.ndim == 4 else np.transpose(X, (0, 2, 1))


def main(path):
    img, seq = inputs()
    out = {"W_STD": W_STD, "B_STD": B_STD}
    for name, (spec, param, kind) in CASES.items():
        X = img if kind == "img" else seq
        X1, X2 = channels_last(X[:4]), channels_last(X[4:7])
        kernel_fn = stax.serial(*stax_layers(spec, param))[2]
        for g in ("nngp", "ntk"):
            out[f"{name}_{g}"] = np.asarray(kernel_fn(X1, X2, g))
            if name in SELF_CASES:
                out[f"{name}_self_{g}"] = np.asarray(kernel_fn(X1, None, g))
        print(name, flush=True)
    spec, param, _ = CASES["c1_relu_flat"]
    kernel_fn = stax.serial(*stax_layers(spec, param))[2]
    XT, X2 = channels_last(img[7:15]), channels_last(img[4:7])
    YT = np.random.default_rng(0).standard_normal((8, 2))
    out["YT"] = YT
    predict_fn = predict.gradient_descent_mse_ensemble(
        kernel_fn, XT, YT, learning_rate=0.7, diag_reg=1e-3, diag_reg_absolute_scale=True)
    for g in ("nngp", "ntk"):
        for t in (0.5, 3.0, None):
            mean, cov = predict_fn(t=t, x_test=X2, get=g, compute_cov=True)
            out[f"ens_{g}_t{t}_mean"] = np.asarray(mean)
            out[f"ens_{g}_t{t}_cov"] = np.asarray(cov)
    np.savez_compressed(path, **out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                            "conv_references.npz"))
