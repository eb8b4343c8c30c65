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
   update — on the dense q × q block, in float64. Where the data lives on the CPU this
   runs in NumPy, where each step costs microseconds. On a GPU it runs on the device
   (ThunderSVM's design): the steps are tensor operations without a host
   synchronization, k of them recorded once as a CUDA graph and replayed, the stopping
   rule read back once per k steps (:class:`_DeviceSMO`);
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
    n_inner : SMO steps in all; converged : whether m(α) − M(α) < tol; gap : m(α) − M(α);
    inner : where the subproblems were solved ("host", or :class:`_DeviceSMO`'s mode).
    """

    alpha: torch.Tensor
    grad: torch.Tensor
    rho: float
    obj: float
    n_iter: int
    n_inner: int
    converged: bool
    gap: float
    inner: str = "host"


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
    the working set come through an LRU :class:`RowCache` (on the kernel's device: one
    batched ``rows_fn`` call per chunk of missing rows)."""

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
        """K[κ(ws)][:, κ(ws)] in float64 on the kernel's device, and the rows read (None
        if direct)."""
        if self.direct:
            return self.cache.block(ws).detach().to(torch.float64), None
        if self.same:
            R = self.cache.get(ws)  # (|ws|, nk)
        else:
            krows, inverse = np.unique(self.kidx_np[ws], return_inverse=True)
            R = self.cache.get(krows)[torch.from_numpy(inverse).to(ws_t.device)]
        return R[:, self.kidx_t[ws_t]].detach().to(torch.float64), R

    def moved_rows(self, ws: np.ndarray, nz: np.ndarray, nz_t: torch.Tensor, R):
        """Kernel rows of the working-set members ``ws[nz]``."""
        if self.direct:
            return self.cache.get(ws[nz])
        return R[nz_t]


def _kkt_gap(s, up, low) -> float:
    """m(α) − M(α): largest score in I_up minus smallest in I_low (−inf if one is empty)."""
    if s.numel() == 0:
        return -math.inf
    m = float(torch.where(up, s, -math.inf).max())
    M = float(torch.where(low, s, math.inf).min())
    return m - M


def _host_subproblem(KBB, ws_t, y, s, alpha, C, eps, max_steps):
    """LIBSVM's SMO on the working set in NumPy float64 (:func:`_inner_smo`). Returns the
    new α_B (a tensor on α's device) and the SMO steps taken."""
    aB = alpha[ws_t].cpu().numpy().copy()
    sB = s[ws_t].cpu().numpy().copy()
    steps = _inner_smo(KBB.cpu().numpy(), y[ws_t].cpu().numpy(), sB, aB,
                       C[ws_t].cpu().numpy(), eps, max_steps)
    return torch.from_numpy(aB).to(alpha.device), steps


def _pair_steps(Kb, QD, U, L, u, s, count, sign, n_steps: int) -> None:
    """``n_steps`` SMO steps of :class:`_DeviceSMO`, in place on ``u``, ``s`` and ``count``
    (+1 per step that moved a pair), in tensor operations only: no value is read back to
    the host, so the steps can be queued (or recorded in a CUDA graph) and run as a batch.

    A step on a pair that cannot improve (the subproblem is solved, or I_up / I_low is
    empty) is a no-op: t = 0 writes the pair's own values back."""
    inf = math.inf
    for _ in range(n_steps):
        gmax, i = torch.where(u < U, s, -inf).max(0)
        i1 = i.view(1)
        Ki = Kb.index_select(0, i1)[0]
        quad = QD + QD.index_select(0, i1) - 2.0 * Ki  # K_ii + K_jj − 2K_ij for every j
        quad = torch.where(quad > 0, quad, _TAU)
        b = gmax - s
        obj = torch.where((b > 0) & (u > L), -(b * b) / quad, inf)
        best, j = obj.min(0)
        j1 = j.view(1)
        ij = torch.cat([i1, j1])
        uij = u.index_select(0, ij)
        bound = torch.cat([U.index_select(0, i1), L.index_select(0, j1)])
        cap = (bound - uij).abs()  # room to move: U_i − u_i and u_j − L_j
        t = torch.minimum(b.index_select(0, j1) / quad.index_select(0, j1), cap.min())
        moved = best < inf
        t = torch.where(moved, t, 0.0)
        new = torch.where(t >= cap, bound, uij + sign * t)  # a bound reached is met exactly
        new = torch.minimum(torch.maximum(new, L.index_select(0, ij)), U.index_select(0, ij))
        u.index_copy_(0, ij, new)
        s.sub_(t * (Ki - Kb.index_select(0, j1)[0]))
        count.add_(moved.to(count.dtype))


def _device_gap(u, U, L, s) -> float:
    """The subproblem's m − M (one read back to the host)."""
    m = torch.where(u < U, s, -math.inf).max()
    M = torch.where(u > L, s, math.inf).min()
    return float(m - M)


def _fused_kernel():
    """The Triton module of the fused subproblem kernel (:mod:`._smo_triton`), or None
    where Triton cannot be imported."""
    try:
        from . import _smo_triton
    except Exception:  # ImportError, or a Triton that fails to initialize
        return None
    return _smo_triton


class _StepGraph:
    """``k`` steps of :func:`_pair_steps` recorded once as a CUDA graph on buffers of
    ``q`` variables; ``replay`` runs them with one launch instead of ~50 per step
    (``record=False``: runs them eagerly, e.g. to check the buffers on a CPU).
    Smaller subproblems are padded with variables that can never move (L = u = U)."""

    def __init__(self, q: int, k: int, device: torch.device, record: bool = True):
        f64 = dict(dtype=torch.float64, device=device)
        self.q = q
        self.Kb = torch.zeros(q, q, **f64)
        self.QD, self.U, self.L, self.u, self.s = (torch.zeros(q, **f64) for _ in range(5))
        self.count = torch.zeros((), **f64)
        self.sign = torch.tensor([1.0, -1.0], **f64)
        args = (self.Kb, self.QD, self.U, self.L, self.u, self.s, self.count, self.sign)
        if not record:
            self.replay = lambda: _pair_steps(*args, k)
            return
        with torch.cuda.device(device):
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):  # warm-up outside the capture, as CUDA graphs need
                _pair_steps(*args, 1)
            torch.cuda.current_stream(device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                _pair_steps(*args, k)
        self.replay = self.graph.replay

    def load(self, Kb, U, L, u, s) -> None:
        m = u.numel()
        self.Kb.zero_()
        self.Kb[:m, :m] = Kb
        self.QD.copy_(self.Kb.diagonal())
        for buf, val in ((self.U, U), (self.L, L), (self.u, u), (self.s, s)):
            buf.zero_()
            buf[:m] = val
        self.count.zero_()


class _DeviceSMO:
    r"""LIBSVM's SMO on a working set, solved on the kernel's device (the subproblem solver
    of ThunderSVM, Wen et al., "ThunderSVM: a fast SVM library on GPUs and CPUs", JMLR
    2018).

    In u = y ∘ α the constraint yᵀα = 0 becomes Σu = const and the box becomes
    L ≤ u ≤ U ([0, C] for y = +1, [−C, 0] for y = −1); the scores s = −y ∘ ∇f are
    −∇_u f. One step is LIBSVM's: i = argmax_{u_i < U_i} s_i, then by second-order
    selection (Fan, Chen & Lin, JMLR 2005) j = argmin over u_j > L_j, b_j = s_i − s_j > 0
    of −b_j² / a_j with a_j = K_ii + K_jj − 2K_ij (τ = 10⁻¹² where a_j ≤ 0), and the
    clipped update u_i += t, u_j −= t, t = min(b_j / a_j, U_i − u_i, u_j − L_j),
    s −= t (K_{:,i} − K_{:,j}) — both label cases of LIBSVM's update in one formula.

    ``mode`` says how the steps run:

    - ``"triton"`` (CUDA with Triton): the whole subproblem in one fused kernel launch
      (:mod:`._smo_triton`), the variables in registers, the stopping rule checked on the
      device after every step;
    - ``"graph"`` (CUDA without Triton): batches of ``k`` steps of tensor operations
      (:func:`_pair_steps`), recorded once as a CUDA graph (:class:`_StepGraph`) and
      replayed; the stopping rule m − M < eps is read back once per batch, so a batch may
      take up to k − 1 steps past it (they only solve the subproblem further);
    - ``"eager"`` (any other device): the same batches run as they are — the algorithm
      of the GPU path, checkable on a CPU.

    A failure falls back one level (triton → graph → host), with a warning; ``failed``
    says why, and ``solve`` returns None when the host must take over.

    Cost per step: O(q) work; ~50 small tensor operations in the batched modes, one
    program's registers in the fused one. Per subproblem: one launch (fused) or one host
    read per ``k`` steps.
    """

    def __init__(self, device: torch.device, k: int = 32, mode: str | None = None):
        self.device, self.k = torch.device(device), int(k)
        if mode is None:
            mode = "eager"
            if self.device.type == "cuda":
                mode = "triton" if _fused_kernel() is not None else "graph"
        self.mode = mode
        self.graphs: dict[int, _StepGraph] = {}
        self.failed: str | None = None
        self.sign = torch.tensor([1.0, -1.0], dtype=torch.float64, device=self.device)

    def _fall_back(self, what: str, err: Exception, to: str) -> None:
        self.failed = f"{type(err).__name__}: {err}"
        self.mode = to
        warnings.warn(f"{what} failed ({self.failed}); the SMO subproblems are solved "
                      f"{'on the host' if to == 'host' else 'by ' + to + ' steps'} instead",
                      RuntimeWarning, stacklevel=5)

    def _graph(self, m: int) -> _StepGraph | None:
        q = -(-m // 64) * 64
        if q not in self.graphs:
            try:
                self.graphs[q] = _StepGraph(q, self.k, self.device)
            except Exception as err:  # e.g. no CUDA, or an operation a graph cannot hold
                self._fall_back("recording the SMO steps as a CUDA graph", err, "host")
                return None
        return self.graphs[q]

    def solve(self, KBB, ws_t, y, s, alpha, C, eps, max_steps):
        """The new α_B (on the device) and the steps taken (a device tensor: read it
        when convenient), or None when the host must solve it (no CUDA graph)."""
        yB, CB = y[ws_t], C[ws_t]
        pos = yB > 0
        U = torch.where(pos, CB, 0.0)
        L = torch.where(pos, 0.0, -CB)
        u, sB = yB * alpha[ws_t], s[ws_t].clone()
        if self.mode == "triton":
            try:
                steps = _fused_kernel().solve(KBB, U, L, u, sB, eps, max_steps, _TAU)
                return yB * u, steps
            except Exception as err:  # no Triton, or a compilation / launch failure
                self._fall_back("the fused Triton SMO kernel", err,
                                "graph" if self.device.type == "cuda" else "eager")
        if self.mode == "graph":
            g = self._graph(u.numel())
            if g is None:
                return None
            g.load(KBB, U, L, u, sB)
            args, run = (g.u, g.U, g.L, g.s), g.replay
            count = g.count
        else:
            count = torch.zeros((), dtype=torch.float64, device=self.device)
            QD = KBB.diagonal().contiguous()
            args = (u, U, L, sB)

            def run():
                _pair_steps(KBB, QD, U, L, u, sB, count, self.sign, self.k)
        steps = 0
        while steps < max_steps and _device_gap(*args) >= eps:
            run()
            steps += self.k
        return yB * args[0][:u.numel()], count


def _apply_step(alpha, grad, y, ws, ws_t, aB, reads, R, nk):
    """α_B ← aB and ∇f += Q[:, B] Δα_B, in place: one (n × moved) product."""
    delta = aB - alpha[ws_t]
    nz_t = torch.nonzero(delta).squeeze(1)
    if not nz_t.numel():
        return
    device = grad.device
    coef = delta[nz_t] * y[ws_t[nz_t]]
    v = torch.zeros(nk, dtype=torch.float64, device=device)
    Rnz = reads.moved_rows(ws, nz_t.cpu().numpy(), nz_t, R)
    for c in range(0, nz_t.numel(), 64):  # float64 products, 64 rows at a time
        v += Rnz[c:c + 64].to(torch.float64).T @ coef[c:c + 64]
    grad += y * (v if reads.same else v[reads.kidx_t])
    alpha[ws_t] = aB


def _gap_bar(verbose, tol, desc, gap):
    """The KKT gap's bar (:class:`~torchkern._progress.ResidualBar`): digits of
    m(α) − M(α) gained from its first value toward ``tol``; None unless ``verbose``."""
    if not verbose or not math.isfinite(gap) or gap < tol:
        return None
    from .._progress import ResidualBar
    return ResidualBar(tol, f"{desc} (KKT gap)", start=gap, label="gap")


@torch.no_grad()
def solve_dual(rows_fn, diag, y, p, C, *, kidx=None, tol=1e-3, max_iter=None,
               working_set=128, cache_rows=1024, chunk=64, block_fn=None, verbose=False,
               desc="SMO", inner="auto"):
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
    verbose : bool
        Show a bar of the KKT gap m(α) − M(α), on a log scale from its first value down
        to ``tol`` (kept on screen at the end).
    desc : str
        The bar's and the warning's name of the problem.
    inner : {"auto", "host", "device"}
        Where the q-variable subproblems are solved: ``"host"`` in NumPy,
        ``"device"`` on the kernel's device by :class:`_DeviceSMO` (CUDA graphs on a
        GPU), ``"auto"``: the device on CUDA, the host otherwise.

    Returns
    -------
    DualSolution

    Notes
    -----
    Cost per outer iteration: ≤ q new kernel rows (O(q n d)), an (n × q) gradient update,
    O(n) selection, and O(q) per inner SMO step. Memory: O(n · cache_rows).
    """
    if inner not in ("auto", "host", "device"):
        raise ValueError(f"inner must be 'auto', 'host' or 'device', got {inner!r}")
    f64 = torch.float64
    device = diag.device
    y = y.to(device=device, dtype=f64)
    p = p.to(device=device, dtype=f64)
    C = C.to(device=device, dtype=f64)
    N = y.shape[0]
    q = int(min(max(2, working_set), N))
    max_iter = 100_000 if max_iter is None else int(max_iter)
    reads = _KernelReads(rows_fn, block_fn, diag, kidx, N, cache_rows, chunk, q)
    on_device = inner == "device" or (inner == "auto" and device.type == "cuda")
    dev_smo = _DeviceSMO(device) if on_device else None
    alpha = torch.zeros(N, dtype=f64, device=device)
    grad = p.clone()
    prev = np.empty(0, dtype=np.int64)
    n_iter = n_inner = 0
    converged = False
    bar = None
    while True:
        up, low = _masks(alpha, y, C)
        s = -y * grad
        gap = _kkt_gap(s, up, low)
        if bar is None and n_iter == 0:
            bar = _gap_bar(verbose, tol, desc, gap)
        if bar is not None:
            bar.update(n_iter, max(gap, 0.0))
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
        eps = tol if ws.size == N else max(tol, 0.1 * gap)
        solved = None
        if dev_smo is not None:
            solved = dev_smo.solve(KBB, ws_t, y, s, alpha, C, eps, 50 * ws.size)
            if solved is None:  # no CUDA graph on this device: the host takes over
                dev_smo = None
        if solved is None:
            solved = _host_subproblem(KBB, ws_t, y, s, alpha, C, eps, 50 * ws.size)
        aB, steps = solved
        n_inner += int(steps)
        _apply_step(alpha, grad, y, ws, ws_t, aB, reads, R, diag.shape[0])
        prev = ws
        n_iter += 1
    if bar is not None:
        bar.close()
    rho = compute_rho(alpha, grad, y, C)
    obj = float(0.5 * (alpha * (grad + p)).sum())
    if not converged:
        warnings.warn(f"{desc} did not converge in {n_iter} iterations: KKT violation "
                      f"m(α) − M(α) = {gap:.3e} > tol={tol:.1e}; raise max_iter",
                      ConvergenceWarning, stacklevel=3)
    return DualSolution(alpha, grad, rho, obj, n_iter, n_inner, converged, gap,
                        "host" if dev_smo is None else dev_smo.mode)
