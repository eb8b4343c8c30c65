"""Support vector machines: the C-SVM classifier (SVC) and ε-insensitive regression (SVR),
with the duals of LIBSVM solved on the lazy Gram matrix (see :mod:`._smo`)."""
from __future__ import annotations

import copy
import functools
import warnings
from typing import NamedTuple

import torch
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning as _SkConvergenceWarning
from sklearn.utils.metaestimators import available_if

from .._estimator import Estimator, check_fitted, input_matrix, is_precomputed, kernel_matrix, resolve_kernel
from .._validation import (as_vector, check_bool, check_positive, check_sample_weight,
                           is_int)
from ..gram import DenseKernelMatrix, KernelMatrix
from ..linalg import ConvergenceWarning
from ..inputs import KernelInput, check_fitted_input, check_precomputed, n_features, take
from ._labels import warn_column_vector, class_weights, decode_labels, encode_labels
from ._platt import couple, fit_sigmoid, fold_bounds, fold_order, libsvm_seed, sigmoid
from ._smo import solve_dual

__all__ = ["SVC", "SVR"]

# SVC(solver="auto") hands problems up to this size with a stored CPU Gram to LIBSVM: at
# n = 500-5,000 its compiled SMO loop is 10-50x faster than torchkern's Python-driven
# decomposition (bench/small_data.py), and a dense float64 copy of K costs ≤ 200 MB.
_LIBSVM_MAX_N = 5000


class _LibsvmSolution(NamedTuple):
    """What the LIBSVM path returns for one binary problem (a DualSolution's fields that
    SVC reads)."""

    alpha: torch.Tensor
    rho: float
    n_iter: int


class _BaseSVM(Estimator):
    """Shared plumbing: the training Gram matrix, the solver call, test-vs-SV kernels."""

    def _check_params(self):
        check_positive(self.C, "C")
        check_positive(self.tol, "tol")
        check_positive(self.cache_size, "cache_size")
        if not (is_int(self.working_set_size) and self.working_set_size >= 2):
            raise ValueError(f"working_set_size must be an int >= 2, got {self.working_set_size!r}")
        if self.max_iter is not None and self.max_iter != -1 and not (
                is_int(self.max_iter) and self.max_iter >= 1):
            raise ValueError(f"max_iter must be None, -1 or a positive int, got {self.max_iter!r}")

    def _train_gram(self, X):
        """The validated training data and its Gram matrix (stored when it fits)."""
        self.kernel_ = resolve_kernel(self.kernel)
        self.__dict__.pop("n_features_in_", None)  # a refit on graphs has none
        if is_precomputed(self.kernel_):
            X = check_precomputed(X, square=True)
            self.n_features_in_ = X.shape[1]  # scikit-learn's: the Gram's columns
        else:
            X = input_matrix(self.kernel_, X, "X")
            d = n_features(X)
            if d is not None:
                self.n_features_in_ = d
        K = kernel_matrix(self.kernel_, X, backend=self.backend, reuse=True)
        self.shape_fit_ = tuple(X.shape)
        return X, K

    def _support_vectors(self, X, support):
        """The inputs of the support vectors (None for a precomputed kernel)."""
        if is_precomputed(self.kernel_):
            return None
        sv = take(X, support)
        if isinstance(sv, KernelInput):
            # a part of a structured input may read fields it has not read yet from the
            # whole input (GraphSet.take keeps the training set for that): a copy holds
            # its own fields only (as the part's pickle does), not every training graph
            sv = copy.deepcopy(sv)
        return sv

    @staticmethod
    def _sample_weight(sample_weight, n, device):
        """(weights as float64, the mask of samples kept): as LIBSVM, a sample of weight
        ≤ 0 is left out of the problem, and the others multiply C. (None, None) without
        weights."""
        if sample_weight is None:
            return None, None
        w = check_sample_weight(sample_weight, n, device=device, allow_negative=True)
        keep = w > 0
        return w, (None if bool(keep.all()) else keep)

    def _solve(self, K, sub, y, p, C, kidx=None, desc="SMO", inner="auto"):
        """Run the decomposition solver on the rows ``sub`` of K (None: all of K);
        ``inner`` says where its subproblems are solved (:func:`._smo.solve_dual`)."""
        nk = K.shape[0] if sub is None else sub.numel()
        cache_rows = max(int(self.cache_size * 2**20 // (nk * K.dtype.itemsize)), 1)
        if sub is None:
            rows_fn, diag, block_fn = K.rows, K.diag(), K.submatrix
        else:
            rows_fn, diag = (lambda r: K.submatrix(sub[r], sub)), K.diag()[sub]
            block_fn = lambda r, c: K.submatrix(sub[r], sub[c])  # noqa: E731
        max_iter = None if self.max_iter in (None, -1) else self.max_iter
        return solve_dual(rows_fn, diag, y, p, C, kidx=kidx, tol=float(self.tol),
                          max_iter=max_iter, working_set=self.working_set_size,
                          cache_rows=cache_rows, chunk=K.block_rows(nk),
                          block_fn=block_fn if isinstance(K, DenseKernelMatrix) else None,
                          verbose=self.verbose, desc=desc, inner=inner)

    def _test_gram_times(self, X, coef):
        """k(X, support vectors) @ coef, lazily; for a precomputed kernel X holds
        k(x_test, x_train) and only its support columns are read."""
        if is_precomputed(self.kernel_):
            X = check_precomputed(X, self.shape_fit_[0])
            Ks = X.cols(self.support_.long()) if isinstance(X, KernelMatrix) else X[:, self.support_.to(X.device).long()]
            return Ks @ coef.to(dtype=Ks.dtype, device=Ks.device)
        X = input_matrix(self.kernel_, X, "X")
        SV = self.support_vectors_.to(dtype=X.dtype, device=X.device)
        X = check_fitted_input(self.kernel_, X, SV, estimator=self)
        if SV.shape[0] == 0:
            return torch.zeros(X.shape[0], *coef.shape[1:], dtype=X.dtype, device=X.device)
        Ks = kernel_matrix(self.kernel_, X, SV, backend=self.backend)
        return Ks @ coef.to(dtype=Ks.dtype, device=X.device)


def _has_probability(svc) -> bool:
    if not svc.probability:
        raise AttributeError("predict_proba is not available when probability=False")
    return True


class SVC(ClassifierMixin, _BaseSVM):
    r"""C-support vector classification with an intercept, solved on the lazy Gram matrix.

    For labels y_i ∈ {−1, +1} it solves the dual of LIBSVM (Chang and Lin 2011;
    Schölkopf and Smola, "Learning with Kernels", 2002, §7)

    .. math::

        \max_{\alpha}\ \sum_i \alpha_i - \tfrac12 \sum_{i,j} \alpha_i\alpha_j y_iy_j K_{ij}
        \quad\text{s.t.}\quad 0 \le \alpha_i \le C w_{y_i},\ \sum_i y_i\alpha_i = 0,

    and predicts with f(x) = Σ_i y_i α_i k(x_i, x) + b, b from the free support vectors
    as in LIBSVM. The solver is a decomposition method: working sets of
    ``working_set_size`` variables solved by LIBSVM's SMO with second-order pair selection
    (Fan, Chen & Lin 2005), the full gradient updated with a few kernel rows at a time
    from an LRU cache of ``cache_size`` MB filled by ``K.rows`` — memory O(n · cache), not
    n². It stops on LIBSVM's KKT criterion m(α) − M(α) < ``tol``, so it reaches the
    optimum LIBSVM (and scikit-learn's ``SVC``) reaches for the same ``tol``.

    More than two classes: one-vs-one, as LIBSVM: one binary machine per pair of classes,
    prediction by votes (ties go to the first class in ``classes_``).

    Parameters
    ----------
    kernel : Kernel, None or "precomputed"
        The kernel (default ``RBF()``, i.e. scikit-learn's ``gamma=0.5``). With
        ``"precomputed"``, ``fit`` takes the (n, n) training Gram matrix and
        ``predict`` the (m, n) test-vs-train Gram matrix (tensor, array or KernelMatrix).
    C : float
        Penalty on the slacks, > 0.
    tol : float
        KKT tolerance (LIBSVM's ``eps``).
    max_iter : int, optional
        Cap on outer (working-set) iterations per binary problem; ``None`` or ``-1``:
        100 000. A :class:`~torchkern.linalg.ConvergenceWarning` says when it is reached.
    class_weight : None, "balanced" or dict
        Multiplies C per class: ``"balanced"`` uses n / (n_classes · n_c).
    decision_function_shape : {"ovr", "ovo"}
        As scikit-learn: ``"ovo"`` returns the n_classes(n_classes−1)/2 pairwise values,
        ``"ovr"`` (default) turns them into per-class scores, votes plus a confidence in
        (−1/3, 1/3). Ignored for two classes.
    break_ties : bool
        As scikit-learn: with ``decision_function_shape="ovr"`` and more than two classes,
        ``predict`` returns the argmax of :meth:`decision_function` (votes, ties broken
        by the confidences) instead of LIBSVM's vote (ties to the first class). Costs
        nothing more; an error with ``"ovo"``.
    probability : bool
        Also fit LIBSVM's probability model, for :meth:`predict_proba`: per pair of
        classes Platt's sigmoid 1/(1 + exp(A f + B)) of decision values from a 5-fold
        cross-validation (five more fits per pair), coupled over the pairs by Wu, Lin and
        Weng's method. The folds follow scikit-learn's LIBSVM for the same
        ``random_state``, so the probabilities equal scikit-learn's (to the solver's
        tolerance). scikit-learn 1.9 deprecates this option in favour of
        ``CalibratedClassifierCV(SVC(), ensemble=False)``, which works with this SVC too.
    cache_size : float
        Megabytes of kernel rows to cache.
    working_set_size : int
        Variables per subproblem (q); 64–256 is a good range.
    solver : {"auto", "smo", "smo-device", "libsvm"}
        ``"smo"``: torchkern's decomposition solver on the (lazy or stored) Gram matrix,
        on any device; its q-variable subproblems are solved where the data lives — in
        NumPy for CPU data, on the GPU for CUDA data (ThunderSVM's design: batched SMO
        steps replayed as a CUDA graph, no host synchronization inside a batch).
        ``"smo-device"``: the GPU algorithm on any device (on the CPU slower than
        ``"smo"``; there to check it). ``"libsvm"``: LIBSVM itself (through
        scikit-learn's ``SVC`` with ``kernel="precomputed"``) on torchkern's Gram
        matrix, copied to the CPU as a dense float64 array — for small problems, where
        LIBSVM's compiled loop beats any per-iteration Python overhead. ``"auto"``:
        ``"libsvm"`` when the training Gram is stored densely on the CPU and n ≤ 5,000
        (measured in ``bench/small_data.py``), ``"smo"`` otherwise (so the GPU solver on
        CUDA). All stop on the same KKT criterion and reach the same optimum.
    random_state : None, int or torch.Generator
        The cross-validation folds of ``probability=True`` (scikit-learn's seed derivation:
        the same int gives the same folds). The solver itself makes no random choice.
    verbose : bool
        Show a tqdm bar per binary problem (``"smo"``): the KKT gap m(α) − M(α) on a
        log scale from its first value down to ``tol``, kept on screen at the end.
    backend : str, optional
        Gram-matrix backend (``"auto"``, ``"dense"``, ``"blocked"``, ``"keops"``).

    Attributes
    ----------
    classes_ : numpy.ndarray
        Sorted class labels.
    support_ : torch.Tensor
        Indices of the support vectors (int32, as scikit-learn's), grouped by class
        (scikit-learn's order).
    support_vectors_ : torch.Tensor, KernelInput or None
        Their inputs (None for a precomputed kernel); for structured inputs (graphs,
        strings) the support items only.
    n_support_ : torch.Tensor
        Support vectors per class.
    fit_status_ : int
        0: fitted (scikit-learn's attribute; a failed fit raises instead).
    dual_coef_ : torch.Tensor
        (n_classes − 1, n_SV), scikit-learn's layout: y_i α_i of every one-vs-one machine
        (for two classes, signed so that a positive decision means ``classes_[1]``).
    intercept_ : torch.Tensor
        (n_classes (n_classes − 1) / 2,) intercepts b = −ρ of the machines (two classes:
        ρ, with the sign flip of ``dual_coef_``).
    n_iter_ : int
        Outer iterations of the binary problem that took the most (the only one for two
        classes).
    probA_, probB_ : torch.Tensor
        (n_classes (n_classes − 1) / 2,) Platt parameters A, B of each pair (empty unless
        ``probability=True``).
    solver_ : str
        The solver that ran: ``"libsvm"``, or ``"smo (<where>)"`` with where the
        subproblems were solved — ``host`` (NumPy), ``triton`` (one fused GPU kernel per
        subproblem), ``graph`` (CUDA-graph steps) or ``eager`` (tensor steps).
    kernel_ : Kernel or str
        The fitted copy of the kernel.

    Notes
    -----
    Cost per binary problem: O(n · d) per new kernel row, about (number of SMO steps)/(q/2)
    outer iterations each reading ≤ q/2 new rows and updating the gradient in O(n q);
    memory O(n · cache_size). Prediction: one lazy product k(X, SV) @ coef.

    References
    ----------
    C.-C. Chang and C.-J. Lin, "LIBSVM: a library for support vector machines", ACM TIST
    2011. R.-E. Fan, P.-H. Chen and C.-J. Lin, "Working set selection using second order
    information for training SVM", JMLR 2005. T. Joachims, "Making large-scale SVM
    learning practical", 1999. Z. Wen et al., "ThunderSVM", JMLR 2018.

    Examples
    --------
    >>> import torch, torchkern
    >>> X = torch.tensor([[0.0, 0.0], [0.0, 1.0], [2.0, 2.0], [2.0, 3.0]])
    >>> clf = torchkern.SVC(torchkern.RBF(lengthscale=1.0), C=10.0).fit(X, [0, 0, 1, 1])
    >>> clf.predict(torch.tensor([[0.1, 0.5], [2.1, 2.4]]))
    tensor([0, 1])
    """

    def __init__(self, kernel=None, C=1.0, *, tol=1e-3, max_iter=None, class_weight=None,
                 decision_function_shape="ovr", probability=False, cache_size=200,
                 working_set_size=256, solver="auto", random_state=None, verbose=False,
                 backend=None, break_ties=False):
        self.kernel = kernel
        self.solver = solver
        self.C = C
        self.probability = probability
        self.tol = tol
        self.max_iter = max_iter
        self.class_weight = class_weight
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.cache_size = cache_size
        self.working_set_size = working_set_size
        self.random_state = random_state
        self.verbose = verbose
        self.backend = backend

    def fit(self, X, y, sample_weight=None):
        """Fit the one-vs-one machines. X: any input of the kernel (:mod:`torchkern.inputs`),
        or the (n, n) Gram when precomputed. ``sample_weight`` (n,) multiplies C per
        sample (scikit-learn's convention); samples of weight ≤ 0 are left out."""
        self._check_params()
        if self.decision_function_shape not in ("ovr", "ovo"):
            raise ValueError(f"decision_function_shape must be 'ovr' or 'ovo', "
                             f"got {self.decision_function_shape!r}")
        check_bool(self.break_ties, "break_ties")
        X, K = self._train_gram(X)
        n = K.shape[0]
        if self._use_libsvm(K):
            solve = self._solve_libsvm
        else:
            inner = "device" if self.solver == "smo-device" else "auto"
            solve = functools.partial(self._solve, inner=inner)
        classes, codes = encode_labels(y, n)
        weights = class_weights(self.class_weight, classes, codes)
        k = classes.size
        device = K.device
        codes_t = torch.as_tensor(codes, device=device)
        f64 = torch.float64
        sw, keep = self._sample_weight(sample_weight, n, device)
        if keep is not None:
            empty = [c for c in range(k) if not bool((keep & (codes_t == c)).any())]
            if empty:
                raise ValueError(f"sample_weight gives no positive weight to class "
                                 f"{classes[empty[0]]!r}: it would have no training sample")
        coef_full = torch.zeros(n, k * (k - 1) // 2, dtype=f64, device=device)
        rhos, iters, inners = [], [], set()
        with torch.no_grad():
            pair = 0
            for i in range(k):
                for j in range(i + 1, k):
                    pair_mask = None if k == 2 else (codes_t == i) | (codes_t == j)
                    if keep is not None:
                        pair_mask = keep if pair_mask is None else pair_mask & keep
                    sub = None if pair_mask is None else torch.nonzero(pair_mask).squeeze(1)
                    c_sub = codes_t if sub is None else codes_t[sub]
                    ys = torch.where(c_sub == i, 1.0, -1.0).to(f64)
                    Cs = torch.where(c_sub == i, self.C * weights[i], self.C * weights[j]).to(f64)
                    if sw is not None:
                        Cs = Cs * (sw if sub is None else sw[sub])
                    sol = solve(K, sub, ys, -torch.ones_like(ys), Cs,
                                desc=f"SVC {classes[i]} vs {classes[j]}")
                    coef = ys * sol.alpha
                    if sub is None:
                        coef_full[:, pair] = coef
                    else:
                        coef_full[sub, pair] = coef
                    rhos.append(sol.rho)
                    iters.append(sol.n_iter)
                    inners.add(getattr(sol, "inner", "libsvm"))
                    pair += 1
            if check_bool(self.probability, "probability"):
                self.probA_, self.probB_ = self._fit_platt(K, codes_t, keep, sw, weights,
                                                           classes, solve)
            else:
                self.probA_ = self.probB_ = torch.zeros(0, dtype=f64)
        is_sv = (coef_full != 0).any(1)
        # scikit-learn's order: grouped by class, increasing index within a class.
        order = torch.cat([torch.nonzero(is_sv & (codes_t == c)).squeeze(1) for c in range(k)])
        self.classes_ = classes
        self.class_weight_ = torch.as_tensor(weights, dtype=f64)
        self.support_ = order.to(torch.int32)  # scikit-learn's dtype
        self.n_support_ = torch.stack([(is_sv & (codes_t == c)).sum() for c in range(k)]).to(torch.int32)
        self.support_vectors_ = self._support_vectors(X, order)
        self._pair_coef = coef_full[order]  # (n_SV, n_pairs)
        self._rho = torch.tensor(rhos, dtype=f64, device=device)
        sv_codes = codes_t[order]
        dual = torch.zeros(max(k - 1, 1), order.numel(), dtype=f64, device=device)
        pair = 0
        for i in range(k):
            for j in range(i + 1, k):
                ci, cj = sv_codes == i, sv_codes == j
                dual[j - 1, ci] = self._pair_coef[ci, pair]
                dual[i, cj] = self._pair_coef[cj, pair]
                pair += 1
        if k == 2:
            self.dual_coef_ = -dual
            self.intercept_ = self._rho.clone()
        else:
            self.dual_coef_ = dual
            self.intercept_ = -self._rho
        self.n_iter_ = int(max(iters))
        self.fit_status_ = 0  # scikit-learn's: 0 = fitted (a failure raises here)
        self.solver_ = "libsvm" if inners == {"libsvm"} else "smo (" + ", ".join(sorted(inners)) + ")"
        return self

    def _fit_platt(self, K, codes_t, keep, sw, weights, classes, solve):
        """Platt's sigmoid (A, B) of every pair, fitted to decision values from a 5-fold
        cross-validation on the pair's samples, as LIBSVM: its sample order (class i,
        then class j), its random folds for ``random_state``, its C per sample."""
        f64, device = torch.float64, K.device
        seed = libsvm_seed(self.random_state)
        k = classes.size
        As, Bs = [], []
        for i in range(k):
            for j in range(i + 1, k):
                gi, gj = codes_t == i, codes_t == j
                if keep is not None:
                    gi, gj = gi & keep, gj & keep
                idx = torch.cat([torch.nonzero(gi).squeeze(1), torch.nonzero(gj).squeeze(1)])
                ni, nj = int(gi.sum()), int(gj.sum())
                ys = torch.cat([torch.ones(ni, dtype=f64), -torch.ones(nj, dtype=f64)]).to(device)
                Cs = torch.cat([torch.full((ni,), self.C * weights[i], dtype=f64),
                                torch.full((nj,), self.C * weights[j], dtype=f64)]).to(device)
                if sw is not None:
                    Cs = Cs * sw[idx]
                order = torch.as_tensor(fold_order(idx.numel(), seed), device=device)
                dec = torch.zeros(idx.numel(), dtype=f64, device=device)
                for f, (b, e) in enumerate(fold_bounds(idx.numel())):
                    test, train = order[b:e], torch.cat([order[:b], order[e:]])
                    yt = ys[train]
                    if train.numel() == 0:
                        continue  # decision 0
                    if bool((yt > 0).all()) or bool((yt < 0).all()):
                        dec[test] = yt[0]
                        continue
                    sol = solve(K, idx[train], yt, -torch.ones_like(yt), Cs[train],
                                desc=f"SVC {classes[i]} vs {classes[j]} (probability, "
                                     f"fold {f + 1}/5)")
                    coef = yt * sol.alpha
                    sv = torch.nonzero(coef).squeeze(1)
                    cols, c_sv = idx[train][sv], coef[sv]
                    step = K.block_rows(max(1, cols.numel()))  # O(block) memory, lazy K too
                    for r0 in range(0, test.numel(), step):
                        rows = test[r0:r0 + step]
                        dec[rows] = K.submatrix(idx[rows], cols).to(f64) @ c_sv - sol.rho
                A, B = fit_sigmoid(dec.cpu().numpy(), ys.cpu().numpy())
                As.append(A)
                Bs.append(B)
        return torch.tensor(As, dtype=f64), torch.tensor(Bs, dtype=f64)

    def _use_libsvm(self, K) -> bool:
        if self.solver not in ("auto", "smo", "smo-device", "libsvm"):
            raise ValueError(f"solver must be 'auto', 'smo', 'smo-device' or 'libsvm', "
                             f"got {self.solver!r}")
        if self.solver != "auto":
            return self.solver == "libsvm"
        return (isinstance(K, DenseKernelMatrix) and K.device.type == "cpu"
                and K.shape[0] <= _LIBSVM_MAX_N)

    def _solve_libsvm(self, K, sub, y, p, C, desc=None) -> _LibsvmSolution:
        """One binary C-SVM dual by LIBSVM on the dense rows ``sub`` of K."""
        from sklearn.svm import SVC as _LibSVC
        K_np = K.to_dense() if sub is None else K.submatrix(sub, sub)
        K_np = K_np.detach().to(torch.float64).cpu().numpy()
        y_np, C_np = y.cpu().numpy(), C.cpu().numpy()
        c0 = float(C_np.max())
        max_iter = -1 if self.max_iter in (None, -1) else self.max_iter
        # Our positive class is passed as -1: scikit-learn sorts the labels, so LIBSVM then
        # sees it first, as in its own one-vs-one training — the same solver path, the
        # same optimum to the last digit. Its decision K c + b is positive for +1 (ours −).
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", _SkConvergenceWarning)
            m = _LibSVC(kernel="precomputed", C=c0, tol=float(self.tol),
                        cache_size=self.cache_size, max_iter=max_iter).fit(
                K_np, -y_np, sample_weight=C_np / c0)
        if any(issubclass(w.category, _SkConvergenceWarning) for w in caught):
            warnings.warn(f"{desc or 'SVC'}: LIBSVM did not converge within "
                          f"max_iter={max_iter} (KKT gap above tol={self.tol})",
                          ConvergenceWarning, stacklevel=3)
        coef = torch.zeros(y.shape[0], dtype=torch.float64)
        coef[torch.as_tensor(m.support_)] = -torch.as_tensor(m.dual_coef_[0])
        coef = coef.to(y.device)
        return _LibsvmSolution(alpha=coef * y, rho=float(m.intercept_[0]),
                               n_iter=int(m.n_iter_[0]))

    def _ovo(self, X):
        check_fitted(self, "dual_coef_")
        with torch.no_grad():
            dec = self._test_gram_times(X, self._pair_coef)
            return dec - self._rho.to(dtype=dec.dtype, device=dec.device)

    def decision_function(self, X):
        """Signed distances: (m,) for two classes (positive → ``classes_[1]``), else
        (m, n_classes) for ``"ovr"`` or (m, n_pairs) for ``"ovo"``."""
        dec = self._ovo(X)
        k = self.classes_.size
        if k == 2:
            return -dec[:, 0]
        if self.decision_function_shape == "ovo":
            return dec
        return _ovr_scores(dec, k)

    @available_if(_has_probability)
    def predict_proba(self, X):
        """Class probabilities (m, n_classes), columns in ``classes_`` order (only with
        ``probability=True``): each pair's sigmoid of its decision value, clipped to
        [1e-7, 1 − 1e-7], then coupled over the pairs (Wu, Lin and Weng 2004) — LIBSVM's
        estimates. As in scikit-learn they may disagree with ``predict`` (votes)."""
        return self._proba(X)

    @available_if(_has_probability)
    def predict_log_proba(self, X):
        """log of :meth:`predict_proba` (only with ``probability=True``)."""
        return torch.log(self._proba(X))

    def _proba(self, X):
        dec = self._ovo(X)
        k = self.classes_.size
        R = torch.zeros(dec.shape[0], k, k, dtype=torch.float64, device=dec.device)
        A, B = self.probA_.to(dec.device), self.probB_.to(dec.device)
        pair = 0
        for i in range(k):
            for j in range(i + 1, k):
                r = sigmoid(dec[:, pair].to(torch.float64), A[pair], B[pair])
                R[:, i, j], R[:, j, i] = r, 1 - r
                pair += 1
        return couple(R).to(dec.dtype)

    def predict(self, X):
        """One-vs-one votes (LIBSVM): pair (i, j) votes i when its decision is > 0; with
        ``break_ties`` (and more than two classes) the argmax of the "ovr" scores."""
        # an SVC pickled before break_ties existed has no such attribute: False, as then
        break_ties = check_bool(getattr(self, "break_ties", False), "break_ties")
        if break_ties and self.decision_function_shape == "ovo":
            raise ValueError("break_ties must be False when decision_function_shape is 'ovo'")
        dec = self._ovo(X)
        k = self.classes_.size
        if break_ties and k > 2:
            return decode_labels(self.classes_, _ovr_scores(dec, k).argmax(1))
        votes = torch.zeros(dec.shape[0], k, dtype=torch.long, device=dec.device)
        pair = 0
        for i in range(k):
            for j in range(i + 1, k):
                win = dec[:, pair] > 0
                votes[:, i] += win
                votes[:, j] += ~win
                pair += 1
        # argmax of the first maximum: LIBSVM's tie rule.
        best = (votes == votes.max(1, keepdim=True).values).to(torch.int8).argmax(1)
        return decode_labels(self.classes_, best)


def _ovr_scores(dec, k):
    """scikit-learn's "ovr" view of one-vs-one values: votes per class plus the summed
    confidences squashed into (−1/3, 1/3), so that the ranking follows the votes."""
    votes = torch.zeros(dec.shape[0], k, dtype=dec.dtype, device=dec.device)
    conf = torch.zeros_like(votes)
    pair = 0
    for i in range(k):
        for j in range(i + 1, k):
            d = dec[:, pair]
            votes[:, i] += (d >= 0).to(dec.dtype)
            votes[:, j] += (d < 0).to(dec.dtype)
            conf[:, i] += d
            conf[:, j] -= d
            pair += 1
    return votes + conf / (3 * (conf.abs() + 1))


class SVR(RegressorMixin, _BaseSVM):
    r"""ε-support vector regression, solved on the lazy Gram matrix.

    Solves LIBSVM's ε-SVR dual in 2n variables (α, α*) (Smola & Schölkopf 2004)

    .. math::

        \min_{\alpha,\alpha^*}\ \tfrac12 (\alpha-\alpha^*)^\top K (\alpha-\alpha^*)
        + \varepsilon \sum_i (\alpha_i + \alpha_i^*) - \sum_i z_i (\alpha_i - \alpha_i^*)
        \quad\text{s.t.}\quad \sum_i (\alpha_i - \alpha_i^*) = 0,\ 0 \le \alpha, \alpha^* \le C,

    and predicts f(x) = Σ_i (α_i − α*_i) k(x_i, x) + b. Same decomposition solver,
    cache and stopping rule as :class:`SVC` (the 2n variables share n kernel rows).

    Parameters
    ----------
    kernel : Kernel, None or "precomputed"
        The kernel (default ``RBF()``).
    C : float
        Penalty on deviations beyond ε, > 0.
    epsilon : float
        Half-width of the insensitive tube, ≥ 0.
    tol, max_iter, cache_size, working_set_size, verbose, backend
        As in :class:`SVC`.

    Attributes
    ----------
    support_ : torch.Tensor
        Indices with α_i ≠ α*_i (int32, as scikit-learn's).
    support_vectors_ : torch.Tensor, KernelInput or None
        Their inputs (None for a precomputed kernel); for structured inputs the support
        items only.
    fit_status_ : int
        0: fitted (scikit-learn's attribute; a failed fit raises instead).
    dual_coef_ : torch.Tensor
        (1, n_SV), α_i − α*_i.
    intercept_ : torch.Tensor
        (1,), b = −ρ.
    n_iter_ : int
        Outer iterations.
    kernel_ : Kernel or str

    Notes
    -----
    Cost as :class:`SVC` with 2n variables and n kernel rows; memory O(n · cache_size).

    References
    ----------
    A. Smola and B. Schölkopf, "A tutorial on support vector regression", 2004.
    C.-C. Chang and C.-J. Lin, "LIBSVM", ACM TIST 2011.

    Examples
    --------
    >>> import torch, torchkern
    >>> X = torch.linspace(0, 3, 30, dtype=torch.float64)[:, None]
    >>> reg = torchkern.SVR(torchkern.RBF(lengthscale=1.0), C=10.0, epsilon=0.05)
    >>> err = (reg.fit(X, torch.sin(X[:, 0])).predict(X) - torch.sin(X[:, 0])).abs().max()
    >>> bool(err < 0.06)
    True
    """

    def __init__(self, kernel=None, C=1.0, epsilon=0.1, *, tol=1e-3, max_iter=None,
                 cache_size=200, working_set_size=256, verbose=False, backend=None):
        self.kernel = kernel
        self.C = C
        self.epsilon = epsilon
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.working_set_size = working_set_size
        self.verbose = verbose
        self.backend = backend

    def fit(self, X, y, sample_weight=None):
        """Fit on X — any input of the kernel, or the (n, n) Gram when precomputed — and
        targets y (n,). ``sample_weight`` (n,) multiplies C per sample (scikit-learn's
        convention); samples of weight ≤ 0 are left out."""
        self._check_params()
        check_positive(self.epsilon, "epsilon", allow_zero=True)
        X, K = self._train_gram(X)
        n = K.shape[0]
        z = as_vector(y, "y", n=n)
        if z.dim() == 2:
            if z.shape[1] != 1:
                raise ValueError(f"y must be 1-D (one target), got shape {tuple(z.shape)}")
            warn_column_vector()
            z = z[:, 0]
        f64 = torch.float64
        device = K.device
        z = z.to(dtype=f64, device=device)
        sw, keep = self._sample_weight(sample_weight, n, device)
        sub = None if keep is None else torch.nonzero(keep).squeeze(1)
        nk = n if sub is None else sub.numel()
        with torch.no_grad():
            zk = z if sub is None else z[sub]
            ones = torch.ones(nk, dtype=f64, device=device)
            ys = torch.cat([ones, -ones])
            p = torch.cat([self.epsilon - zk, self.epsilon + zk])
            Ck = torch.full((nk,), float(self.C), dtype=f64, device=device)
            if sw is not None:
                Ck = Ck * (sw if sub is None else sw[sub])
            kidx = torch.cat([torch.arange(nk, device=device)] * 2)
            sol = self._solve(K, sub, ys, p, torch.cat([Ck, Ck]), kidx=kidx, desc="SVR")
        coef = sol.alpha[:nk] - sol.alpha[nk:]
        if sub is not None:
            coef = torch.zeros(n, dtype=f64, device=device).index_copy_(0, sub, coef)
        support = torch.nonzero(coef).squeeze(1)
        self.support_ = support.to(torch.int32)
        self.support_vectors_ = self._support_vectors(X, support)
        self.dual_coef_ = coef[support][None, :]
        self.intercept_ = torch.tensor([-sol.rho], dtype=f64, device=device)
        self.n_support_ = torch.tensor([support.numel()], dtype=torch.int32)
        self.n_iter_ = sol.n_iter
        self.fit_status_ = 0
        return self

    def predict(self, X):
        """f(x) = Σ_i (α_i − α*_i) k(x_i, x) + b, shape (m,)."""
        check_fitted(self, "dual_coef_")
        with torch.no_grad():
            out = self._test_gram_times(X, self.dual_coef_[0])
            return out + self.intercept_.to(dtype=out.dtype, device=out.device)
