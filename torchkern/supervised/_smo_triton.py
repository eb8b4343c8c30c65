"""The SMO subproblem of :class:`._smo._DeviceSMO` as one fused GPU kernel (Triton).

One program holds the q variables of a working set in registers and runs LIBSVM's SMO
steps on them until the subproblem's m − M < eps — the whole inner solve in one launch,
as ThunderSVM's CUDA kernel does (Z. Wen, J. Shi, Q. Li, B. He and J. Chen, "ThunderSVM:
a fast SVM library on GPUs and CPUs", JMLR 19, 2018). The step is the one of
:class:`._smo._DeviceSMO` (second-order pair selection of Fan, Chen & Lin, JMLR 2005, and
the clipped two-variable update, in u = y ∘ α); kernel rows i and j are read from the
q × q block in memory (L2-resident), scalars of row i / j by single loads.

Importing this module needs Triton; :func:`solve` is called only for CUDA tensors (or any
tensors under ``TRITON_INTERPRET=1``, Triton's interpreter, which is how it is tested on
a CPU).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_Q = 4096  # one program's registers hold ~10 q-vectors in float64


@triton.jit(do_not_specialize=["m", "max_steps"])
def _smo_subproblem(Kb, QD, U, L, u_ptr, s_ptr, steps_ptr, par_ptr, m, max_steps,
                    BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    inside = offs < m
    eps = tl.load(par_ptr)
    tau = tl.load(par_ptr + 1)
    inf = tl.load(par_ptr + 2)
    qd = tl.load(QD + offs, mask=inside, other=0.0)
    hi = tl.load(U + offs, mask=inside, other=0.0)  # padding: L = u = U = 0, never moves
    lo = tl.load(L + offs, mask=inside, other=0.0)
    u = tl.load(u_ptr + offs, mask=inside, other=0.0)
    s = tl.load(s_ptr + offs, mask=inside, other=0.0)
    gmax, i = tl.max(tl.where(u < hi, s, -inf), 0, return_indices=True)
    gmin = tl.min(tl.where(u > lo, s, inf), 0)
    steps = tl.full((), 0, tl.int32)  # a tensor from the start: loop-carried types must not change
    while (gmax - gmin >= eps) & (steps < max_steps):
        Ki = tl.load(Kb + i * m + offs, mask=inside, other=0.0)
        qdi = tl.load(QD + i)
        quad = qd + qdi - 2.0 * Ki
        quad = tl.where(quad > 0, quad, tau)
        b = gmax - s
        obj = tl.where((b > 0) & (u > lo), -(b * b) / quad, inf)
        best, j = tl.min(obj, 0, return_indices=True)
        ui = tl.sum(tl.where(offs == i, u, 0.0), 0)
        uj = tl.sum(tl.where(offs == j, u, 0.0), 0)
        sj = tl.sum(tl.where(offs == j, s, 0.0), 0)
        hi_i = tl.load(U + i)
        lo_j = tl.load(L + j)
        qj = qdi + tl.load(QD + j) - 2.0 * tl.load(Kb + i * m + j)
        qj = tl.where(qj > 0, qj, tau)
        cap_i = hi_i - ui
        cap_j = uj - lo_j
        t = tl.minimum((gmax - sj) / qj, tl.minimum(cap_i, cap_j))
        new_i = tl.where(t >= cap_i, hi_i, tl.minimum(ui + t, hi_i))
        new_j = tl.where(t >= cap_j, lo_j, tl.maximum(uj - t, lo_j))
        u = tl.where(offs == i, new_i, tl.where(offs == j, new_j, u))
        Kj = tl.load(Kb + j * m + offs, mask=inside, other=0.0)
        s = s - t * (Ki - Kj)
        steps += 1
        gmax, i = tl.max(tl.where(u < hi, s, -inf), 0, return_indices=True)
        gmin = tl.min(tl.where(u > lo, s, inf), 0)
    tl.store(u_ptr + offs, u, mask=inside)
    tl.store(s_ptr + offs, s, mask=inside)
    tl.store(steps_ptr, steps)


def solve(Kb, U, L, u, s, eps: float, max_steps: int, tau: float) -> torch.Tensor:
    """Run the subproblem to m − M < eps (or ``max_steps`` steps) in place on the float64
    vectors ``u`` and ``s``; ``Kb`` is the contiguous q × q block. Returns the steps taken
    as a one-element int32 tensor (not read back: no host synchronization)."""
    m = u.numel()
    if m > MAX_Q:
        raise ValueError(f"working set of {m} variables exceeds the kernel's {MAX_Q}")
    par = torch.tensor([eps, tau, float("inf")], dtype=torch.float64).to(u.device)
    steps = torch.zeros(1, dtype=torch.int32, device=u.device)
    block = max(triton.next_power_of_2(m), 256)  # one compilation for every q ≤ 256
    _smo_subproblem[(1,)](Kb.contiguous(), Kb.diagonal().contiguous(), U.contiguous(),
                          L.contiguous(), u, s, steps, par, m, int(max_steps),
                          BLOCK=block, num_warps=min(max(block // 128, 1), 8))
    return steps
