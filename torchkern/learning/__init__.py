"""Learning kernels by gradient, multiple kernel learning, and kernels inside models.

- differentiable objectives (:mod:`~torchkern.learning.objectives`):
  :func:`log_marginal_likelihood`, :func:`kernel_alignment`, :func:`loo_error`,
  :func:`gcv`, :func:`kernel_ridge_predict`, :func:`mmd_test_power`, :func:`sgpr_bound`,
  :func:`nystrom_complexity_reg`;
- :func:`fit_kernel`, which minimizes an objective over hyperparameters (L-BFGS-B on
  log-hyperparameters to convergence, or any ``torch.optim`` optimizer; restarts) and
  returns a :class:`KernelLearningResult`, and :func:`learn_kernel`, which learns an
  estimator's kernel (leave-one-out, GCV, holdout, alignment, likelihood) and fits it;
- :class:`MultipleKernel` (learnable weights on the simplex) and :class:`SimpleMKL`;
- :class:`KernelLayer` and :class:`MMDLoss`, ``nn.Module`` layers for models.

See ``docs/learning.md``.
"""
from .estimator import learn_kernel
from .fit import KernelLearningResult, fit_kernel
from .layers import KernelLayer, MMDLoss
from .mkl import MultipleKernel, SimpleMKL
from .objectives import (gcv, kernel_alignment, kernel_ridge_predict, log_marginal_likelihood,
                         loo_error, mmd_test_power, nystrom_complexity_reg,
                         sgpr_bound)

__all__ = [
    "log_marginal_likelihood", "kernel_alignment", "loo_error", "gcv",
    "kernel_ridge_predict", "mmd_test_power", "sgpr_bound", "nystrom_complexity_reg",
    "fit_kernel", "learn_kernel", "KernelLearningResult", "MultipleKernel", "SimpleMKL",
    "KernelLayer", "MMDLoss",
]
