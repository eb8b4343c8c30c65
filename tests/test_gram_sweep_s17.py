"""KernelMatrix pieces (rows, cols, submatrix) refuse indices they cannot honour, by the
argument's name, on every representation — as the structured inputs' indices do."""
import warnings

import numpy as np
import pytest
import torch

import torchkern as tk

BACKENDS = ["dense", "blocked", "compiled"]


def _matrix(backend):
    X = torch.linspace(-1, 1, 10, dtype=torch.float64).reshape(5, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tk.Matern(1.5)(X, backend=backend), tk.Matern(1.5)(X, backend="dense").to_dense()


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_indices_refused(backend):
    # were truncated to integers: rows([1.7]) returned row 1
    K, _ = _matrix(backend)
    with pytest.raises(IndexError, match="rows must hold integers"):
        K.rows(torch.tensor([1.7]))
    with pytest.raises(IndexError, match="cols must hold integers"):
        K.cols([0.5, 2.0])
    with pytest.raises(IndexError, match="rows must hold integers"):
        K.submatrix(torch.tensor([1.0]), [0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_boolean_mask_of_another_length_refused(backend):
    # a mask of length 2 on 5 rows selected row 0; a mask of the right length still works
    K, D = _matrix(backend)
    with pytest.raises(IndexError, match="rows: a boolean mask must have length 5, got 2"):
        K.rows(torch.tensor([True, False]))
    with pytest.raises(IndexError, match="cols: a boolean mask must have length 5"):
        K.submatrix([0], torch.tensor([False, True, True]))
    mask = torch.tensor([True, False, True, False, True])
    torch.testing.assert_close(K.rows(mask), D[mask])
    torch.testing.assert_close(K.submatrix(mask, mask), D[mask][:, mask])


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_range_indices_name_the_argument(backend):
    # the dense submatrix read the next row's entry for a column past the end (its flat
    # gather), the others raised torch's IndexError without the argument's name
    K, D = _matrix(backend)
    with pytest.raises(IndexError, match="cols holds indices outside"):
        K.submatrix([0], [9])
    with pytest.raises(IndexError, match="cols holds indices outside"):
        K.cols([5])
    with pytest.raises(IndexError, match="rows holds indices outside"):
        K.rows([-6])
    with pytest.raises(IndexError, match="rows must be an int, a slice"):
        K.rows("a")
    torch.testing.assert_close(K.submatrix([-1, 0], [4, -5]), D[[4, 0]][:, [4, 0]])


def test_row_blocks_size_checked():
    # 0 failed inside range(), -1 gave no blocks at all (nothing iterated, silently)
    K, D = _matrix("blocked")
    for size in (0, -1, 2.5):
        with pytest.raises(ValueError, match="block_size must be an int"):
            list(K.row_blocks(size))
    blocks = list(K.row_blocks(2))
    assert [(s, e) for s, e, _ in blocks] == [(0, 2), (2, 4), (4, 5)]
    torch.testing.assert_close(torch.cat([b for _, _, b in blocks]), D)


@pytest.mark.parametrize("c,error,match", [
    ("a", TypeError, "c must be a real number or a 0-d tensor, got str"),
    (torch.ones(2), TypeError, "got Tensor of shape"),
    (True, TypeError, "got bool"),
    (float("nan"), ValueError, "c must be finite"),
    (torch.tensor(float("inf")), ValueError, "c must be finite"),
    (np.array([2.0]), TypeError, r"got ndarray of shape \(1,\)"),
    (np.array(float("nan")), ValueError, "c must be finite"),
    (np.array("a"), TypeError, "c must be a real number"),
    (torch.tensor(True), TypeError, "c must be a real number"),
])
def test_scaling_by_a_non_scalar_refused(c, error, match):
    # 'a' raised torch's "new(): invalid data type 'str'", NaN failed only at K @ V
    K, D = _matrix("blocked")
    with pytest.raises(error, match=match):
        K * c
    with pytest.raises(error, match=match):
        c * K
    for c in (2, 0.5, torch.tensor(3.0, dtype=torch.float64)):  # scalars still scale
        torch.testing.assert_close((c * K).to_dense(), float(c) * D)


@pytest.mark.parametrize("c", [np.array(2.5), np.float32(2.5), np.int64(2),
                               torch.tensor(2.5, dtype=torch.float32)])
def test_scaling_by_a_zero_dimensional_array_like(c):
    # a 0-d NumPy array was refused ("got ndarray of shape ()"); every real 0-d scale
    # gives the dense product, on either side
    K, D = _matrix("blocked")
    torch.testing.assert_close((K * c).to_dense(), float(c) * D)
    torch.testing.assert_close((c * K) @ torch.ones(5, dtype=torch.float64), float(c) * D.sum(1))


def test_sum_of_matrices_of_different_dtypes_refused():
    # was torch's "Expected out tensor to have dtype float, but got double" at K @ V
    X = torch.randn(4, 2, dtype=torch.float64)
    K64, K32 = tk.RBF()(X, backend="blocked"), tk.RBF()(X.float(), backend="blocked")
    with pytest.raises(TypeError, match="cannot add Gram matrices of dtypes"):
        K64 + K32
    D = tk.RBF()(X, backend="dense").to_dense()
    torch.testing.assert_close((K64 + K64) @ torch.ones(4, dtype=torch.float64), 2 * D.sum(1))


@pytest.mark.parametrize("call,error,match", [
    (lambda K: K.add_diag("a"), TypeError, "lam must be a real number"),
    (lambda K: K.centered(mean="a"), TypeError, "mean must be a real number"),
    (lambda K: K.centered(col_mean=torch.full((5,), float("nan"), dtype=torch.float64)),
     ValueError, "col_mean contains NaN"),
    (lambda K: K.centered(mean=float("inf")), ValueError, "mean contains NaN"),
    (lambda K: K.scaled(torch.full((5,), float("nan"), dtype=torch.float64)), ValueError,
     "left contains NaN"),
    (lambda K: K.scaled(torch.ones(5, dtype=torch.float64), ["a"] * 5), TypeError,
     "right must be a real number"),
])
def test_derived_views_check_their_arguments(call, error, match):
    # strings failed inside torch ("new(): invalid data type 'str'"), NaN surfaced only as
    # "the product is not finite ... kernel values overflowed" at K @ V
    K, _ = _matrix("blocked")
    with pytest.raises(error, match=match):
        call(K)


def test_scaled_takes_a_list():
    # a list had no .shape (AttributeError); the scaled matrix is diag(a) K diag(a)
    K, D = _matrix("blocked")
    a = [1.0, 2.0, 0.5, 3.0, 1.5]
    t = torch.tensor(a, dtype=torch.float64)
    torch.testing.assert_close(K.scaled(a).to_dense(), t[:, None] * D * t[None, :])


def test_product_with_a_vector_on_another_device_refused():
    # No second device on a CPU machine: K reports a CUDA device, V stays on the CPU (a
    # CPU V times a CUDA K reached torch's own device error, which names no argument).
    X = torch.randn(5, 2, dtype=torch.float64)
    K = tk.RBF()(X, backend="dense")
    V = torch.ones(5, 1, dtype=torch.float64)
    assert torch.allclose(K @ V, K.to_dense() @ V)  # same device: the product
    K.device = torch.device("cuda", 0)
    with pytest.raises(ValueError, match=r"K @ V: V is on cpu but K is on cuda:0"):
        K @ V
