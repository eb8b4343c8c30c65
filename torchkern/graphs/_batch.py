"""A set of graphs as one kernel input: every graph's nodes and edges in flat tensors."""
from __future__ import annotations

import math
import operator
import os
import sys
from itertools import repeat

import numpy as np
import torch

from .._threads import one_thread
from .._validation import is_int
from ..inputs import KernelInput, nonempty_parts
from ..kernels._ops import sqdist
from ..kernels.structured import StructuredKernel

__all__ = ["GraphSet", "check_edge_index", "check_memory"]

EDGE_INDEX_EXPECTED = "an integer tensor of shape (2, E) with entries in [0, num_nodes)"


def check_edge_index(edge_index, num_nodes, where="graph") -> torch.Tensor:
    """The one check of an ``edge_index``, for graph and node kernels alike: an integer
    tensor (or array) of shape (2, E) with entries in [0, num_nodes). Returns it as int64.

    A float ``edge_index`` is an error, not rounded: ``[[0., 1.7], [1.7, 0.]]`` is no
    edge list. ``num_nodes`` is an int, or an int64 tensor (E,) with the bound of every
    column (the edges of several graphs one after the other, each graph its own
    ``num_nodes``). ``where`` names the graph in the message: a string, or a function of
    the offending column (several graphs).
    """
    def fail(cls, got, col=0):
        w = where(col) if callable(where) else where
        raise cls(f"{w}: edge_index must be {EDGE_INDEX_EXPECTED}; got {got}")

    ei = edge_index if isinstance(edge_index, torch.Tensor) else \
        torch.as_tensor(np.asarray(edge_index))
    if ei.dtype.is_floating_point or ei.is_complex() or ei.dtype == torch.bool:
        fail(TypeError, f"dtype {getattr(edge_index, 'dtype', ei.dtype)}")
    if ei.dim() != 2 or ei.shape[0] != 2:
        fail(ValueError, f"shape {tuple(ei.shape)}")
    ei = ei.long()
    if ei.numel():
        if isinstance(num_nodes, torch.Tensor) and num_nodes.dim():  # a bound per column
            ok = int(ei.min()) >= 0 and not bool((ei.amax(0) >= num_nodes).any())
        else:
            lo, hi = (int(v) for v in torch.aminmax(ei))
            ok = lo >= 0 and hi < int(num_nodes)
        if ok:
            return ei
        bad = (ei < 0) | (ei >= num_nodes)
        if bool(bad.any()):
            j = int(bad.any(0).nonzero()[0, 0])
            n = int(num_nodes if not isinstance(num_nodes, torch.Tensor) or num_nodes.dim() == 0
                    else num_nodes[j])
            v = int(ei[:, j][bad[:, j]][0])
            fail(ValueError, f"node id {v} in a graph with num_nodes={n}", j)
    return ei


def device_memory(device) -> int | None:
    """Total memory of ``device`` in bytes: the GPU's, or the machine's RAM for the CPU
    (None when unknown)."""
    device = torch.device(device)
    try:
        if device.type == "cuda":
            return int(torch.cuda.get_device_properties(device).total_memory)
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError, RuntimeError):
        return None


def _fmt_bytes(b: float) -> str:
    """``b`` bytes in decimal units, bytes to PB (larger sizes in PB)."""
    units = ("bytes", "KB", "MB", "GB", "TB", "PB")
    for unit in units[:-1]:
        if b < 1000:
            return f"{b:.3g} {unit}"
        b /= 1000
    return f"{b:.3g} {units[-1]}"


def check_memory(nbytes: int, what: str, device) -> None:
    """Refuse up front, with a ValueError giving the size, a computation that needs
    ``nbytes`` (a lower bound) where ``device`` has less memory in all; ``what`` says
    which argument and what the bytes are for."""
    total = device_memory(device)
    if total is not None and nbytes > total:
        raise ValueError(f"{what} needs at least {nbytes:,} bytes ({_fmt_bytes(nbytes)}), more "
                         f"than the {total:,} bytes ({_fmt_bytes(total)}) of memory of "
                         f"{torch.device(device)}")


def check_numpy_seed(random_state, what: str) -> None:
    """``random_state`` of a kernel that draws with NumPy's ``RandomState``: None, a
    RandomState, or an int seed in its range [0, 2^32); else a ValueError naming it
    (``what``: the draws it seeds)."""
    if random_state is not None and not isinstance(random_state, np.random.RandomState) \
            and (not is_int(random_state) or not 0 <= random_state < 2 ** 32):
        raise ValueError(f"random_state must be None, a numpy RandomState or a non-negative "
                         f"int below 2^32 (the seed of {what}, numpy RandomState's range), "
                         f"got {random_state!r}")


def _check_node_count(n: int, device) -> None:
    """A set whose graphs' num_nodes add up past the device's memory (8 bytes a node for
    the label ids alone) is refused before anything is allocated: 10^12 isolated nodes
    were an allocator error that named no argument."""
    check_memory(8 * n, f"a set of {n:,} nodes (the graphs' num_nodes summed) keeps a "
                 f"label id per node, which", device)


def check_range(t: torch.Tensor, dtype, message) -> torch.Tensor:
    """``t``, or ``ValueError(message(top))`` where an entry is NaN or its modulus passes
    the largest finite value of ``dtype`` (``top``: the largest modulus, NaN if any):
    ``message`` names the argument to change. One ``aminmax`` pass and one host sync, as
    ``gram._finite_gram`` (2 % of a block where ``isfinite(t).all()`` took 34 %)."""
    if t.numel():
        lo, hi = (float(v) for v in torch.aminmax(t.detach()))
        top = max(-lo, hi) if lo == lo and hi == hi else math.nan
        if not top <= torch.finfo(dtype).max:
            raise ValueError(message(top))
    return t


def sqdist_fits(a_sq: torch.Tensor, b_sq: torch.Tensor | None = None) -> bool:
    """Whether :func:`pair_sqdist`'s expansion ‖a‖² + ‖b‖² − 2aᵀb stays finite for rows
    of squared norms ``a_sq`` and ``b_sq`` (default: the same rows): |2aᵀb| ≤ ‖a‖² + ‖b‖²
    (Cauchy–Schwarz, for every partial sum of the product too), so 2(max ‖a‖² + max ‖b‖²)
    bounds every term (the factor 2 a margin for rounding) within the norms' dtype. O(n)
    for the whole set, once, instead of a test of every block's entries."""
    top = [float(s.max()) if s.numel() else 0.0 for s in (a_sq, a_sq if b_sq is None else b_sq)]
    return 2.0 * (top[0] + top[1]) <= torch.finfo(a_sq.dtype).max


def pair_sqdist(a: torch.Tensor, b: torch.Tensor, fits: bool = False) -> torch.Tensor:
    """‖a_i − b_j‖² for rows a (..., n, d) and b (..., m, d), (..., n, m): the expansion
    ‖a‖² + ‖b‖² − 2aᵀb through one matrix product, clipped at 0 (the kernels' fast
    ``sqdist``; batched, one ``baddbmm``). Unless ``fits`` (:func:`sqdist_fits`, decided
    once for all blocks), the entries it overflows (attributes past √max: inf − inf = NaN,
    where a node's distance to itself is 0) are recomputed from the differences."""
    if a.dim() == 2:
        d2 = sqdist(a.unsqueeze(1), b.unsqueeze(0), center=False).squeeze(-1)
    else:
        d2 = torch.baddbmm((b * b).sum(-1).unsqueeze(-2), a, b.transpose(-1, -2), alpha=-2.0)
        d2 = d2.add_((a * a).sum(-1).unsqueeze(-1)).clamp_min_(0)
    if fits:
        return d2
    bad = ~torch.isfinite(d2)
    if bool(bad.any()):
        *batch, i, j = bad.nonzero(as_tuple=True)
        d2[bad] = (a[(*batch, i)] - b[(*batch, j)]).square().sum(-1)
    return d2


def segment_ranges(starts: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """The concatenation of ``arange(s, s + c)`` for every (s, c), without a Python loop."""
    total = int(counts.sum()) if counts.numel() else 0
    shift = torch.repeat_interleave(starts - (torch.cumsum(counts, 0) - counts), counts,
                                    output_size=total)
    return shift + torch.arange(total, device=starts.device)


def _offsets(counts: torch.Tensor) -> torch.Tensor:
    return torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])


def _global_edges(ei: torch.Tensor, counts: torch.Tensor, ecounts: torch.Tensor,
                  own: bool = False):
    """The concatenated ``edge_index`` ``ei`` of graphs with ``counts`` nodes and
    ``ecounts`` edges each, checked graph by graph (an error names the graph) and
    shifted to global node ids; ``own``: ``ei`` is a fresh tensor of the caller's, shifted
    in place.

    The check costs one ``aminmax`` of ``ei`` when its largest entry is below every
    graph's node count, else also the largest end of every edge and, on the CPU, one
    ``numpy.maximum.reduceat`` of those per graph (no per-edge bound tensor); an error
    is then located by :func:`check_edge_index`."""
    E = ei.shape[1] if ei.dim() == 2 else 0
    if (ei.dtype.is_floating_point or ei.is_complex() or ei.dtype == torch.bool
            or ei.dim() != 2 or ei.shape[0] != 2):
        E = -1  # refused below, by check_edge_index
    elif ei.dtype != torch.long:
        ei, own = ei.long(), True
    ok = E == 0
    if E > 0:
        lo, hi = (int(v) for v in torch.aminmax(ei))
        has = ecounts > 0
        ok = lo >= 0 and hi < int(counts[has].min())
        if lo >= 0 and not ok:  # the largest node id of each graph against its node count
            top = torch.maximum(ei[0], ei[1])
            if ei.device.type == "cpu":
                starts = (torch.cumsum(ecounts, 0) - ecounts)[has].numpy()
                gmax = np.maximum.reduceat(top.numpy(), starts)
                ok = not bool((gmax >= counts[has].numpy()).any())
            else:
                bound = torch.repeat_interleave(counts, ecounts, output_size=E)
                ok = not bool((top >= bound).any())
    if not ok:  # the culprit, named
        bound = torch.repeat_interleave(counts, ecounts, output_size=max(E, 0)) if E >= 0 \
            else counts[:1]
        ends = torch.cumsum(ecounts, 0)
        check_edge_index(
            ei, bound, lambda j: f"graph {int(torch.searchsorted(ends, j, right=True))}")
    shift = torch.repeat_interleave(_offsets(counts)[:-1], ecounts, output_size=E)
    out = ei if own else torch.empty_like(ei)
    torch.add(ei[0], shift, out=out[0])  # row by row: a broadcast add is about twice
    torch.add(ei[1], shift, out=out[1])  # slower on the CPU
    return out


_KEY_LIMIT = 2 ** 62

# from this length on torch's CPU sort of an integer tensor is a radix sort (about twice
# NumPy's introsort on 64-bit keys on a 2-core AVX machine; below it NumPy's is faster)
_RADIX_FROM = 2 ** 15


def sort_int64(key: np.ndarray) -> np.ndarray:
    """A 1-D int64 NumPy array sorted, by the faster of NumPy's and torch's CPU sorts for
    its length."""
    if key.size >= _RADIX_FROM:
        return torch.sort(torch.from_numpy(key)).values.numpy()
    return np.sort(key)


_LSD_FROM = 2 ** 11  # from here to _RADIX_FROM: _lsd_order (1.5 to 3.5 times NumPy's sort)


def _lsd_order(key: np.ndarray, hi: int) -> np.ndarray:
    """The stable sorting permutation of non-negative int64 ``key`` (below ``hi`` + 1): a
    least-significant-digit radix sort, one stable NumPy argsort of every 16-bit digit
    (a radix sort in NumPy for 16-bit integers)."""
    perm = None
    for shift in range(0, max(int(hi).bit_length(), 1), 16):
        digit = ((key if perm is None else key[perm]) >> shift).astype(np.uint16)
        order = np.argsort(digit, kind="stable")
        perm = order if perm is None else perm[order]
    return perm


def sorted_unique(key: torch.Tensor, inverse: bool = True):
    """The distinct values of a 1-D int64 ``key``, sorted: ``(values, inverse, counts,
    first)`` — ``first`` the smallest position holding each value; ``inverse=False``
    skips the inverse (None then).

    On the CPU, from 2^15 keys one stable ``torch.sort`` (a radix sort there) gives the
    order and the permutation; fewer non-negative keys below 2^(63 − b) (b = bits of the
    length) by an LSD radix sort of 16-bit digits from 2^11 keys (:func:`_lsd_order`),
    below that sorted with their positions packed into the low b bits, one NumPy sort
    of plain integers (about three times ``torch.unique(return_inverse=True)`` there).
    Otherwise ``torch.unique``.
    """
    n = key.numel()
    b = max(int(n - 1).bit_length(), 1)
    lo, hi = (int(key.min()), int(key.max())) if n else (0, 0)
    if n and lo >= 0 and hi < max(4 * n, 2 ** 16):  # small range: counting, no sort
        counts = torch.bincount(key, minlength=hi + 1)
        present = counts > 0
        values = present.nonzero().reshape(-1)
        remap = torch.cumsum(present, 0) - 1
        inv = remap.index_select(0, key)
        pos = torch.arange(n - 1, -1, -1, device=key.device)  # reversed: the last write,
        first = torch.empty(values.numel(), dtype=torch.long, device=key.device)
        first.index_put_((inv.flip(0),), pos)  # the smallest position, wins
        return values, inv if inverse else None, counts.index_select(0, values), first
    radix = key.device.type == "cpu" and n >= _RADIX_FROM
    if radix or (key.device.type == "cpu" and n and lo >= 0 and hi < 2 ** (63 - b)):
        if radix:
            sk, perm = (t.numpy() for t in torch.sort(key, stable=True))
        elif n >= _LSD_FROM:
            perm = _lsd_order(key.numpy(), hi)
            sk = key.numpy()[perm]
        else:
            packed = np.sort((key.numpy() << b) | np.arange(n))
            perm, sk = packed & ((1 << b) - 1), packed >> b
        new = np.empty(n, dtype=bool)
        new[0] = True
        np.not_equal(sk[1:], sk[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        counts = np.diff(np.append(starts, n))
        inv = None
        if inverse:
            inv = np.empty(n, dtype=np.int64)
            inv[perm] = np.repeat(np.arange(starts.size), counts)
            inv = torch.from_numpy(inv)
        return (torch.from_numpy(sk[starts]), inv, torch.from_numpy(counts),
                torch.from_numpy(perm[starts]))
    values, inv, counts = torch.unique(key, return_inverse=True, return_counts=True)
    first = torch.full((counts.numel(),), n, dtype=torch.long, device=key.device)
    first.scatter_reduce_(0, inv, torch.arange(n, device=key.device), "amin")
    return values, inv, counts, first


def compact(columns, sizes):
    """The distinct rows of the integer columns ``columns`` (values of column c in
    [0, sizes[c])), numbered in lexicographic order.

    Returns ``(inverse, counts, first)``: the distinct-row id of every row, the number of
    rows with each id, and the position of one row with each id. The columns are packed
    into one int64 key (mixed radix); when the key would overflow, the part packed so far
    is renumbered first (a 1-D unique keeps the order), so any number of columns works
    with 1-D sorts only. On the CPU below 2^15 rows keys are kept below 2^(63 − b), b
    the bits of the row count, so that :func:`sorted_unique` can pack the positions in
    (one plain sort).
    """
    device = columns[0].device
    n = columns[0].numel()
    limit = _KEY_LIMIT if device.type != "cpu" or n >= _RADIX_FROM else \
        min(_KEY_LIMIT, 2 ** (62 - max(int(n - 1).bit_length(), 1)))
    key, span = torch.zeros(n, dtype=torch.long, device=device), 1
    for col, s in zip(columns, sizes):
        s = max(int(s), 1)
        if span * s >= limit and span > 1:
            _, key, cnt, _ = sorted_unique(key)
            span = cnt.numel() if n else 1
        if span * s >= 2 ** 63:  # a column too wide even then (key · s would wrap around):
            _, col, cnt, _ = sorted_unique(col)  # its values' ranks, in the same order
            s = max(cnt.numel(), 1)
        key, span = key * s + col, span * s
    _, inv, counts, first = sorted_unique(key)
    return inv, counts, first


def count_rows(columns, sizes, mask=None):
    """The distinct rows of integer columns (as in :func:`compact`) and how often each
    occurs: ``(distinct_columns, counts)``. The columns may be any tensors that broadcast
    to one shape; ``mask`` (of that shape) selects the rows to count. A small key space
    is counted by ``bincount`` on the packed keys (no sort, no gather), a large one by
    one sort of the packed keys (no positions: the distinct keys are decoded) while they
    fit in int64, else through :func:`compact`."""
    space = 1
    for s in sizes:
        space *= max(int(s), 1)
    shape = torch.broadcast_shapes(*(c.shape for c in columns))
    n = math.prod(shape) if mask is None else int(mask.sum())
    if space <= max(4 * n, 2 ** 16) or space < _KEY_LIMIT:
        key = torch.zeros((), dtype=torch.long, device=columns[0].device)
        for col, s in zip(columns, sizes):
            key = key * max(int(s), 1) + col
        key = key.reshape(-1) if mask is None else key[mask]
        if space <= max(4 * n, 2 ** 16):
            counts = torch.bincount(key, minlength=space)
            key = counts.nonzero().reshape(-1)
            counts = counts.index_select(0, key)
        else:
            key, counts = torch.unique_consecutive(torch.sort(key).values, return_counts=True)
        out = []
        for s in reversed(sizes):
            s = max(int(s), 1)
            out.append(key % s)
            key = key // s
        return out[::-1], counts
    flat = [c.expand(shape).reshape(-1) if mask is None else c.expand(shape)[mask] for c in columns]
    _, counts, first = compact(flat, sizes)
    return [c.index_select(0, first) for c in flat], counts


def _integral(x: torch.Tensor) -> bool:
    """Whether every entry of the finite floating ``x`` is an integer."""
    lo, hi = torch.aminmax(x.frac())
    return float(lo) == 0 and float(hi) == 0


def _stamps(objs) -> tuple:
    """(object, in-place version) of each object and of each item of a tuple among them
    (the objects are kept: held, their ids cannot be reused)."""
    out = []
    for o in objs:
        out.append((o, getattr(o, "_version", None)))
        if isinstance(o, tuple):
            out.extend((t, getattr(t, "_version", None)) for t in o)
    return tuple(out)


def _same_stamps(a: tuple, b: tuple) -> bool:
    """Whether two :func:`_stamps` are of the same objects, unmodified in between."""
    return len(a) == len(b) and all(x is y and u == v for (x, u), (y, v) in zip(a, b))


class _EdgeAttrGap:
    """The ``edge_attr`` of a set in which some graphs have it and others not: no edge
    label can be read from it, and reading one (:attr:`GraphSet.edge_label`,
    :meth:`GraphSet.labelled_edges`) raises the ValueError ``message``, which names
    ``edge_attr``. Kept in place of the rows, so that the kernels that read no edge
    labels (WL, shortest path, ...) compare such a set as they compare it without
    ``edge_attr``."""

    __slots__ = ("message",)

    def __init__(self, message: str):
        self.message = message

    def fail(self):
        raise ValueError(self.message)


def _edge_attr_gap(vals, item: str = "graph"):
    """An :class:`_EdgeAttrGap` when some of the ``edge_attr`` ``vals`` (of graphs, or of
    the sets of graphs that ``item`` names) are None and others not (by identity: a
    tensor's == is slow), else None."""
    absent = list(map(operator.is_, vals, repeat(None)))
    if not any(absent) or all(absent):
        return None
    i, j = absent.index(True), absent.index(False)
    return _EdgeAttrGap(
        f"edge_attr: {item} {i} has none while {item} {j} has one; this kernel reads "
        f"edge_attr as edge labels, so every graph needs edge_attr (one row per edge; each "
        f"distinct row one label): give every graph edge_attr, or remove it from all")


class _EdgeAttributesGap(_EdgeAttrGap):
    """The ``edge_attributes`` of a set in which some graphs have them and others not,
    or of different widths: no kernel of :mod:`torchkern.graphs` reads continuous edge
    attributes (nor does any of GraKeL 0.1.11's), so such a set is compared as one
    without them; reading :attr:`GraphSet.edge_attributes` raises the ValueError
    ``message``, which names ``edge_attributes``."""

    __slots__ = ()


def _stack_edge_attributes(eats, device):
    """The ``edge_attributes`` of several graphs or sets stacked (None when none has
    them), or an :class:`_EdgeAttributesGap` when some have them and others not, or
    their widths differ. A part that is a gap makes the whole a gap."""
    gap = next((e for e in eats if isinstance(e, _EdgeAttrGap)), None)
    if gap is not None:
        return gap
    absent = list(map(operator.is_, eats, repeat(None)))
    if all(absent):
        return None
    if any(absent):
        i, j = absent.index(True), absent.index(False)
        return _EdgeAttributesGap(
            f"edge_attributes: graph {i} has none while graph {j} has them; no graph kernel "
            f"reads continuous edge attributes, so the set is compared as one without them, "
            f"but they cannot be stacked: give every graph edge_attributes of one width, or "
            f"none")
    try:
        return _cat_attributes(eats, "edge_attributes", None, device)
    except ValueError:
        widths = sorted({1 if e.dim() == 1 else int(e.shape[1]) if e.dim() == 2 else -1
                         for e in eats})
        if len(widths) < 2 or widths[0] < 0:
            raise
        return _EdgeAttributesGap(
            f"edge_attributes of different widths {widths}: no graph kernel reads "
            f"continuous edge attributes, so the set is compared as one without them, but "
            f"they cannot be stacked: give every graph edge_attributes of one width, or none")


def _label_ids(rows: torch.Tensor | None, n: int, name: str, device, integral: bool = False,
               compress: bool | int = True):
    """(ids (n,), distinct rows (L, d)): each distinct row of ``rows`` is one label; no rows
    means every item has the same label (width 0). ``integral``: the finite entries of a
    floating ``rows`` are known to be integers (:func:`_check_integral` passed).
    ``compress=False``: where the rows' label space is small enough to be counted (at
    most max(4n, 2^16) rows of integers), the ids are the rows' mixed-radix keys and the
    rows returned are the whole space, in the same (lexicographic) order — rows that no
    item has included — which skips the passes that number the rows present; what counts
    labels only (:class:`EdgeHistogram`) needs no more. An int ``compress``: compress
    only a space of more rows than that."""
    if rows is None:
        return torch.zeros(n, dtype=torch.long, device=device), torch.zeros(1, 0, device=device)
    if rows.dim() == 1:
        rows = rows.unsqueeze(-1)
    if rows.dim() != 2 or rows.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n}, d) (one row per item), got "
                         f"{tuple(rows.shape)}")
    if rows.is_complex():
        raise TypeError(f"{name} must be real, got dtype {rows.dtype}")
    if rows.shape[1] == 0 or n == 0:
        if rows.is_floating_point() and not bool(torch.isfinite(rows).all()):
            raise ValueError(f"{name} contains NaN or infinity")
        if rows.shape[1] == 0:
            return torch.zeros(n, dtype=torch.long, device=device), torch.zeros(1, 0, device=device)
        return torch.zeros(0, dtype=torch.long, device=device), rows.to(device)
    rows = rows.to(device)
    if rows.dtype == torch.bool:
        rows = rows.long()
    floating = rows.is_floating_point()
    lo, hi = ((float if floating else int)(v) for v in torch.aminmax(rows))  # NaN propagates
    if floating and not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{name} contains NaN or infinity")
    if not floating or (max(-lo, hi) < 2 ** 53 and (integral or _integral(rows))):
        d, bound = rows.shape[1], max(4 * n, 2 ** 16)
        span = int(hi) - int(lo) + 1  # an int: a float power overflows past 1e308
        if span > 2 ** 62:  # differences overflow int64 (64-bit hashes as labels): sorted
            values, ids = torch.unique(rows, dim=0, return_inverse=True)
            return ids, values
        # one range for all columns will do when span^d is small (span^d ≥ 2^d, span > 1)
        if span == 1 or (d < bound.bit_length() and span ** d <= bound):
            clo = torch.full((d,), lo, dtype=rows.dtype, device=device)
            chi = torch.full((d,), hi, dtype=rows.dtype, device=device)
        else:  # one range per column (a reduction along the rows: slower)
            clo, chi = torch.aminmax(rows, dim=0)
        sizes = (chi - clo + 1).long().tolist()
        space = math.prod(sizes)
        if space < 2 ** 62 // max(n, 1):  # one mixed-radix key per row
            radix = [math.prod(sizes[c + 1:]) for c in range(len(sizes))]
            key = _radix_key(rows, clo, radix, max(abs(int(lo)), abs(int(hi))))
            if space <= max(4 * n, 2 ** 16):  # counting, no sort: the rows decoded from
                if compress is True or (compress is not False and space > compress):
                    present = torch.bincount(key, minlength=space) > 0
                    values = present.nonzero().reshape(-1)
                    ids = (torch.cumsum(present, 0) - 1).index_select(0, key)
                else:  # every key of the space
                    values, ids = torch.arange(space, device=device), key
                cols = (values[:, None] // torch.tensor(radix, device=device)
                        % torch.tensor(sizes, device=device))
                return ids, (cols + clo.long()).to(rows.dtype)
            _, ids, _, first = sorted_unique(key)
        else:
            cols = (rows.long() - clo.long()).T.contiguous()  # one row per column of x
            ids, _, first = compact(list(cols), sizes)
        return ids, rows.index_select(0, first)
    values, ids = torch.unique(rows, dim=0, return_inverse=True)
    return ids, values


def _radix_key(rows: torch.Tensor, clo: torch.Tensor, radix: list, top: int) -> torch.Tensor:
    """Σ_c (rows[:, c] − clo[c]) · radix[c] of integer-valued ``rows`` (|entries| ≤
    ``top``), as int64, with no (N, d) temporary where it can: one column read as is; a
    product ``rows @ radix`` in float32 (float64) when every partial sum stays below 2^24
    (2^53), so exact, minus Σ_c clo[c] · radix[c]; else in int64. float32 on the CPU at
    the "highest" float32 matmul precision only (no TF32 or bfloat16 products)."""
    off = sum(int(c) * r for c, r in zip(clo.tolist(), radix))
    if rows.shape[1] == 1:
        key = rows.reshape(-1).long()
        return key - off if off else key
    bound = top * sum(radix)
    if rows.is_floating_point() or bound < 2 ** 53:
        dt = torch.float32 if (bound < 2 ** 24 and rows.device.type == "cpu" and
                               torch.get_float32_matmul_precision() == "highest") \
            else torch.float64
        if bound < 2 ** 53:
            r = rows if rows.dtype == dt else rows.to(dt)
            key = (r @ torch.tensor(radix, dtype=dt, device=rows.device)).long()
            return key - off if off else key  # no pass for a zero offset (0/1 rows)
    return ((rows.long() - clo.long()) * torch.tensor(radix, device=rows.device)).sum(1)


def unify_labels(parts):
    """Label ids of several (ids, values) pairs mapped into one shared dictionary.

    Returns ``(ids_list, values)``: ``ids_list[i]`` re-expresses ``parts[i]``'s ids as rows
    of ``values`` (the distinct rows of all parts, sorted). Widths must agree.
    """
    widths = {int(v.shape[1]) for _, v in parts}
    if len(widths) > 1:
        raise ValueError(f"label rows of different widths {sorted(widths)} cannot be compared")
    if widths == {0}:
        return [torch.zeros_like(ids) for ids, _ in parts], parts[0][1][:1]
    dtype = parts[0][1].dtype
    for _, v in parts[1:]:
        dtype = torch.promote_types(dtype, v.dtype)
    allv = torch.cat([v.to(dtype) for _, v in parts])
    values, inv = torch.unique(allv, dim=0, return_inverse=True)
    out, start = [], 0
    for ids, v in parts:
        out.append(inv[start:start + v.shape[0]][ids])
        start += v.shape[0]
    return out, values


class GraphSet(KernelInput):
    r"""A set of graphs as one kernel input (the input of :mod:`torchkern.graphs` kernels).

    Built from a list of ``torch_geometric.data.Data`` (a ``Batch`` in the list counts as
    its graphs), a PyG ``Batch`` or another GraphSet; every graph kernel converts its
    inputs with it (a torch-geometric ``Dataset`` or a ``DataLoader`` too, see
    ``GRAPH_SETS``), so users rarely build one.

    Notes
    -----
    - **Node labels**: each distinct row of ``x`` is one label (the one-hot rows of
      ``TUDataset``, or an integer column; a 1-D ``x`` is one column). A graph without
      ``x`` has all its nodes alike — then no graph of the set may have ``x``.
      Labels are compared across sets by value, so the rows of two sets must have the
      same width.
    - **edge_index** must be an integer tensor of shape (2, E) with entries in
      [0, num_nodes) (``check_edge_index``, shared with the node kernels); a float
      one is an error, never rounded. In a ``Batch`` every edge joins two nodes of one
      graph: an edge between two of its graphs is refused (ValueError naming it).
    - **Edges** are read as given: an entry (s, t) of ``edge_index`` is the directed edge
      s → t (adjacency A[s, t] = 1). PyG stores an undirected graph with both directions,
      so such graphs are undirected here as well. A graph given with one direction per
      edge is a *directed* graph: Weisfeiler–Lehman neighbours are out-neighbours, shortest
      paths and walks follow the edge directions (as GraKeL does with a one-way edge
      dictionary). Call ``torch_geometric.utils.to_undirected`` first to compare it as
      undirected. Duplicate edges are merged (the graphs are simple); self-loops are kept
      (the kernels whose definitions have no room for them ignore them: see each).
    - **Edge labels**: each distinct row of ``edge_attr`` is one label, used by
      ``WeisfeilerLehman(edge_labels=True)``, ``RandomWalk(edge_labels=True)``,
      :class:`EdgeHistogram` and :class:`NeighborhoodSubgraphPairwiseDistance`. They are
      read on first use (``edge_label``): a float ``edge_attr`` whose entries are not all
      integers is refused there (ValueError naming ``edge_attr``) and ignored by the
      kernels that read no edge labels. So is ``edge_attr`` that some graphs of the set
      have and others not (a list, or two sets compared): the kernels that read no edge
      labels compare the set as if no graph had it.
    - **Duplicate edges** are merged (the first occurrence kept, the edges sorted by
      (source, target)); duplicates whose ``edge_attr`` (or ``edge_attributes``) rows
      differ leave the field a gap that raises, naming it and the edge, when read: the
      kernels that read edge labels refuse such a set, the others compare the merged
      graph.
    - **Continuous attributes** are kept apart from the labels: node attributes are
      read from the Data field named ``node_attr`` (default ``"node_attributes"``, the
      field :func:`torchkern.datasets.read_tu` fills), edge attributes from the field
      ``"edge_attributes"``; both are optional, and only the kernels that say so read
      node attributes (:class:`GraphHopper`, :class:`PropagationAttr`, ...). No kernel
      reads edge attributes: a set in which some graphs have them and others not, or of
      different widths, is compared as one without them (reading
      :attr:`edge_attributes` then raises a ValueError naming them). ``node_attr="x"`` reads
      ``x`` itself as the attributes — the nodes then have no labels. A float ``x``
      whose entries are not all integers is refused (ValueError naming ``x``) rather
      than read as labels, which would make every node its own label. torch-geometric's
      ``TUDataset(use_node_attr=True)`` puts the attributes in the first
      ``dataset.num_node_attributes`` columns of ``x``, in front of the one-hot labels:
      split them into ``x`` and ``node_attributes`` (a ``transform``), or read the data
      set with :func:`~torchkern.datasets.read_tu`.
    - **Cost**: a ``Batch`` and an ``InMemoryDataset`` without ``transform`` and without
      its own ``get`` (TUDataset, and its index views ``ds[idx]``) are read from their
      concatenated tensors (the data set's collated storage and ``slices``) by tensor
      operations only (other data sets graph by graph, through ``ds[i]``); a list of
      Data costs one read of each field per graph and one ``torch.cat`` per field. The
      edges are merged and sorted on the first read of an edge field, so kernels that
      read node labels only (:class:`VertexHistogram`) never pay for it. From a list, a
      kernel reads (and checks) only the field groups it uses — x, the node attributes,
      the edges (``edge_index``, ``edge_attr``, ``edge_attributes``): VertexHistogram
      reads x, EdgeHistogram the edges; the others are read, and checked, on first use
      (a later kernel, ``take``, ``to``). ``GraphSet(list)`` itself reads every field.
      The histogram kernels read less: :class:`VertexHistogram` reads x for counting
      (:meth:`labelled_nodes`; ``node_label`` is numbered on first use), and
      :class:`EdgeHistogram`, from a list or a data set whose edges are valid and
      distinct in each graph (sorted, as PyG's coalesced graphs, or few), counts them
      from each graph's own node ids (:meth:`labelled_edges`), with no global
      ``edge_index`` built (it is built on first use).
    - **num_nodes** must be a non-negative integer (an integral float such as 3.0 is 3;
      2.5 is refused, naming the graph); where it is not set, the rows of ``x``, else
      torch-geometric's inference.

    Attributes
    ----------
    ptr : Tensor (G + 1,)
        Node offsets: graph g owns nodes ``ptr[g]:ptr[g + 1]``.
    edge_index : Tensor (2, E)
        Global node indices, sorted by (source, target), grouped by graph.
    eptr : Tensor (G + 1,)
        Edge offsets, as ``ptr`` for nodes.
    node_label : Tensor (N,)
        Node label ids: rows of ``label_values`` (shape (L, d)).
    edge_label : Tensor (E,) or None
        Edge label ids: rows of ``edge_label_values``.
    node_attributes : Tensor (N, d) or None
        Continuous node attributes (float64).
    edge_attributes : Tensor (E, d') or None
        Continuous edge attributes, in the order of ``edge_index``.
    dtype, device
        Floating dtype of the Gram matrices built from the set (float64 by default) and
        the device of its tensors.
    """

    def __init__(self, graphs, *, dtype: torch.dtype | None = None, device=None,
                 node_attr: str = "node_attributes", _read=None):
        # _read (private): the field groups of a list of Data to read now ("nodes": x,
        # "node_attributes", "edges": edge_index, edge_attr, edge_attributes), the others
        # on first use (GraphKernel.check_input: the groups its kernel reads); None: all.
        # "labelled_nodes" / "labelled_edges": x / the edges read and checked for
        # counting only (labelled_nodes, labelled_edges: the histogram kernels)
        if isinstance(graphs, GraphSet):
            self.__dict__.update(graphs.__dict__)
        else:
            if not isinstance(node_attr, str):
                raise TypeError(f"node_attr must be the name of a Data field (a str), got "
                                f"{node_attr!r}")
            with one_thread():  # many short passes: see CountFeatureKernel.forward
                self._build(graphs, node_attr, _GROUPS if _read is None else _read)
        if dtype is not None or device is not None:
            moved = self.to(device=device, dtype=dtype)
            if device is not None:
                moved._resolve_all()  # a set built for a device holds all its fields
            self.__dict__.clear()  # the moved set's fields only (no groups left to read)
            self.__dict__.update(moved.__dict__)

    # -- construction ------------------------------------------------------------------
    @classmethod
    def _from_parts(cls, ptr, edge_index, eptr, node_label, label_values, edge_label,
                    edge_label_values, dtype=torch.float64, node_attributes=None,
                    edge_attributes=None, edge_rows=None):
        self = cls.__new__(cls)
        self.ptr, self.edge_index, self.eptr = ptr, edge_index, eptr
        self.node_label, self.label_values = node_label, label_values
        self.edge_label, self.edge_label_values = edge_label, edge_label_values
        self._edge_rows = edge_rows
        self.node_attributes, self.edge_attributes = node_attributes, edge_attributes
        self.dtype, self.device = dtype, ptr.device
        return self

    def _build(self, graphs, node_attr="node_attributes", read=None):
        from torch_geometric.data import Batch, Data
        na = eat = None
        if isinstance(graphs, Batch) and isinstance(getattr(graphs._store, "_mapping", None),
                                                    dict):
            self._build_lazy(_BatchFields(graphs, node_attr), read)
            return
        if isinstance(graphs, Batch):
            counts = (graphs.ptr[1:] - graphs.ptr[:-1]).long()
            st = getattr(graphs._store, "_mapping", None)  # no PyG dispatch per read
            get = st.get if st is not None else lambda k: getattr(graphs, k, None)
            x, ei, ea = get("x"), get("edge_index"), get("edge_attr")
            na, eat = get(node_attr), get("edge_attributes")
            if ei is None:
                _refuse_sparse_adjacency(get, "the Batch")
                ei = torch.zeros(2, 0, dtype=torch.long, device=counts.device)
            ei = check_edge_index(ei, int(counts.sum()), "the Batch")
            device = ei.device
            _check_within_graphs(ei, counts.to(device), "the Batch")
        elif isinstance(graphs, Data):
            raise TypeError("a graph kernel compares a set of graphs: pass a list of Data, a "
                            "Batch or a GraphSet, not one Data (node kernels take one graph)")
        elif isinstance(graphs, _Collated):
            self._build_lazy(_CollatedFields(graphs, node_attr), read)
            return
        elif isinstance(graphs, (list, tuple)):
            types = set(map(type, graphs))  # one C-level pass over the graphs
            if not all(issubclass(t, Data) for t in types):
                bad = [i for i, g in enumerate(graphs) if not isinstance(g, Data)]
                raise TypeError(f"graphs must be torch_geometric Data objects; item {bad[0]} "
                                f"is a {type(graphs[bad[0]]).__name__}")
            if not graphs:
                raise ValueError("the set of graphs is empty")
            if any(issubclass(t, Batch) for t in types):  # a Batch holds several graphs
                self.__dict__.update(_from_batches(graphs, node_attr).__dict__)
                return
            self._build_lazy(_ListFields(graphs, node_attr), read)
            return
        else:
            raise TypeError(f"expected {GRAPH_SETS}, got {type(graphs).__name__}")
        ptr = _offsets(counts.to(device))
        n = int(ptr[-1])
        _check_node_count(n, device)
        ei = ei.to(device=device, dtype=torch.long)
        if node_attr == "x":
            x = None  # x holds the attributes, the nodes have no labels
        elif x is not None:
            _check_integral(x)
        node_label, label_values = _label_ids(x, n, "x", device, integral=True)
        self.node_attributes = _attributes(na, n, node_attr, device)
        eat = _attributes(eat, ei.shape[1], "edge_attributes", device)  # one Batch: no gap
        if ea is not None:  # label ids on first read (edge_label): most kernels need none
            ea = _edge_rows(ea, ei.shape[1])
        self.ptr = ptr
        # Duplicate edges are merged and the edges sorted on first read (_merge): the
        # kernels that read node labels only (VertexHistogram, ...) never pay for it.
        self.__dict__["_raw_edges"] = (ei, ea, eat)
        self.node_label, self.label_values = node_label, label_values
        self.__dict__.update(_edge_label=None, _edge_label_values=None)
        self.dtype, self.device = torch.float64, ptr.device

    def _build_lazy(self, fields: "_ListFields", read) -> None:
        """A set from a list of Data whose field groups are read on first use, those in
        ``read`` at once (their errors raised here)."""
        d = self.__dict__
        self.ptr = _offsets(torch.as_tensor(fields.counts).to(fields.device))
        self.dtype, self.device = torch.float64, self.ptr.device
        _check_node_count(int(self.ptr[-1]), self.device)
        d.update(_edge_label=None, _edge_label_values=None, _reader=fields,
                 _pending=frozenset(_GROUPS))
        for group in read:
            if group == "labelled_edges":  # the edges for counting only (EdgeHistogram)
                if getattr(fields, "edges_valid", _never)():
                    continue  # checked without being read: read on first use
                group = "edges"
            if group == "labelled_nodes":  # x read and checked for counting only
                self.labelled_nodes()
                continue
            self._resolve(group)

    def _resolve(self, group: str) -> None:
        """Read the field group ``group`` of a list of Data if not read yet. The set of
        groups still to read is replaced, never changed in place: copies of the set
        (``GraphSet(G)``, :meth:`to`) share it and read their own."""
        d = self.__dict__
        pending = d.get("_pending")
        if not pending or group not in pending:
            return
        f, n = d["_reader"], int(self.ptr[-1])
        kept = group == "edges" and self._labelled_valid()
        with one_thread():
            if isinstance(f, _TakenFields):  # a part of a set: from that set
                new = f.resolve(group)
            elif group == "nodes":
                x = None if f.node_attr == "x" else f.x()  # node_attr="x": no labels
                if x is not None:
                    _check_integral(x)
                node_label, label_values = _label_ids(x, n, "x", f.device, integral=True)
                new = dict(node_label=node_label, label_values=label_values)
            elif group == "node_attributes":
                new = dict(node_attributes=_attributes(f.node_attributes(), n, f.node_attr,
                                                       f.device))
            else:
                ei, ea, eat = f.edges()
                if not isinstance(eat, _EdgeAttrGap):  # a gap: never read, kept
                    eat = _attributes(eat, ei.shape[1], "edge_attributes", f.device)
                if isinstance(ea, torch.Tensor):  # label ids on first read (edge_label)
                    ea = _edge_rows(ea, ei.shape[1])
                # duplicate edges are merged and the edges sorted on first read (_merge)
                new = dict(_raw_edges=(ei, ea, eat))
        d.update(new)
        if kept:  # the same edges, now read: the labelled edges stay valid
            d["_labelled_stamps"] = self._edge_stamps()
        if group == "nodes":
            d.pop("_labelled_nodes", None)
        rest = pending - {group}
        d["_pending"] = rest
        if not rest:
            del d["_pending"], d["_reader"]

    def _resolve_all(self) -> None:
        for group in _GROUPS:
            self._resolve(group)

    def _lazy_field(name, group):  # noqa: N805 (a property factory used in the class body)
        def get(self):
            d = self.__dict__
            if name not in d:
                self._resolve(group)
            try:
                return d[name]
            except KeyError:
                raise AttributeError(name) from None

        def set_(self, value):
            self._resolve(group)  # the other fields of the group stay consistent
            self.__dict__[name] = value
        return property(get, set_)

    node_label = _lazy_field("node_label", "nodes")
    label_values = _lazy_field("label_values", "nodes")
    node_attributes = _lazy_field("node_attributes", "node_attributes")
    del _lazy_field

    def _merge(self) -> None:
        """Merge duplicate edges and sort them by (source, target), which sorts them by
        graph; the edge attributes and edge_attr rows follow. Done once, on the first read
        of an edge field."""
        self._resolve("edges")
        d = self.__dict__
        raw = d.get("_raw_edges")
        if raw is None:
            return
        ei, ea, eat = raw
        kept = self._labelled_valid()
        rows = isinstance(ea, torch.Tensor)  # not None, nor an _EdgeAttrGap
        with one_thread():
            eat_rows = isinstance(eat, torch.Tensor)  # not None, nor an _EdgeAttributesGap
            edge_index, first = _merge_edges(ei, int(self.ptr[-1]),
                                             positions=rows or eat_rows, ptr=self.ptr)
            eptr = torch.searchsorted(edge_index[0], self.ptr)  # sources are sorted
            if first is not None and first.numel() < ei.shape[1] and (rows or eat_rows):
                ea, eat = _merge_duplicate_rows(ei, first, self.ptr, ea if rows else None,
                                                eat if eat_rows else None, ea, eat)
                rows, eat_rows = isinstance(ea, torch.Tensor), isinstance(eat, torch.Tensor)
            eat = eat if first is None or not eat_rows else _rows(eat, first)
            ea = ea if first is None or not rows else _rows(ea, first)
        # all at once, the raw edges dropped last: an error above leaves the set unmerged
        d.update(_eptr=eptr, _edge_index=edge_index, _edge_attributes=eat)
        if ea is not None:
            d["_edge_rows"] = ea
        del d["_raw_edges"]
        if kept:  # the same edges, merged: the labelled edges stay valid
            d["_labelled_stamps"] = self._edge_stamps()

    def _edge_field(name):  # noqa: N805 (a property factory used in the class body)
        def get(self):
            d = self.__dict__
            if "_raw_edges" in d or "edges" in d.get("_pending", ()):
                self._merge()
            return d.get(name)

        def set_(self, value):
            d = self.__dict__
            if "_raw_edges" in d or "edges" in d.get("_pending", ()):
                self._merge()
            d[name] = value
            d.pop("_labelled", None)
        return property(get, set_)

    edge_index = _edge_field("_edge_index")
    eptr = _edge_field("_eptr")
    _edge_attributes_raw = _edge_field("_edge_attributes")  # a gap kept as it is
    _edge_rows = _edge_field("_edge_rows")
    del _edge_field

    @property
    def edge_attributes(self) -> torch.Tensor | None:
        """Continuous edge attributes, (E, k) in edge order, or None: read by no kernel;
        a ValueError naming the graph where some graphs have them and others not, or
        their widths differ."""
        eat = self._edge_attributes_raw
        if isinstance(eat, _EdgeAttrGap):  # some graphs have them, others not (widths)
            eat.fail()
        return eat

    @edge_attributes.setter
    def edge_attributes(self, value) -> None:
        self._edge_attributes_raw = value

    # -- edge labels, read lazily ------------------------------------------------------
    @property
    def edge_label(self) -> torch.Tensor | None:
        rows = self._edge_rows
        if isinstance(rows, _EdgeAttrGap):  # some graphs have edge_attr, others not
            rows.fail()
        if rows is not None:  # the rows of edge_attr, not yet read as labels
            _check_integral(rows, "edge_attr")
            ids, values = _label_ids(rows, rows.shape[0], "edge_attr", self.ptr.device)
            kept = self._labelled_valid()
            self.__dict__.update(_edge_label=ids, _edge_label_values=values, _edge_rows=None)
            if kept:  # the same labels, numbered: the labelled edges stay valid
                self.__dict__["_labelled_stamps"] = self._edge_stamps()
        return self.__dict__.get("_edge_label")

    @edge_label.setter
    def edge_label(self, value) -> None:
        self._merge()
        self.__dict__.update(_edge_label=value, _edge_rows=None)
        self.__dict__.pop("_labelled", None)

    @property
    def edge_label_values(self) -> torch.Tensor | None:
        self.edge_label  # noqa: B018 (reads the labels if not yet done)
        return self.__dict__.get("_edge_label_values")

    @edge_label_values.setter
    def edge_label_values(self, value) -> None:
        self.__dict__["_edge_label_values"] = value
        self.__dict__.pop("_labelled", None)

    def labelled_nodes(self):
        """``(label, values)``: the label id of every node, a row of ``values`` — what
        counting node labels needs (:class:`VertexHistogram`). ``node_label`` and
        ``label_values`` once the nodes are read; before (a set whose x is not read
        yet), x is read and checked as that read does, and where the label space is
        small enough for a dense count matrix (at most max(4N, 2^16) / G rows, N nodes
        and G graphs) the ids index the whole space (``_label_ids(compress=...)``: no
        pass that numbers the labels present), kept with the set until the nodes are
        read. Raises what reading x raises."""
        d = self.__dict__
        if "nodes" not in d.get("_pending", ()) or isinstance(d["_reader"], _TakenFields):
            return self.node_label, self.label_values
        hit = d.get("_labelled_nodes")
        if hit is None:
            f, n = d["_reader"], int(self.ptr[-1])
            with one_thread():
                x = None if f.node_attr == "x" else f.x()  # node_attr="x": no labels
                if x is not None:
                    _check_integral(x)
                hit = _label_ids(x, n, "x", f.device, integral=True,
                                 compress=max(4 * n, 2 ** 16) // max(len(self), 1))
            d["_labelled_nodes"] = hit
        return hit

    def labelled_edges(self):
        """``(graph, label, values)`` of every distinct edge, in an unspecified order: the
        graph of its source and its edge label id, a row of ``values`` (the edge-label
        rows; where the label space is small, all of it, rows that no edge has included:
        ``_label_ids(compress=False)``) — what counting edge labels needs
        (:class:`EdgeHistogram`). None when the set has no edge labels.

        Edges not merged yet (:meth:`_merge` runs on the first read of an edge field) are
        used as given when they hold no duplicate: sorted by (source, target) (as PyG's
        coalesced graphs are; one comparison pass), or checked by one scatter of per-graph
        (source, target) keys into Σ_g n_g² flags; else (duplicates, large unsorted
        graphs, an edge between two graphs) the merged edges are read.

        The answer is kept with the set (a set used again: a fitted model's) while the
        set's edge tensors it comes from (``edge_index``, ``eptr``, the edge labels or
        ``edge_attr`` rows, ``ptr``) are the same objects, unchanged in place (their
        ``_version``, which every in-place write bumps); after an in-place write to one
        of them it is made again."""
        d = self.__dict__
        if self._labelled_valid():  # kept: a set used again (a fitted model's)
            return d["_labelled"]
        with one_thread():
            local = None  # (graph of each edge, edge_attr) from a reader, edges unread
            if "edges" in d.get("_pending", ()) and hasattr(d["_reader"], "labelled_edges"):
                local = d["_reader"].labelled_edges()
            if local is None:
                self._resolve("edges")
            raw = d.get("_raw_edges") if local is None else (None, local[1])
            out = None
            if raw is not None and isinstance(raw[1], _EdgeAttrGap):
                raw[1].fail()
            if raw is not None and raw[1] is not None:
                graph = _graph_if_distinct(raw[0], self.ptr) if local is None else local[0]
                if graph is not None:
                    ea = raw[1]
                    _check_integral(ea, "edge_attr")
                    ids, values = _label_ids(ea, ea.shape[0], "edge_attr", self.ptr.device,
                                             integral=True, compress=False)
                    out = graph, ids, values
            if out is None:
                if self.edge_label is None:
                    return None
                graph = torch.repeat_interleave(self.num_edges,  # = arange(G) repeated
                                                output_size=self.edge_label.numel())
                out = graph, self.edge_label, self.edge_label_values
        d["_labelled"], d["_labelled_stamps"] = out, self._edge_stamps()
        return out

    def _edge_stamps(self) -> tuple:
        """:func:`_stamps` of the set's own edge tensors (``_EDGE_STATE``), as stored
        now: what :meth:`labelled_edges` derives its answer from."""
        d = self.__dict__
        return _stamps([d.get(k) for k in _EDGE_STATE])

    def _labelled_valid(self) -> bool:
        """Whether the kept :meth:`labelled_edges` answer is still the set's: its edge
        tensors the same objects, unmodified in place since (:meth:`_edge_stamps`)."""
        d = self.__dict__
        return d.get("_labelled") is not None and _same_stamps(d.get("_labelled_stamps", ()),
                                                                self._edge_stamps())

    def _edge_label_parts(self, edges: torch.Tensor) -> dict:
        """The edge labels of the edges ``edges`` (positions in ``edge_index``), as
        keyword arguments of :meth:`_from_parts`: label ids if read, else the raw rows."""
        rows = self._edge_rows
        if isinstance(rows, _EdgeAttrGap):  # no labels to take: the gap, kept
            return dict(edge_label=None, edge_label_values=None, edge_rows=rows)
        if rows is not None:
            return dict(edge_label=None, edge_label_values=None,
                        edge_rows=rows.index_select(0, edges))
        el = self.edge_label
        return dict(edge_label=None if el is None else el[edges],
                    edge_label_values=self.edge_label_values)

    # -- the KernelInput protocol ------------------------------------------------------
    def __len__(self) -> int:
        return int(self.ptr.numel() - 1)

    @property
    def num_nodes(self) -> torch.Tensor:
        """Nodes per graph, shape (G,)."""
        return self.ptr[1:] - self.ptr[:-1]

    @property
    def num_edges(self) -> torch.Tensor:
        """Directed edges per graph (an undirected edge counts twice), shape (G,)."""
        return self.eptr[1:] - self.eptr[:-1]

    @property
    def graph_of_node(self) -> torch.Tensor:
        """The graph of every node, shape (N,)."""
        # repeat_interleave(counts) is arange(G) repeated, by one pass (a repeat of values
        # is that index and a gather: about five times the time on the CPU)
        return torch.repeat_interleave(self.num_nodes, output_size=int(self.ptr[-1]))

    # -- padded dense views, by groups of graphs of similar size -------------------------
    def size_chunks(self, budget: int, power: int = 2):
        """Groups of graphs of similar size: yields ``(graph_ids, n_pad)`` with the graphs
        sorted by node count and ``len(graph_ids) * n_pad**power <= budget`` (or one graph).
        Padding to the largest graph of a group wastes little since sizes are sorted."""
        sizes = self.num_nodes
        order = torch.argsort(sizes, stable=True)
        s = sizes[order].cpu()
        G, i = len(self), 0
        while i < G:
            cost = torch.arange(1, G - i + 1) * s[i:].clamp_min(1) ** power
            j = i + max(1, int(torch.searchsorted(cost, torch.tensor(budget), right=True)))
            yield order[i:j], int(s[j - 1])
            i = j

    def padded_nodes(self, graph_ids: torch.Tensor, n_pad: int) -> torch.Tensor:
        """Global node indices of the graphs ``graph_ids`` in a (B, n_pad) table, -1 past
        each graph's last node."""
        local = torch.arange(n_pad, device=self.device)
        start, count = self.ptr[:-1][graph_ids], self.num_nodes[graph_ids]
        return torch.where(local < count[:, None], start[:, None] + local, -1)

    def dense_adjacency(self, graph_ids: torch.Tensor, n_pad: int, dtype,
                        edge_label: torch.Tensor | None = None,
                        n_edge_labels: int = 1) -> torch.Tensor:
        """Adjacency matrices A[s, t] = 1 for every edge s → t of the graphs ``graph_ids``,
        zero-padded to (B, n_pad, n_pad). With ``edge_label`` (ids in [0, C) for all
        edges of the set): one matrix per edge label, (B, C, n_pad, n_pad)."""
        ec = self.num_edges[graph_ids]
        edges = segment_ranges(self.eptr[:-1][graph_ids], ec)
        b = torch.repeat_interleave(torch.arange(len(graph_ids), device=self.device), ec)
        start = torch.repeat_interleave(self.ptr[:-1][graph_ids], ec)
        s, t = self.edge_index[:, edges] - start
        if edge_label is None:
            A = torch.zeros(len(graph_ids), n_pad, n_pad, dtype=dtype, device=self.device)
            A[b, s, t] = 1
            return A
        A = torch.zeros(len(graph_ids), n_edge_labels, n_pad, n_pad, dtype=dtype,
                        device=self.device)
        A[b, edge_label[edges], s, t] = 1
        return A

    def take(self, idx: torch.Tensor) -> "GraphSet":
        with one_thread():
            return self._take(idx)

    def _take(self, idx: torch.Tensor) -> "GraphSet":
        idx = idx.to(self.ptr.device)
        nc, ec = self.num_nodes[idx], self.num_edges[idx]
        ptr, eptr = _offsets(nc), _offsets(ec)
        nodes = segment_ranges(self.ptr[:-1][idx], nc)
        edges = segment_ranges(self.eptr[:-1][idx], ec)
        shift = torch.repeat_interleave(ptr[:-1] - self.ptr[:-1][idx], ec)
        # node groups this set has not read yet stay unread in the part (_TakenFields)
        lazy = [g for g in ("nodes", "node_attributes") if g in self.__dict__.get("_pending", ())]
        out = GraphSet._from_parts(
            ptr, _cols(self.edge_index, edges) + shift, eptr,
            None if "nodes" in lazy else self.node_label[nodes],
            None if "nodes" in lazy else self.label_values, dtype=self.dtype,
            node_attributes=None if "node_attributes" in lazy or self.node_attributes is None
            else self.node_attributes[nodes],
            edge_attributes=_take_rows(self._edge_attributes_raw, edges),
            **self._edge_label_parts(edges))
        if lazy:
            d = out.__dict__
            for name in (("node_label", "label_values") if "nodes" in lazy else ()) + \
                    (("node_attributes",) if "node_attributes" in lazy else ()):
                del d[name]
            d.update(_pending=frozenset(lazy), _reader=_TakenFields(self, nodes))
        return out

    @classmethod
    def concat(cls, parts, attributes: bool = True, labels: bool = True) -> "GraphSet":
        """One set of the graphs of ``parts`` (GraphSets or anything GraphSet takes), in
        order; label ids renumbered over all of them. ``attributes=False`` leaves the
        continuous node and edge attributes out (None) without reading them: the union
        of two sets for a kernel that reads none (their widths may then differ).
        ``labels=False`` gives every node one label (rows of width 0) without reading
        the node labels: the union for a kernel that reads none (:class:`EdgeHistogram`).
        Edge labels that some parts have and others not are kept as a gap that raises,
        naming ``edge_attr``, when read (:attr:`edge_label`)."""
        with one_thread():
            return cls._concat(parts, attributes, labels)

    @classmethod
    def _concat(cls, parts, attributes: bool = True, labels: bool = True) -> "GraphSet":
        parts = [p if isinstance(p, GraphSet) else GraphSet(p) for p in nonempty_parts(parts)]
        device, dtype = parts[0].device, parts[0].dtype
        parts = [p if p.device == device else p.to(device=device) for p in parts]
        if labels:
            ids, values = unify_labels([(p.node_label, p.label_values) for p in parts])
        else:  # one label for all nodes, as a set without x has
            ids = [torch.zeros(int(p.ptr[-1]), dtype=torch.long, device=device) for p in parts]
            values = torch.zeros(1, 0, device=device)
        raw = [p._edge_rows for p in parts]
        erows = next((r for r in raw if isinstance(r, _EdgeAttrGap)), None)
        if erows is None:
            has_e = [r is not None or p.edge_label is not None for p, r in zip(parts, raw)]
            erows = _edge_attr_gap([p if h else None for p, h in zip(parts, has_e)],
                                   "the set of graphs")
        if erows is not None:  # edge_attr in some graphs only: no edge labels to read
            eids = evalues = None
        elif all(r is not None for r in raw):  # none read as labels yet: the rows
            eids, evalues, erows = None, None, _cat_attributes(raw, "edge_attr", None)
        elif all(has_e):
            eids, evalues = unify_labels([(p.edge_label, p.edge_label_values) for p in parts])
        else:
            eids, evalues = None, None
        noff = _offsets(torch.tensor([int(p.ptr[-1]) for p in parts], device=device))
        eoff = _offsets(torch.tensor([int(p.eptr[-1]) for p in parts], device=device))
        ptr = torch.cat([parts[0].ptr[:1]] + [p.ptr[1:] + noff[i] for i, p in enumerate(parts)])
        eptr = torch.cat([parts[0].eptr[:1]] + [p.eptr[1:] + eoff[i] for i, p in enumerate(parts)])
        edge_index = torch.cat([p.edge_index + noff[i] for i, p in enumerate(parts)], 1)
        na = eat = None
        if attributes:
            na = _cat_attributes([p.node_attributes for p in parts], "node attributes", None)
            eat = _stack_edge_attributes([p._edge_attributes_raw for p in parts], device)
        return GraphSet._from_parts(ptr, edge_index, eptr, torch.cat(ids), values,
                                    None if eids is None else torch.cat(eids), evalues, dtype,
                                    na, eat, edge_rows=erows)

    def _move(self, device) -> None:
        # the edge fields by their stored names: moving them must not read edge_attr, nor
        # merge the edges (done on the device, on first read). The field groups not read
        # yet are read for another device only: on its own device (a fitted model casting
        # graphs to its device) a set reads no field its kernel does not read
        if torch.device(device) != self.ptr.device:
            self._resolve_all()
        d = self.__dict__
        d.pop("_labelled", None)
        d.pop("_labelled_stamps", None)
        for name in [k for k in d if k.startswith("_count_key_")]:
            del d[name]  # the histogram kernels' (histogram._count_key)
        for name in ("ptr", "_edge_index", "_eptr", "node_label", "label_values", "_edge_label",
                     "_edge_label_values", "node_attributes", "_edge_attributes", "_edge_rows"):
            t = d.get(name)
            if isinstance(t, torch.Tensor):  # not None, nor an _EdgeAttrGap
                d[name] = t.to(device)
        if "_raw_edges" in d:
            d["_raw_edges"] = tuple(t.to(device) if isinstance(t, torch.Tensor) else t
                                    for t in d["_raw_edges"])

    def check_compatible(self, other: "GraphSet", name: str = "X", *,
                         attributes: bool = True, labels: bool = True) -> None:
        """Raise ValueError if ``other`` (graphs met at predict time) cannot be compared
        with this (fitted) set: node attributes missing or of another width
        (``attributes``), node-label rows of another width (``labels``). A kernel
        checks only the fields it reads (``GraphKernel._check_fitted``): the others are
        neither compared nor read."""
        super().check_compatible(other, name)
        if attributes:
            a, b = self.node_attributes, getattr(other, "node_attributes", None)
            if a is not None and (b is None or b.shape[1] != a.shape[1]):
                raise ValueError(f"{name} has node attributes of width "
                                 f"{None if b is None else b.shape[1]} but the model was "
                                 f"fitted on graphs whose node attributes have width "
                                 f"{a.shape[1]}")
        if not labels:
            return
        w, v = int(self.label_values.shape[1]), int(other.label_values.shape[1])
        if w != v:
            raise ValueError(f"{name} has node labels of width {v} but the model was fitted on "
                             f"graphs whose node labels have width {w}: each row of x is one "
                             f"label, so the rows must be comparable")

    def __repr__(self) -> str:
        return (f"GraphSet(n_graphs={len(self)}, n_nodes={int(self.ptr[-1])}, "
                f"n_edges={int(self.eptr[-1])}, dtype={self.dtype}, device={self.device})")


def _cat(tensors, device, dim=0):
    """``torch.cat`` of the tensors, on ``device``; they are moved one by one only when
    they are not all on one device (no check per tensor otherwise)."""
    try:
        out = torch.cat(tensors, dim)
    except RuntimeError:
        out = torch.cat([t.to(device) for t in tensors], dim)
    return out.to(device)


_GROUPS = ("nodes", "node_attributes", "edges")

# the stored edge fields of a GraphSet that GraphSet.labelled_edges derives from
_EDGE_STATE = ("ptr", "_raw_edges", "_edge_index", "_eptr", "_edge_rows", "_edge_label",
               "_edge_label_values")


def _never() -> bool:
    return False


def _node_count(v, i: int) -> int:
    """Graph ``i``'s ``num_nodes`` as an int: an integer (a Python or NumPy int, a 0-d
    integer tensor) or an integral float; None (nothing to infer it from) is 0."""
    if v is None:
        return 0
    if isinstance(v, (torch.Tensor, np.ndarray)) and v.ndim == 0:
        v = v.item()
    elif isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"graph {i}: num_nodes must be a non-negative integer, got "
                        f"{type(v).__name__} {v!r}")
    if isinstance(v, float):
        if not (math.isfinite(v) and v == int(v)):
            raise ValueError(f"graph {i}: num_nodes must be a non-negative integer, got {v!r}")
        v = int(v)
    if v < 0:
        raise ValueError(f"graph {i}: num_nodes must be a non-negative integer, got {v!r}")
    return v


def is_undirected(G: "GraphSet") -> bool:
    """Whether every edge of G is also given in the other direction (as many times; a
    self-loop is its own reverse). The (source, target) keys are compared with the
    (target, source) keys, both sorted (the first usually are: a GraphSet keeps its
    edges sorted, checked in one pass)."""
    s, t = G.edge_index
    N = max(int(G.ptr[-1]), 1)
    fwd, bwd = s * N + t, t * N + s
    if fwd.numel() > 1 and not bool((fwd[1:] >= fwd[:-1]).all()):
        fwd = torch.sort(fwd).values
    return torch.equal(fwd, torch.sort(bwd).values)


def _uncatenable(parts, name: str, rows: str):
    """The error for graphs' ``name`` tensors that ``torch.cat`` refused: one not a
    tensor, or rows of different shapes."""
    bad = next((i for i, p in enumerate(parts) if not isinstance(p, torch.Tensor)), None)
    if bad is not None:
        raise TypeError(f"{name} must be a tensor in every graph (graph {bad} has a "
                        f"{type(parts[bad]).__name__})") from None
    raise ValueError(f"every graph's {name} must have shape ({rows}, d) with one d for all "
                     f"graphs, got rows of shapes {sorted({tuple(p.shape[1:]) for p in parts})}"
                     ) from None


def _all_or_none(vals, name: str) -> None:
    """Refuse a field that some graphs have and others not (by identity: a tensor's ==
    is slow)."""
    absent = list(map(operator.is_, vals, repeat(None)))
    if any(absent) and not all(absent):
        raise ValueError(f"graph {absent.index(True)} has no {name} while others do: "
                         f"give every graph {name} or none")


class _ListFields:
    """The fields of a list of Data, read group by group (:attr:`GraphSet._resolve`):
    per graph one read of each field from its attribute dict (no PyG dispatch) in C-level
    ``map`` passes, one ``torch.cat`` per field, and vectorized checks; ``node_attr``
    names the node-attribute field. ``counts`` (the nodes per graph, NumPy int64) and
    ``device`` are read at once: ``num_nodes``, else the rows of ``x`` (what PyG infers
    first), else PyG's inference. Picklable: a set whose groups are not all read yet can
    be copied and saved (it holds the graphs' attribute dicts)."""

    def __init__(self, data_list, node_attr: str):
        try:  # the attribute dicts themselves
            stores = [g._store._mapping for g in data_list]
        except AttributeError:
            stores = [getattr(g._store, "_mapping", g._store) for g in data_list]
        self.stores, self.node_attr = stores, node_attr
        sizes = self.field("num_nodes")
        unset = list(map(operator.is_, sizes, repeat(None)))
        if any(unset):  # not set: x's rows, else PyG's inference
            xs = self.field("x")
            try:  # every x a tensor of 1 or more dimensions: one C-level pass
                rows = list(map(torch.Tensor.size, xs, repeat(0)))
            except (TypeError, IndexError, RuntimeError):
                rows = [x.shape[0] if isinstance(x, torch.Tensor) and x.dim() else None
                        for x in xs]
            if all(unset) and None not in rows:
                sizes = rows
            else:
                sizes = [v if v is not None else r if r is not None else g.num_nodes
                         for v, r, g in zip(sizes, rows, data_list)]
        if set(map(type, sizes)) <= {int}:
            counts = np.fromiter(sizes, np.int64, len(sizes))
            if counts.size and counts.min() < 0:
                i = int(np.argmax(counts < 0))
                _node_count(sizes[i], i)
        else:
            counts = np.array([_node_count(v, i) for i, v in enumerate(sizes)], dtype=np.int64)
        self.counts = counts
        device = None
        for key in ("edge_index", "x"):
            v = stores[0].get(key)
            if isinstance(v, torch.Tensor):
                device = v.device
                break
        self.device = device if device is not None else torch.device("cpu")

    def field(self, name: str) -> list:
        """Field ``name`` of every graph (None where absent)."""
        try:
            return list(map(dict.get, self.stores, repeat(name)))
        except TypeError:  # attribute stores that are not dicts
            return [st.get(name) for st in self.stores]

    def _check_rows(self, parts, cat: torch.Tensor, name: str, counts, what: str) -> None:
        """Every part has ``counts`` rows: from ``numel`` (one C-level pass) when the
        concatenation ``cat`` has a known nonzero width, else from each shape."""
        if cat.dim() == 1 or (cat.dim() == 2 and cat.shape[1] > 0):
            w = 1 if cat.dim() == 1 else int(cat.shape[1])
            numel = np.fromiter(map(torch.Tensor.numel, parts), np.int64, len(parts))
            if np.array_equal(numel, counts * w):
                return
        rows = [int(p.shape[0]) if p.dim() else 1 for p in parts]
        bad = next((i for i, (r, c) in enumerate(zip(rows, counts.tolist())) if r != c), None)
        if bad is not None:
            raise ValueError(f"every graph's {name} must have one row per {what} "
                             f"(graph {bad} has {rows[bad]} rows for "
                             f"{int(counts[bad])} {what}s)")

    def x(self):
        """All graphs' ``x`` stacked (None when no graph has one)."""
        xs = self.field("x")
        if xs[0] is None:
            _all_or_none(xs, "x")
            return None
        try:  # a graph without x fails the cat: said by _all_or_none
            x = _cat(xs, self.device)
        except (TypeError, RuntimeError):
            _all_or_none(xs, "x")
            _uncatenable(xs, "x", "num_nodes")
        self._check_rows(xs, x, "x", self.counts, "node")
        return x

    def node_attributes(self):
        nas = self.field(self.node_attr)
        _all_or_none(nas, self.node_attr)
        if nas[0] is None:
            return None
        na = _cat_attributes(nas, self.node_attr, None, self.device)
        self._check_rows(nas, na, self.node_attr, self.counts, "node")
        return na

    def _local_edges(self):
        """``(edge_index, edges per graph, edge_attr)``: the graphs' edge_index
        concatenated as given (each graph's own node ids; no global ids) and their
        edge_attr, when every graph has an int64 edge_index, valid
        (:func:`_local_valid`), and one edge_attr row per edge (or no graph has
        edge_attr); else None (then read by :meth:`edges`, which checks graph by graph
        and names the culprit). The edge_attributes, if any, are read and checked here
        as :meth:`edges` and :meth:`GraphSet._resolve` do (the same errors). Kept for
        :meth:`edges`, which then shifts them in place: ``(ei, ecounts, ea, eat)``."""
        if getattr(self, "_local", None) is None:
            self._local = (None,)
            eis, eas, eats = (self.field(k) for k in ("edge_index", "edge_attr",
                                                      "edge_attributes"))
            gap = _edge_attr_gap(eas)  # edge_attr in some graphs only: no edge labels
            try:
                if set(map(operator.attrgetter("dtype"), eis)) != {torch.int64}:
                    return None
                ei = _cat(eis, self.device, 1)
                ea = gap if gap is not None or eas[0] is None else _cat(eas, self.device)
            except (AttributeError, RuntimeError, IndexError, TypeError):
                return None  # said by edges()
            ecounts = np.fromiter(map(torch.Tensor.numel, eis), np.int64, len(eis)) // 2
            if isinstance(ea, torch.Tensor):
                width = 1 if ea.dim() == 1 else int(ea.shape[1]) if ea.dim() == 2 else 0
                rows = np.fromiter(map(torch.Tensor.numel, eas), np.int64, len(eas))
                if not width or not np.array_equal(rows, ecounts * width):
                    return None
            counts = torch.from_numpy(self.counts).to(self.device)
            if not _local_valid(ei, torch.from_numpy(ecounts).to(self.device), counts):
                return None
            eat = _stack_edge_attributes(eats, self.device)
            if isinstance(eat, torch.Tensor):  # not None, nor a gap (never read)
                self._check_rows(eats, eat, "edge_attributes", ecounts, "edge")
                eat = _attributes(eat, ei.shape[1], "edge_attributes", self.device)
            self._local = (ei, torch.from_numpy(ecounts).to(self.device), ea, eat)
        return None if self._local[0] is None else self._local

    def edges_valid(self) -> bool:
        """Whether the edges are known to be valid (see :meth:`_local_edges`)."""
        return self._local_edges() is not None

    def labelled_edges(self):
        """``(graph of each edge, edge_attr)`` when the edges are valid and strictly
        sorted by (source, target) in each graph (:func:`_local_graph`), without global
        node ids; else None."""
        local = self._local_edges()
        graph = None if local is None else _local_graph(
            local[0], local[1], torch.from_numpy(self.counts).to(self.device))
        if graph is None:
            return None
        ea = local[2]
        return graph, ea if not isinstance(ea, torch.Tensor) else _edge_rows(ea, graph.numel())

    def edges(self):
        """``(edge_index, edge_attr, edge_attributes)``: the edges with global node ids
        (checked per graph), the rows of the other two; an :class:`_EdgeAttrGap` for
        ``edge_attr`` when some graphs have it and others not."""
        local = getattr(self, "_local", None)
        if local is not None and local[0] is not None:  # concatenated and checked
            self._local = None
            ei, ecounts, ea, eat = local
            counts = torch.from_numpy(self.counts).to(self.device)
            return _global_edges(ei, counts, ecounts, own=True), ea, eat
        eis, eas, eats = (self.field(k) for k in ("edge_index", "edge_attr",
                                                  "edge_attributes"))
        device, sizes = self.device, self.counts
        try:
            dtypes = set(map(operator.attrgetter("dtype"), eis))
        except AttributeError:  # a graph without edge_index (no edges), or not a tensor
            if any(map(operator.is_, eis, repeat(None))):
                for i in (i for i, e in enumerate(eis) if e is None):
                    _refuse_sparse_adjacency(self.stores[i].get, f"graph {i}")
                empty = torch.zeros(2, 0, dtype=torch.long, device=device)
                eis = [empty if e is None else e for e in eis]
            try:
                dtypes = set(map(operator.attrgetter("dtype"), eis))
            except AttributeError:
                dtypes = {None}
        if not dtypes <= _INT_DTYPES:
            # one by one: torch.cat would promote a bool or a float among int64 silently
            eis = [check_edge_index(e, int(sizes[i]), f"graph {i}") for i, e in enumerate(eis)]
        try:
            ei = _cat(eis, device, 1)
        except (RuntimeError, IndexError, TypeError):
            ei = None
        if ei is None or ei.dim() != 2 or ei.shape[0] != 2:  # the culprit (cat checked shapes)
            for i, e in enumerate(eis):
                check_edge_index(e, int(sizes[i]), f"graph {i}")
            raise ValueError("the graphs' edge_index tensors cannot be concatenated")
        ecounts = np.fromiter(map(torch.Tensor.numel, eis), np.int64, len(eis)) // 2
        counts = torch.from_numpy(sizes).to(device)
        ecounts = torch.from_numpy(ecounts).to(device)
        ei = _global_edges(ei, counts, ecounts, own=True)  # ei: the fresh cat's
        ea = eat = None
        if eas[0] is not None:
            try:  # a graph without edge_attr fails the cat: an _EdgeAttrGap
                ea = _cat(eas, device)
            except (TypeError, RuntimeError):
                ea = _edge_attr_gap(eas)
                if ea is None:
                    _uncatenable(eas, "edge_attr", "E")
        else:
            ea = _edge_attr_gap(eas)
        if isinstance(ea, torch.Tensor):
            # graph by graph: only the total was checked, so 8 rows for 6 edges in one
            # graph and 4 for 6 in the next shifted the edge labels silently
            self._check_rows(eas, ea, "edge_attr", ecounts.cpu().numpy(), "edge")
        eat = _stack_edge_attributes(eats, device)
        if isinstance(eat, torch.Tensor):  # not None, nor a gap (never read)
            self._check_rows(eats, eat, "edge_attributes", ecounts.cpu().numpy(), "edge")
        return ei, ea, eat


# the node field groups a part of a set may leave unread, and their fields
_TAKEN_GROUPS = (("nodes", ("node_label", "label_values")),
                 ("node_attributes", ("node_attributes",)))


class _TakenFields:
    """The node field groups of a part of a set (:meth:`GraphSet.take`) that the set had
    not read: read on first use from the set (its reads, its checks and errors) and
    indexed by ``nodes``, the part's nodes in the set. Pickled (a fitted model saved),
    it holds the part's fields only, not the set: they are read then, and an error
    reading one is kept and raised on its first use. The pickle holds tensors and the
    errors only (no names: equal parts pickle to equal bytes, as ``joblib.hash`` needs)."""

    def __init__(self, parent: GraphSet | None, nodes: torch.Tensor | None, done=None):
        self.parent, self.nodes, self.done = parent, nodes, done

    def __reduce__(self):
        done = []
        for group, names in _TAKEN_GROUPS:
            try:
                fields = self.resolve(group)
                done.append((None, tuple(fields[k] for k in names)))
            except (ValueError, TypeError) as e:
                done.append((e, None))
        return _TakenFields, (None, None, tuple(done))

    def resolve(self, group: str) -> dict:
        if self.done is not None:
            i = 0 if group == "nodes" else 1
            error, values = self.done[i]
            if error is not None:
                raise error
            return dict(zip(_TAKEN_GROUPS[i][1], values))
        p = self.parent
        if group == "nodes":
            return dict(node_label=p.node_label.index_select(0, self.nodes),
                        label_values=p.label_values)
        a = p.node_attributes
        return dict(node_attributes=None if a is None else a.index_select(0, self.nodes))


class _BatchFields:
    """The fields of a PyG ``Batch`` (its graphs' fields already stacked), read group by
    group as :class:`_ListFields` reads a list's: ``x``, the node attributes, and the
    edges (``edge_index`` checked against the batch's node count)."""

    def __init__(self, batch, node_attr: str):
        self.store, self.node_attr = batch._store._mapping, node_attr
        self.counts = (batch.ptr[1:] - batch.ptr[:-1]).long()
        ei = self.store.get("edge_index")
        self.device = ei.device if isinstance(ei, torch.Tensor) else self.counts.device

    def x(self):
        return self.store.get("x")

    def node_attributes(self):
        return self.store.get(self.node_attr)

    def edges(self):
        ei = self.store.get("edge_index")
        if ei is None:
            _refuse_sparse_adjacency(self.store.get, "the Batch")
            ei = torch.zeros(2, 0, dtype=torch.long, device=self.device)
        ei = check_edge_index(ei, int(self.counts.sum()), "the Batch").to(self.device)
        _check_within_graphs(ei, self.counts.to(self.device), "the Batch")
        return ei, self.store.get("edge_attr"), self.store.get("edge_attributes")


class _Collated:
    """The graphs of a torch_geometric ``InMemoryDataset`` (TUDataset, ...) read from its
    collated storage and ``slices``, no Data object per graph: :meth:`counts`, :meth:`edges`
    and ``_field`` give what the list path (:class:`_ListFields`) reads from the list of
    its graphs, by tensor operations only.
    ``of(dataset)`` is None where that storage cannot be read so (a ``transform``, which
    must see every graph; a subclass with its own ``get``, ``len`` or indexing; no node
    counts; nested or sparse fields): the graphs are then read one by one."""

    def __init__(self, data, slices, indices):
        self.data, self.slices, self.indices = data, slices, indices

    @classmethod
    def of(cls, ds):
        pyg = sys.modules.get("torch_geometric.data")
        if pyg is None or not isinstance(ds, pyg.InMemoryDataset) or ds.transform is not None:
            return None
        if any(getattr(type(ds), m, None) is not getattr(pyg.InMemoryDataset, m)
               for m in ("get", "len", "indices", "__getitem__", "__len__")):
            return None  # a subclass reading its graphs its own way: read as it does
        data, slices = getattr(ds, "_data", None), getattr(ds, "slices", None)
        if type(data) is not pyg.Data or not isinstance(slices, dict) or not slices:
            return None
        store = getattr(data._store, "_mapping", None)
        if not isinstance(store, dict) or "edge_index" not in slices:
            return None
        if any(not isinstance(v, torch.Tensor) or v.dim() != 1 for v in slices.values()):
            return None  # nested (dict) slices: not one tensor per field
        if any(isinstance(v, torch.Tensor) and v.layout != torch.strided
               for v in store.values()):
            return None
        if "x" not in slices and not isinstance(getattr(data._store, "_num_nodes", None),
                                                (list, tuple)):
            return None  # no node counts but PyG's inference, graph by graph
        indices = ds._indices
        return cls(data, slices, None if indices is None else
                   torch.as_tensor(indices if isinstance(indices, torch.Tensor)
                                   else list(indices), dtype=torch.long).reshape(-1))

    def _field(self, name, lo, counts):
        """Field ``name`` of the selected graphs (rows ``slices[name]`` of each), and the
        rows per graph; ``(None, None)`` when the data set has no such field."""
        value = self.data._store._mapping.get(name)
        if value is None or name not in self.slices:
            return None, None
        sl = self.slices[name].to(value.device)
        cnt = sl[1:] - sl[:-1]
        if self.indices is None:
            return value.narrow(0 if name != "edge_index" else 1, int(sl[0]),
                                int(sl[-1] - sl[0])), cnt
        idx = self.indices.to(value.device)
        cnt = cnt.index_select(0, idx)
        rows = segment_ranges(sl[:-1].index_select(0, idx), cnt)
        return value.index_select(0 if name != "edge_index" else 1, rows), cnt

    def counts(self) -> torch.Tensor:
        """Nodes per selected graph (from the slices of ``x``, else the stored counts), on
        the device of ``edge_index``."""
        device = self.data._store._mapping["edge_index"].device
        if "x" in self.slices and self.data._store._mapping.get("x") is not None:
            sl = self.slices["x"]
            counts = sl[1:] - sl[:-1]
        else:
            counts = torch.as_tensor(list(self.data._store._num_nodes), dtype=torch.long)
        if self.indices is not None:
            counts = counts.index_select(0, self.indices.to(counts.device))
        counts = counts.long().to(device)
        if not counts.numel():
            raise ValueError("the set of graphs is empty")
        return counts

    def edges(self, counts: torch.Tensor):
        """``(edge_index, edge_attr, edge_attributes)``: the edges with global node ids
        (checked per graph), the rows of the other two."""
        ei, ecounts = self._field("edge_index", None, None)
        if not ei.dtype.is_floating_point and ei.dtype != torch.bool and ei.dim() == 2:
            ei = _global_edges(ei, counts, ecounts)
        else:
            check_edge_index(ei, int(counts[0]), "graph 0")  # as the graph-by-graph read
        return (ei, self._field("edge_attr", None, None)[0],
                self._field("edge_attributes", None, None)[0])


class _CollatedFields:
    """The fields of a :class:`_Collated` data set, read group by group as
    :class:`_ListFields` reads a list's.

    The edges of a data set without ``edge_attributes`` can be checked without being
    read (:meth:`edges_valid`), and their labels counted from the stored, per-graph edge
    ids (:meth:`labelled_edges`): no edge_index of global node ids is built (three
    passes and a 2 × E int64 tensor), which a kernel that counts edge labels only
    (:class:`EdgeHistogram`) does not need."""

    def __init__(self, collated: _Collated, node_attr: str):
        self.c, self.node_attr = collated, node_attr
        self.counts = collated.counts()
        self.device = self.counts.device
        self._local = None

    def _local_edges(self):
        """``(edge_index, edges per graph, edge_attr)`` as stored (each graph's own node
        ids) when they are valid (:func:`_local_valid`), and ``edge_attr`` and
        ``edge_attributes``, where present, have the edges' slices (one row per edge),
        the edge_attributes checked as :meth:`GraphSet._resolve` checks them (the same
        errors); else None (then read by :meth:`edges`, which checks graph by graph and
        names the culprit)."""
        if self._local is None:
            self._local = (None,)
            ei, ecounts = self.c._field("edge_index", None, None)
            if ei is not None and ecounts is not None:
                ecounts = ecounts.long().to(self.device)
                ok = _local_valid(ei, ecounts, self.counts)
                sl = self.c.slices
                ea = self.c._field("edge_attr", None, None)[0]
                eat = self.c._field("edge_attributes", None, None)[0]
                for name, v in (("edge_attr", ea), ("edge_attributes", eat)):
                    if v is not None:  # a row per edge
                        ok = ok and torch.equal(sl[name], sl["edge_index"])
                if ok and eat is not None:
                    _attributes(eat, ei.shape[1], "edge_attributes", self.device)
                if ok:
                    self._local = (ei, ecounts, ea)
        return None if self._local[0] is None else self._local

    def edges_valid(self) -> bool:
        """Whether the edges are known to be valid without reading them (see
        :meth:`_local_edges`)."""
        return self._local_edges() is not None

    def labelled_edges(self):
        """``(graph of each edge, edge_attr)`` when the stored edges are valid and
        strictly sorted by (source, target) within each graph (PyG's coalesced graphs:
        distinct: :func:`_local_graph`), read from the storage without global node ids;
        else None (the edges are then read, merged and counted as any set's)."""
        local = self._local_edges()
        graph = None if local is None else _local_graph(local[0], local[1], self.counts)
        if graph is None:
            return None
        ea = local[2]
        return graph, None if ea is None else _edge_rows(ea, graph.numel())

    def x(self):
        return self.c._field("x", None, None)[0]

    def node_attributes(self):
        return self.c._field(self.node_attr, None, None)[0]

    def edges(self):
        return self.c.edges(self.counts)


def _local_valid(ei: torch.Tensor, ecounts: torch.Tensor, counts: torch.Tensor) -> bool:
    """Whether the concatenated per-graph ``edge_index`` ``ei`` (graph g's ``ecounts[g]``
    columns in its own node ids) is an integer (2, E) tensor with every entry in
    [0, counts[g]): one ``aminmax`` when the largest entry is below every graph's node
    count, else, on the CPU, one ``numpy.maximum.reduceat`` of each row per graph (no
    temporary); False when that cannot be told so (the caller then checks graph by
    graph, naming the culprit)."""
    if ei.dim() != 2 or ei.shape[0] != 2 or ei.dtype not in _INT_DTYPES:
        return False
    if ecounts.numel() != counts.numel() or int(ecounts.sum()) != ei.shape[1]:
        return False
    if not ei.shape[1]:
        return True
    lo, hi = (int(v) for v in torch.aminmax(ei))
    has = ecounts > 0
    if lo < 0:
        return False
    if hi < int(counts[has].min()):
        return True
    if ei.device.type != "cpu":
        return False
    starts = (torch.cumsum(ecounts, 0) - ecounts)[has].numpy()
    n = counts[has].numpy()
    return all(bool((np.maximum.reduceat(row, starts) < n).all()) for row in ei.numpy())


def _local_graph(ei: torch.Tensor, ecounts: torch.Tensor, counts: torch.Tensor):
    """The graph of every edge of a valid (:func:`_local_valid`) per-graph ``ei`` when
    its edges are distinct, else None: when each graph's edges are strictly sorted by
    (source, target) (PyG's coalesced graphs), told by one key per edge (source · m +
    target, m the largest graph) and one comparison of neighbours (the keys may drop
    only where a graph's edges begin: the drops there, counted apart, are all the
    drops); else, with at most ``_SORT_DISTINCT`` edges (TU files in their order), by
    one sort of (graph, source, target) keys; larger unsorted sets: None."""
    E = ei.shape[1]
    graph = torch.repeat_interleave(ecounts, output_size=E)  # arange(G) repeated
    if E > 1:
        m = max(int(counts.max()), 1)
        key = torch.add(ei[1].long(), ei[0].long(), alpha=m)  # int64 (a stored int32 overflows)
        drop = key[1:] <= key[:-1]
        has = ecounts > 0
        first = (torch.cumsum(ecounts, 0) - ecounts)[has][1:]  # a graph's first edge
        at = int(drop.index_select(0, first - 1).sum()) if first.numel() else 0
        if int(torch.count_nonzero(drop)) != at:
            # not sorted: few edges are told distinct by one sort of (graph, source,
            # target) keys (as _graph_if_distinct does)
            if E > _SORT_DISTINCT or len(counts) * m * m >= 2 ** 62:
                return None
            key = torch.sort(key.add_(graph, alpha=m * m)).values
            if bool((key[1:] == key[:-1]).any()):
                return None
    return graph


def _check_integral(x: torch.Tensor, name: str = "x") -> None:
    """Refuse (ValueError naming ``x``, or ``edge_attr``) a floating ``x`` with entries
    that are not integers: ``x`` holds discrete labels, continuous attributes go
    elsewhere."""
    if not x.is_floating_point() or not x.numel():
        return
    lo, hi = (float(v) for v in torch.aminmax(x.frac()))  # NaN where x is NaN or infinite
    if lo == 0 and hi == 0:  # every entry an integer (one fast pass)
        return
    bad = torch.isfinite(x) & (x != x.trunc())
    if bool(bad.any()):
        r, c = (int(v) for v in bad.nonzero()[0]) if x.dim() == 2 else (int(bad.nonzero()[0]), 0)
        v = float(x[r, c] if x.dim() == 2 else x[r])
        if name == "edge_attr":
            raise ValueError(
                f"edge_attr holds floats that are not integers (edge_attr[{r}, {c}] = {v!r} "
                f"in the set's edge order): this kernel reads edge_attr as discrete edge "
                f"labels, each distinct row one label, so every edge would be its own label. "
                f"Pass continuous edge attributes in the Data field 'edge_attributes' "
                f"(torchkern.datasets.read_tu does), or round edge_attr to labels")
        raise ValueError(
            f"x holds floats that are not integers (x[{r}, {c}] = {v!r}): graph "
            f"kernels read x as discrete node labels, each distinct row one label, so every "
            f"node would be its own label. Pass continuous node attributes in the Data field "
            f"'node_attributes' (torchkern.datasets.read_tu does; torch-geometric's "
            f"TUDataset(use_node_attr=True) puts them in the first num_node_attributes "
            f"columns of x) and use a kernel that reads them (GraphHopper, PropagationAttr, "
            f"node_attr=...), or round x to labels")


def _as_rows(a, rows: int, name: str) -> torch.Tensor:
    """``a`` as a real (rows, d) tensor, as given otherwise (a 1-D one is one column)."""
    a = torch.as_tensor(a)
    if a.dim() == 1:
        a = a.unsqueeze(-1)
    if a.dim() != 2 or a.shape[0] != rows:
        raise ValueError(f"{name} must have shape ({rows}, d) (one row per item), got "
                         f"{tuple(a.shape)}")
    if a.is_complex():
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    return a


def _edge_rows(ea, n_edges: int) -> torch.Tensor:
    """``edge_attr`` checked for its shape, kept as given until a kernel reads it as edge
    labels (:attr:`GraphSet.edge_label`)."""
    return _as_rows(ea, n_edges, "edge_attr")


def _attributes(a, rows: int, name: str, device):
    """Continuous attributes (rows, d) as a float64 tensor on ``device`` (a 1-D tensor is
    one column); None stays None."""
    if a is None:
        return None
    a = _as_rows(a, rows, name)
    if a.dtype == torch.bool:
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    a = a.to(device=device, dtype=torch.float64)
    # a finite sum has no NaN nor infinity in it (one pass, no temporary); else look
    if not math.isfinite(float(a.sum())) and not bool(torch.isfinite(a).all()):
        raise ValueError(f"{name} contains NaN or infinity")
    return a


def _cat_attributes(parts, name, dtype, device=None):
    """The attribute tensors of several graphs (or sets) stacked; all or none present,
    of one width."""
    try:  # the usual case: all present, of one shape but the rows, one cat
        dims = set(map(torch.Tensor.dim, parts))
        if len(dims) == 1 and dims <= {1, 2}:
            out = _cat(parts, device or parts[0].device)  # refuses unequal widths
            out = out.unsqueeze(-1) if out.dim() == 1 else out
            return out if dtype is None else out.to(dtype)
    except (TypeError, RuntimeError):
        pass  # said below
    present = [p is not None for p in parts]
    if not any(present):
        return None
    if not all(present):
        raise ValueError(f"some graphs have {name} and others not: give every graph {name} "
                         f"or none")
    bad = next((i for i, p in enumerate(parts) if not isinstance(p, torch.Tensor)), None)
    if bad is not None:
        raise TypeError(f"{name} must be a tensor in every graph (graph {bad} has a "
                        f"{type(parts[bad]).__name__})")
    bad = next((i for i, p in enumerate(parts) if p.dim() not in (1, 2)), None)
    if bad is not None:
        raise ValueError(f"{name} must have shape (rows, d) in every graph (graph {bad} has "
                         f"shape {tuple(parts[bad].shape)})")
    widths = {1 if p.dim() == 1 else int(p.shape[1]) for p in parts}
    if len(widths) > 1:
        raise ValueError(f"{name} of different widths {sorted(widths)} cannot be compared")
    parts = [p.unsqueeze(-1) if p.dim() == 1 else p for p in parts]
    out = _cat(parts, device or parts[0].device)
    return out if dtype is None else out.to(dtype)


_INT_DTYPES = {torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8}


def _check_within_graphs(ei: torch.Tensor, counts: torch.Tensor, where: str) -> None:
    """Refuse an edge of the concatenated ``edge_index`` ``ei`` (global node ids, graph g
    owning the next ``counts[g]`` nodes) whose ends lie in two different graphs: a set of
    graphs has no such edge, and no graph could be said to own it. One gather of each
    end's graph, O(N + E)."""
    if not ei.shape[1] or counts.numel() < 2:
        return
    graph = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device),
                                    counts, output_size=int(counts.sum()))
    src, dst = graph.index_select(0, ei[0]), graph.index_select(0, ei[1])
    across = src != dst
    if bool(across.any()):
        k = int(across.nonzero()[0, 0])
        raise ValueError(
            f"{where}: edge_index must join nodes of the same graph; edge {k} "
            f"({int(ei[0, k])}, {int(ei[1, k])}) joins graph {int(src[k])} to graph "
            f"{int(dst[k])} (a Batch's graphs are separate: an edge between two of them "
            f"belongs to neither)")


def _from_batches(items, node_attr="node_attributes") -> "GraphSet":
    """One GraphSet from a list of Data and Batch objects (a DataLoader's batches): each
    Batch contributes its graphs, each run of plain Data its graphs, in order."""
    from torch_geometric.data import Batch
    parts, run = [], []
    for g in items:
        if isinstance(g, Batch):
            if run:
                parts.append(GraphSet(run, node_attr=node_attr))
                run = []
            parts.append(GraphSet(g, node_attr=node_attr))
        else:
            run.append(g)
    if run:
        parts.append(GraphSet(run, node_attr=node_attr))
    return parts[0] if len(parts) == 1 else GraphSet.concat(parts)


def _merge_duplicate_rows(ei, first, ptr, ea, eat, ea_out, eat_out):
    """Where an edge is listed more than once (``first``: the position of each distinct
    edge's first occurrence, sorted by (source, target), from :func:`_merge_edges`), its
    ``edge_attr`` rows ``ea`` and ``edge_attributes`` rows ``eat`` (None: not checked)
    must agree: merging keeps the first, and a graph kernel compares simple graphs (as
    GraKeL's edge dictionaries do, one label per edge). ``(ea_out, eat_out)``, a field
    whose duplicates disagree replaced by a gap that raises, naming it and the edge,
    when read (the kernels that do not read it compare the merged graph). Only called
    when there are duplicates: one sort of the edges."""
    key = ei[0] * max(int(ptr[-1]), 1) + ei[1]
    _, inv = torch.unique(key, sorted=True, return_inverse=True)  # groups in first's order
    out = []
    for name, a, keep in (("edge_attr", ea, ea_out), ("edge_attributes", eat, eat_out)):
        if a is not None:
            a2 = a if a.dim() == 2 else a.reshape(a.shape[0], -1)
            bad = (a2 != a2.index_select(0, first).index_select(0, inv)).any(1)
            if a2.is_floating_point():
                bad &= ~a2.isnan().any(1)  # NaN (never equal): refused when read
            if bool(bad.any()):
                k = int(bad.nonzero()[0, 0])
                s, t = int(ei[0, k]), int(ei[1, k])
                g = int(torch.searchsorted(ptr, ei[0, k:k + 1], right=True)[0]) - 1
                s0, t0 = s - int(ptr[g]), t - int(ptr[g])
                msg = (f"{name}: graph {g} lists the edge ({s0}, {t0}) more than once with "
                       f"different {name} rows; a graph kernel compares simple graphs (one "
                       f"row per edge; duplicates are merged): give each edge once, or "
                       f"its duplicates equal rows")
                keep = _EdgeAttrGap(msg) if name == "edge_attr" else _EdgeAttributesGap(msg)
        out.append(keep)
    return tuple(out)


def _refuse_sparse_adjacency(get, where: str) -> None:
    """Refuse (ValueError) a graph with no ``edge_index`` that holds its edges in a sparse
    adjacency matrix (``adj_t``, as ``torch_geometric.transforms.ToSparseTensor`` leaves
    it, or ``adj``): read as a graph without edges, its edges would be lost silently.
    ``get``: the graph's (or Batch's) field getter."""
    for key in ("adj_t", "adj"):
        if get(key) is not None:
            raise ValueError(
                f"{where} has no edge_index but a sparse adjacency matrix {key!r} (what "
                f"torch_geometric.transforms.ToSparseTensor leaves): graph kernels read the "
                f"edges from edge_index, so they would compare it as a graph without edges. "
                f"Pass the graphs with edge_index (ToSparseTensor(remove_edge_index=False), "
                f"or the graphs before that transform)")


def _take_rows(a, idx: torch.Tensor):
    """The rows ``idx`` of the attributes ``a``; None and a gap stay as they are."""
    return a[idx] if isinstance(a, torch.Tensor) else a


def _cols(ei: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``ei[:, idx]`` of a (2, E) tensor, row by row (a gather along dim 1 is about three
    times slower on the CPU)."""
    return torch.stack([ei[0].index_select(0, idx), ei[1].index_select(0, idx)])


def _rows(a: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``a[idx]`` of an (E, d) tensor; one column is gathered flat (``index_select`` on
    rows of width 1 is about four times slower on the CPU)."""
    if a.dim() == 2 and a.shape[1] == 1:
        return a.reshape(-1).index_select(0, idx).unsqueeze(1)
    return a.index_select(0, idx)


_SORT_DISTINCT = 2 ** 15


def _graph_if_distinct(ei: torch.Tensor, ptr: torch.Tensor):
    """The graph of every edge's source when the edges ``ei`` (global node ids) are
    strictly sorted by (source, target) or by (target, source) (so distinct: PyG's
    coalesced graphs, TU files read by :func:`~torchkern.datasets.read_tu`), or, in any
    order, distinct: told by one sort of the (source, target) keys when there are at
    most ``_SORT_DISTINCT`` edges (a few operations: what small sets cost is the number
    of operations), else when each edge is inside one graph and Σ_g n_g² (the flags of
    one (source, target) key per node pair of each graph) is at most 16 per edge; None
    otherwise."""
    E, n_all = ei.shape[1], int(ptr[-1])
    counts = ptr[1:] - ptr[:-1]
    head = ei[:, :65].tolist() if n_all < 2 ** 31 else None
    for a, b in ((0, 1), (1, 0)) if n_all < 2 ** 31 else ():
        # sorted by (source, target) or by (target, source): distinct. The first 64
        # keys first, in Python (an unsorted set is told at once, by no tensor operation)
        hk = [u * n_all + v for u, v in zip(head[a], head[b])]
        if not all(map(operator.lt, hk, hk[1:])):
            continue
        key = torch.add(ei[b], ei[a], alpha=n_all)  # one pass
        if E < 2 or bool((key[1:] > key[:-1]).all()):
            if a == 0:  # sorted by source: the graphs' edges in runs
                eptr = torch.searchsorted(ei[0], ptr)  # repeat_interleave(c): arange(G)
                return torch.repeat_interleave(eptr[1:] - eptr[:-1], output_size=E)  # repeated
            return torch.repeat_interleave(counts, output_size=n_all).index_select(0, ei[0])
    if E <= _SORT_DISTINCT and n_all < 2 ** 31:  # few edges: one sort tells duplicates
        key = torch.sort(torch.add(ei[1], ei[0], alpha=n_all)).values
        if E > 1 and bool((key[1:] == key[:-1]).any()):
            return None
        return torch.repeat_interleave(counts, output_size=n_all).index_select(0, ei[0])
    sq = counts * counts
    R = int(sq.sum())
    if R > max(16 * E, 2 ** 16):  # no edges too: R flags for nothing
        return None
    graph = torch.repeat_interleave(counts, output_size=n_all).index_select(0, ei[0])
    start, n = ptr.index_select(0, graph), counts.index_select(0, graph)
    s, t = ei[0] - start, ei[1] - start
    if E and not bool(((t >= 0) & (t < n)).all()):
        return None  # an edge between two graphs: the merge sorts it out
    key = (torch.cumsum(sq, 0) - sq).index_select(0, graph) + s * n + t
    flags = torch.zeros(R, dtype=torch.bool, device=ptr.device).index_fill_(0, key, True)
    return graph if int(flags.sum()) == E else None


def _merge_edges(ei: torch.Tensor, n: int, positions: bool, ptr: torch.Tensor | None = None):
    """``(edge_index, first)``: the distinct edges of ``ei`` sorted by (source, target), and
    the position in ``ei`` of each (the first occurrence; None when ``ei`` is sorted and
    distinct already, as PyG's coalesced graphs are). Without ``positions`` (nothing else
    to reorder) the packed keys are sorted alone and decoded.

    One ``torch.sort`` of packed (source, target) keys (a radix sort on the CPU: 2 to 3
    times NumPy's sort at 10^5 to 10^6 keys), in int32 when the keys fit (half the time
    of int64): source·n + target, or, with the node offsets ``ptr`` of the graphs and
    every edge inside one graph, source·m + target's rank in its graph (m the largest
    graph)."""
    n = max(n, 1)
    key = torch.add(ei[1], ei[0], alpha=n)  # one pass
    if key.numel() < 2 or bool((key[1:] > key[:-1]).all()):
        return ei, None
    width, base = n, None  # key = source * width + (target - base[source])
    if n * n >= 2 ** 31 and ptr is not None and ptr.numel() > 1:
        counts = ptr[1:] - ptr[:-1]
        m = max(int(counts.max()), 1)
        if n * m < 2 ** 31:
            start = torch.repeat_interleave(ptr[:-1], counts, output_size=n)
            local = ei[1] - start.index_select(0, ei[0])
            if bool(((local >= 0) & (local < m)).all()):  # every edge inside its graph
                width, base, key = m, start, ei[0] * m + local
    if n * width < 2 ** 31:
        key = key.to(torch.int32)

    def decode(k):
        k = k.long()
        src = k // width
        dst = k % width if base is None else k % width + base.index_select(0, src)
        return torch.stack([src, dst])

    if not positions:
        k = torch.sort(key).values
        new = k[1:] != k[:-1]
        if not bool(new.all()):
            k = k[torch.cat([new.new_ones(1), new])]
        return decode(k), None
    k, perm = torch.sort(key, stable=True)  # stable: the first of equal keys comes first
    new = torch.cat([k.new_ones(1, dtype=torch.bool), k[1:] != k[:-1]])
    first = perm if bool(new.all()) else perm[new]
    return _cols(ei, first), first


GRAPH_SETS = ("a list of torch_geometric Data (or of Batch objects), a Batch, a "
              "torch_geometric Dataset (TUDataset, any InMemoryDataset), a DataLoader "
              "that does not shuffle, or a GraphSet")


def _graph_list(X, name: str):
    """The graphs of a torch_geometric Dataset (a list of Data, in order) or the batches
    of a DataLoader (a list of Batch); None for anything else."""
    pyg = sys.modules.get("torch_geometric.data")
    if pyg is not None and isinstance(X, pyg.Dataset):
        return _Collated.of(X) or [X[i] for i in range(len(X))]
    tud = sys.modules.get("torch.utils.data")
    if tud is not None and isinstance(X, tud.DataLoader):
        bs = X.batch_sampler
        if not isinstance(X.sampler, tud.SequentialSampler) or (bs is not None and not (
                isinstance(bs, tud.BatchSampler)
                and isinstance(bs.sampler, tud.SequentialSampler))):
            raise ValueError(f"{name} is a DataLoader that does not read its dataset in order "
                             f"(sampler {type(X.sampler).__name__}, batch sampler "
                             f"{type(bs).__name__}): its graphs come in a new order on every "
                             f"pass, which no labels and no second pass can match; pass its "
                             f"dataset, or a DataLoader with shuffle=False")
        if isinstance(bs, tud.BatchSampler) and bs.drop_last and len(bs.sampler) % bs.batch_size:
            raise ValueError(f"{name} is a DataLoader with drop_last=True, which leaves out the "
                             f"last {len(bs.sampler) % bs.batch_size} of its "
                             f"{len(bs.sampler)} graphs (batch_size={bs.batch_size}): pass "
                             f"its dataset, or a DataLoader with drop_last=False")
        batches = list(X)
        if not batches:
            raise ValueError(f"{name} is a DataLoader that yields no batches")
        bad = next((b for b in batches if pyg is None or not isinstance(b, pyg.Data)), None)
        if bad is not None:
            raise TypeError(f"{name} is a DataLoader whose batches are {type(bad).__name__}, "
                            f"not torch_geometric Batch objects: use "
                            f"torch_geometric.loader.DataLoader")
        return batches
    return None


def _with_base_fields(own: tuple, base) -> tuple | None:
    """The ``_graph_fields`` of a kernel that reads ``own`` and runs ``base`` on its
    graphs (CoreFramework, HadamardCode): ``own`` when the base kernel reads no node
    attributes, else every field (None)."""
    return None if base._reads_attributes else own


class GraphKernel(StructuredKernel):
    """Base of kernels between graphs: inputs become a :class:`GraphSet`.

    Graph sets are taken as ``GRAPH_SETS`` says; :meth:`_check_size` (a subclass
    hook) refuses up front a set the kernel could not compute in memory.
    ``_graph_fields``: the field groups of a list of Data the kernel reads ("nodes",
    "node_attributes", "edges"; None: all; "labelled_nodes", "labelled_edges": for
    counting only, see :meth:`GraphSet.labelled_nodes`), read and checked at
    conversion; the others are read on first use."""

    _graph_fields = None
    # k(G, G') depends on G and G' only (not on the other graphs of the call): ``pairs``
    # then evaluates k on ``_pair_batch`` pairs at a time instead of reading the diagonal
    # of the whole k(X, Y), which these kernels compute as a dense (n, m) matrix
    _pair_local = False
    _pair_batch = 16

    def _pairs(self, X: GraphSet, Y: GraphSet) -> torch.Tensor:
        """k(x_i, y_i): by batches of pairs (O(batch²) memory) where k is pair-local,
        else the diagonal of the lazy k(X, Y) (row-wise products of features for the
        feature-map kernels)."""
        if not self._pair_local:
            return super()._pairs(X, Y)
        B, n = self._pair_batch, len(X)
        out = [self(X.take(i), Y.take(i)).diag() for i in
               torch.arange(n, device=X.device).split(B)]
        return torch.cat(out) if out else torch.zeros(0, dtype=X.dtype, device=X.device)

    @property
    def _reads_attributes(self) -> bool:
        """Whether the kernel reads continuous attributes: not when its ``_graph_fields``
        leave the node attributes out (no such kernel reads edge attributes either)."""
        return self._graph_fields is None or "node_attributes" in self._graph_fields

    @property
    def _reads_node_labels(self) -> bool:
        """Whether the kernel reads node labels (``x``): not when its ``_graph_fields``
        leave the nodes out (:class:`EdgeHistogram`)."""
        f = self._graph_fields
        return f is None or "nodes" in f or "labelled_nodes" in f

    def _fixed_draws(self, torch_seed: bool = False):
        """The random state of one call, the same for every call of this kernel object, so
        that k(X), k(X, Y) and a fitted model's training and test Grams share their draws
        (as GraKeL's kernels, which draw once when fitted): ``random_state`` as an int
        seed as it is; None a seed drawn once for the object, from NumPy's global
        generator (torch's with ``torch_seed``), so that ``np.random.seed`` /
        ``torch.manual_seed`` make it reproducible; a ``numpy.random.RandomState``, NumPy
        ``Generator`` or ``torch.Generator`` the state it had at the first call, replayed
        on a copy at each call. Kept while ``random_state`` is the same object (``set_params`` gives
        a new one)."""
        rs = self.random_state
        hit = self.__dict__.get("_draws_of")
        if hit is None or hit[0] is not rs:
            if rs is None:
                seed = int(torch.randint(2 ** 62, ())) if torch_seed else \
                    int(np.random.randint(2 ** 32, dtype=np.int64))
                hit = (rs, seed)
            elif isinstance(rs, np.random.RandomState):
                hit = (rs, rs.get_state())
            elif isinstance(rs, np.random.Generator):
                hit = (rs, rs.bit_generator.state)
            elif isinstance(rs, torch.Generator):
                hit = (rs, (rs.device, rs.get_state()))
            else:
                hit = (rs, rs)
            self.__dict__["_draws_of"] = hit
        state = hit[1]
        if isinstance(rs, np.random.RandomState):
            out = np.random.RandomState()
            out.set_state(state)
            return out
        if isinstance(rs, np.random.Generator):  # a copy of its bit generator at that state
            bits = type(rs.bit_generator)()
            bits.state = state
            return np.random.Generator(bits)
        if isinstance(rs, torch.Generator):
            out = torch.Generator(state[0])
            out.set_state(state[1])
            return out
        return state

    def _numpy_stream(self) -> np.random.RandomState:
        """:meth:`_fixed_draws` as a NumPy stream (GraKeL's): ``RandomState(seed)`` for an
        int or None (a seed drawn once per object), a RandomState given replayed from its
        state at the first call."""
        d = self._fixed_draws()
        return d if isinstance(d, np.random.RandomState) else np.random.RandomState(d)

    def _check_fitted(self, X_fit: GraphSet, X: GraphSet, name: str = "X") -> None:
        """Predict-time graphs ``X`` checked against the fitted ones ``X_fit``
        (:func:`torchkern.inputs.check_fitted_input`) on the fields this kernel reads
        only: node attributes (width, presence) where it reads attributes, node-label
        widths where it reads node labels."""
        X_fit.check_compatible(X, name, attributes=self._reads_attributes,
                               labels=self._reads_node_labels)

    def check_input(self, X, name: str = "X", **kw) -> GraphSet:
        if not isinstance(X, GraphSet):
            X = self._as_graph_set(X, name)
        self._check_size(X, name)
        return X

    def _as_graph_set(self, X, name: str) -> GraphSet:
        pyg = sys.modules.get("torch_geometric.data")  # a PyG object implies PyG is loaded
        items = _graph_list(X, name)
        if items is not None:
            X = items
        if isinstance(X, (list, tuple, _Collated)) or (pyg is not None and
                                                       isinstance(X, pyg.Data)):
            try:
                return GraphSet(X, node_attr=getattr(self, "node_attr", "node_attributes"),
                                _read=self._graph_fields)
            except TypeError as e:
                raise TypeError(f"{name}: {e}") from None
            except ValueError as e:
                raise ValueError(f"{name}: {e}") from None
        raise TypeError(f"{name} must be {GRAPH_SETS}, got {type(X).__name__}")

    def _checked_sets(self, X, Y, backend):
        """``(X, Y)`` as GraphSets on one device (Y None stays None), ``backend`` checked:
        the input step of the kernels that compute their Gram in ``forward``."""
        from .._config import _check_backend
        if backend is not None:
            _check_backend(backend)
        X = self.check_input(X, "X")
        if Y is not None:
            Y = self.check_input(Y, "Y")
            if Y.device != X.device:
                raise ValueError(f"X and Y must be on the same device, got {X.device} and "
                                 f"{Y.device}")
        return X, Y

    def _check_size(self, X: GraphSet, name: str) -> None:
        """Raise ValueError (``check_memory``) when the graphs of X are too large for
        this kernel's method; by the kernels with dense per-graph steps."""

    def _check_pair(self, X: GraphSet, Y: GraphSet | None) -> None:
        if Y is not None and X.label_values.shape[1] != Y.label_values.shape[1]:
            raise ValueError(f"the node labels of X (rows of width {X.label_values.shape[1]}) "
                             f"and Y (width {Y.label_values.shape[1]}) are not comparable: each "
                             f"row of x is one label, so X and Y need the same number of columns")
