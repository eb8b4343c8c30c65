"""Generate tests/ntk/unseen_references.npz from neural-tangents (run once; not a test).

Environment: the scratch venv of tests/ntk/make_references.py (jax 0.4.30, neural-tangents
0.6.5, float64), then ``python tests/ntk/make_unseen_references.py``.

Stored arrays: ``X`` (6, 10) uniform on [0, 1000) (inputs of pixel-like scale, so that the
first layer's variances are ~3e5) with a repeated row, and ``{kind}_erf_d2`` =
``kernel_fn(X, None, kind)`` of ``stax.serial(Dense(7, 1.3, 0.1), Erf(), Dense(7, 1.3, 0.1),
Erf(), Dense(1, 1.3, 0.1))`` for kind in (ntk, nngp).
"""
import sys
import types

import numpy as np

sys.modules["neural_tangents.experimental"] = types.ModuleType("neural_tangents.experimental")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

from neural_tangents import stax  # noqa: E402


def main(path):
    rng = np.random.default_rng(15)
    X = rng.uniform(0.0, 1000.0, (6, 10))
    X[5] = X[1]
    layers = []
    for _ in range(2):
        layers += [stax.Dense(7, 1.3, 0.1), stax.Erf()]
    kernel_fn = stax.serial(*layers, stax.Dense(1, 1.3, 0.1))[2]
    out = {"X": X}
    for kind in ("ntk", "nngp"):
        out[f"{kind}_erf_d2"] = np.asarray(kernel_fn(X, None, kind))
    np.savez(path, **out)


if __name__ == "__main__":
    import os
    main(os.path.join(os.path.dirname(os.path.abspath(__file__)), "unseen_references.npz"))
