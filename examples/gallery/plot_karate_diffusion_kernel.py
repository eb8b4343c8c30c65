"""
Diffusion kernels on the nodes of a graph: the karate club
==========================================================

Zachary's karate club (Zachary 1977, "An information flow model for conflict and fission
in small groups", J. Anthropol. Res. 33): 34 members, 78 friendships. torch-geometric's
copy (``torch_geometric.datasets.KarateClub``, shipped with the package) labels each
member with one of four communities, and marks one member of each as known.

From those four labels, kernel ridge regression with the diffusion kernel
K = exp(−βL) on the graph Laplacian L (Kondor and Lafferty 2002, "Diffusion kernels on
graphs and other discrete input spaces", ICML) predicts the other 30 members' communities:
the kernel spreads each label along the edges, for a time β.
"""

# %%
import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import torch
from torch_geometric.datasets import KarateClub
from torch_geometric.utils import to_networkx

import torchkern as tk
from torchkern.graphs import DiffusionKernel

data = KarateClub()[0]
y = data.y.numpy()
labelled = data.train_mask.nonzero().ravel()
unlabelled = (~data.train_mask).nonzero().ravel()
print(f"{data.num_nodes} members, {data.num_edges // 2} friendships, "
      f"{len(np.unique(y))} communities; labelled members: {labelled.tolist()}")

# %%
# One-vs-rest kernel ridge regression on node indices: the targets are the one-hot
# community labels of the four known members; a member's predicted community is the
# column of largest prediction. The kernel holds the graph; its inputs are node indices.
onehot = torch.nn.functional.one_hot(data.y[labelled], 4).double()


def predict(beta, laplacian="normalized"):
    k = DiffusionKernel(beta=beta, laplacian=laplacian, graph=data)
    model = tk.KernelRidge(kernel=k, alpha=1e-3).fit(labelled, onehot)
    return model.predict(torch.arange(data.num_nodes)).argmax(1).numpy()


betas = np.geomspace(0.1, 30, 13)
accuracy = {lap: [np.mean(predict(b, lap)[unlabelled] == y[unlabelled]) for b in betas]
            for lap in ("normalized", "combinatorial")}
best = betas[int(np.argmax(accuracy["normalized"]))]
pred = predict(best)
print(f"normalized Laplacian, β = {best:.2f}: {np.mean(pred[unlabelled] == y[unlabelled]):.3f} "
      f"of the {len(unlabelled)} unlabelled members in their community")

# %%
# Left: the members coloured by predicted community (ringed: a wrong prediction; large:
# the four labelled members). Right: the accuracy on the unlabelled members against the
# diffusion time β, for both Laplacians — too short a time leaves far members with no
# label, too long a time blurs the communities together.
G = to_networkx(data, to_undirected=True)
pos = nx.spring_layout(G, seed=3)
fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), width_ratios=[1.2, 1])
ax = axes[0]
nx.draw_networkx_edges(G, pos, ax=ax, alpha=0.3)
wrong = pred != y
sizes = np.where(data.train_mask.numpy(), 420, 160)
nx.draw_networkx_nodes(G, pos, ax=ax, node_color=[f"C{c}" for c in pred], node_size=sizes,
                       edgecolors=np.where(wrong, "black", "white"), linewidths=2)
nx.draw_networkx_labels(G, pos, ax=ax, font_size=7)
ax.set_title(f"predicted communities, diffusion β = {best:.2f} "
             f"({int(wrong[unlabelled].sum())} wrong of {len(unlabelled)})")
ax.axis("off")
ax = axes[1]
for lap, acc in accuracy.items():
    ax.semilogx(betas, acc, marker="o", ms=3, label=f"{lap} Laplacian")
ax.set_xlabel("diffusion time β")
ax.set_ylabel("accuracy on the 30 unlabelled members")
ax.set_ylim(0, 1.02)
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()
