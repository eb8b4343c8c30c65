"""KernelMatrix pieces (rows, cols, submatrix) refuse indices they cannot honour, by the
argument's name, on every representation — as the structured inputs' indices do."""
import warnings

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
