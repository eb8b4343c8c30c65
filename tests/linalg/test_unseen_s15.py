"""The lazy KernelMatrix views on unusual-but-valid shapes, against dense torch."""
import torch

import torchkern as tk
from torchkern.gram import FeatureKernelMatrix


def test_transpose_of_a_centered_matrix_that_is_square_but_not_symmetric():
    # CenteredKernelMatrix.T returned the matrix itself whenever it was square: K(X_new, X)
    # of as many new points as training points centred with the training means, or a
    # square K(X, Y), read as its own transpose — K.T @ V and cols() silently wrong (off by
    # 12 on this data); rectangular ones raised. Reference: dense torch.
    g = torch.Generator().manual_seed(0)
    X = torch.randn(9, 2, generator=g, dtype=torch.float64)
    Y = torch.randn(9, 2, generator=g, dtype=torch.float64)
    V = torch.randn(9, 2, generator=g, dtype=torch.float64)
    H = torch.eye(9, dtype=torch.float64) - 1 / 9
    D = X @ Y.T
    cases = [(FeatureKernelMatrix(X, Y).centered(), H @ D @ H)]
    Dx = tk.RBF(1.0)(X, backend="dense").to_dense().detach()
    for Z in (Y, Y[:4]):  # new points against the training points, square and not
        Dn = tk.RBF(1.0)(Z, X, backend="dense").to_dense().detach()
        ref = Dn - Dn.mean(1, keepdim=True) - Dx.mean(0)[None, :] + Dx.mean()
        cases.append((tk.RBF(1.0)(Z, X, backend="blocked").centered(Dx.mean(0), Dx.mean()),
                      ref))
    with torch.no_grad():
        for K, ref in cases:
            torch.testing.assert_close(K.T @ V[:K.shape[0]], ref.T @ V[:K.shape[0]],
                                       rtol=0, atol=1e-12)
            torch.testing.assert_close(K.T.to_dense(), ref.T, rtol=0, atol=1e-12)
            torch.testing.assert_close(K.cols([1, 5]), ref[:, [1, 5]], rtol=0, atol=1e-12)
            torch.testing.assert_close(K.T.T @ V, ref @ V, rtol=0, atol=1e-12)
