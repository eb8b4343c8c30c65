"""The paths made robust to a busy machine (issue 25): steps that run on one torch thread
inside a call, the native loop's dynamic scheduling. Each test checks that the caller's
thread count is back afterwards and that the values still match an independent
reference (dense linear algebra, brute force)."""
import numpy as np
import pytest
import torch

from torchkern._compiled import native
from torchkern._threads import num_threads, one_thread
from torchkern.linalg import eigsh
from torchkern.linalg.eig import block_krylov_eigsh
from torchkern.linalg.operators import RowBlockOperator

D64 = torch.float64


@pytest.fixture
def two_threads():
    prev = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(prev)


def test_thread_scopes_restore_the_callers_count_even_on_error(two_threads):
    with one_thread():
        assert torch.get_num_threads() == 1
        with num_threads(2):
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError, match="inside"):
        with one_thread():
            raise RuntimeError("inside")
    assert torch.get_num_threads() == 2
    with one_thread(False):
        assert torch.get_num_threads() == 2


def test_overlapping_scopes_of_two_python_threads_restore_the_callers_count(two_threads):
    # torch's thread count is process-wide: thread A enters one_thread (2 -> 1), thread B
    # enters while it is 1, A leaves first and B last; B must not restore its "1"
    import threading
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a():
        with one_thread():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b():
        a_in.wait(5)
        with one_thread():
            b_in.set()
            a_out.wait(5)

    ts = [threading.Thread(target=f) for f in (a, b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert torch.get_num_threads() == 2


def _spd(n, seed):
    g = torch.Generator().manual_seed(seed)
    Q = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=D64)).Q
    w = torch.logspace(0, -6, n, dtype=D64)
    return (Q * w) @ Q.T


def test_eigensolvers_on_one_thread_match_lapack(two_threads):
    # block Krylov and Lanczos keep their bookkeeping on one thread and give the products
    # the caller's threads; top eigenvalues against LAPACK's full eigendecomposition
    A = _spd(500, 0)
    ref = torch.linalg.eigvalsh(A).flip(0)[:6]
    w, U, ok, _ = block_krylov_eigsh(A, 6, tol=1e-10, random_state=0)
    assert ok and torch.get_num_threads() == 2
    assert float(((w - ref) / ref).abs().max()) < 1e-10
    assert float((A @ U - U * w).norm(dim=0).max()) < 1e-8
    w2, _ = eigsh(A, 6, tol=1e-10, random_state=0)
    assert torch.get_num_threads() == 2
    assert float(((w2 - ref) / ref).abs().max()) < 1e-10


def test_nystrom_normal_products_on_one_thread_match_dense(two_threads):
    g = torch.Generator().manual_seed(1)
    A = torch.rand(3000, 200, generator=g)  # float32: chunks converted to float64
    V = torch.randn(200, 3, generator=g, dtype=D64)
    w = torch.rand(3000, generator=g, dtype=D64)
    op = RowBlockOperator(A, 700)
    A64 = A.double()
    ref = A64.T @ (w[:, None] * (A64 @ V))
    out = op.normal_matmul(V, w)
    assert torch.get_num_threads() == 2
    assert float((out - ref).abs().max() / ref.abs().max()) < 1e-13
    U = torch.randn(3000, 2, generator=g, dtype=D64)
    assert float((op.rmatmul(U) - A64.T @ U).abs().max()) < 1e-10


@pytest.fixture
def tiny_chunks(monkeypatch):
    """The native loop with chunks of 3 rows of 250 columns: many chunks go to both
    threads in any order."""
    native.load()  # CI has a C++ compiler: a failed build fails the test
    monkeypatch.setattr(native, "_CHUNK_EVALS", 3 * 250)


def test_native_dynamic_chunks_match_dense(two_threads, tiny_chunks):
    # each row is computed by the same code whichever thread takes it: equal bit for bit
    # to the one-thread run, and to torch's dense Gaussian product to rounding
    g = torch.Generator().manual_seed(2)
    x = torch.randn(403, 3, generator=g, dtype=D64)
    y = torch.randn(250, 3, generator=g, dtype=D64)
    V = torch.randn(250, 2, generator=g, dtype=D64)
    out = native.radial_matmul("gauss", x, y, V)
    K = torch.exp(-0.5 * torch.cdist(x, y) ** 2)
    assert float((out - K @ V).abs().max()) < 1e-12
    G = native.radial_gram("gauss", x, y)
    assert float((G - K).abs().max()) < 1e-14
    assert torch.get_num_threads() == 2
    with one_thread():
        assert torch.equal(native.radial_matmul("gauss", x, y, V), out)


def test_wl_gram_on_one_thread_equals_brute_force(two_threads):
    from torch_geometric.data import Data

    from torchkern.graphs import WeisfeilerLehman
    rng = np.random.default_rng(3)
    graphs = []
    for n in rng.integers(4, 15, 60):
        iu = np.triu_indices(n, 1)
        keep = rng.random(len(iu[0])) < 3.0 / n
        s, t = iu[0][keep], iu[1][keep]
        ei = torch.as_tensor(np.stack([np.r_[s, t], np.r_[t, s]]))
        x = torch.nn.functional.one_hot(torch.as_tensor(rng.integers(0, 3, n)), 3).float()
        graphs.append(Data(x=x, edge_index=ei, num_nodes=int(n)))
    k = WeisfeilerLehman(n_iter=3)
    K = k(graphs).to_dense()
    assert torch.get_num_threads() == 2
    Phi = k.features(graphs).to_dense().double()
    assert torch.equal(K, Phi @ Phi.T)  # integer counts: exact
    rows = k(graphs).rows(torch.tensor([5, 0, 59]))
    assert torch.equal(rows, (Phi @ Phi.T)[[5, 0, 59]])
    assert torch.get_num_threads() == 2


def test_small_blocked_product_on_one_thread_matches_dense(two_threads):
    import torchkern as tk
    g = torch.Generator().manual_seed(4)
    X = torch.randn(300, 3, generator=g, dtype=D64)
    Y = torch.randn(200, 3, generator=g, dtype=D64)
    V = torch.randn(200, 2, generator=g, dtype=D64)
    with torch.no_grad():
        out = tk.RBF(1.3)(X, Y, backend="blocked") @ V
    assert torch.get_num_threads() == 2
    ref = torch.exp(-0.5 * torch.cdist(X, Y) ** 2 / 1.3 ** 2) @ V
    assert float((out - ref).abs().max()) < 1e-12


def test_native_dynamic_chunks_gradients_and_float32(two_threads, tiny_chunks):
    # the gradient entry points (cases 2/3 of tk_radial_run) and the float32 ones under
    # tiny chunks on 2 threads: against torch autograd of the dense Gaussian product, and
    # bit-equal to the one-thread run
    g = torch.Generator().manual_seed(3)
    for dt, tol in ((D64, 1e-13), (torch.float32, 2e-6)):  # measured 2e-15, 1.7e-7
        x = torch.randn(403, 3, generator=g, dtype=dt)
        y = torch.randn(250, 3, generator=g, dtype=dt)
        V = torch.randn(250, 2, generator=g, dtype=dt)
        G = torch.randn(403, 2, generator=g, dtype=dt)

        def grads(native_path):
            xs, ys = x.clone().requires_grad_(), y.clone().requires_grad_()
            if native_path:
                out = native.radial_matmul("gauss", xs, ys, V)
            else:
                out = torch.exp(-0.5 * torch.cdist(xs.double(), ys.double()) ** 2) @ V.double()
            return [t.detach() for t in (out, *torch.autograd.grad(out, (xs, ys), G.to(out.dtype)))]

        got, ref = grads(True), grads(False)
        assert torch.get_num_threads() == 2
        for a, b in zip(got, ref):
            assert float((a.double() - b).abs().max() / b.abs().max()) < tol
        with one_thread():
            for a, b in zip(grads(True), got):
                assert torch.equal(a, b)


def test_native_helpers_keep_the_tensors_alive_past_an_interrupted_caller(two_threads,
                                                                          monkeypatch):
    # a KeyboardInterrupt is raised in the caller right after its share of the rows (the
    # C++ call cannot be interrupted), i.e. while the pool's helpers may still be writing
    # their last chunk: the tensors they write into must outlive the unwound caller
    import gc
    import weakref
    native.load()  # CI has a C++ compiler: a failed build fails the test
    pending = []

    class Interrupted:
        def result(self):
            raise KeyboardInterrupt

    class DeferringPool:  # runs the helpers only after the caller has given up
        def submit(self, fn):
            pending.append(fn)
            return Interrupted()

    monkeypatch.setattr(native, "pool", lambda threads: DeferringPool())
    x = torch.randn(300, 3, dtype=D64)
    yt, vt = torch.randn(3, 250, dtype=D64), torch.randn(2, 250, dtype=D64)
    out = torch.empty(300, 2, dtype=D64)
    alive = weakref.ref(out)
    with pytest.raises(KeyboardInterrupt):
        native._run("tk_radial_forward", native.PROFILES["gauss"], x, (yt, vt), out, 250, 2)
    del out
    assert pending and alive() is not None  # still referenced by the waiting helper
    while pending:
        pending.pop()()  # the helpers run (nothing left to take) and let go
    gc.collect()
    assert alive() is None
