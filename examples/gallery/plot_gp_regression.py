"""
Gaussian-process regression: uncertainty bands and learned relevances
=====================================================================

:class:`torchkern.GaussianProcessRegressor` on scikit-learn's diabetes data (442
patients, 10 standardized features, a measure of disease progression one year later).

First one feature, the body-mass index, to draw the posterior mean with its ±2σ band.
Then all ten features with an ARD kernel — one lengthscale ℓ_j per feature — whose
hyperparameters and noise variance are learned by maximizing the log marginal likelihood
(Rasmussen and Williams 2006, §5.4): a large 1/ℓ_j marks a feature the fit relies on.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

import torchkern as tk

data = load_diabetes()
X, y = data.data, data.target
names = data.feature_names

# %%
# One feature: disease progression against body-mass index. The kernel is
# c · k_RBF + σ² noise; ``optimize=True`` learns c, ℓ and σ², ``normalize_y`` fits the
# standardized target and maps predictions back.
bmi = X[:, [names.index("bmi")]]
gp1 = tk.GaussianProcessRegressor(kernel=1.0 * tk.RBF(lengthscale=0.05), noise=0.5,
                                  normalize_y=True).fit(bmi, y, optimize=True)
grid = np.linspace(bmi.min(), bmi.max(), 200)[:, None]
mean, std = (np.asarray(t) for t in gp1.predict(grid, return_std=True))
print(f"BMI only: lengthscale {gp1.kernel_.base.lengthscale.item():.3f}, "
      f"noise variance {gp1.noise_:.3f} (standardized units)")

# %%
# All ten features with ARD, on a train/test split.
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
ard = 1.0 * tk.RBF(lengthscale=torch.full((X.shape[1],), 0.1, dtype=torch.float64))
gp = tk.GaussianProcessRegressor(kernel=ard, noise=0.5, normalize_y=True)
gp.fit(X_train, y_train, optimize=True)
print(f"ARD: test R² {gp.score(X_test, y_test):.3f}, "
      f"log marginal likelihood {float(gp.log_marginal_likelihood()):.1f}")
relevance = 1.0 / gp.kernel_.base.lengthscale.detach().numpy().ravel()
for name, r in sorted(zip(names, relevance), key=lambda t: -t[1]):
    print(f"  {name:4s} 1/ℓ = {r:7.2f}")

# %%
# The same model in scikit-learn (constant × RBF + white noise) reaches the same optimum:
import warnings  # noqa: E402

from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.gaussian_process import GaussianProcessRegressor  # noqa: E402
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel  # noqa: E402

sk = GaussianProcessRegressor(ConstantKernel() * RBF(np.full(X.shape[1], 0.1))
                              + WhiteKernel(0.5), normalize_y=True)
with warnings.catch_warnings():  # s2, s4, s6 stop at scikit-learn's lengthscale bound
    warnings.simplefilter("ignore", ConvergenceWarning)
    sk.fit(X_train, y_train)
print(f"scikit-learn: test R² {sk.score(X_test, y_test):.3f}, "
      f"log marginal likelihood {sk.log_marginal_likelihood_value_:.1f}")

# %%
# Left: the posterior mean and ±2 standard deviations of the latent function, over the
# data. Right: the learned relevances 1/ℓ_j.
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2))
ax0.scatter(bmi[:, 0], y, s=8, color="0.6", label="patients")
ax0.plot(grid[:, 0], mean, color="C0", label="posterior mean")
ax0.fill_between(grid[:, 0], mean - 2 * std, mean + 2 * std, color="C0", alpha=0.25,
                 label="±2σ (latent f)")
ax0.set_xlabel("body-mass index (standardized)")
ax0.set_ylabel("disease progression")
ax0.legend(loc="upper left")
ax0.set_title("GP on one feature")

order = np.argsort(relevance)
ax1.barh(np.array(names)[order], relevance[order], color="C1")
ax1.set_xlabel("relevance 1/ℓ_j")
ax1.set_title("ARD: learned relevance of each feature")
fig.tight_layout()
plt.show()
