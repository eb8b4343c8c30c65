"""The sharded matrix's ridge shift checks lam as the one-process KernelMatrix does."""
import numpy as np
import pytest
import torch

import torchkern
from torchkern import distributed as tkd

from ._spawn import spawn

F64 = torch.float64


def _add_diag_arguments(rank, world):
    X = torch.randn(6, 2, dtype=F64, generator=torch.Generator().manual_seed(0))
    K = tkd.ShardedKernel(torchkern.RBF(0.8), vectors="sharded")(tkd.ShardedInput(X),
                                                                   backend="dense")
    # "a" and None failed inside torch ("new(): invalid data type 'str'", "Could not infer
    # dtype of NoneType"); True was taken as λ = 1
    for lam in ("a", None, True):
        with pytest.raises(TypeError, match="lam must be a real number"):
            K.add_diag(lam)
    with pytest.raises(ValueError, match="lam contains NaN"):
        K.add_diag(np.array([0.5, 1.0, float("nan"), 0.5, 0.5, 0.5]))
    D = torchkern.RBF(0.8)(X, backend="dense").to_dense()
    V = torch.randn(6, 2, dtype=F64, generator=torch.Generator().manual_seed(1))
    lam = [0.5, 1.0, 2.0, 0.5, 0.25, 3.0]
    want = D @ V + torch.tensor(lam, dtype=F64)[:, None] * V
    torch.testing.assert_close(K.add_diag(lam) @ V, want)
    torch.testing.assert_close(K.add_diag(np.float32(0.5)) @ V, D @ V + 0.5 * V)


def test_sharded_add_diag_checks_lam():
    spawn(_add_diag_arguments, 1)
