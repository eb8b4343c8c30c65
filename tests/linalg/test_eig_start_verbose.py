"""Block Krylov eigensolver: start blocks and the verbose residual bar, against eigh."""
import pytest
import torch

from torchkern.linalg import eigsh
from torchkern.linalg.eig import block_krylov_eigsh

from .conftest import MatmulOnly


# small dense products: two threads on the shared CPUs only add synchronization
pytestmark = pytest.mark.usefixtures("one_thread")


def _slow_spectrum(n=500, seed=0):
    # 1/(1 + i)^0.7: no large gap after the wanted pairs, so the start matters
    g = torch.Generator().manual_seed(seed)
    Q = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64)).Q
    lam = 1.0 / (1.0 + torch.arange(n, dtype=torch.float64)) ** 0.7
    return (Q * lam) @ Q.T, lam, Q


def test_good_start_block_saves_products():
    A, lam, Q = _slow_spectrum()
    g = torch.Generator().manual_seed(1)
    # the top 30 eigenvectors, perturbed by 1e-3 noise, as start directions
    start = Q[:, :30] + 1e-3 * torch.randn(500, 30, generator=g, dtype=torch.float64)
    cold, warm = MatmulOnly(A), MatmulOnly(A)
    e0, _, ok0, s0 = block_krylov_eigsh(cold, 5, tol=1e-10, random_state=0)
    e1, V1, ok1, s1 = block_krylov_eigsh(warm, 5, tol=1e-10, random_state=0, start=start)
    assert ok0 and ok1
    assert warm.products == s1 < s0 == cold.products
    torch.testing.assert_close(e1, lam[:5], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close((V1 * Q[:, :5]).sum(0).abs(), torch.ones(5, dtype=A.dtype),
                               rtol=0, atol=1e-9)


def test_narrow_start_is_filled_and_bad_start_rejected():
    A, lam, _ = _slow_spectrum(n=200, seed=2)
    # one start column: the other b - 1 are Gaussian
    e, _, ok, _ = block_krylov_eigsh(A, 4, random_state=0, start=torch.ones(200, 1,
                                                                            dtype=A.dtype))
    assert ok
    torch.testing.assert_close(e, lam[:4], rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match=r"start must be a tensor of shape \(200, r\)"):
        block_krylov_eigsh(A, 4, start=torch.ones(100, 3, dtype=A.dtype))
    with pytest.raises(ValueError, match="start contains NaN"):
        block_krylov_eigsh(A, 4, start=torch.full((200, 3), float("nan"), dtype=A.dtype))


def test_block_krylov_verbose_bar_shows_residual_and_stays(capsys):
    A, lam, _ = _slow_spectrum(n=300, seed=3)
    e, _, ok, steps = block_krylov_eigsh(A, 3, tol=1e-9, random_state=0, verbose="eig-test")
    assert ok
    torch.testing.assert_close(e, lam[:3], rtol=1e-10, atol=1e-10)
    err = capsys.readouterr().err
    assert "eig-test" in err and "digits" in err
    # the last refresh is the full bar with the final residual (below tol) and step count
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert "100%" in last and f"{steps} it" in last
    assert float(last.split("residual ")[1].split(",")[0]) <= 1e-9


def test_lanczos_verbose_bar(capsys):
    A, lam, _ = _slow_spectrum(n=600, seed=4)  # n > 500: Lanczos, not dense eigh
    e, _ = eigsh(MatmulOnly(A), 3, tol=1e-9, random_state=0, verbose=True)
    torch.testing.assert_close(e, lam[:3], rtol=1e-9, atol=1e-9)
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("eigsh (Lanczos)") and "100%" in last
    assert float(last.split("residual ")[1].split(",")[0]) <= 1e-9


def test_quiet_by_default(capsys):
    A, _, _ = _slow_spectrum(n=200, seed=5)
    block_krylov_eigsh(A, 2, random_state=0)
    assert capsys.readouterr().err == ""
