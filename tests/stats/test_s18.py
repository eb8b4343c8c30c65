"""Sweep s18 of the statistics: inputs that gave silently wrong values or unclear errors."""
import pytest
import torch

from torchkern.stats import hsic_biased, hsic_unbiased


@pytest.mark.parametrize("stat", [hsic_biased, hsic_unbiased])
@pytest.mark.parametrize("which", ["K", "L"])
def test_hsic_refuses_an_asymmetric_gram_matrix_by_name(stat, which):
    # Before: a value that is not tr(KHLH)/n² and that changed with the orientation
    g = torch.Generator().manual_seed(0)
    A = torch.rand(8, 8, generator=g, dtype=torch.float64)
    S = A + A.T
    K, L = (A, S) if which == "K" else (S, A)
    with pytest.raises(ValueError, match=f"{which} must be a symmetric Gram matrix"):
        stat(K, L)


@pytest.mark.parametrize("weights", [
    torch.ones(5, dtype=torch.complex128),   # the imaginary part was dropped silently
    "abcde",                                 # TypeError "new(): invalid data type 'str'"
])
def test_mean_embedding_weights_must_be_real_numbers(weights):
    import torchkern
    from torchkern.stats import KernelMeanEmbedding
    X = torch.randn(5, 2, dtype=torch.float64)
    with pytest.raises(TypeError, match="weights"):
        KernelMeanEmbedding(X, weights, torchkern.RBF(1.0))


def test_witness_normalize_must_be_a_bool():
    import torchkern
    from torchkern.stats import witness
    X = torch.randn(6, 2, dtype=torch.float64)
    with pytest.raises(TypeError, match="normalize"):
        witness(X, X + 1.0, torchkern.RBF(1.0), normalize="no")   # read as True
