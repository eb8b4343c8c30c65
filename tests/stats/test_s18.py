"""Sweep s18 of the statistics: inputs that gave silently wrong values or unclear errors."""
import warnings

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
    with pytest.raises(ValueError, match=f"{which} must be symmetric"):
        stat(K, L)


def _hsic_brute_force(K, L, unbiased):
    """tr(KHLH)/n² (Gretton et al. 2005) or Song et al. (2012, eq. 5), dense."""
    n = K.shape[0]
    if not unbiased:
        H = torch.eye(n, dtype=K.dtype) - 1.0 / n
        return torch.trace(K @ H @ L @ H) / n**2
    Kt, Lt = K - torch.diag(K.diagonal()), L - torch.diag(L.diagonal())
    one = torch.ones(n, dtype=K.dtype)
    return (torch.trace(Kt @ Lt) + (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
            - 2.0 / (n - 2) * (one @ Kt @ Lt @ one)) / (n * (n - 3))


def _float32_grams_cast_to_float64():
    import torchkern
    g = torch.Generator().manual_seed(0)
    X = torch.randn(50, 2, generator=g)
    Y = X[:, :1] + torch.randn(50, 1, generator=g)
    K = torchkern.RBF(1.0)(X).to_dense().detach().double()
    L = torchkern.RBF(1.0)(Y).to_dense().detach().double()
    assert float((K - K.T).abs().max()) > 1e-8     # the case: asymmetric by rounding
    C = torchkern.RBF(1.0)(X, X + 0.5).to_dense().detach().double()
    return K, L, C


@pytest.mark.parametrize("stat, unbiased", [(hsic_biased, False), (hsic_unbiased, True)])
def test_hsic_takes_a_float32_gram_cast_to_float64(stat, unbiased):
    # a float32 RBF Gram is symmetric only to float32 rounding (1.2e-7 here): cast to
    # float64 it was refused as 'not symmetric' by the √ε(float64) rule
    K, L, _ = _float32_grams_cast_to_float64()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # the rounding is reported (below)
        value = stat(K, L)
    torch.testing.assert_close(value, _hsic_brute_force(K, L, unbiased), rtol=1e-5, atol=0)


@pytest.mark.parametrize("stat", [hsic_biased, hsic_unbiased])
def test_hsic_warns_of_rounding_asymmetry_and_refuses_a_cross_gram(stat):
    # the linalg rule: a warning below 1 % of max |K|, a ValueError above (a cross-Gram)
    K, L, C = _float32_grams_cast_to_float64()
    with pytest.warns(UserWarning, match="[KL] is symmetric only"):
        stat(K, L)
    with pytest.raises(ValueError, match="K must be symmetric"):
        stat(C, L)


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
