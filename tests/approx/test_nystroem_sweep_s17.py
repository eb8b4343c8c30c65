"""Nystroem with more components than samples: scikit-learn's Nystroem warns and uses all
n samples (the full kernel); torchkern's did not fit at all, also with the default 100 on a
smaller sample (ValueError)."""
import warnings

import numpy as np
import pytest
from sklearn.kernel_approximation import Nystroem as SkNystroem

import torchkern
from torchkern.approx import Nystroem


@pytest.mark.parametrize("kw", [dict(n_components=100), dict()], ids=["100", "default"])
@pytest.mark.parametrize("selection", ["uniform", "greedy"])
def test_more_components_than_samples_warns_and_uses_the_full_kernel(kw, selection):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    with pytest.warns(UserWarning, match="n_components=100 is larger than the number of "
                                         "samples n=30"):
        ny = Nystroem(torchkern.RBF(1.5), center_selection=selection, random_state=0,
                      **kw).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        sk = SkNystroem(gamma=1 / (2 * 1.5**2), n_components=100, random_state=0).fit(X)
    assert ny.n_components_ == 30 == sk.components_.shape[0]
    F = np.asarray(ny.transform(X))
    assert F.shape == sk.transform(X).shape == (30, 30)
    # all n anchors: the features reproduce the exact Gram matrix, as scikit-learn's do
    exact = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / (2 * 1.5**2))
    np.testing.assert_allclose(F @ F.T, exact, atol=1e-8)
    Fs = sk.transform(X)
    np.testing.assert_allclose(Fs @ Fs.T, exact, atol=1e-8)
