"""Benchmark: torchkern string kernels on antimicrobial peptides — Gram time against
straightforward Python, and 5-fold cross-validated SVC AUC.

    python bench/sequences.py                 # default run (< 10 min on 2 CPU cores)
    python bench/sequences.py --full          # also substring / LA Grams at 5,000 and CV on all
    python bench/sequences.py --threads 2     # torch threads (default 1)
    python bench/sequences.py --mismatch-only # only the (5, 2)-mismatch table (~1 min)

Data: ``AMPvsUniProt.csv`` from the installed modlamp (``pip install --no-deps modlamp``):
5,200 peptides (7-174 residues, mean 33), 2,600 antimicrobial (APD3) and 2,600 random
UniProt fragments, shuffled with seed 0; "n = 1000" is the first 1,000 of that order.

Kernels: Spectrum(k=3), Mismatch(k=3, m=1) (protein alphabet), Substring(k=3, λ=0.5),
LocalAlignment(β=0.5, BLOSUM62, gap open 11, extend 1; ``log=True``, the values Saigo et
al. feed their SVM up to the spectrum shift).

Gram table: seconds for one dense K(X, X) from the list of strings (encoding included).
"python" is a straightforward pure-Python implementation of the same definition (dicts of
k-mer counts and their dot products; neighbour enumeration for mismatch; Lodhi's and Saigo's
dynamic programmes pair by pair); it runs on the first ``n_py`` peptides and its time is
extrapolated to n by the number of pairs n(n+1)/2 (marked "~"). "max rel diff" compares the
two on those ``n_py`` peptides. torchkern rows marked "~" are extrapolated the same way from
the n = 1,000 run (``--full`` measures them).

Mismatch (5, 2) table: one Gram of ``Mismatch(k=5, m=2, alphabet="protein")`` on the first
40 peptides, against ``py_mismatch`` on the same 40 (each 5-mer's Hamming ball of radius 2
enumerated, 3,706 words, summed in dicts; no extrapolation); best of 3 for torchkern; the
load average (1 min) is printed before and after.

AUC table: 5-fold stratified CV (seed 0) of torchkern's ``SVC(C=1, kernel="precomputed")``
on the cosine-normalized Gram of each kernel, AUC of its decision function, mean ± std over
the folds. LA twice: the normalized LA kernel K_LA(x, y)/√(K_LA(x, x) K_LA(y, y)) (p.d.),
and Saigo et al.'s practice, the cosine of log K_LA with the Gram's smallest eigenvalue
subtracted from its diagonal when negative (transductive: one shift for all n peptides).
The Gram matrices are those of the timing runs (one per n), sliced per fold.
"""
from __future__ import annotations

import argparse
import importlib.resources
import itertools
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import device_name, table  # noqa: E402

AMINO = "ACDEFGHIKLMNPQRSTVWY"


# -- straightforward Python implementations ---------------------------------------------

def py_spectrum(seqs, k=3):
    feats = []
    for s in seqs:
        c = {}
        for i in range(len(s) - k + 1):
            c[s[i:i + k]] = c.get(s[i:i + k], 0) + 1
        feats.append(c)
    return _py_dot_gram(feats)


def py_mismatch(seqs, k=3, m=1, letters=AMINO):
    def ball(w):
        out = [w]
        for d in range(1, m + 1):
            for pos in itertools.combinations(range(k), d):
                for subs in itertools.product(letters, repeat=d):
                    if all(w[p] != a for p, a in zip(pos, subs)):
                        v = list(w)
                        for p, a in zip(pos, subs):
                            v[p] = a
                        out.append("".join(v))
        return out

    feats = []
    for s in seqs:
        c = {}
        for i in range(len(s) - k + 1):
            for u in ball(s[i:i + k]):
                c[u] = c.get(u, 0) + 1
        feats.append(c)
    return _py_dot_gram(feats)


def _py_dot_gram(feats):
    n = len(feats)
    K = np.zeros((n, n))
    for i in range(n):
        fi = feats[i]
        for j in range(i, n):
            fj = feats[j]
            K[i, j] = K[j, i] = sum(v * fj.get(u, 0) for u, v in fi.items())
    return K


def py_substring_pair(s, t, k=3, lam=0.5):
    """Lodhi et al. 2002, with the K'' table: O(k |s| |t|)."""
    n, m = len(s), len(t)
    Kp = [[1.0] * (m + 1) for _ in range(n + 1)]               # K'_0
    for _ in range(1, k):
        Kpp = [[0.0] * (m + 1) for _ in range(n + 1)]
        new = [[0.0] * (m + 1) for _ in range(n + 1)]
        for i in range(1, n + 1):
            for j in range(1, m + 1):
                Kpp[i][j] = lam * Kpp[i][j - 1] + (
                    lam * lam * Kp[i - 1][j - 1] if s[i - 1] == t[j - 1] else 0.0)
                new[i][j] = lam * new[i - 1][j] + Kpp[i][j]
        Kp = new
    return sum(lam * lam * Kp[i - 1][j - 1] for i in range(1, n + 1)
               for j in range(1, m + 1) if s[i - 1] == t[j - 1])


def py_la_pair(x, y, S, idx, beta=0.5, go=11.0, ge=1.0):
    """(1/β) log K_LA by Saigo et al.'s recursion (direct space, pair by pair)."""
    ed, ee = math.exp(-beta * go), math.exp(-beta * ge)
    m = len(y)
    M = [0.0] * (m + 1)
    X = [0.0] * (m + 1)
    Y = [0.0] * (m + 1)
    total = 1.0
    for a in x:
        row = S[idx[a]]
        Mn, Xn, Yn = [0.0] * (m + 1), [0.0] * (m + 1), [0.0] * (m + 1)
        for j in range(1, m + 1):
            Mn[j] = math.exp(beta * row[idx[y[j - 1]]]) * (1 + X[j - 1] + Y[j - 1] + M[j - 1])
            Xn[j] = ed * M[j] + ee * X[j]
            Yn[j] = ed * (Mn[j - 1] + Xn[j - 1]) + ee * Yn[j - 1]
            total += Mn[j]
        M, X, Y = Mn, Xn, Yn
    return math.log(total) / beta


def _py_pairwise(seqs, pair):
    n = len(seqs)
    K = np.zeros((n, n))
    for i in range(n):
        for j in range(i, n):
            K[i, j] = K[j, i] = pair(seqs[i], seqs[j])
    return K


# -- the run -----------------------------------------------------------------------------

def mismatch_52(seqs, n=40):
    """Mismatch(5, 2) on ``n`` peptides: torchkern against the Python neighbourhood
    enumeration, with the load average beside the times."""
    from torchkern.sequences import Mismatch
    load = os.getloadavg()[0]
    t = time.perf_counter()
    K_py = py_mismatch(seqs[:n], k=5, m=2)
    t_py = time.perf_counter() - t
    kern = Mismatch(5, 2, "protein")
    t_tk = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        K_tk = kern(seqs[:n]).to_dense().numpy()
        t_tk = min(t_tk, time.perf_counter() - t)
    diff = float(np.abs(K_tk - K_py).max() / np.abs(K_py).max())
    table([{"kernel": "mismatch k=5 m=2", "n": n, "torchkern s": f"{t_tk:.3f}",
            "python s": f"{t_py:.1f}", "speedup": f"{t_py / t_tk:.0f}x",
            "max rel diff": f"{diff:.1e}",
            "load avg": f"{load:.1f} -> {os.getloadavg()[0]:.1f}"}],
          ["kernel", "n", "torchkern s", "python s", "speedup", "max rel diff", "load avg"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--mismatch-only", action="store_true")
    args = ap.parse_args()
    import torch
    from threadpoolctl import threadpool_limits
    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads)
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold

    from torchkern.datasets import read_sequence_csv
    from torchkern.sequences import LocalAlignment, Mismatch, Spectrum, Substring, blosum62
    from torchkern.supervised import SVC

    path = importlib.resources.files("modlamp").joinpath("data", "AMPvsUniProt.csv")
    seqs, y, _ = read_sequence_csv(path)
    order = np.random.default_rng(0).permutation(len(seqs))
    seqs, y = [seqs[i] for i in order], y[order]
    print(f"# AMPvsUniProt: {len(seqs)} peptides, {int(y.sum())} AMP; {device_name('cpu')}; "
          f"load average {os.getloadavg()[0]:.1f}\n")
    mismatch_52(seqs)
    print(flush=True)
    if args.mismatch_only:
        return

    letters, S = blosum62()
    S, idx = S.tolist(), {c: i for i, c in enumerate(letters)}
    kernels = {
        "spectrum k=3": (Spectrum(3, "protein"), lambda s: py_spectrum(s), 300, (1000, 5000)),
        "mismatch k=3 m=1": (Mismatch(3, 1, "protein"), lambda s: py_mismatch(s), 150,
                             (1000, 5000)),
        "substring k=3 λ=0.5": (Substring(3, 0.5),
                                lambda s: _py_pairwise(s, py_substring_pair), 40, (1000,)),
        "LA β=0.5 (log)": (LocalAlignment(0.5, log=True),
                           lambda s: _py_pairwise(s, lambda a, b: py_la_pair(a, b, S, idx)),
                           30, (1000,)),
    }
    pairs = lambda n: n * (n + 1) / 2  # noqa: E731
    rows, grams = [], {}
    for name, (kern, py, n_py, sizes) in kernels.items():
        t = time.perf_counter()
        K_py = py(seqs[:n_py])
        t_py = time.perf_counter() - t
        K_tk = kern(seqs[:n_py]).to_dense().numpy()
        diff = float(np.abs(K_tk - K_py).max() / np.abs(K_py).max())
        measured = sizes if not args.full else (1000, 5000)
        t_by_n = {}
        for n in measured:
            t = time.perf_counter()
            K = kern(seqs[:n]).to_dense()
            t_by_n[n] = time.perf_counter() - t
            grams[name, n] = K
        for n in (1000, 5000):
            if n in t_by_n:
                tk = f"{t_by_n[n]:.2f}"
                tk_s = t_by_n[n]
            else:
                tk_s = t_by_n[1000] * pairs(n) / pairs(1000)
                tk = f"~{tk_s:.0f}"
            py_s = t_py * pairs(n) / pairs(n_py)
            rows.append({"kernel": name, "n": n, "torchkern s": tk, "python s": f"~{py_s:.0f}",
                         "speedup": f"{py_s / tk_s:.0f}x", "n_py": n_py,
                         "max rel diff": f"{diff:.1e}"})
        print(f"  {name}: done", flush=True)
    print()
    table(rows, ["kernel", "n", "torchkern s", "python s", "speedup", "n_py", "max rel diff"])

    # -- cross-validated AUC -----------------------------------------------------------
    def cosine(K):
        d = torch.diagonal(K).clamp_min(1e-300).rsqrt()
        return K * d[:, None] * d[None, :]

    def la_normalized(L):      # L = (1/β) log K_LA -> K_LA(x, y)/√(K_LA(x, x) K_LA(y, y))
        d = torch.diagonal(L)
        return torch.exp(0.5 * (L - d[:, None] / 2 - d[None, :] / 2))   # β = 0.5

    def la_log_shifted(L):                 # cosine of log K_LA, spectrum shifted to p.s.d.
        C = cosine(L)
        low = float(torch.linalg.eigvalsh(C).min())
        return C + max(0.0, -low) * torch.eye(len(C), dtype=C.dtype)

    variants = [("spectrum k=3", "spectrum k=3", cosine),
                ("mismatch k=3 m=1", "mismatch k=3 m=1", cosine),
                ("substring k=3 λ=0.5", "substring k=3 λ=0.5", cosine),
                ("LA normalized (p.d.)", "LA β=0.5 (log)", la_normalized),
                ("LA log, cosine + shift", "LA β=0.5 (log)", la_log_shifted)]

    def cv_auc(K, labels):
        aucs = []
        folds = StratifiedKFold(5, shuffle=True, random_state=0)
        for tr, te in folds.split(np.zeros(len(labels)), labels.numpy()):
            tr, te = torch.as_tensor(tr), torch.as_tensor(te)
            model = SVC(C=1.0, kernel="precomputed").fit(K[tr][:, tr], labels[tr])
            score = model.decision_function(K[te][:, tr])
            aucs.append(roc_auc_score(labels[te].numpy(), np.asarray(score)))
        return np.mean(aucs), np.std(aucs)

    print()
    auc_rows = []
    for label, name, transform in variants:
        row = {"kernel (5-fold CV, SVC C=1)": label}
        for n in (1000, 5000):
            if (name, n) in grams:
                mean, std = cv_auc(transform(grams[name, n]), y[:n])
                row[f"AUC n={n}"] = f"{mean:.3f} ± {std:.3f}"
            else:
                row[f"AUC n={n}"] = "(--full)"
        auc_rows.append(row)
    table(auc_rows, ["kernel (5-fold CV, SVC C=1)", "AUC n=1000", "AUC n=5000"])


if __name__ == "__main__":
    main()
