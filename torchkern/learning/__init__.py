"""Learning kernels by gradient, multiple kernel learning, and kernels inside models.

- differentiable objectives (:mod:`~torchkern.learning.objectives`):
  :func:`log_marginal_likelihood`, :func:`log_posterior` (MAP, with the hyperparameters'
  priors) and :func:`log_prior`, :func:`kernel_alignment`, :func:`loo_error`,
  :func:`gcv`, :func:`kernel_ridge_predict`, :func:`mmd_test_power`, :func:`sgpr_bound`,
  :func:`nystrom_complexity_reg`;
- :func:`fit_kernel`, which minimizes an objective over hyperparameters (L-BFGS-B on
  log-hyperparameters to convergence, or any ``torch.optim`` optimizer; restarts) and
  returns a :class:`KernelLearningResult`, and :func:`learn_kernel`, which learns an
  estimator's kernel (leave-one-out, GCV, holdout, alignment, likelihood) and fits it;
- :class:`MultipleKernel` (learnable weights on the simplex) and the weights of a
  combination learned from Gram matrices and labels: :func:`easymkl_weights`,
  :func:`fheuristic_weights`, :func:`cka_weights`, :func:`alignf_weights` (the MKL
  estimators that wrap an SVM or a ridge, ``SimpleMKL``, ``EasyMKL``, ``AverageMKL``,
  ``FHeuristic``, ``CKA``, live in ``torchkern.supervised.mkl``, above the estimators,
  and are also ``torchkern.SimpleMKL``, ...);
- :class:`KernelLayer` and :class:`MMDLoss`, ``nn.Module`` layers for models.

See ``docs/learning.md``.
"""
from .estimator import learn_kernel
from .fit import KernelLearningResult, fit_kernel
from .layers import KernelLayer, MMDLoss
from .mkl import (MultipleKernel, alignf_weights, cka_weights, easymkl_weights,
                  fheuristic_weights)
from .objectives import (gcv, kernel_alignment, kernel_ridge_predict, log_marginal_likelihood,
                         log_posterior, log_prior, loo_error, mmd_test_power,
                         nystrom_complexity_reg, sgpr_bound)

__all__ = [
    "log_marginal_likelihood", "log_posterior", "log_prior", "kernel_alignment", "loo_error",
    "gcv",
    "kernel_ridge_predict", "mmd_test_power", "sgpr_bound", "nystrom_complexity_reg",
    "fit_kernel", "learn_kernel", "KernelLearningResult", "MultipleKernel",
    "easymkl_weights", "fheuristic_weights", "cka_weights", "alignf_weights",
    "KernelLayer", "MMDLoss",
]
