"""Generate tests/ntk/zero_references.npz from neural-tangents (run once; not a test).

Environment: the scratch venv of ``make_references.py`` (jax 0.4.30, neural-tangents 0.6.5,
float64)::

    PYTHONPATH=. /tmp/ntvenv/bin/python tests/ntk/make_zero_references.py

Inputs where a pre-activation has variance exactly 0: a zero input with ``b_std`` 0 or
None, where neural-tangents' ReLU takes the angle between a zero-variance unit and any
other as π/2 (``_arctan2(0, 0, fill_zero=π/2)``, slope E φ'(u)φ'(v) = 1/4). Stored arrays:

- ``X1`` (4, 4) with row 0 zero, ``X2`` (3, 4) with row 1 zero;
- ``fc_{act}_{param}_b{b}_d{depth}_{kind}`` — ``kernel_fn(X1, X2, kind)`` of
  ``stax.serial(*[Dense(7, 1.3, b, param), act] * depth, Dense(1, 1.3, b, param))`` for act
  in (relu, leaky, erf, gelu), param in (ntk, standard), b in (0.0, None, 0.4), depth in
  (1, 2, 3), kind in (nngp, ntk); ``..._self_{kind}`` the same for ``kernel_fn(X1, None)``;
- ``conv_{case}_b0_{kind}`` — ``kernel_fn(D1, D2, kind)`` for the ``_conv_cases.CASES``
  networks ``ZERO_CASES`` with b_std = 0 on every layer (W_std = 1.3): digits images
  (whose blank borders have pixel variance 0 without bias), D1 = digits 0..2 and a zero
  image, D2 = digits 4..6.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.ntk import make_conv_references as conv  # noqa: E402  (registers the stub)

import jax.numpy as jnp  # noqa: E402
from neural_tangents import stax  # noqa: E402

W_STD, WIDTH = 1.3, 7
ACTS = {"relu": stax.Relu, "leaky": lambda: stax.LeakyRelu(0.1), "erf": stax.Erf,
        "gelu": lambda: stax.Gelu(approximate=False)}
BIASES = {"0": 0.0, "None": None, "0.4": 0.4}
ZERO_CASES = ("c2_relu_gap", "c2_relu_gap_std", "c3_mixed_flat", "c1_leaky_flat",
              "c1_gelu_flat")


def inputs():
    rng = np.random.default_rng(7)
    X1, X2 = rng.standard_normal((4, 4)), rng.standard_normal((3, 4))
    X1[0] = 0.0
    X2[1] = 0.0
    return X1, X2


def main(path):
    X1, X2 = inputs()
    out = {"X1": X1, "X2": X2, "W_STD": W_STD, "WIDTH": WIDTH}
    for act, make in ACTS.items():
        for param in ("ntk", "standard"):
            for b_name, b in BIASES.items():
                for depth in (1, 2, 3):
                    layers = []
                    for _ in range(depth):
                        layers += [stax.Dense(WIDTH, W_STD, b, parameterization=param), make()]
                    layers.append(stax.Dense(1, W_STD, b, parameterization=param))
                    kernel_fn = stax.serial(*layers)[2]
                    key = f"fc_{act}_{param}_b{b_name}_d{depth}"
                    for kind in ("nngp", "ntk"):
                        out[f"{key}_{kind}"] = np.asarray(kernel_fn(X1, X2, kind))
                        out[f"{key}_self_{kind}"] = np.asarray(kernel_fn(X1, None, kind))
    img, _ = conv.inputs()
    D1 = np.concatenate([img[:3], np.zeros_like(img[:1])])
    D2 = img[4:7]
    conv.B_STD = 0.0  # stax_layers reads it for every Dense and Conv
    for name in ZERO_CASES:
        spec, param, _ = conv.CASES[name]
        kernel_fn = stax.serial(*conv.stax_layers(spec, param))[2]
        for kind in ("nngp", "ntk"):
            out[f"conv_{name}_b0_{kind}"] = np.asarray(
                kernel_fn(conv.channels_last(D1), conv.channels_last(D2), kind))
    np.savez_compressed(path, **out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                            "zero_references.npz"))
