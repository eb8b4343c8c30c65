"""
Learning a lengthscale, and learning a weighting of kernels
===========================================================

Kernels in torchkern are ``nn.Module``\\ s whose hyperparameters are differentiable, so
they can be learned by gradient rather than by a grid search.

1. One lengthscale: :class:`torchkern.KernelRidge` fitted with ``learn_kernel="loo"``
   minimizes the closed-form leave-one-out error of kernel ridge regression (Wahba 1990,
   *Spline Models for Observational Data*; Cawley and Talbot 2004) over the RBF
   lengthscale by L-BFGS-B, on scikit-learn's diabetes data.
2. A weighting: :class:`torchkern.SimpleMKL` (Rakotomamonjy, Bach, Canu and Grandvalet
   2008, "SimpleMKL", JMLR 9) learns the weights η of a sum Σ_m η_m k_m of kernels, one
   kernel per kind of cell-nucleus measurement of scikit-learn's breast-cancer data,
   with an SVM: the weights say which measurements the classifier uses.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import torchkern as tk
from torchkern.learning import loo_error

X, y = load_diabetes(return_X_y=True)
X = torch.as_tensor(StandardScaler().fit_transform(X))
y = torch.as_tensor((y - y.mean()) / y.std())
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)

model = tk.KernelRidge(tk.RBF(lengthscale=1.0), alpha=0.3).fit(X_train, y_train,
                                                                learn_kernel="loo")
res = model.learn_kernel_result_
ell = float(model.kernel_.lengthscale.detach())
mse = float(((model.predict(X_test) - y_test) ** 2).mean())
print(f"learned lengthscale {ell:.3f} in {res.n_iter} L-BFGS-B iterations "
      f"(converged: {res.converged}); test MSE {mse:.3f} (standardized target)")

# %%
# The objective on a grid of lengthscales, for comparison: the learned value sits at its
# minimum.
grid = np.geomspace(0.3, 100, 30)
with torch.no_grad():
    loo = [float(loo_error(tk.RBF(lengthscale=float(g)), X_train, y_train, 0.3)) for g in grid]

# %%
# SimpleMKL: breast-cancer data (569 tumours, 30 standardized features: ten measurements
# of the cell nuclei — radius, texture, ... — each as a mean, a standard error and a
# worst value). One RBF kernel per measurement on its three columns (``active_dims``).
data = load_breast_cancer()
Xb = StandardScaler().fit_transform(data.data)
measurements = [n.replace("mean ", "") for n in data.feature_names[:10]]
kernels = [tk.RBF(lengthscale=2.0, active_dims=[j, j + 10, j + 20]) for j in range(10)]
Xb_train, Xb_test, yb_train, yb_test = train_test_split(Xb, data.target, test_size=0.3,
                                                        random_state=0,
                                                        stratify=data.target)
mkl = tk.SimpleMKL(kernels, estimator="svc", C=1.0, max_iter=10).fit(Xb_train, yb_train)
eta = np.asarray(mkl.weights_)
uniform = tk.SVC(kernel=tk.learning.MultipleKernel(kernels, weights="fixed"), C=1.0)
uniform.fit(Xb_train, yb_train)
print(f"SimpleMKL: {mkl.n_iter_} steps, test accuracy {mkl.score(Xb_test, yb_test):.3f} "
      f"(uniform weights: {uniform.score(Xb_test, yb_test):.3f})")
print("largest weights:", ", ".join(f"{measurements[i]} {eta[i]:.2f}"
                                    for i in np.argsort(eta)[::-1][:3]))

# %%
# Left: the leave-one-out error against the lengthscale, and where L-BFGS-B stopped.
# Middle: the objective at each L-BFGS-B iteration. Right: the learned kernel weights.
fig, axes = plt.subplots(1, 3, figsize=(14, 4), width_ratios=[1, 0.8, 1.1])
axes[0].semilogx(grid, loo, color="0.3", label="LOO error on a grid")
axes[0].plot([ell], [float(res.loss)], "o", color="C3", ms=8,
             label=f"learned ℓ = {ell:.2f}")
axes[0].set_xlabel("RBF lengthscale ℓ")
axes[0].set_ylabel("leave-one-out squared error")
axes[0].set_title("diabetes: KernelRidge, α = 0.3")
axes[0].legend()
axes[1].plot(np.arange(len(res.history)), res.history, marker="o", color="C3")
axes[1].set_xlabel("L-BFGS-B iteration")
axes[1].set_ylabel("LOO error")
axes[1].set_title("learn_kernel='loo' from ℓ = 1")
order = np.argsort(eta)
axes[2].barh(np.array(measurements)[order], eta[order], color="C0")
axes[2].set_xlabel("SimpleMKL weight η_m")
axes[2].set_title(f"breast cancer: SVM, {len(kernels)} kernels")
fig.tight_layout()
plt.show()
