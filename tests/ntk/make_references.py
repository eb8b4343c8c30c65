"""Generate tests/ntk/references.npz from neural-tangents (run once; not a test).

Environment (offline, in a scratch venv so the project's own environment is unchanged)::

    python -m venv /tmp/ntvenv --system-site-packages
    /tmp/ntvenv/bin/pip install "jax==0.4.30" "jaxlib==0.4.30" frozendict
    /tmp/ntvenv/bin/pip install --no-deps neural-tangents==0.6.5
    /tmp/ntvenv/bin/python tests/ntk/make_references.py

neural_tangents.experimental needs TensorFlow, so an empty module is registered in its
place before the import. Everything is float64 (jax_enable_x64).

Stored arrays (X1: (6, 4), X2: (5, 4) inputs, the second set containing a copy of a row
of the first and a rescaled row, so that exact and near-diagonal angles are covered):

- ``{kind}_{act}_{param}_d{depth}`` — ``kernel_fn(X1, X2, kind)`` of
  ``stax.serial(*[Dense(W, W_std, b_std, parameterization), act()] * depth,
  Dense(1, W_std, b_std, parameterization))``, kind in (nngp, ntk), act in (relu, erf),
  param in (ntk, standard), depth in (1, 2, 3), W_std = 1.3, b_std = 0.4, hidden width W
  = 7 (only the standard NTK depends on it);
- ``{kind}_{act}_ntk_d3_self`` — ``kernel_fn(X1, None, kind)`` (diagonal included);
- ``{kind}_relu_ntk_d2_nobias`` — the same with ``b_std=None``;
- ``pred_t{t}`` — ``gradient_descent_mse_ensemble(kernel_fn, X1, Y1, learning_rate=0.7,
  diag_reg=1e-3, diag_reg_absolute_scale=True)`` mean NTK prediction on X2 at time t
  (t = 0.5, 3, inf) for the ReLU depth-2 NTK network, with ``Y1`` of shape (6, 2).
"""
import sys
import types

import numpy as np

sys.modules["neural_tangents.experimental"] = types.ModuleType("neural_tangents.experimental")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from neural_tangents import predict, stax  # noqa: E402

W_STD, B_STD, WIDTH = 1.3, 0.4, 7


def network(depth, act, param, b_std=B_STD):
    layers = []
    for _ in range(depth):
        layers += [stax.Dense(WIDTH, W_STD, b_std, parameterization=param),
                   stax.Relu() if act == "relu" else stax.Erf()]
    layers.append(stax.Dense(1, W_STD, b_std, parameterization=param))
    return stax.serial(*layers)[2]


def main(path):
    rng = np.random.default_rng(0)
    X1 = rng.standard_normal((6, 4))
    X2 = rng.standard_normal((5, 4))
    X2[0] = X1[2]              # exact repeat: θ = 0
    X2[1] = 2.5 * X1[4]        # same direction, other norm
    X2[2] = X1[1] + 1e-6 * rng.standard_normal(4)   # nearly equal
    out = {"X1": X1, "X2": X2, "W_STD": W_STD, "B_STD": B_STD, "WIDTH": WIDTH}
    for act in ("relu", "erf"):
        for param in ("ntk", "standard"):
            for depth in (1, 2, 3):
                kernel_fn = network(depth, act, param)
                for kind in ("nngp", "ntk"):
                    out[f"{kind}_{act}_{param}_d{depth}"] = np.asarray(
                        kernel_fn(jnp.asarray(X1), jnp.asarray(X2), kind))
    for act in ("relu", "erf"):
        kernel_fn = network(3, act, "ntk")
        for kind in ("nngp", "ntk"):
            out[f"{kind}_{act}_ntk_d3_self"] = np.asarray(kernel_fn(X1, None, kind))
    kernel_fn = network(2, "relu", "ntk", b_std=None)
    for kind in ("nngp", "ntk"):
        out[f"{kind}_relu_ntk_d2_nobias"] = np.asarray(kernel_fn(X1, X2, kind))
    kernel_fn = network(2, "relu", "ntk")
    Y1 = rng.standard_normal((6, 2))
    out["Y1"] = Y1
    predict_fn = predict.gradient_descent_mse_ensemble(
        kernel_fn, X1, Y1, learning_rate=0.7, diag_reg=1e-3, diag_reg_absolute_scale=True)
    for t in (0.5, 3.0, None):
        out[f"pred_t{t}"] = np.asarray(predict_fn(t=t, x_test=X2, get="ntk"))
    np.savez(path, **out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else __file__.replace("make_references.py",
                                                                 "references.npz"))
