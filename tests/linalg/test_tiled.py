"""Tiled products shared by dynamic scheduling (torchkern.linalg.tiled) against one dense
product; the caller's thread count is back afterwards, in the caller and as the default
of new threads."""
import threading

import pytest
import torch

from torchkern.linalg.tiled import symmetric_tiled_mm, symmetric_tiles, tiled_mm


def _sym(n, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    T = torch.randn(n, n, generator=g, dtype=dtype)
    return T + T.T, g


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_symmetric_and_plain_tiles_equal_one_product(threads):
    for n, r in [(1, 1), (7, 3), (301, 1), (301, 24)]:
        S, g = _sym(n, seed=n + r)
        V = torch.randn(n, r, generator=g, dtype=torch.float64)
        ref = S @ V
        # tiles that do not divide n, a column tile narrower than a row tile
        out = symmetric_tiled_mm(S, V, tile_rows=64, tile_cols=45, threads=threads)
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
        N = torch.randn(n, n + 5, generator=g, dtype=torch.float64)
        W = torch.randn(n + 5, r, generator=g, dtype=torch.float64)
        torch.testing.assert_close(tiled_mm(N, W, tile_rows=70, threads=threads), N @ W,
                                   rtol=1e-12, atol=1e-12)


def test_symmetric_product_reads_only_the_upper_triangle():
    n, rows, cols = 200, 48, 70
    S, g = _sym(n, seed=1)
    V = torch.randn(n, 5, generator=g, dtype=torch.float64)
    poisoned = S.clone()
    lower = torch.ones(n, n, dtype=torch.bool).tril(-1)
    blocks = torch.zeros(n, n, dtype=torch.bool)
    for s in range(0, n, rows):
        blocks[s:s + rows, s:s + rows] = True
    poisoned[lower & ~blocks] = float("nan")
    out = symmetric_tiled_mm(poisoned, V, tile_rows=rows, tile_cols=cols, threads=2)
    torch.testing.assert_close(out, S @ V, rtol=1e-12, atol=1e-12)
    # and every upper entry is used exactly once: the tiles cover the upper triangle
    count = torch.zeros(n, n, dtype=torch.int64)
    for s, e, c0, c1 in symmetric_tiles(n, rows, cols):
        count[s:e, c0:c1] += 1
    upper = torch.ones(n, n, dtype=torch.bool).triu()
    assert bool((count[upper] == 1).all()) and bool((count[lower & ~blocks] == 0).all())


def test_float32_and_strided_input():
    S, g = _sym(150, torch.float32, seed=2)
    V = torch.randn(150, 12, generator=g, dtype=torch.float32)
    ref = (S.double() @ V.double()).float()
    torch.testing.assert_close(symmetric_tiled_mm(S, V, tile_rows=32, tile_cols=50), ref,
                               rtol=1e-5, atol=1e-4)
    big = torch.randn(300, 400, generator=g, dtype=torch.float64)
    view = big[10:160, 20:320:2]  # a strided (150, 150) view
    W = torch.randn(150, 4, generator=g, dtype=torch.float64)
    torch.testing.assert_close(tiled_mm(view, W, tile_rows=33, threads=2), view @ W,
                               rtol=1e-12, atol=1e-12)


def test_thread_count_is_restored_in_the_caller_and_for_new_threads():
    prev = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        S, g = _sym(120, seed=3)
        V = torch.randn(120, 3, generator=g, dtype=torch.float64)
        symmetric_tiled_mm(S, V, tile_rows=16, tile_cols=16, threads=3)
        assert torch.get_num_threads() == 2
        got = []
        t = threading.Thread(target=lambda: got.append(torch.get_num_threads()))
        t.start()
        t.join()
        assert got == [2]  # a worker's one-thread setting did not become the default
    finally:
        torch.set_num_threads(prev)


def test_bad_arguments_are_named():
    S, _ = _sym(10)
    with pytest.raises(ValueError, match="V must have shape"):
        symmetric_tiled_mm(S, torch.zeros(9, 2, dtype=torch.float64))
    with pytest.raises(TypeError, match="dtype"):
        tiled_mm(S, torch.zeros(10, 2, dtype=torch.float32))
    with pytest.raises(ValueError, match="square"):
        symmetric_tiled_mm(torch.zeros(4, 5, dtype=torch.float64),
                           torch.zeros(5, 1, dtype=torch.float64))


def test_an_error_in_the_caller_stops_the_workers():
    # the caller's tile raises: the workers take no further tile, the error reaches the
    # caller, and the thread count is back
    import torchkern.linalg.tiled as tiled
    prev = torch.get_num_threads()
    torch.set_num_threads(2)
    caller = threading.get_ident()
    done = []

    def do(tile, out):
        if threading.get_ident() == caller:
            raise RuntimeError("tile failed")
        done.append(tile)
        threading.Event().wait(0.01)

    try:
        with pytest.raises(RuntimeError, match="tile failed"):
            tiled._shared(range(1000), do, 1, 1, torch.zeros(1), 2)
        assert torch.get_num_threads() == 2
        assert len(done) < 100
    finally:
        torch.set_num_threads(prev)
