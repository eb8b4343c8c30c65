"""Kernel algebra's bad operands, and float32 Grams whose scaled inputs overflow."""
import numpy as np
import pytest
import torch

import torchkern as tk


@pytest.mark.parametrize("expr, op", [
    (lambda k: k * "a", r"\*"), (lambda k: "a" * k, r"\*"), (lambda k: k * [1], r"\*"),
    (lambda k: [1] * k, r"\*"), (lambda k: k * None, r"\*"), (lambda k: k * 2j, r"\*"),
    (lambda k: k + "a", r"\+"), (lambda k: k + None, r"\+"), (lambda k: None + k, r"\+"),
    (lambda k: k + 1.5, r"\+"), (lambda k: k + torch.zeros(2), r"\+"),
])
def test_kernel_algebra_names_what_it_accepts(expr, op):
    # Python's own messages ("can't multiply sequence by non-int of type 'RBF'",
    # "unsupported operand type(s)") said neither what a kernel combines with nor which side
    with pytest.raises(TypeError, match=rf"kernel {op} .*: expected a Kernel"):
        expr(tk.RBF())


def test_kernel_algebra_keeps_numbers_zero_and_sum():
    X = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    k = tk.RBF(lengthscale=0.7)
    D = k(X, backend="dense").to_dense()
    L = tk.Linear()(X, backend="dense").to_dense()
    for c in (2, 2.0, np.float32(2.0), np.array(2.0), torch.tensor(2.0)):
        for s in (c * k, k * c):
            torch.testing.assert_close(s(X, backend="dense").to_dense(), 2 * D)
    # 0 in any real 0-d form is the start of a sum
    for z in (0, 0.0, np.int64(0), np.array(0.0), torch.tensor(0.0)):
        assert (z + k) is k and (k + z) is k
    s = sum([k, tk.Linear()], torch.tensor(0.0))
    torch.testing.assert_close(s(X, backend="dense").to_dense(), D + L)
