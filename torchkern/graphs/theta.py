"""Lovász-θ and SVM-θ graph kernels (Johansson, Jethava, Dubhashi and Bhattacharyya, 2014):
geometric embeddings of every graph (orthonormal labellings), compared through random
node subsets."""
from __future__ import annotations

import functools
import math
import zlib

import numpy as np
import torch
from scipy.linalg import eigvalsh
from scipy.special import binom

from .._threads import one_thread
from .._validation import check_bool, check_int, is_int, is_real
from ..gram import FeatureKernelMatrix
from ..kernels.base import Kernel
from ..kernels.structured import _inv_sqrt
from ._batch import GraphKernel, GraphSet, sort_int64

__all__ = ["LovaszTheta", "SVMTheta", "lovasz_theta_sdp", "svm_theta_alphas"]


# -- GraKeL's random draws, replayed --------------------------------------------------------

class _LegacyDraws:
    """The draws of ``numpy.random.RandomState(seed)`` that GraKeL's θ kernels make —
    ``randint(0, n)``, ``permutation(n)``, ``choice(n, k, replace=False)`` (the first k
    of ``permutation(n)``) — replayed from the raw 32-bit MT19937 stream of that seed.

    All three are NumPy's bounded draw ``random_interval(max)``: a 32-bit word masked to
    the smallest covering bit mask, drawn again while above ``max``; the permutation is
    Fisher–Yates from the last position down. Replaying them on a buffer of raw words
    costs a fraction of a NumPy call each (tests compare with RandomState itself)."""

    def __init__(self, seed: int):
        state = np.random.RandomState(seed).get_state()
        self._bitgen = np.random.MT19937()
        self._bitgen.state = {"bit_generator": "MT19937",
                              "state": {"key": state[1], "pos": state[2]}}
        self._buf, self._pos = [], 0

    def _word(self) -> int:
        if self._pos == len(self._buf):
            self._buf, self._pos = self._bitgen.random_raw(4096).tolist(), 0
        w = self._buf[self._pos]
        self._pos += 1
        return w

    def interval(self, mx: int) -> int:
        """A uniform int in [0, mx] (``RandomState.randint(0, mx + 1)``)."""
        if mx == 0:
            return 0
        mask = (1 << mx.bit_length()) - 1
        while True:
            w = self._word() & mask
            if w <= mx:
                return w

    def permutation(self, n: int) -> list:
        """``RandomState.permutation(n)`` as a list (the draws inlined: the hot loop)."""
        a = list(range(n))
        buf, pos = self._buf, self._pos
        end = len(buf)
        for i in range(n - 1, 0, -1):
            mask = (1 << i.bit_length()) - 1
            while True:
                if pos == end:
                    buf, pos = self._bitgen.random_raw(4096).tolist(), 0
                    end = len(buf)
                j = buf[pos] & mask
                pos += 1
                if j <= i:
                    break
            a[i], a[j] = a[j], a[i]
        self._buf, self._pos = buf, pos
        return a

    def removals(self, P: list) -> list:
        """The points a randomized Welzl recursion minidisk(P, ·) removes, one nested call
        after the other: for each, ``P[randint(0, len(P))]`` and the list P without it,
        as (point, rest) pairs (a list of one point draws nothing)."""
        chain = []
        buf, pos = self._buf, self._pos
        end = len(buf)
        while len(P) > 1:
            mx = len(P) - 1
            mask = (1 << mx.bit_length()) - 1
            while True:
                if pos == end:
                    buf, pos = self._bitgen.random_raw(4096).tolist(), 0
                    end = len(buf)
                i = buf[pos] & mask
                pos += 1
                if i <= mx:
                    break
            p = P[i]
            P = P[:i] + P[i + 1:]
            chain.append((p, P))
        self._buf, self._pos = buf, pos
        if P:
            chain.append((P[0], P[1:]))
        return chain


@functools.lru_cache(maxsize=4096)
def _distribute_samples(n: int, lo: int, hi: int, n_samples: int) -> tuple:
    """Samples per subset size lo..hi for a graph of n nodes: proportional to the number
    of subsets C(n, k) (floors, the remainder added one by one from the largest size
    down), sizes above n getting none — GraKeL's ``distribute_samples``, same floating
    arithmetic. An empty list when n < lo (GraKeL divides by zero there)."""
    top = min(hi, n)
    if top < lo:
        return ()
    w = np.array([binom(n, k) for k in range(lo, top + 1)], dtype=float)
    w = w / np.sum(w)
    smpls = np.floor(w * n_samples).astype(int)
    ss = smpls.shape[0]
    for r in range(int(n_samples - np.sum(smpls))):
        smpls[(ss - r - 1) % ss] += 1
    return tuple(smpls.tolist())


def _edge_pairs(G: GraphSet):
    """For every graph of G: (n, pairs (E, 2) int array of its undirected edges a < b,
    sorted); an edge counts when either direction is given, self-loops are dropped.

    G's edges are merged and sorted by (source, target): where they are symmetric (the
    adjacency equals its transpose, built in O(E) by scipy) the pairs s < t are the
    answer; else both directions are merged and sorted."""
    from scipy.sparse import csr_matrix
    ptr = G.ptr.cpu().numpy()
    s, t = G.edge_index.cpu().numpy()
    N = max(int(ptr[-1]), 1)
    symmetric = False
    if len(s) and bool((s[1:] >= s[:-1]).all()):
        indptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(np.bincount(s, minlength=N), out=indptr[1:])
        A = csr_matrix((np.ones(len(s)), t, indptr), shape=(N, N))
        At = A.T.tocsr()
        symmetric = np.array_equal(A.indptr, At.indptr) and np.array_equal(A.indices,
                                                                           At.indices)
    fwd = s < t
    a, b = s[fwd], t[fwd]
    if not symmetric:  # one direction only on some edges (or unsorted)
        key = sort_int64(np.concatenate([a * N + b, t[s > t] * N + s[s > t]]))
        key = key[np.r_[True, key[1:] != key[:-1]]] if len(key) else key
        a, b = np.divmod(key, N)
    bounds = np.searchsorted(a, ptr)
    pairs = np.stack([a, b], 1) - np.repeat(ptr[:-1], np.diff(bounds))[:, None]
    n = np.diff(ptr).tolist()
    return [(n[i], pairs[bounds[i]:bounds[i + 1]]) for i in range(len(G))]


# -- the Lovász SDP -------------------------------------------------------------------------

# Centering floor and step fraction: the iterates stay near the central path (Mehrotra's
# σ alone, with steps of 0.99, drifts off it and ends far from the analytic centre of the
# optimal face on graphs whose optimal slack is not unique).
_SIGMA_MIN, _STEP = 0.3, 0.9
# the largest relative duality gap accepted as a solution
_GAP_OK = 1e-6


def _sdp_sizes(n: int, n_edges: int) -> tuple:
    """(n', m'): the sizes a graph of n nodes and ``n_edges`` edges is solved at by
    :func:`_lovasz_group` — n rounded up to even (a dummy node, decoupled), n + edges up
    to a multiple of 4 (padding variables) — a function of the graph alone."""
    return n + n % 2, -(-(n + n_edges) // 4) * 4


def _lovasz_group(n: int, edges: list, tol: float, max_iter: int):
    """The Lovász SDP of graphs with n ≥ 2 nodes each, one batch (see
    :func:`lovasz_theta_sdp`). Returns (θ (B,), W (B, n, n), the relative duality gap
    reached (B,)).

    Every graph of the batch is solved at the sizes :func:`_sdp_sizes` gives (equal
    for all: the caller groups by them), so that each matrix of a batched operation
    starts at a multiple of 32 bytes from the batch's start and its arithmetic is the
    same wherever it sits in whatever batch (batched LAPACK and matmul kernels round
    differently at other offsets; on graphs whose optimal slack is not unique that
    moved W by up to 0.5 between two batches holding the same graph). A graph leaves the
    batch at the iteration it finishes (its results written out then): later iterations
    work on the unfinished graphs only, which the same per-matrix arithmetic makes
    bit-equal to keeping it (measured on this CPU: batched Cholesky, LU, triangular
    solves, eigvalsh, matmul and reductions of each matrix are bit-equal for batches of
    1 to 37)."""
    B = len(edges)
    dt = torch.float64
    n_real = n
    n, m = _sdp_sizes(n_real, max((len(e) for e in edges), default=0))
    if any(_sdp_sizes(n_real, len(e)) != (n, m) for e in edges):
        raise ValueError("_lovasz_group: the graphs of a batch must share _sdp_sizes")
    # the dual variables X: n diagonal entries, then one entry per edge; padding
    # variables (index -1) are kept at zero with an identity block of the Schur matrix
    ia = torch.zeros(B, m, dtype=torch.long)
    ib = torch.zeros(B, m, dtype=torch.long)
    used = torch.zeros(B, m, dtype=torch.bool)
    ia[:, :n_real] = torch.arange(n_real)
    ib[:, :n_real] = torch.arange(n_real)
    used[:, :n_real] = True
    for g, e in enumerate(edges):
        if len(e):
            ia[g, n_real:n_real + len(e)] = torch.as_tensor(e[:, 0])
            ib[g, n_real:n_real + len(e)] = torch.as_tensor(e[:, 1])
            used[g, n_real:n_real + len(e)] = True
    scale = torch.where(torch.arange(m) < n_real, 0.5, 1.0).to(dt).expand(B, m) * used
    is_diag = (torch.arange(m) < n_real).to(dt).expand(B, m)
    bidx = torch.arange(B)[:, None]
    # the graph's nodes, and a dummy node (odd n_real) that stays outside the problem:
    # W and X are 1 on its diagonal and 0 elsewhere on its row and column throughout
    real = (torch.arange(n) < n_real).to(dt)
    I = torch.diag(real).expand(B, n, n)     # the identity of the graph's nodes
    dummy = torch.diag(1.0 - real).expand(B, n, n)
    J = (real[:, None] * real[None, :]).expand(B, n, n)  # also the graph's block in ⟨W, X⟩
    Wm = torch.zeros(B, n, n, dtype=torch.bool)  # where ΔW must vanish: the edges
    Wm[:, n_real:, :] = True                 # and the dummy node's row and column
    Wm[:, :, n_real:] = True
    for g, e in enumerate(edges):
        if len(e):
            Wm[g, e[:, 0], e[:, 1]] = True
            Wm[g, e[:, 1], e[:, 0]] = True

    t = torch.full((B,), float(n_real + 1), dtype=dt)
    W = t[:, None, None] * I - J + dummy     # t I − J + Y, Y = 0: positive definite
    X = I / n_real + dummy                   # trace 1, supported on edges ∪ diagonal
    pad = (~used).to(dt)
    # M_kl scale_k scale_l (scales 0, 1/2 or 1: exact in either order), and the padding
    # variables' identity block
    scale2, pad_block = scale[:, :, None] * scale[:, None, :], torch.diag_embed(pad)

    # flat indices of the (m, m) gathers of n × n matrices, fixed for the whole solve
    flat = {(r, c): (rr[:, :, None] * n + cc[:, None, :]).reshape(B, m * m)
            for (r, c), (rr, cc) in {("a", "a"): (ia, ia), ("a", "b"): (ia, ib),
                                     ("b", "b"): (ib, ib)}.items()}

    def gather(A, key):  # A[g, r[g, k], c[g, l]] for all k, l: (B, m, m)
        return A.reshape(B, n * n).gather(1, flat[key]).reshape(B, m, m)

    def scatter(z):  # Σ_k z_k B_k as an n × n matrix
        out = torch.zeros(B, n * n, dtype=dt)
        v = z * scale
        out.index_put_((bidx.expand(B, m), ia * n + ib), v, accumulate=True)
        out.index_put_((bidx.expand(B, m), ib * n + ia), v, accumulate=True)
        return out.reshape(B, n, n)

    def max_steps(L, ok, DW, DX):
        """The largest α with W + α ΔW ⪰ 0 and with X + α ΔX ⪰ 0 (times ``step``, at
        most 1), from the Cholesky factors L of W and X stacked (2B, n, n); 0 where a
        factorization failed."""
        D = torch.cat([DW, DX])
        T = torch.linalg.solve_triangular(L, D, upper=False)
        T = torch.linalg.solve_triangular(L, T.transpose(1, 2), upper=False)
        lam = torch.linalg.eigvalsh((T + T.transpose(1, 2)) / 2)[:, 0]
        a = torch.where(lam < 0, -1.0 / lam.clamp_max(-1e-300), torch.full_like(lam, 1e300))
        a = torch.where(ok, (step * a).clamp_max(1.0), torch.zeros_like(a))
        return a[:B], a[B:]

    def gap_of(W, X, t, last, done):
        """⟨W, X⟩ on the graph's block; a step that raised it (rounding, near the
        singular optimum: from a relative gap of at most ``_GAP_OK``) taken back to
        ``last``, its graph marked done. Further from the optimum a step may raise the
        gap (a badly centred start: complete graphs of 9 nodes or more, whose first
        step raised it and stopped them at the starting point); it is kept."""
        gap = (W * X * J).sum((1, 2))
        if last is not None:
            up = (gap > last[0]) & ~done & (last[0] / last[3].abs().clamp_min(1.0) <= _GAP_OK)
            if bool(up.any()):
                u = up[:, None, None]
                W, X = torch.where(u, last[1], W), torch.where(u, last[2], X)
                t, gap = torch.where(up, last[3], t), torch.where(up, last[0], gap)
                done = done | up
        return gap, W, X, t, done

    # the results, written once per graph when it is finished; from then on the batch is
    # the unfinished graphs only (each graph's arithmetic does not depend on the batch)
    t_out, W_out, gap_out = torch.empty(B, dtype=dt), torch.empty(B, n, n, dtype=dt), \
        torch.empty(B, dtype=dt)
    active = torch.arange(B)
    done = torch.zeros(B, dtype=torch.bool)
    step, history, last = _STEP, [], None
    for _ in range(max_iter):
        gap, W, X, t, done = gap_of(W, X, t, last, done)
        done |= gap <= tol * t.abs().clamp_min(1.0)
        history.append(gap)
        if len(history) > 3:  # stalled: the Schur system is too ill-conditioned
            done |= gap > 0.9 * history[-4]
        history = history[-3:]
        if bool(done.any()):  # W, X and t of a finished graph do not change any more
            fin = done.nonzero()[:, 0]
            dest = active[fin]
            t_out[dest], W_out[dest], gap_out[dest] = t[fin], W[fin], gap[fin]
            if len(fin) == B:
                active = active[:0]
                break
            k = (~done).nonzero()[:, 0]
            active, B = active[k], len(k)
            gap, W, X, t, done = gap[k], W[k], X[k], t[k], done[k]
            history = [h[k] for h in history]
            ia, ib, scale, scale2, pad_block, Wm = (v[k] for v in (ia, ib, scale, scale2,
                                                                   pad_block, Wm))
            flat = {key: v[k] for key, v in flat.items()}
            is_diag, bidx = is_diag[:B], bidx[:B]
            I, dummy, J = I[:B], dummy[:B], J[:B]
        last = (gap, W, X, t)
        mu = gap / n_real
        L, info = torch.linalg.cholesky_ex(torch.cat([W, X]))
        ok = info == 0
        if not bool(ok.all()):
            L = torch.where(ok[:, None, None], L, torch.eye(n, dtype=dt))
        done |= ~ok[B:]
        Xi = torch.cholesky_inverse(L[B:])
        # Schur matrix M_kl = ⟨B_k, W B_l X⁻¹⟩ (W[b, a] = W[a, b]ᵀ: symmetric W, X⁻¹)
        # (in place: the (m, m) temporaries are most of an iteration's memory traffic)
        Wab, Xab = gather(W, ("a", "b")), gather(Xi, ("a", "b"))
        M = gather(W, ("a", "a")).mul_(gather(Xi, ("b", "b")))
        M.add_(Wab * Xab.transpose(1, 2))
        M.add_(Xab.mul_(Wab.transpose(1, 2)))
        M.add_(gather(W, ("b", "b")).mul_(gather(Xi, ("a", "a"))))
        M.mul_(scale2).add_(pad_block)
        LU, piv, info = torch.linalg.lu_factor_ex(M)
        done |= info != 0
        if bool((info != 0).any()):
            LU = torch.where(info[:, None, None] == 0, LU, torch.eye(m, dtype=dt).expand(B, m, m))
        Md = torch.linalg.lu_solve(LU, piv, is_diag[:, :, None])[..., 0]
        dMd = (is_diag * Md).sum(1)

        def direction(R):
            # ΔW + sym(W ΔX X⁻¹) = R with ΔX on edges ∪ diagonal, tr ΔX = 0, and
            # ΔW = Δt I + (entries on the non-edges)
            r = 2 * scale * R[bidx, ia, ib]
            Mr = torch.linalg.lu_solve(LU, piv, r[:, :, None])[..., 0]
            dt_ = (is_diag * Mr).sum(1) / dMd
            z = Mr - dt_[:, None] * Md
            dX = scatter(z)
            S = W @ dX @ Xi
            dW = R - (S + S.transpose(1, 2)) / 2
            dW = torch.where(Wm, 0.0, dW)
            dW = dW - torch.diag_embed(torch.diagonal(dW, 0, 1, 2)) + dt_[:, None, None] * I
            return dW, dX, dt_

        dW_a, dX_a, _ = direction(-W)
        ap, ad = max_steps(L, ok, dW_a, dX_a)
        mu_a = ((W + ap[:, None, None] * dW_a) * (X + ad[:, None, None] * dX_a)
                * J).sum((1, 2)) / n_real
        sigma = ((mu_a / mu).clamp(0.0, 1.0) ** 3).clamp_min(_SIGMA_MIN)
        C = dW_a @ dX_a @ Xi
        R = (sigma * mu)[:, None, None] * Xi - W - (C + C.transpose(1, 2)) / 2
        dW, dX, dt_ = direction(R)
        ap, ad = max_steps(L, ok, dW, dX)
        done |= (ap <= 0) | (ad <= 0)  # a factorization failed: as far as it goes
        keep = (~done).to(dt)
        ap, ad = ap * keep, ad * keep
        W = W + ap[:, None, None] * dW
        t = t + ap * dt_
        X = X + ad[:, None, None] * dX
    if len(active):  # max_iter reached
        gap, W, X, t, done = gap_of(W, X, t, last, done)
        t_out[active], W_out[active], gap_out[active] = t, W, gap
    W = ((W_out + W_out.transpose(1, 2)) / 2)[:, :n_real, :n_real]
    return t_out, W, gap_out / t_out.abs().clamp_min(1.0)


def lovasz_theta_sdp(graphs, tol: float = 1e-9, max_iter: int = 60):
    r"""θ and the optimal slack matrix of the Lovász SDP of every graph, in GraKeL's
    convention:

    .. math:: \theta(G) = \min\, t \quad\text{s.t.}\quad W = tI - J + Y \succeq 0,\;
              Y_{ij} = 0 \text{ unless } i \ne j \text{ are not adjacent},

    which is Lovász's ϑ of the *complement* of G (Lovász, 1979: ϑ(Ḡ) lies between
    the clique number and the chromatic number of G; ϑ of the 5-cycle is √5, of K_n
    n, of the empty graph 1). The dual is max ⟨J, X⟩ over X ⪰ 0, tr X = 1, X_ij = 0
    on the non-edges.

    Parameters
    ----------
    graphs : list of (n, pairs)
        Each graph's node count and its undirected edges as an (E, 2) array.
    tol : float
        Stop when the duality gap ⟨W, X⟩ ≤ tol·max(1, θ) (or when a step can no longer
        be factorized; a RuntimeError when the gap is then above 10⁻⁶·max(1, θ)).
        Finite and > 0.
    max_iter : int
        Most interior-point iterations (a positive int).

    Returns
    -------
    list of (θ, W) : float and (n, n) float64 numpy array (n = 1: θ = 1, W = [[0]];
    n = 0: θ = 0).

    Notes
    -----
    A feasible primal–dual interior-point method (Helmberg, Rendl, Vanderbei and
    Wolkowicz, 1996; dual HKM direction) with Mehrotra's predictor–corrector, on all
    graphs of one size at once (torch, float64, on the CPU). The Schur system has one
    unknown per node and per edge (sparse graphs: few) and is solved by LU, which holds
    up longer than Cholesky as X nears singularity; near a gap of 10⁻⁸ it becomes too
    ill-conditioned to go further, where the method stops (θ is then an upper bound
    within about 10⁻⁸; a step that raised the duality gap there is taken back, and the
    graph stops at the iterate before it). The graphs are batched by their padded sizes
    (n to even, n + edges to a multiple of 4, decoupled padding), which makes each
    graph's arithmetic, and so its W, independent of the other graphs of the call; a
    graph leaves its batch when it has finished, and a graph given twice is solved once.
    The centering parameter is kept ≥ 0.3 and steps at 0.9 of the
    way to the boundary so that the iterates stay near the central path, whose limit is
    the analytic centre of the optimal face (Halická, de Klerk and Roos, 2002): W is the
    slack whose factor gives the orthonormal labelling u_i = (e + w_i)/√θ (Johansson et
    al., 2014), whose Gram matrix is (J + W)/θ. Where the optimal W is not unique, other
    solvers (cvxopt, stopped at its default tolerances, as GraKeL) return another one.
    """
    if not is_real(tol) or not math.isfinite(tol) or tol <= 0:
        raise ValueError(f"tol must be a finite float > 0, got {tol!r}")
    max_iter = check_int(max_iter, "max_iter")
    out = [None] * len(graphs)
    groups = {}  # graphs solved at the same sizes (a function of the graph alone)
    first, copies = {}, []  # a graph given again (same n, same edge array) solved once
    for i, (n, pairs) in enumerate(graphs):
        if n <= 1:
            out[i] = (float(n), np.zeros((n, n)))
            continue
        e = np.asarray(pairs)
        j = first.setdefault((n, e.shape, e.dtype.str, e.tobytes()), i)
        if j != i:
            copies.append((i, j))
        else:
            groups.setdefault((n, _sdp_sizes(n, len(pairs))), []).append(i)
    for (n, _), idx in groups.items():
        with one_thread():
            t, W, gap = _lovasz_group(n, [graphs[i][1] for i in idx], tol, max_iter)
        worst = float(gap.max())
        if worst > _GAP_OK:
            raise RuntimeError(f"lovasz_theta_sdp: the interior-point method stopped at a "
                               f"relative duality gap of {worst:.2e} on a graph of {n} nodes "
                               f"(tol={tol}, max_iter={max_iter})")
        for j, i in enumerate(idx):
            out[i] = (float(t[j]), W[j].numpy())
    for i, j in copies:  # the same result as its own solve (a graph's is batch-independent)
        out[i] = (out[j][0], out[j][1].copy())
    return out


# -- GraKeL's minimum enclosing cone (Welzl's move-to-front ball with a 0.1 tolerance) -----

def _grakel_cone(Gm: np.ndarray, draws: _LegacyDraws) -> float:
    """GraKeL's per-subset value: the cosine min_i ⟨u_i, c⟩/‖c‖ for c the centre its
    ``_minimum_cone_`` returns, the points given by their Gram matrix ``Gm`` (k × k).

    GraKeL runs Welzl's randomized minimum enclosing ball on the points (a point counts
    as inside when its distance to the centre exceeds the radius by at most 0.1), with
    ``permutation(k) − 1`` as the point list (index −1 is the last point) and
    ``randint`` picks; its ``_fitball_`` computes the circumcentre offset C of the
    support points R from R_0 but returns C + R_1 as the centre (the radius ‖C‖ is the
    circumradius). Replayed here exactly, with the centre kept as coefficients γ over
    the points (c = Σ γ_i u_i), so only the Gram matrix is needed; plain Python floats
    (the systems have at most k − 1 unknowns).

    Welzl's recursion minidisk(P, R) removes a random point p of P, solves (P − p, R),
    and solves (P − p, R + p) when p lies outside that ball; unrolled, one call draws
    its whole chain of removals first (the draws GraKeL's nested calls make, in their
    order), fits the ball of R once at its end, and goes back up the chain, branching
    where a point lies outside. GraKeL's shifted centre leaves most points outside, so
    a subset of k points costs about 2^k balls; each ball extends its parent's (R minus
    its last point) Cholesky factor of 2·QQ and forward solve by one row — the same
    operations, in the same order, as solving it afresh."""
    k = Gm.shape[0]
    G = Gm.tolist()
    removals = draws.removals
    sqrt = math.sqrt

    def fitball(R, state):
        """GraKeL's ``_fitball_(R)`` (R ≠ []): the centre c = u_{R_1} + Σ_i L_i
        (u_{R_i} − u_{R_0}), as (R_0, R_1, R[1:], L, radius, ‖c‖², state), ``state`` the
        factor, forward solve and right-hand side of the system of R (None where it
        was solved by elimination), given that of R minus its last point."""
        r0 = R[0]
        g0 = G[r0]
        g00 = g0[r0]
        if len(R) == 1:
            return r0, r0, (), (), 0.0, g00, ([], [], [])
        rest = R[1:]
        m = len(rest)
        a = rest[-1]
        ga = G[a]
        Lc = None
        if state is not None:  # one more row of the Cholesky factor of 2 QQ
            prev, yprev, rprev = state
            c0 = g00 - g0[a]
            row = []
            d2 = 2.0 * (ga[a] - g0[a] + c0)
            for pj, b in zip(prev, rest):
                v = 2.0 * (ga[b] - g0[b] + c0)
                for x, z in zip(row, pj):  # (len(row) < len(pj): the row's known part)
                    v -= x * z
                v /= pj[-1]
                row.append(v)
                d2 -= v * v
            if d2 > 1e-10 * 2.0 * (ga[a] - g0[a] + c0):
                row.append(sqrt(d2))
                Lc = prev + [row]
        if Lc is not None:
            ra = ga[a] - 2.0 * g0[a] + g00  # diag(QQ)
            rhs = rprev + [ra]
            v = ra
            for x, z in zip(row, yprev):
                v -= x * z
            y = yprev + [v / row[-1]]
            L = [0.0] * m
            for i in range(m - 1, -1, -1):
                v = y[i]
                for j in range(i + 1, m):
                    v -= Lc[j][i] * L[j]
                L[i] = v / Lc[i][i]
            # ‖C‖² = Lᵀ QQ L = ½ Lᵀ diag(QQ), as 2 QQ L = diag(QQ)
            rr = 0.0
            for x, z in zip(L, rhs):
                rr += x * z
            rr *= 0.5
            state = Lc, y, rhs
        else:  # ill-conditioned: Gaussian elimination with partial pivoting
            QQ = [[G[a][b] - g0[a] - g0[b] + g00 for b in rest] for a in rest]
            M = [[2.0 * v for v in row] + [row[i]] for i, row in enumerate(QQ)]
            for c in range(m):
                piv = max(range(c, m), key=lambda i: abs(M[i][c]))
                M[c], M[piv] = M[piv], M[c]
                if M[c][c] == 0.0:
                    raise np.linalg.LinAlgError(
                        "LovaszTheta: the support points of a minimum ball are affinely "
                        "dependent (GraKeL's solver fails here too)")
                for i in range(c + 1, m):
                    f = M[i][c] / M[c][c]
                    if f:
                        Mi, Mc = M[i], M[c]
                        for j in range(c, m + 1):
                            Mi[j] -= f * Mc[j]
            L = [0.0] * m
            for i in range(m - 1, -1, -1):
                L[i] = (M[i][m] - sum(M[i][j] * L[j] for j in range(i + 1, m))) / M[i][i]
            rr = sum(L[i] * QQ[i][j] * L[j] for i in range(m) for j in range(m))
            state = None
            if m == 1 and QQ[0][0] > 0:
                d = sqrt(2.0 * QQ[0][0])
                ra = ga[a] - 2.0 * g0[a] + g00
                state = [[d]], [ra / d], [ra]
        r1 = rest[0]
        g1 = G[r1]
        # ‖c‖² = ‖C‖² + 2⟨C, u_{R_1}⟩ + ‖u_{R_1}‖²
        cc = 0.0
        g01 = g0[r1]
        for x, b in zip(L, rest):
            cc += x * (g1[b] - g01)
        cc = rr + 2.0 * cc + g1[r1]
        return r0, r1, rest, L, sqrt(max(rr, 0.0)), cc, state

    def solve(P, R, state):
        """GraKeL's ``minidisk(P, R)`` (P and R lists of point indices, P ∪ R ≠ ∅)."""
        chain = removals(P)  # the nested calls' draws, in their order
        ball = fitball(R, state) if R else None
        here = ball[6] if R else None  # the factor of R, which R + [p] extends
        for p, left in reversed(chain):
            Gp = G[p]
            if ball is None:
                d2, r = Gp[p], 0.0
            else:
                r0, r1, rest, L, r, cc, _ = ball
                v = Gp[r1]
                if L:
                    g0p = Gp[r0]
                    for x, b in zip(L, rest):
                        v += x * (Gp[b] - g0p)
                d2 = Gp[p] - 2.0 * v + cc
            # (p is never in R: P and R are disjoint, so GraKeL's "p not in R" holds)
            if sqrt(max(d2, 0.0)) - r > 0.1:
                ball = solve(left, R + [p], here) if left else fitball(R + [p], here)
        return ball

    ball = solve([(p - 1) % k for p in draws.permutation(k)], [], None)
    r0, r1, rest, L, _, cc, _ = ball

    def dot_c(q):  # ⟨u_q, c⟩
        Gq = G[q]
        v = Gq[r1]
        if L:
            g0q = Gq[r0]
            for x, b in zip(L, rest):
                v += x * (Gq[b] - g0q)
        return v

    return min(dot_c(i) for i in range(k)) / sqrt(cc)


def _exact_cone(Gm: np.ndarray) -> float:
    """θ_S = min over unit c of max_i 1/⟨c, u_i⟩² (Johansson et al., 2014) for points of
    Gram matrix Gm: = min ‖w‖² s.t. ⟨w, u_i⟩ ≥ 1, a least-distance programme solved
    exactly through non-negative least squares (Lawson and Hanson, 1974, Ch. 23):
    u ≥ 0 minimizing ‖E u − f‖, E = [U; 1ᵀ], f = e_last, gives w = −r_{:d}/r_d for the
    residual r = E u − f. U are coordinates of the points (from the eigendecomposition
    of Gm). The points must lie in an open half-space (true of a labelling's subsets,
    whose handle makes angles below 90° with every u_i)."""
    from scipy.optimize import nnls
    w, V = np.linalg.eigh(Gm)
    keep = w > 1e-12 * max(w.max(), 1.0)
    U = np.sqrt(w[keep])[:, None] * V[:, keep].T  # (d, k): UᵀU = Gm
    E = np.vstack([U, np.ones((1, Gm.shape[0]))])
    f = np.zeros(E.shape[0])
    f[-1] = 1.0
    u, _ = nnls(E, f)
    r = E @ u - f
    if abs(r[-1]) < 1e-300:
        raise ValueError("LovaszTheta(cone='exact'): the points of a subset do not lie in "
                         "an open half-space")
    x = -r[:-1] / r[-1]
    return float(x @ x)


# -- SVM-θ ----------------------------------------------------------------------------------

# OneClassSVM's own arguments to libsvm (sklearn.svm._base.BaseLibSVM._dense_fit with
# OneClassSVM's defaults: C and epsilon 0, ν = 0.5, tol 10⁻³, shrinking, a 200 MB cache)
_LIBSVM_ONE_CLASS = dict(svm_type=2, kernel="precomputed", C=0.0, nu=0.5, epsilon=0.0,
                         tol=1e-3, shrinking=1, probability=0, cache_size=200.0, degree=3,
                         coef0=0.0, gamma=1.0, max_iter=-1, random_seed=0)
_DIRECT: dict = {}


def _one_class_sklearn(K: np.ndarray) -> np.ndarray:
    from sklearn.svm import OneClassSVM
    svm = OneClassSVM(kernel="precomputed").fit(K)
    alphas = np.zeros(K.shape[0])
    np.put(alphas, svm.support_, svm._dual_coef_[0])
    return alphas


def _one_class_direct(K: np.ndarray) -> np.ndarray:
    _libsvm = _LIBSVM[0]
    if _libsvm is None:
        from sklearn.svm import _libsvm
        _LIBSVM[0] = _libsvm
    n = K.shape[0]
    if len(_ONES[0]) < n:  # the labels and unit sample weights, read only by libsvm
        _ONES[0] = np.ones(max(n, 2 * len(_ONES[0])))
        _ONES[0].flags.writeable = False
    ones = _ONES[0][:n]
    out = _libsvm.fit(K, ones, sample_weight=ones, class_weight=_NO_WEIGHT,
                      **_LIBSVM_ONE_CLASS)
    alphas = np.zeros(n)
    alphas[out[0]] = out[3][0]
    return alphas


_ONES = [np.ones(0)]
_LIBSVM = [None]
_NO_WEIGHT = np.empty(0)
_NO_WEIGHT.flags.writeable = False


def _one_class_alphas():
    """The function K ↦ α of ``OneClassSVM(kernel="precomputed").fit(K)``: libsvm's
    fit called with the arguments OneClassSVM gives it (its input checks, which cost more
    than the solve on small graphs, skipped), once checked in this process to return what
    OneClassSVM returns on a small problem; OneClassSVM itself where that check fails
    (another scikit-learn whose private ``_libsvm.fit`` takes other arguments)."""
    if "fn" not in _DIRECT:
        K = np.array([[1.0, 0.6, 0.0, 0.2], [0.6, 1.0, 0.5, 0.0],
                      [0.0, 0.5, 1.0, 0.7], [0.2, 0.0, 0.7, 1.0]])
        fn = _one_class_sklearn
        try:
            from sklearn.svm import _libsvm
            _libsvm.set_verbosity_wrap(0)
            if np.array_equal(_one_class_direct(K), _one_class_sklearn(K)):
                fn = _one_class_direct
        except Exception:  # noqa: BLE001 (any failure of a private API: use the public one)
            pass
        _DIRECT["fn"] = fn
    return _DIRECT["fn"]


def _permuted_is_legacy() -> bool:
    """Whether ``Generator.permuted(X, axis=1)`` on an MT19937 shuffles the rows of a
    C-contiguous int64 X one after the other with the draws of
    ``RandomState.shuffle`` on each row (NumPy's bounded draw of the legacy shuffle,
    Fisher–Yates from the last position down), leaving the stream where those
    shuffles leave it — checked once in this process on rows of lengths whose draws
    are often rejected; NumPy does not promise it (``Generator`` streams may change
    between versions), so the row-by-row shuffles are used where it fails."""
    if "ok" not in _PERMUTED:
        ok = True
        try:
            bits = np.random.MT19937()
            mine, gen = np.random.RandomState(bits), np.random.Generator(bits)
            ref = np.random.RandomState()
            for n in (1, 2, 3, 5, 17, 40, 129, 300):
                mine.seed([3, n])
                ref.seed([3, n])
                X = np.tile(np.arange(n, dtype=np.int64), (7, 1))
                Y = X.copy()
                for row in X:
                    ref.shuffle(row)
                gen.permuted(Y, axis=1, out=Y)
                ok = ok and np.array_equal(X, Y) and mine.randint(2 ** 30) == ref.randint(2 ** 30)
        except Exception:  # noqa: BLE001 (another NumPy: the row-by-row shuffles)
            ok = False
        _PERMUTED["ok"] = ok
    return _PERMUTED["ok"]


_PERMUTED: dict = {}


# Graphs of at least this many nodes get λ_min(A) from the batched Lanczos iteration, the
# smaller ones from one dense eigvalsh per size (measured crossover; see
# :func:`_lambda_min_lanczos`)
_LANCZOS_MIN_N = 56
# Lanczos steps of the first check of a graph's Ritz values; the next check of a graph not
# yet certified is where its residual, falling at the rate measured (after the first
# check: at _LANCZOS_RATE decades a step; Erdős–Rényi graphs of 100–300 nodes fall at
# 0.15–0.35), reaches the certified level
_LANCZOS_FIRST_CHECK = 48
_LANCZOS_RATE = 0.25
# the first check where the caller accepts a looser certificate (``accept``)
_LANCZOS_FIRST_CHECK_ACCEPT = 44
# Relative accuracy to which the Lanczos iteration certifies λ_min for α: α depends on λ
# only through float32(1/ρ), and λ is taken again from GraKeL's own eigenvalue call when
# 1/ρ is within _TIE of a float32 rounding tie; certified to _TIE/10, any λ within that
# (GraKeL's own included: LAPACK's error is about 10⁻¹⁵) rounds alike elsewhere
_TIE = 1e-10
_ALPHA_LAMBDA_TOL = 1e-11
# ... or to this accuracy, where 1/ρ's float32 rounding is then known (:func:`_rounds_alike`)
_ACCEPT_TOL = 1e-8


def _ritz_min(d: np.ndarray, e: np.ndarray, tol: float):
    """The smallest Ritz value θ₁ of a Lanczos tridiagonal T_k (diagonal ``d`` (k,),
    off-diagonal ``e`` (k,): e[:-1] inside T_k, e[-1] = β_k the next coefficient) and
    whether it is certified: 0 ≤ θ₁ − λ_min ≤ r₁²/(θ₂ − r₂ − θ₁) ≤ tol·max(1, |θ₁|)
    (Kato–Temple, with r_i = β_k |s_ki| the residual of Ritz pair i and θ₂ − r₂ taken
    as the lower bound of the second eigenvalue). LAPACK's bisection (``dstebz``) and
    inverse iteration (``dstein``) on T_k. Returns (θ₁, certified, r₁, r*), r* the
    residual that would certify θ₁ (NaN when θ₂ − r₂ ≤ θ₁)."""
    from scipy.linalg import lapack
    k = len(d)
    bk = abs(float(e[-1]))
    if k == 1:  # the start vector is an eigenvector (β₁ = 0: a graph without edges)
        bound = tol * max(1.0, abs(float(d[0])))
        return float(d[0]), bk <= bound, bk, bound
    m, w, iblock, isplit, info = lapack.dstebz(d, e[:-1], 2, 0.0, 0.0, 1, 2, 0.0, "B")
    if info != 0 or m < 2:
        return math.nan, False, math.nan, math.nan
    z, info = lapack.dstein(d, e[:-1], w[:m], iblock, isplit)
    if info != 0:
        return math.nan, False, math.nan, math.nan
    o = np.argsort(w[:m])
    t1, t2 = float(w[o[0]]), float(w[o[1]])
    r1, r2 = bk * abs(float(z[-1, o[0]])), bk * abs(float(z[-1, o[1]]))
    gap = t2 - r2 - t1
    if not gap > 0:
        return t1, False, r1, math.nan
    rstar = math.sqrt(tol * max(1.0, abs(t1)) * gap)
    return t1, r1 <= rstar, r1, rstar


def _lambda_min_lanczos(graphs, tol: float = 1e-13, max_iter: int | None = None,
                        seed: int = 0, accept=None, accept_tol: float = 1e-8):
    """λ_min(A) of the adjacency matrix of every graph (n, pairs) by one Lanczos iteration
    on all graphs at once, with a certificate.

    The Lanczos recurrence (Lanczos, 1950; Golub and Van Loan, *Matrix Computations*,
    4th ed., 2013, Sec. 10.1) runs on the block-diagonal sparse adjacency of the whole
    list, from a Gaussian start vector per graph, the inner products of each graph
    summed over its block; no reorthogonalization (a graph is done long before its Ritz
    vectors lose orthogonality). A graph's tridiagonal T_k is checked after 48 steps
    (``_LANCZOS_FIRST_CHECK``), then where its residual, falling at the rate seen,
    should be certified: with the residual norms r_i = β_k |s_ki| of the two smallest
    Ritz pairs (θ_i, s_i) of T_k, the Kato–Temple inequality (Kato, 1949; Parlett, *The
    Symmetric Eigenvalue Problem*, 1998, Ch. 10) bounds 0 ≤ θ₁ − λ_min ≤ r₁²/(b − θ₁)
    with b = θ₂ − r₂ standing for a lower bound of the second eigenvalue; the graph is
    done when that bound is ≤ tol·max(1, |θ₁|). Where a check comes after θ₁ converged
    and rounding has already made a copy of it (Paige, 1976: the loss of orthogonality
    that follows convergence), closing the gap, the earlier tridiagonals T_j (the
    leading parts of T_k) are checked, back to the last check. A graph is given up
    (``certified`` False: the caller computes it densely) after min(n, ``max_iter``)
    steps, or when β_k vanishes (an invariant subspace) without a certificate. The
    certificate assumes that the start vector is not deficient in the lowest eigenvector
    (probability one for a Gaussian start) and that no eigenvalue the iteration has not
    seen lies between λ_min and θ₂ − r₂.

    Parameters
    ----------
    graphs : list of (n, pairs)
        Node count and undirected edges (E, 2) of every graph (repeated pairs count
        once).
    tol : float
        Certified relative accuracy of λ_min.
    max_iter : int or None
        Most Lanczos steps of a graph (None: its node count).
    seed : int
        Seed of the start vectors (the certified values do not depend on it).
    accept : None or callable (θ₁, δ) → bool
        Where given, a graph is also done at a check where the Kato–Temple bound δ
        (0 ≤ θ₁ − λ_min ≤ δ) is ≤ ``accept_tol``·max(1, |θ₁|) and ``accept(θ₁, δ)``
        says that is enough (its first check then comes after
        ``_LANCZOS_FIRST_CHECK_ACCEPT`` steps, the next ones aimed at ``accept_tol``
        until its bound is there, then at ``tol``).
    accept_tol : float
        The accuracy ``accept`` is asked about (above ``tol``).

    Returns
    -------
    lam : (B,) float64 array
        θ₁ where certified (else NaN).
    certified : (B,) bool array
        Certified to ``tol``, or accepted by ``accept``.

    Notes
    -----
    Cost: O(E + n) per graph and step (40–80 steps on Erdős–Rényi graphs of 100–300
    nodes and average degree 6, whatever n), plus O(k) per graph and check (about 2
    checks a graph); no n × n array.
    """
    from scipy.sparse import csr_matrix
    B = len(graphs)
    lam = np.full(B, math.nan)
    ok = np.zeros(B, dtype=bool)
    sizes = np.array([n for n, _ in graphs], dtype=np.int64)
    todo = np.nonzero(sizes > 0)[0]
    lam[sizes == 0], ok[sizes == 0] = 0.0, True
    if not len(todo):
        return lam, ok
    limit = sizes if max_iter is None else np.minimum(sizes, max_iter)
    # the block-diagonal adjacency of the graphs to do, CSR, entries 1 (repeated or
    # reversed pairs counted once, as the dense adjacency does)
    n_a = sizes[todo]
    off = np.zeros(len(todo) + 1, dtype=np.int64)
    np.cumsum(n_a, out=off[1:])
    pairs = [np.asarray(graphs[g][1], dtype=np.int64).reshape(-1, 2) for g in todo]
    ne = np.array([len(p) for p in pairs], dtype=np.int64)
    e = np.concatenate(pairs) if ne.sum() else np.zeros((0, 2), dtype=np.int64)
    base = np.repeat(off[:-1], ne)
    T = int(off[-1])
    A = csr_matrix((np.ones(2 * len(e)), (np.r_[e[:, 0] + base, e[:, 1] + base],
                                          np.r_[e[:, 1] + base, e[:, 0] + base])), shape=(T, T))
    A.sum_duplicates()
    A.data[:] = 1.0
    act = todo.copy()  # the graphs still iterating, in block order
    al = np.zeros((B, 64))  # the tridiagonals, grown as the steps go on
    be = np.zeros((B, 64))
    q = np.random.default_rng(seed).standard_normal(T)
    q /= np.repeat(np.sqrt(np.add.reduceat(q * q, off[:-1])), n_a)
    qb = np.zeros(T)  # β_{k−1} q_{k−1}
    k = 0
    first = _LANCZOS_FIRST_CHECK if accept is None else _LANCZOS_FIRST_CHECK_ACCEPT
    loose = math.sqrt(accept_tol / tol)  # r* of accept_tol over r* of tol
    nxt = np.full(len(act), first)  # the step of each graph's next check
    seen = np.full((len(act), 2), math.nan)  # (step, log10 r₁) of its last check
    live = np.ones(len(act), dtype=bool)  # finished graphs stay (zero blocks) until compacted
    idle = 0  # their nodes
    while live.any():
        starts = off[:-1]
        w = A @ q
        a = np.add.reduceat(w * q, starts)
        w -= np.repeat(a, n_a) * q
        w -= qb
        b = np.sqrt(np.add.reduceat(w * w, starts))
        if k == al.shape[1]:
            al = np.concatenate([al, np.zeros_like(al)], 1)
            be = np.concatenate([be, np.zeros_like(be)], 1)
        al[act, k], be[act, k] = a, b
        k += 1
        last = live & ((k >= limit[act]) | (b <= 1e-12 * np.maximum(np.abs(a), 1.0)))
        for j in np.nonzero(last | (live & (nxt == k)))[0].tolist():
            g = act[j]
            theta, certified, r, rstar = _ritz_min(al[g, :k], be[g, :k], tol)
            target = rstar
            if accept is not None and not certified and rstar > 0:
                if r <= loose * rstar:  # the Kato–Temple bound r²/(θ₂ − r₂ − θ₁) ≤ accept_tol
                    certified = bool(accept(theta, tol * max(1.0, abs(theta)) * (r / rstar) ** 2))
                else:
                    target = loose * rstar
            if not certified and not rstar > 0 and r <= 1e-8 * max(1.0, abs(theta)):
                # θ₁ converged, and a copy of it (rounding's ghost) already closes the
                # gap: certify it on an earlier T_j, before the copy (T_j is the
                # leading part of T_k)
                for kk in range(k - 2, max(1, int(seen[j, 0]) if seen[j, 0] > 0 else 1), -2):
                    theta, certified, _, _ = _ritz_min(al[g, :kk], be[g, :kk], tol)
                    if certified:
                        break
            if certified or last[j]:
                if certified:
                    lam[g], ok[g] = theta, True
                live[j] = False
                idle += int(n_a[j])
                w[off[j]:off[j + 1]] = 0.0
                q[off[j]:off[j + 1]] = 0.0
            elif r > 0 and rstar > 0:  # where the residual reaches r*, at the rate seen
                lr = math.log10(r)
                rate = _LANCZOS_RATE
                if seen[j, 1] > lr:
                    rate = min(rate, (seen[j, 1] - lr) / (k - seen[j, 0]))
                seen[j] = k, lr
                # aimed a decade below r*: a step costs far less than a check, and the
                # residual stays below r* for many steps (until a copy of θ₁ appears)
                nxt[j] = k + min(max(math.ceil((lr - math.log10(target) + 1.0) / rate), 2), k)
            else:
                nxt[j] = k + max(2, k // 5)
        b[~live] = 1.0
        if idle > T // 4:  # drop the finished graphs' blocks from the iteration
            rows = np.repeat(live, n_a)
            ip = A.indptr
            nnz = ip[off[1:]] - ip[off[:-1]]
            new = np.zeros(int(live.sum()) + 1, dtype=np.int64)
            np.cumsum(n_a[live], out=new[1:])
            cols = A.indices[np.repeat(rows, np.diff(ip))] - np.repeat(
                (off[:-1][live] - new[:-1]), nnz[live])
            indptr = np.zeros(int(new[-1]) + 1, dtype=np.int64)
            np.cumsum(np.diff(ip)[rows], out=indptr[1:])
            off, T, idle = new, int(new[-1]), 0
            A = csr_matrix((np.ones(len(cols)), cols, indptr), shape=(T, T))
            q, w = q[rows], w[rows]
            act, n_a, b, nxt, seen = act[live], n_a[live], b[live], nxt[live], seen[live]
            live = live[live]
        r = np.repeat(b, n_a)
        qb = q * r
        q = w / r
    return lam, ok


def _rounds_alike(theta: float, delta: float) -> bool:
    """Whether every λ in [θ − δ, θ] (where the Kato–Temple bound puts λ_min) gives
    1/ρ = −1/λ the same float32 rounding, with the tie window ``_TIE`` around them all:
    then λ = θ gives GraKeL's α (1/ρ moves by at most δ/|θ| relative, counted twice)."""
    if not theta < -0.5:  # (a graph with an edge has λ_min ≤ −1)
        return False
    q = -1.0 / theta
    w = 2.0 * delta / -theta + _TIE
    return bool(np.float32(q * (1.0 + w)) == np.float32(q * (1.0 - w)))


def _svm_theta_alphas_all(graphs, lanczos_min_n: int | None = None,
                          lanczos_max_iter: int | None = None) -> list:
    """:func:`svm_theta_alphas` of every (n, pairs) of ``graphs``.

    λ_min(A) comes from one batched Lanczos iteration over all graphs of at least
    ``lanczos_min_n`` nodes (default ``_LANCZOS_MIN_N``; :func:`_lambda_min_lanczos`,
    certified to 10⁻¹¹·max(1, |λ|), or less where float32(1/ρ) is then known,
    :func:`_rounds_alike`; the graphs it does not certify, after at most
    ``lanczos_max_iter`` steps, computed densely), and from one batched dense eigvalsh
    per graph size for the smaller graphs.

    libsvm reads the kernel matrix K = A/ρ + I in single precision (its ``Qfloat``)
    except for the diagonal, so α depends on ρ only through float32(1/ρ): where that
    rounding is within 10⁻¹⁰ of a tie (a different last bit of λ_min could change it),
    λ_min is recomputed with GraKeL's own call (LAPACK's ``syevr`` for the smallest
    eigenvalue), so α is GraKeL's bit for bit."""
    out = [None] * len(graphs)
    groups, first, same = {}, {}, []  # a graph seen before (same nodes, same edges): α shared
    edges = [np.ascontiguousarray(pairs, np.int64).reshape(-1, 2) for _, pairs in graphs]
    if edges:
        every = np.concatenate(edges)
        if (every[:, 0] == every[:, 1]).any():  # GraKeL zeroes the diagonal: self-loops
            edges = [np.ascontiguousarray(e[e[:, 0] != e[:, 1]]) for e in edges]  # ignored
    for i, (n, _) in enumerate(graphs):
        key = (n, edges[i].tobytes())
        if key in first:
            same.append((i, first[key]))
        else:
            first[key] = i
            groups.setdefault(n, []).append(i)
    fit = _one_class_alphas()
    if fit is _one_class_direct:  # libsvm prints unless told not to (OneClassSVM tells it
        from sklearn.svm import _libsvm  # before every fit: a verbose one leaves it on)
        _libsvm.set_verbosity_wrap(0)
    min_n = _LANCZOS_MIN_N if lanczos_min_n is None else lanczos_min_n
    big = [i for n, idx in groups.items() if n >= max(min_n, 2) for i in idx]
    lam_big = {}
    if big:
        lam, ok = _lambda_min_lanczos([(graphs[i][0], edges[i]) for i in big],
                                      tol=_ALPHA_LAMBDA_TOL, max_iter=lanczos_max_iter,
                                      accept=_rounds_alike, accept_tol=_ACCEPT_TOL)
        lam_big = {i: float(v) for i, v, c in zip(big, lam, ok) if c}

    def adjacency(n, idx):
        A = np.zeros((len(idx), n, n))
        es = [edges[i] for i in idx]
        e = np.concatenate(es)
        if len(e):
            at = np.repeat(np.arange(0, len(idx) * n * n, n * n), [len(x) for x in es])
            flat = A.reshape(-1)
            flat[at + e[:, 0] * n + e[:, 1]] = 1.0
            flat[at + e[:, 1] * n + e[:, 0]] = 1.0
        return A

    for n, idx in groups.items():
        if n == 0:  # no node, no coefficient
            for i in idx:
                out[i] = np.zeros(0)
            continue
        A = None  # the group's dense adjacencies, where all were needed
        if n == 1:
            lam = np.zeros(len(idx))
        else:
            lam = np.array([lam_big.get(i, math.nan) for i in idx])
            dense = np.nonzero(np.isnan(lam))[0]  # small graphs, or not certified
            if len(dense):
                Ad = adjacency(n, [idx[b] for b in dense])
                with one_thread():
                    lam[dense] = torch.linalg.eigvalsh(torch.from_numpy(Ad))[:, 0].numpy()
                if len(dense) == len(idx):
                    A = Ad
            with np.errstate(divide="ignore"):
                q = 1.0 / -lam
                near = (np.float32(q * (1 + _TIE)) != np.float32(q * (1 - _TIE))) & (lam < -0.5)
            for b in np.nonzero(near)[0]:
                lam[b] = eigvalsh(adjacency(n, [idx[b]])[0], lower=False,
                                  subset_by_index=(0, 0))[0]
        if A is not None:  # K = A/ρ + I (A where λ_min ≥ −10⁻⁶) for the whole group
            ridge = (lam < 0) & (np.abs(lam) > 1e-6)
            if ridge.any():
                A[ridge] /= -lam[ridge][:, None, None]
                A[ridge] += np.eye(n)
            for b, i in enumerate(idx):
                out[i] = fit(A[b])
            continue
        # else in one buffer, its entries set and cleared graph by graph (no n × n
        # array a graph)
        K = np.zeros((n, n))
        flat = K.reshape(-1)
        diag = flat[::n + 1]
        for b, i in enumerate(idx):
            e = edges[i]
            at = np.concatenate([e[:, 0] * n + e[:, 1], e[:, 1] * n + e[:, 0]])
            ridge = lam[b] < 0 and abs(lam[b]) > 1e-6
            flat[at] = 1.0 / -lam[b] if ridge else 1.0
            if ridge:
                diag += 1.0
            out[i] = fit(K)
            flat[at] = 0.0
            diag[:] = 0.0
    for i, j in same:
        out[i] = out[j]
    return out


def svm_theta_alphas(n: int, pairs: np.ndarray) -> np.ndarray:
    """The one-class SVM dual coefficients of a graph (Jethava et al., 2013), as GraKeL:
    K = A/ρ + I with ρ = −λ_min(A) (K = A, no ridge, when λ_min(A) ≥ −10⁻⁶: no edge),
    α from scikit-learn's ``OneClassSVM(kernel="precomputed")`` (ν = 0.5: the dual
    min ½αᵀKα s.t. 0 ≤ α_i ≤ 1, Σα_i = νn, solved by libsvm to its tolerance 10⁻³),
    equal to it bit for bit.

    Parameters
    ----------
    n : int
        Number of nodes.
    pairs : (E, 2) int array
        The undirected edges (a, b); a pair counts once whatever its order and
        repetitions, a self-loop (a, a) not at all (GraKeL zeroes the diagonal).

    Returns
    -------
    (n,) float64 array
    """
    return _svm_theta_alphas_all([(n, np.asarray(pairs).reshape(-1, 2))])[0]


# -- the kernels ----------------------------------------------------------------------------

def _check_common(n_samples, subsets_size_range, random_state, base_kernel):
    if isinstance(n_samples, bool) or not is_int(n_samples) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    r = subsets_size_range
    if (not isinstance(r, (tuple, list)) or len(r) != 2 or not all(
            is_int(v) and not isinstance(v, bool) for v in r) or r[0] < 1 or r[0] > r[1]):
        raise ValueError(f"subsets_size_range must be a pair (min, max) of ints with "
                         f"1 <= min <= max, got {subsets_size_range!r}")
    if random_state is not None and (isinstance(random_state, bool) or not is_int(random_state)
                                     or not 0 <= random_state < 2 ** 32):
        raise ValueError(f"random_state must be None or a non-negative int below 2^32 (the "
                         f"seed of the subset draws, numpy RandomState's range), got "
                         f"{random_state!r}")
    if base_kernel is not None and not (isinstance(base_kernel, Kernel)
                                        and getattr(base_kernel, "vector_input", True)):
        raise TypeError(f"base_kernel must be None (the dot product of the feature vectors) "
                        f"or a torchkern vector kernel, got {type(base_kernel).__name__}")


class _ThetaKernel(GraphKernel):
    """Common part: features per graph (one value per subset size), Gram = base kernel
    of the features, normalization from the same features."""

    _graph_fields = ("edges",)  # a list of Data: no node label nor attribute read

    def __init__(self, n_samples, subsets_size_range, random_state, draws, base_kernel,
                 normalize):
        super().__init__()
        _check_common(n_samples, subsets_size_range, random_state, base_kernel)
        if draws not in ("graph", "grakel"):
            raise ValueError(f"draws must be 'graph' or 'grakel', got {draws!r}")
        self.draws = draws
        self.n_samples = int(n_samples)
        self.subsets_size_range = (int(subsets_size_range[0]), int(subsets_size_range[1]))
        self.random_state = None if random_state is None else int(random_state)
        self.base_kernel = base_kernel
        self.normalize = check_bool(normalize, "normalize")

    def _structural_args(self) -> dict:
        out = super()._structural_args()
        out["base_kernel"] = self.base_kernel
        return out

    def _check_pair(self, X, Y):  # no labels are read
        return None

    def features(self, X) -> torch.Tensor:
        """φ of every graph of X: (n_graphs, max − min + 1), in the set's dtype, column j
        the mean per-subset value over the subsets of size min + j drawn (0 where none is). The
        embedding the kernel compares, whatever ``normalize`` and ``base_kernel``: the
        kernel is ⟨φ, φ'⟩, or ``base_kernel`` on φ, then cosine-normalized if asked."""
        X = self.check_input(X, "X")
        with one_thread():
            return self._features(X).to(device=X.device, dtype=X.dtype)

    def _levels(self, G: GraphSet, value_of_graph):
        """Draw the subsets of every graph and average ``value(subset)`` per size;
        ``value_of_graph(i, n, pairs)`` returns that function for graph i. One stream
        for the set, graph after graph (``draws="grakel"``), or one stream per graph
        seeded by ``random_state`` and the graph (``draws="graph"``)."""
        lo, hi = self.subsets_size_range
        seed = self._fixed_draws()  # None: a seed drawn once for the object
        shared = _LegacyDraws(seed) if self.draws == "grakel" else None
        phi = np.zeros((len(G), hi - lo + 1))
        for i, (n, pairs) in enumerate(_edge_pairs(G)):
            plan = _distribute_samples(n, lo, hi, self.n_samples)
            if not plan:
                continue
            draws = shared if shared is not None else _LegacyDraws(
                [seed, n, zlib.crc32(np.ascontiguousarray(pairs, np.int64))])
            value = value_of_graph(i, n, pairs)
            for j, count in enumerate(plan):
                if count <= 0:
                    continue
                level = lo + j
                vals = [value(draws.permutation(n)[:level], draws) for _ in range(count)]
                phi[i, j] = np.mean(vals)
        return torch.from_numpy(phi)

    def _gram(self, X: GraphSet, Y: GraphSet | None):
        """The unnormalized Gram (``forward`` builds it with normalization itself)."""
        with one_thread():
            fx = self._features(X).to(device=X.device, dtype=X.dtype)
            fy = fx if Y is None else self._features(Y).to(device=X.device, dtype=X.dtype)
        normalize, self.normalize = self.normalize, False
        try:
            return self._base_gram(fx, fy, Y is None)
        finally:
            self.normalize = normalize

    def forward(self, X, Y=None, *, backend: str | None = None):
        """k(X, Y): the base kernel (dot product by default) of the feature vectors of X
        and of Y (with ``draws="grakel"`` each set drawn from a fresh stream, so that
        k(X, Y), k(X) and k(Y) share the features of X and of Y)."""
        from ..gram import DenseKernelMatrix
        X, Y = self._checked_sets(X, Y, backend)
        with one_thread():
            fx = self._features(X).to(device=X.device, dtype=X.dtype)
            fy = fx if Y is None else self._features(Y).to(device=X.device, dtype=X.dtype)
        K = self._base_gram(fx, fy, Y is None)
        if backend == "dense":
            return DenseKernelMatrix(K.to_dense())
        return K

    def _base_gram(self, fx, fy, same):
        if self.base_kernel is None:
            if self.normalize:  # cosine normalization: unit feature vectors
                fx = fx * _inv_sqrt((fx * fx).sum(1))[:, None]
                fy = fx if same else fy * _inv_sqrt((fy * fy).sum(1))[:, None]
            return FeatureKernelMatrix(fx, None if same else fy)
        K = self.base_kernel(fx, None if same else fy)
        if self.normalize:
            dx = _inv_sqrt(self.base_kernel.diag(fx))
            K = K.scaled(dx, dx if same else _inv_sqrt(self.base_kernel.diag(fy)))
        return K

    def diag(self, X) -> torch.Tensor:
        X = self.check_input(X, "X")
        with one_thread():
            f = self._features(X).to(device=X.device, dtype=X.dtype)
        d = self._base_diag(f)
        return (d > 0).to(d.dtype) if self.normalize else d

    def _base_diag(self, f):
        if self.base_kernel is None:
            return (f * f).sum(1)
        return self.base_kernel.diag(f)

    def _diag(self, X: GraphSet) -> torch.Tensor:
        return self._base_diag(self._features(X).to(device=X.device, dtype=X.dtype))


class LovaszTheta(_ThetaKernel):
    r"""Lovász-θ graph kernel (Johansson, Jethava, Dubhashi and Bhattacharyya, 2014), as
    GraKeL 0.1.11's ``LovaszTheta`` (GraKeL's values with ``draws="grakel"``; the
    default ``draws="graph"`` draws other subsets).

    Every graph gets an orthonormal labelling u_1..u_n from its Lovász SDP
    (:func:`lovasz_theta_sdp`; the unit vectors u_i = (e + w_i)/√θ with Gram matrix
    (J + W)/θ, W the optimal slack). For every subset size s in ``subsets_size_range``
    the graph's feature φ_s is the mean, over random node subsets S of size s, of a
    value of the minimum cone enclosing {u_i : i ∈ S}; the kernel is the base kernel
    of the feature vectors, by default the dot product

    .. math:: k(G, G') = \sum_s \varphi_s(G)\, \varphi_s(G').

    **Reads** the edges only (an edge counts in either direction; self-loops are
    ignored); no label, no attribute.

    Parameters
    ----------
    n_samples : int
        Subsets drawn per graph, spread over the sizes in proportion to the number of
        subsets C(n, s) of each size (floors; the remainder one by one from the largest
        size down; sizes above n get none) — GraKeL's ``distribute_samples``.
    subsets_size_range : (int, int)
        Smallest and largest subset size (min ≥ 1).
    random_state : int or None
        Seed of the draws (below 2^32), made as GraKeL makes them with NumPy's
        ``RandomState``: ``choice(n, s, replace=False)`` per subset, then
        (``cone="grakel"``) the permutation and picks of the cone routine — from
        ``RandomState(random_state)`` with ``draws="grakel"``, from a stream per graph
        with ``draws="graph"``. None (GraKeL's default): a seed drawn from NumPy's global
        generator when the object is first called, then kept for all its calls (a new
        object, or a clone made before the first call, draws anew; a later clone keeps
        the seed).
    draws : {"graph", "grakel"}
        ``"graph"``: each graph draws from its own stream, seeded by ``random_state``,
        its node count and its edges — a graph's features depend on the graph only, so
        Grams of training and test sets, and of any subset (SVC's support vectors),
        agree. ``"grakel"``: one stream ``RandomState(random_state)`` for the whole set,
        graph after graph, as GraKeL — k(X) then equals GraKeL's ``fit_transform`` on
        the same graphs with the same seed, but a graph's features depend on the graphs
        before it (each set starts a fresh stream; GraKeL's ``transform(Y)`` continues
        the stream of ``fit(X)`` instead), so use it to reproduce GraKeL, not in
        estimators.
    cone : {"grakel", "exact"}
        ``"grakel"``: GraKeL's value — the cosine min_{i∈S} ⟨u_i, c⟩/‖c‖ for the
        centre c of GraKeL's minimum-ball routine (Welzl's algorithm with a 0.1
        tolerance, whose circumcentre is shifted by u_{R_1} − u_{R_0}; see Notes).
        ``"exact"``: the paper's θ_S = min_{‖c‖=1} max_{i∈S} 1/⟨c, u_i⟩² (Johansson et
        al., 2014, Sec. 3), a small quadratic programme solved exactly.
    base_kernel : None or torchkern vector kernel
        Kernel between the feature vectors (None: dot product). GraKeL accepts a
        ``base_kernel`` but always uses the dot product.
    normalize : bool
        Cosine normalization k(G, G')/√(k(G, G) k(G', G')).

    Notes
    -----
    Where GraKeL departs from the paper, kept in ``cone="grakel"`` (its values):

    - its SDP constrains W_ij = −1 on the *edges* (:func:`lovasz_theta_sdp`), so the
      labelling is orthogonal on adjacent nodes: ϑ and labelling of the complement
      graph, where the paper makes non-adjacent nodes orthogonal;
    - the per-subset value is the cosine of the cone's half-angle (the paper: its
      inverse square, θ_S);
    - the cone comes from a minimum enclosing *ball* with a 0.1 slack, whose
      ``_fitball_`` returns the circumcentre offset added to the second support point
      instead of the first, so c is not the minimum cone's axis.

    GraKeL solves the SDP with cvxopt (default tolerances: gap 10⁻⁷ absolute, 10⁻⁶
    relative); the interior-point method here runs to a gap of 10⁻⁹ θ or as far as its
    Schur system allows. Where the optimal slack W is unique the labellings agree to
    about cvxopt's tolerance, not to 10⁻¹⁰, and GraKeL's features are reproduced to
    about 10⁻⁶ (the tests say how close). Where it is not unique (many graphs: a
    5-node lollipop, most Erdős–Rényi graphs of 10–30 nodes) both solvers return an
    optimal W, each its own: θ agrees, the free entries of W — and the features — do
    not (measured: up to 15 % of a feature on graphs of 10–11 nodes). This W is the
    same for a graph whichever graphs it is computed with, so a graph's features
    depend on the graph alone (``draws="graph"``). Graphs with fewer nodes than the
    smallest subset size get φ = 0 (GraKeL divides by zero on them; it also fails on
    one-node graphs). GraKeL reads only the upper triangle of the adjacency, so on a
    graph given with one direction per edge it drops the edges (s, t) with s > t;
    here an edge counts in either direction.

    Cost: the SDPs of all graphs of one size are solved together, O(n³ + m³) per
    graph and iteration with m = n + edges (20–35 iterations); the cone of each subset
    is Welzl's recursion in Python on its s × s Gram matrix, which GraKeL's shifted
    centre makes nearly exhaustive — almost every point lands outside the ball it is
    tested against, so a subset fits close to 2^s balls of O(s²) each (1,000
    Erdős–Rényi graphs of 10–30 nodes, defaults: about 170 balls a subset, 3 points
    inside; 11 s of SDPs and 40 s of cones, one thread).

    References
    ----------
    F. D. Johansson, V. Jethava, D. Dubhashi and C. Bhattacharyya, "Global graph
    kernels using geometric embeddings", ICML (2014).
    L. Lovász, "On the Shannon capacity of a graph", IEEE Trans. Inf. Theory 25(1)
    (1979).
    E. Welzl, "Smallest enclosing disks (balls and ellipsoids)", New Results and New
    Trends in Computer Science, LNCS 555 (1991).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import LovaszTheta
    >>> ring = torch.tensor([[0, 1, 2, 3, 4, 1, 2, 3, 4, 0], [1, 2, 3, 4, 0, 0, 1, 2, 3, 4]])
    >>> c5 = Data(edge_index=ring, num_nodes=5)
    >>> LovaszTheta(n_samples=10, subsets_size_range=(2, 3)).features([c5]).shape
    torch.Size([1, 2])
    """

    def __init__(self, n_samples: int = 50, subsets_size_range=(2, 8), random_state: int = 0,
                 draws: str = "graph", cone: str = "grakel", base_kernel=None,
                 normalize: bool = False):
        super().__init__(n_samples, subsets_size_range, random_state, draws, base_kernel,
                         normalize)
        if cone not in ("grakel", "exact"):
            raise ValueError(f"cone must be 'grakel' or 'exact', got {cone!r}")
        self.cone = cone

    def extra_repr(self) -> str:
        return (f"n_samples={self.n_samples}, subsets_size_range={self.subsets_size_range}, "
                f"random_state={self.random_state}, draws={self.draws!r}, cone={self.cone!r}, "
                f"normalize={self.normalize}")

    def _features(self, G: GraphSet) -> torch.Tensor:
        self._fixed_draws()  # fixes random_state=None's seed before anything else draws
        lo = self.subsets_size_range[0]
        graphs = _edge_pairs(G)
        need = [i for i, (n, _) in enumerate(graphs) if n >= lo]
        sdp = dict(zip(need, lovasz_theta_sdp([graphs[i] for i in need])))
        exact = self.cone == "exact"

        def value_of_graph(i, n, pairs):
            theta, W = sdp[i]
            Gm = (1.0 + W) / theta  # the Gram matrix of the labelling
            if exact:
                return lambda idx, draws: _exact_cone(Gm[np.ix_(idx, idx)])
            return lambda idx, draws: _grakel_cone(Gm[np.ix_(idx, idx)], draws)

        return self._levels(G, value_of_graph)


class SVMTheta(_ThetaKernel):
    r"""SVM-θ graph kernel (Johansson, Jethava, Dubhashi and Bhattacharyya, 2014), as
    GraKeL 0.1.11's ``SvmTheta`` (GraKeL's values with ``draws="grakel"``; the default
    ``draws="graph"`` draws other subsets).

    Every graph gets the one-class SVM dual coefficients α of the kernel matrix
    K = A/ρ + I, ρ = −λ_min(A) (Jethava, Martinsson, Bhattacharyya and Dubhashi, 2013:
    Σ_i α_i approximates Lovász's ϑ(G); :func:`svm_theta_alphas`). For every subset
    size s, φ_s(G) is the mean of Σ_{i∈S} α_i over random node subsets S of size s;
    the kernel is the base kernel of the feature vectors (default: dot product,
    k(G, G') = Σ_s φ_s(G) φ_s(G')).

    **Reads** the edges only (either direction; self-loops ignored).

    Parameters
    ----------
    n_samples : int
        Subsets drawn per graph, spread over the sizes as in :class:`LovaszTheta`.
    subsets_size_range : (int, int)
        Smallest and largest subset size (min ≥ 1).
    random_state : int or None
        Seed of the draws (below 2^32): ``choice(n, s, replace=False)`` per subset,
        NumPy's ``RandomState`` replayed exactly — ``RandomState(random_state)`` itself
        with ``draws="grakel"``, a stream per graph with ``draws="graph"``. None
        (GraKeL's default): a seed drawn from NumPy's global generator when the object is
        first called, then kept for all its calls (a new object, or a clone made before
        the first call, draws anew; a later clone keeps the seed).
    draws : {"graph", "grakel"}
        As in :class:`LovaszTheta`: one stream per graph (seeded by ``random_state``
        and the graph: consistent Grams in estimators), or GraKeL's one stream for the
        set (``"grakel"``: k(X) equals GraKeL's ``fit_transform`` for the same seed).
    base_kernel : None or torchkern vector kernel
        Kernel between the feature vectors (None: the dot product). GraKeL calls it
        ``metric``, and its default ``np.inner(x, y)[0, 0]`` on the (levels, 1)
        feature columns is x₀y₀ — the *first subset size only*, which with 50
        samples and sizes 2–8 a graph of 12 nodes or more almost never gets, so
        GraKeL's default Gram is zero on most of MUTAG. The dot product here is the
        sum over all sizes (GraKeL with ``metric=lambda x, y: (x.T @ y).item()``).
    normalize : bool
        Cosine normalization.

    Notes
    -----
    α is computed by libsvm as scikit-learn's ``OneClassSVM(kernel="precomputed")``
    computes it (ν = 0.5, tol 10⁻³; libsvm's fit called with OneClassSVM's arguments,
    without its per-call input checks), as GraKeL, so α and the features are GraKeL's
    bit for bit (with ``draws="grakel"``): the SVM is stopped at libsvm's tolerance,
    not at the exact optimum of the dual. Graphs with fewer nodes than the smallest
    subset size get φ = 0 (GraKeL divides by zero).

    Cost: one libsvm solve per distinct graph (identical graphs share theirs); ρ of
    the graphs of 56 nodes or more from one Lanczos iteration on all of them at once
    (O(E + n) per graph and step, about 40–80 steps on sparse graphs; λ_min certified
    to 10⁻¹¹ relative by the Kato–Temple bound — enough for float32(1/ρ), the only
    way α depends on ρ, ρ being taken again from GraKeL's own eigenvalue call near a
    float32 rounding tie — a dense eigvalsh for any graph not certified), of the
    smaller ones from one batched dense eigvalsh per graph size; the n_samples
    subsets of a graph are the rows of one ``Generator.permuted`` call on the MT19937
    behind the seeded ``RandomState`` (the draws of ``RandomState.shuffle`` row after
    row, which this is checked once to give; else those shuffles themselves) and
    their α summed in bulk. On the CPU only (a few small sequential solves per
    graph). On Erdős–Rényi graphs of 100–300 nodes and average degree 6, about
    1.4 ms a graph, of which 1 ms is libsvm's solve.

    References
    ----------
    F. D. Johansson, V. Jethava, D. Dubhashi and C. Bhattacharyya, "Global graph
    kernels using geometric embeddings", ICML (2014).
    C.-C. Chang and C.-J. Lin, "LIBSVM: a library for support vector machines", ACM
    TIST 2(3) (2011).
    V. Jethava, A. Martinsson, C. Bhattacharyya and D. Dubhashi, "Lovász ϑ function,
    SVMs and finding dense subgraphs", JMLR 14 (2013).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import SVMTheta
    >>> path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3)
    >>> SVMTheta(subsets_size_range=(2, 3))([path, path]).shape
    (2, 2)
    """

    def __init__(self, n_samples: int = 50, subsets_size_range=(2, 8), random_state: int = 0,
                 draws: str = "graph", base_kernel=None, normalize: bool = False):
        super().__init__(n_samples, subsets_size_range, random_state, draws, base_kernel,
                         normalize)

    def extra_repr(self) -> str:
        return (f"n_samples={self.n_samples}, subsets_size_range={self.subsets_size_range}, "
                f"random_state={self.random_state}, draws={self.draws!r}, "
                f"normalize={self.normalize}")

    def _features(self, G: GraphSet) -> torch.Tensor:
        # fixes random_state=None's seed before libsvm draws from NumPy's global generator
        self._fixed_draws()
        lo, hi = self.subsets_size_range
        S = self.n_samples
        graphs = _edge_pairs(G)
        phi = np.zeros((len(G), hi - lo + 1))
        use = [i for i, (n, _) in enumerate(graphs) if n >= lo]  # the others get φ = 0
        if not use:
            return torch.from_numpy(phi)
        alphas = _svm_theta_alphas_all([graphs[i] for i in use])
        sizes = np.array([graphs[i][0] for i in use])
        # the S subsets of a graph are the first s entries of S permutations of its nodes
        # (``choice(n, s, replace=False)``), drawn graph after graph by the shuffle of
        # NumPy's RandomState itself, in place on the rows of one int64 buffer (NumPy's
        # fast path: other widths shuffle 25 % slower), of which every draw keeps its
        # first ``hi`` entries (its largest subset) as a row of P, S rows a graph
        nmax = int(sizes.max())
        itype = np.int16 if nmax < 2 ** 15 else np.int32 if nmax < 2 ** 31 else np.int64
        m = len(use)
        w = min(nmax, hi)
        P = np.zeros((m * S, w), dtype=itype)
        buf = np.empty(S * nmax, dtype=np.int64)
        shared = self.draws == "grakel"
        # one MT19937 behind a RandomState (its legacy seeding) and a Generator (whose
        # ``permuted`` shuffles all S rows of a graph in one call, with the same draws,
        # where :func:`_permuted_is_legacy` found so)
        bits = np.random.MT19937()
        rs = np.random.RandomState(bits)
        seed = self._fixed_draws()  # None: a seed drawn once for the object
        if shared:
            rs.seed(seed)
        permuted = np.random.Generator(bits).permuted if _permuted_is_legacy() else None
        shuffle = rs.shuffle
        for k, i in enumerate(use):
            n, pairs = graphs[i]
            if not shared:
                rs.seed([seed, n,
                         zlib.crc32(np.ascontiguousarray(pairs, np.int64))])
            perms = buf[:S * n].reshape(S, n)
            perms[:] = np.arange(n)
            if permuted is not None:
                permuted(perms, axis=1, out=perms)
            else:
                for row in perms:
                    shuffle(row)
            P[k * S:(k + 1) * S, :min(n, w)] = perms[:, :w]
        A = np.zeros((m, nmax))
        A[np.arange(nmax) < sizes[:, None]] = np.concatenate(alphas)
        nl = hi - lo + 1
        plans = {n: _distribute_samples(n, lo, hi, S) for n in set(sizes.tolist())}
        C = np.zeros((m, nl), dtype=np.int64)  # subsets of each size, graph by graph
        for k, n in enumerate(sizes.tolist()):
            C[k, :len(plans[n])] = plans[n]
        # φ_s: the mean over the subsets of size s of Σ α over the subset, as GraKeL
        # sums (np.sum of each subset, np.mean of the sums: rows of C-contiguous 2-D
        # arrays reduce as 1-D arrays do)
        level = np.repeat(np.tile(np.arange(nl), m), C.ravel())
        graph_of = np.repeat(np.arange(m), S)
        sums = np.zeros(m * S)
        for j in range(nl):
            sel = np.nonzero(level == j)[0]
            if len(sel):
                sums[sel] = A[graph_of[sel][:, None], P[sel, :lo + j]].sum(1)
        c = C.ravel()
        start = np.cumsum(c) - c
        rows = np.asarray(use)
        for cnt in np.unique(c[c > 0]).tolist():
            blocks = np.nonzero(c == cnt)[0]
            mean = sums[start[blocks][:, None] + np.arange(cnt)].sum(1) / cnt
            phi[rows[blocks // nl], blocks % nl] = mean
        return torch.from_numpy(phi)
