from .classification import KernelLogisticRegression
from .svm import SVC, SVR
from .ridge import KernelRidge
from .gp import GaussianProcessRegressor
from .mkl import AverageMKL, CKA, EasyMKL, FHeuristic, SimpleMKL

__all__ = ["KernelRidge", "GaussianProcessRegressor", "KernelLogisticRegression", "SVC", "SVR",
           "SimpleMKL", "EasyMKL", "AverageMKL", "FHeuristic", "CKA"]
