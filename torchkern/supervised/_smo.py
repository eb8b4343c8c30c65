"""The LIBSVM dual solver shared by :class:`~torchkern.supervised.SVC` and ``SVR``.

Every C-SVM and ε-SVR dual is one instance of

.. math::

    \\min_\\alpha\\ \\tfrac12 \\alpha^\\top Q \\alpha + p^\\top \\alpha
    \\quad\\text{s.t.}\\quad y^\\top \\alpha = 0,\\ 0 \\le \\alpha_t \\le C_t,
    \\qquad Q_{ts} = y_t y_s K_{\\kappa(t)\\kappa(s)},\\ y_t = \\pm 1,

(Chang and Lin, "LIBSVM", ACM TIST 2011, §2–4):
C-SVC takes p = −1 and κ(t) = t; ε-SVR takes 2n variables (α, α*), y = (1, −1),
p = (ε − z, ε + z) and κ(t) = t mod n.

Method: a *decomposition* with working sets of q variables (Joachims' SVMlight, and the
GPU solver ThunderSVM of Wen et al. 2018). One outer iteration

1. picks q variables: the q/2 most violating ones of the first-order rule (largest
   −y_t∇f_t in I_up, smallest in I_low), plus q/2 kept from the previous working set
   (free ones first), which stops the zig-zag of pure maximal-violator sets;
2. gets their q kernel rows from an LRU cache filled by ``K.rows(idx)`` — O(q n) memory
   per step and O(cache n) overall, never n × n;
3. solves the q-variable subproblem with LIBSVM's own SMO iterations — second-order
   working-pair selection (Fan, Chen and Lin 2005, "WSS2") and the clipped two-variable
   update — on the dense q × q block, in NumPy float64 where each step costs microseconds;
4. updates the full gradient ∇f = Qα + p with one (n × q)(q) product in torch.

Why not plain SMO over all n variables: each SMO step touches two variables, so in Python
the per-step overhead (a few torch calls on n-vectors) dominates and 10⁵ steps take
minutes. Here the Python-level steps run on q-vectors, and the O(n) work — the gradient
update and the selection — happens once per q/2 new variables, as one matrix product.

Stopping rule: the one of LIBSVM, m(α) − M(α) < tol with
m = max_{I_up} −y_t∇f_t and M = min_{I_low} −y_t∇f_t, checked on the full gradient, so
the solution satisfies the same KKT tolerance as LIBSVM's ``eps``. The offset ρ is
LIBSVM's: the mean of y_t∇f_t over free variables, else the midpoint of the feasible
interval.
"""
from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch

from ..linalg import ConvergenceWarning

_TAU = 1e-12  # LIBSVM's TAU: curvature used when K_ii + K_jj − 2K_ij ≤ 0.


@dataclass
class DualSolution:
    """What :func:`solve_dual` returns (all float64, on the kernel's device).

    alpha : (N,) the dual variables; grad : (N,) ∇f = Qα + p; rho : the offset, decision
    f(x) = Σ_t y_t α_t K(x_κ(t), x) − ρ; obj : ½αᵀQα + pᵀα; n_iter : outer iterations;
    n_inner : SMO steps in all; converged : whether m(α) − M(α) < tol; gap : m(α) − M(α).
    """

    alpha: torch.Tensor
    grad: torch.Tensor
    rho: float
    obj: float
    n_iter: int
    n_inner: int
    converged: bool
    gap: float


class RowCache:
    """Least-recently-used cache of dense kernel rows ``K[i, :]``.

    Rows come from ``rows_fn(idx)`` (e.g. ``K.rows``) in chunks of at most ``chunk`` rows,
    so that evaluating them never needs more than the blocked backend's memory budget.
    Storage is one (capacity, n) buffer in the kernel's dtype, grown on demand.
    """

    def __init__(self, rows_fn, n, dtype, device, capacity, chunk):
        self.rows_fn, self.n = rows_fn, n
        self.dtype, self.device = dtype, device
        self.capacity = max(1, int(capacity))
        self.chunk = max(1, int(chunk))
        self.buf = torch.empty(0, n, dtype=dtype, device=device)
        self.slots: OrderedDict[int, int] = OrderedDict()
        self.hits = self.misses = 0

    def _grow(self, need):
        # One allocation of the whole capacity: the pages of torch.empty are only
        # committed when rows are written, so the resident memory follows the rows cached.
        if need > self.buf.shape[0]:
            self.buf = torch.empty(self.capacity, self.n, dtype=self.dtype, device=self.device)

    def get(self, idx: np.ndarray) -> torch.Tensor:
        """Rows ``K[idx, :]`` (idx: distinct ints, at most ``capacity`` of them)."""
        idx = [int(i) for i in idx]
        missing = [i for i in idx if i not in self.slots]
        self.hits += len(idx) - len(missing)
        self.misses += len(missing)
        for i in idx:
            if i in self.slots:
                self.slots.move_to_end(i)
        if missing:
            used = len(self.slots)
            self._grow(min(self.capacity, used + len(missing)))
            free = list(range(used, min(self.buf.shape[0], used + len(missing))))
            wanted = set(idx)
            while len(free) < len(missing):  # evict the least recently used rows
                for key in self.slots:
                    if key not in wanted:
                        free.append(self.slots.pop(key))
                        break
            for s in range(0, len(missing), self.chunk):
                part = missing[s:s + self.chunk]
                where = torch.tensor(free[s:s + self.chunk], device=self.device)
                rows = self.rows_fn(torch.tensor(part, device=self.device))
                self.buf[where] = rows.to(self.dtype)
            for i, slot in zip(missing, free):
                self.slots[i] = slot
        where = torch.tensor([self.slots[i] for i in idx], device=self.device)
        return self.buf[where]


class DirectRows:
    """Reads of a stored Gram: ``get(idx)`` rows straight from ``rows_fn`` (an LRU cache
    would only add a copy) and ``block(idx)`` the square block K[idx][:, idx] from
    ``block_fn``, so a step reads the q × q subproblem and only the rows whose α moved."""

    def __init__(self, rows_fn, block_fn, device):
        self.rows_fn, self.block_fn, self.device = rows_fn, block_fn, device

    def _index(self, idx):
        return torch.as_tensor(np.asarray(idx, dtype=np.int64), device=self.device)

    def get(self, idx: np.ndarray) -> torch.Tensor:
        return self.rows_fn(self._index(idx))

    def block(self, idx: np.ndarray) -> torch.Tensor:
        i = self._index(idx)
        return self.block_fn(i, i)


def _inner_smo(Kb, y, s, a, C, eps, max_steps):
    """LIBSVM's SMO on a dense q-variable subproblem, in place on ``a`` and ``s`` (NumPy
    float64): WSS2 pair selection (Fan, Chen & Lin 2005) and the clipped analytic
    two-variable update. ``Kb`` is the q × q kernel block and ``s = −y ∘ ∇f`` the scores
    of the variables. Stops when the subproblem's m − M < eps. Returns the steps taken."""
    QD = np.diag(Kb).copy()
    pos = y > 0
    up = np.where(pos, a < C, a > 0)
    low = np.where(pos, a > 0, a < C)
    ninf = np.full_like(s, -np.inf)
    pinf = np.full_like(s, np.inf)
    steps = 0
    while steps < max_steps:
        su = np.where(up, s, ninf)
        i = int(su.argmax())
        gmax = su[i]
        sl = np.where(low, s, pinf)
        if not gmax - sl.min() >= eps:
            break
        b = gmax - sl  # > 0 exactly for the candidates j ∈ I_low that violate with i
        Ki = Kb[i]
        quad = QD - 2.0 * Ki
        quad += QD[i]
        quad[quad <= 0] = _TAU
        obj = np.where(b > 0, -(b * b) / quad, pinf)
        j = int(obj.argmin())
        if not obj[j] < np.inf:
            break
        ai, aj, Ci, Cj, yi, yj = a[i], a[j], C[i], C[j], y[i], y[j]
        gi, gj = -yi * s[i], -yj * s[j]
        Kij = Ki[j]
        if yi != yj:
            q = QD[i] + QD[j] - 2.0 * Kij
            delta = (-gi - gj) / (q if q > 0 else _TAU)
            diff = ai - aj
            ni, nj = ai + delta, aj + delta
            if diff > 0:
                if nj < 0:
                    nj, ni = 0.0, diff
            elif ni < 0:
                ni, nj = 0.0, -diff
            if diff > Ci - Cj:
                if ni > Ci:
                    ni, nj = Ci, Ci - diff
            elif nj > Cj:
                nj, ni = Cj, Cj + diff
        else:
            q = QD[i] + QD[j] - 2.0 * Kij
            delta = (gi - gj) / (q if q > 0 else _TAU)
            total = ai + aj
            ni, nj = ai - delta, aj + delta
            if total > Ci:
                if ni > Ci:
                    ni, nj = Ci, total - Ci
            elif nj < 0:
                nj, ni = 0.0, total
            if total > Cj:
                if nj > Cj:
                    nj, ni = Cj, total - Cj
            elif ni < 0:
                ni, nj = 0.0, total
        a[i], a[j] = ni, nj
        # ∇f += Q[:, i]Δα_i + Q[:, j]Δα_j, i.e. s −= y_iΔα_i K[:, i] + y_jΔα_j K[:, j].
        s -= Ki * (yi * (ni - ai)) + Kb[j] * (yj * (nj - aj))
        for t in (i, j):
            up[t] = (a[t] < C[t]) if pos[t] else (a[t] > 0)
            low[t] = (a[t] > 0) if pos[t] else (a[t] < C[t])
        steps += 1
    return steps


def _masks(alpha, y, C):
    pos = y > 0
    up = torch.where(pos, alpha < C, alpha > 0)
    low = torch.where(pos, alpha > 0, alpha < C)
    return up, low


def _select(s, up, low, alpha, C, prev, q):
    """q variables: the most violating of I_up (largest s = −y∇f) and of I_low (smallest),
    q/2 of them fresh after the first iteration, the rest kept from the previous set
    (free variables first)."""
    device = s.device
    n_new = q if prev.size == 0 else max(2, q // 2)
    k_up = min(n_new // 2 + n_new % 2, int(up.sum()))
    k_low = min(n_new // 2, int(low.sum()))
    top_up = torch.topk(torch.where(up, s, -math.inf), k_up).indices
    top_low = torch.topk(torch.where(low, -s, -math.inf), k_low).indices
    fresh = np.unique(torch.cat([top_up, top_low]).cpu().numpy())
    if prev.size == 0:
        return fresh
    keep = np.setdiff1d(prev, fresh, assume_unique=True)
    keep_t = torch.from_numpy(keep).to(device)
    a_keep, c_keep = alpha[keep_t], C[keep_t]
    free = ((a_keep > 0) & (a_keep < c_keep)).cpu().numpy()
    keep = np.concatenate([keep[free], keep[~free]])[: q - fresh.size]
    return np.concatenate([fresh, keep])


def compute_rho(alpha, grad, y, C) -> float:
    """LIBSVM's offset ρ: mean of y_t∇f_t over free t, else the middle of [lb, ub]."""
    yg = y * grad
    at_upper = alpha >= C
    at_lower = alpha <= 0
    free = ~at_upper & ~at_lower
    if bool(free.any()):
        return float(yg[free].mean())
    pos = y > 0
    ub_mask = (at_upper & ~pos) | (at_lower & pos)
    lb_mask = (at_upper & pos) | (at_lower & ~pos)
    ub = float(yg[ub_mask].min()) if bool(ub_mask.any()) else math.inf
    lb = float(yg[lb_mask].max()) if bool(lb_mask.any()) else -math.inf
    return (ub + lb) / 2


class _KernelReads:
    """What an outer iteration reads from K: the q × q block of the working set and the
    rows of the variables whose α moved. Variable t reads kernel row κ(t) (``kidx``).

    A stored Gram (``block_fn`` given, κ the identity) is read directly — the block
    straight from ``block_fn``, rows only for the moved variables; otherwise whole rows of
    the working set come through an LRU :class:`RowCache`."""

    def __init__(self, rows_fn, block_fn, diag, kidx, n_vars, cache_rows, chunk, q):
        device = diag.device
        self.same = kidx is None
        self.kidx_t = torch.arange(n_vars, device=device) if self.same else kidx.to(device)
        self.kidx_np = self.kidx_t.cpu().numpy()
        self.direct = block_fn is not None and self.same
        self.cache = (DirectRows(rows_fn, block_fn, device) if self.direct
                      else RowCache(rows_fn, diag.shape[0], diag.dtype, device,
                                    max(cache_rows, q), chunk))

    def working_block(self, ws: np.ndarray, ws_t: torch.Tensor):
        """K[κ(ws)][:, κ(ws)] as a NumPy float64 array, and the rows read (None if direct)."""
        if self.direct:
            return self.cache.block(ws).to(torch.float64).cpu().numpy(), None
        if self.same:
            R = self.cache.get(ws)  # (|ws|, nk)
        else:
            krows, inverse = np.unique(self.kidx_np[ws], return_inverse=True)
            R = self.cache.get(krows)[torch.from_numpy(inverse).to(ws_t.device)]
        return R[:, self.kidx_t[ws_t]].to(torch.float64).cpu().numpy(), R

    def moved_rows(self, ws: np.ndarray, nz: np.ndarray, R):
        """Kernel rows of the working-set members ``ws[nz]``."""
        if self.direct:
            return self.cache.get(ws[nz])
        return R[torch.from_numpy(nz).to(R.device)]


def _kkt_gap(s, up, low) -> float:
    """m(α) − M(α): largest score in I_up minus smallest in I_low (−inf if one is empty)."""
    if s.numel() == 0:
        return -math.inf
    m = float(torch.where(up, s, -math.inf).max())
    M = float(torch.where(low, s, math.inf).min())
    return m - M


def _solve_subproblem(KBB, ws_t, y, s, alpha, C, eps):
    """LIBSVM's SMO on the working set (NumPy float64). Returns the new α_B, its change
    and the SMO steps taken."""
    aB = alpha[ws_t].cpu().numpy().copy()
    a0 = aB.copy()
    sB = s[ws_t].cpu().numpy().copy()
    steps = _inner_smo(KBB, y[ws_t].cpu().numpy(), sB, aB, C[ws_t].cpu().numpy(), eps,
                       50 * ws_t.numel())
    return aB, aB - a0, steps


def _apply_step(alpha, grad, y, ws, ws_t, aB, delta, reads, R, nk):
    """α_B ← aB and ∇f += Q[:, B] Δα_B, in place: one (n × moved) product."""
    nz = np.nonzero(delta)[0]
    if not nz.size:
        return
    device = grad.device
    coef = torch.from_numpy(delta[nz]).to(device) * y[ws_t][torch.from_numpy(nz).to(device)]
    v = torch.zeros(nk, dtype=torch.float64, device=device)
    Rnz = reads.moved_rows(ws, nz, R)
    for c in range(0, nz.size, 64):  # float64 products, 64 rows at a time
        v += Rnz[c:c + 64].to(torch.float64).T @ coef[c:c + 64]
    grad += y * (v if reads.same else v[reads.kidx_t])
    alpha[ws_t] = torch.from_numpy(aB).to(device)


def solve_dual(rows_fn, diag, y, p, C, *, kidx=None, tol=1e-3, max_iter=None,
               working_set=128, cache_rows=1024, chunk=64, block_fn=None, verbose=False,
               desc="SMO"):
    """Solve ``min ½αᵀQα + pᵀα, yᵀα = 0, 0 ≤ α ≤ C`` by decomposition (module docstring).

    Parameters
    ----------
    rows_fn : callable
        ``rows_fn(idx)`` → dense kernel rows K[idx, :] of shape (len(idx), n_k).
    diag : torch.Tensor
        K_ii, shape (n_k,).
    y, p, C : torch.Tensor
        Labels ±1, linear term and upper bounds of the N variables.
    kidx : torch.Tensor, optional
        κ(t), the kernel row of variable t (default t).
    tol : float
        LIBSVM's ``eps``: stop when m(α) − M(α) < tol.
    max_iter : int, optional
        Cap on outer iterations (default 100 000).
    working_set : int
        q, the subproblem size.
    cache_rows : int
        Kernel rows kept in the LRU cache (at least q).
    chunk : int
        Rows per ``rows_fn`` call.
    block_fn : callable, optional
        ``block_fn(rows, cols)`` → K[rows][:, cols] of a stored matrix. Given, rows are
        read directly (no LRU cache) and a step reads only the q × q block and the rows
        whose α changed.

    Returns
    -------
    DualSolution

    Notes
    -----
    Cost per outer iteration: ≤ q new kernel rows (O(q n d)), an (n × q) gradient update,
    O(n) selection, and O(q) per inner SMO step. Memory: O(n · cache_rows).
    """
    f64 = torch.float64
    device = diag.device
    y = y.to(device=device, dtype=f64)
    p = p.to(device=device, dtype=f64)
    C = C.to(device=device, dtype=f64)
    N = y.shape[0]
    q = int(min(max(2, working_set), N))
    max_iter = 100_000 if max_iter is None else int(max_iter)
    reads = _KernelReads(rows_fn, block_fn, diag, kidx, N, cache_rows, chunk, q)
    alpha = torch.zeros(N, dtype=f64, device=device)
    grad = p.clone()
    prev = np.empty(0, dtype=np.int64)
    n_iter = n_inner = 0
    converged = False
    bar = None
    if verbose:
        from tqdm.auto import tqdm
        bar = tqdm(total=max_iter, desc=desc, leave=False)
    while True:
        up, low = _masks(alpha, y, C)
        s = -y * grad
        gap = _kkt_gap(s, up, low)
        if not gap >= tol:  # also stops on an empty I_up or I_low (gap = −inf)
            converged = True
            break
        if n_iter >= max_iter:
            break
        # (1) working set: fresh violators, then kept members of the last set (the whole
        # problem when it fits one set: plain LIBSVM SMO).
        ws = np.arange(N) if q == N else _select(s, up, low, alpha, C, prev, q)
        ws_t = torch.from_numpy(ws).to(device)
        # (2) its kernel block; (3) the subproblem, to a tolerance relative to the gap;
        # (4) α_B and the full gradient.
        KBB, R = reads.working_block(ws, ws_t)
        aB, delta, steps = _solve_subproblem(KBB, ws_t, y, s, alpha, C,
                                             tol if ws.size == N else max(tol, 0.1 * gap))
        n_inner += steps
        _apply_step(alpha, grad, y, ws, ws_t, aB, delta, reads, R, diag.shape[0])
        prev = ws
        n_iter += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(gap=f"{gap:.2e}")
    if bar is not None:
        bar.close()
    rho = compute_rho(alpha, grad, y, C)
    obj = float(0.5 * (alpha * (grad + p)).sum())
    if not converged:
        warnings.warn(f"{desc} did not converge in {n_iter} iterations: KKT violation "
                      f"m(α) − M(α) = {gap:.3e} > tol={tol:.1e}; raise max_iter",
                      ConvergenceWarning, stacklevel=3)
    return DualSolution(alpha, grad, rho, obj, n_iter, n_inner, converged, gap)
