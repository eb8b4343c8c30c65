"""Warnings point at the user's line, also through fit_transform and a scikit-learn
Pipeline (their stacklevel was counted from torchkern's own frames: KernelPCA's pointed
into pca.py, Nystroem's into scikit-learn's base.py under fit_transform)."""
import warnings

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline

import torchkern as tk

X = np.random.default_rng(0).normal(size=(5, 2))

CALLS = {
    "KernelPCA.fit": lambda: tk.KernelPCA(n_components=9).fit(X),
    "KernelPCA.fit_transform": lambda: tk.KernelPCA(n_components=9).fit_transform(X),
    "Nystroem.fit_transform": lambda: tk.approx.Nystroem(tk.RBF(), 9).fit_transform(X),
    "Pipeline(Nystroem)": lambda: make_pipeline(tk.approx.Nystroem(tk.RBF(), 9)).fit_transform(X),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_more_components_than_samples_warns_at_the_callers_line(call):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        call()
    hits = [w for w in got if "larger than the number of samples" in str(w.message)]
    assert len(hits) == 1
    assert hits[0].filename == __file__
