"""Generate tests/learning/mkl_references.npz: MKLpy 0.6's kernel weights on its own examples.

MKLpy is a local test peer, never a dependency: run this script in a scratch venv,

    python -m venv --system-site-packages /tmp/mkl-venv
    /tmp/mkl-venv/bin/pip install cvxopt
    /tmp/mkl-venv/bin/pip install --no-deps mklpy==0.6
    /tmp/mkl-venv/bin/python tests/learning/make_mkl_references.py

The data sets follow MKLpy's documented example (breast cancer, features rescaled to [0, 1]
then each sample to unit norm, homogeneous polynomial kernels of degrees 1..10, a 70/30
split with ``random_state=42``) and a second binary problem (iris versicolor against
virginica, standardized, RBF kernels of four widths and the linear kernel). The Gram
matrices are MKLpy's own (``MKLpy.metrics.pairwise``); the test rebuilds them with
torchkern's kernels, so the stored values are the weights and the split indices only.
"""
import os

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.model_selection import train_test_split

from MKLpy.algorithms import CKA, AverageMKL, EasyMKL, FHeuristic
from MKLpy.metrics import pairwise
from MKLpy.preprocessing import normalization, rescale_01

HERE = os.path.dirname(os.path.abspath(__file__))
RBF_GAMMAS = [0.01, 0.1, 1.0, 10.0]


def breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = normalization(rescale_01(torch.tensor(X)))
    tr, _ = train_test_split(np.arange(len(y)), test_size=0.3, random_state=42)
    Xtr = X[tr]
    KL = [pairwise.homogeneous_polynomial_kernel(Xtr, degree=d) for d in range(1, 11)]
    return KL, torch.tensor(y[tr]), tr


def iris():
    X, y = load_iris(return_X_y=True)
    keep = y > 0
    X, y = X[keep], y[keep]
    X = (X - X.mean(0)) / X.std(0)
    tr, _ = train_test_split(np.arange(len(y)), test_size=0.3, random_state=0)
    Xtr = torch.tensor(X[tr])
    KL = [pairwise.rbf_kernel(Xtr, gamma=g) for g in RBF_GAMMAS]
    KL.append(pairwise.linear_kernel(Xtr))
    return KL, torch.tensor(y[tr]), tr


def weights(model, KL, y):
    return np.asarray(model.fit(KL, y).solution.weights, dtype=np.float64)


def main():
    out = {"rbf_gammas": np.array(RBF_GAMMAS)}
    for name, make in (("breast_cancer", breast_cancer), ("iris", iris)):
        KL, y, tr = make()
        KL = [K.double() for K in KL]
        out[f"{name}_train"] = tr
        out[f"{name}_average"] = weights(AverageMKL(), KL, y)
        for lam in (0.1, 0.5):
            out[f"{name}_easymkl_{lam}"] = weights(EasyMKL(lam=lam), KL, y)
        out[f"{name}_fheuristic"] = weights(FHeuristic(), KL, y)
        out[f"{name}_cka"] = weights(CKA(), KL, y)
        for k, v in out.items():
            if k.startswith(name) and not k.endswith("train"):
                print(k, np.array2string(v, precision=6))
    np.savez(os.path.join(HERE, "mkl_references.npz"), **out)


if __name__ == "__main__":
    main()
