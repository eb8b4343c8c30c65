"""
Kernels inside a model: a kernel layer and an MMD loss
======================================================

torchkern's kernels are ``nn.Module``\\ s, so they can sit inside a network and train
with it by backpropagation.

1. :class:`torchkern.learning.KernelLayer` is an RBF-network layer
   f(x) = Σ_j k(x, c_j) W_j + b (Broomhead and Lowe 1988; Moody and Darken 1989) whose
   centres c_j, weights W and lengthscale all learn. Here it is the head of a digit
   classifier, on top of a linear map of the 8 × 8 images to the plane, so the learned
   centres can be drawn.
2. :class:`torchkern.learning.MMDLoss` is the squared maximum mean discrepancy between two
   samples as a loss (Gretton et al. 2012, JMLR 13). A small generator network trained to
   minimize it against real data is a generative moment-matching network (Li, Swersky
   and Zemel 2015, ICML).

Data: scikit-learn's digits (1,797 images) and breast-cancer sets.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split
from torch import nn

import torchkern as tk
from torchkern.learning import KernelLayer, MMDLoss

torch.manual_seed(0)
digits = load_digits()
X = torch.as_tensor(digits.data / 16.0, dtype=torch.float32)
y = torch.as_tensor(digits.target)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)

# %%
# The classifier: a linear map to 2 dimensions, then a kernel layer with 30 centres and
# 10 outputs (one score per digit). Adam on the cross-entropy, full batch.
model = nn.Sequential(
    nn.Linear(64, 2),
    KernelLayer(tk.RBF(lengthscale=1.0), n_centers=30, in_features=2, out_features=10,
                random_state=0),
)
opt = torch.optim.Adam(model.parameters(), lr=0.03)
train_loss, test_acc = [], []
for epoch in range(150):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(X_train), y_train)
    loss.backward()
    opt.step()
    train_loss.append(loss.item())
    if epoch % 10 == 9:
        with torch.no_grad():
            test_acc.append((model(X_test).argmax(1) == y_test).float().mean().item())
head = model[1]
print(f"test accuracy {test_acc[-1]:.3f} after {len(train_loss)} epochs; "
      f"learned lengthscale {head.kernel.lengthscale.item():.3f}")

# %%
# The generator: noise z ~ N(0, I₂) through a network with two hidden layers, trained
# so that its samples match two standardized features of the breast-cancer data (mean
# radius and mean texture) in MMD, with a sum of RBF kernels at three scales; minibatches
# of 200 (the unbiased estimate is noisy from batch to batch, and can be negative).
bc = load_breast_cancer()
real = bc.data[:, [0, 1]]
real = torch.as_tensor((real - real.mean(0)) / real.std(0), dtype=torch.float32)
generator = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 2))
kernel = tk.RBF(0.2) + tk.RBF(0.5) + tk.RBF(1.5)
kernel.requires_grad_(False)  # a fixed kernel: only the generator learns
mmd = MMDLoss(kernel)
opt = torch.optim.Adam(generator.parameters(), lr=3e-3)
mmd_history = []
for step in range(200):
    opt.zero_grad()
    batch = real[torch.randint(len(real), (200,))]
    loss = mmd(generator(torch.randn(200, 2)), batch)
    loss.backward()
    opt.step()
    mmd_history.append(loss.item())
with torch.no_grad():
    fake = generator(torch.randn(len(real), 2))
    print(f"MMD² between generated and real samples: {mmd_history[0]:.4f} at the start, "
          f"{float(mmd(fake, real)):.4f} after {len(mmd_history)} steps")

# %%
# Left: the test digits in the learned plane, coloured by digit, with the kernel layer's
# centres (black crosses). Middle: the classifier's training curves. Right: real and
# generated samples. Far right: the MMD² loss during training.
with torch.no_grad():
    Z = model[0](X_test).numpy()
    C = head.centers.numpy()
fig, axes = plt.subplots(1, 4, figsize=(16, 4))
sc = axes[0].scatter(*Z.T, c=y_test.numpy(), cmap="tab10", s=6)
axes[0].scatter(*C.T, marker="x", color="black", s=40, label="centres c_j")
axes[0].legend(loc="upper right", fontsize=8)
fig.colorbar(sc, ax=axes[0], label="digit")
axes[0].set_title("learned 2-D features and centres")
axes[1].plot(train_loss, label="training cross-entropy")
axes[1].plot(np.arange(9, len(train_loss), 10), test_acc, marker="o", ms=3,
             label="test accuracy")
axes[1].set_xlabel("epoch")
axes[1].set_title("KernelLayer classifier")
axes[1].legend()
axes[2].scatter(*real.numpy().T, s=6, color="0.5", label="real")
axes[2].scatter(*fake.numpy().T, s=6, color="C3", label="generated")
axes[2].set_xlabel("mean radius (standardized)")
axes[2].set_ylabel("mean texture (standardized)")
axes[2].set_title("moment matching with MMDLoss")
axes[2].legend(fontsize=8)
axes[3].semilogy(np.maximum(mmd_history, 1e-5))
axes[3].set_xlabel("step")
axes[3].set_ylabel("MMD² (unbiased)")
axes[3].set_title("generator loss")
fig.tight_layout()
plt.show()
