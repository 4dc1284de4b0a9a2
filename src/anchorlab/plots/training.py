"""Training-curve figures (draw only; data comes from run histories)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure


def plot_ood_over_training(histories: dict[str, pd.DataFrame], gammas: dict[str, float] | None = None) -> Figure:
    """Held-out-pair accuracy under the inferential and symmetric hypotheses vs step, one panel per run."""
    fig = Figure(figsize=(5 * len(histories), 3.6))
    axes = fig.subplots(1, len(histories), squeeze=False, sharey=True)
    for ax, (label, h) in zip(axes[0], histories.items()):
        ax.plot(h.step, h.ood_inferential_acc, label="OOD: inferential", color="tab:blue")
        ax.plot(h.step, h.ood_symmetric_acc, label="OOD: symmetric", color="tab:red")
        ax.plot(h.step, h.id_acc, label="ID (seen pairs, test keys)", color="0.5", ls="--")
        g = f" (gamma={gammas[label]})" if gammas and label in gammas else ""
        ax.set_title(f"{label}{g}")
        ax.set_xlabel("step")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("accuracy")
    axes[0][-1].legend(loc="center right", fontsize=8)
    fig.tight_layout()
    return fig


def plot_training_curves(history: pd.DataFrame, metrics: tuple[str, ...] = (
        "train_acc", "id_acc", "ood_inferential_acc", "ood_symmetric_acc")) -> Figure:
    """Loss (left) and chosen accuracies (right) of one run over steps."""
    fig = Figure(figsize=(10, 3.6))
    a1, a2 = fig.subplots(1, 2)
    a1.plot(history.step, history.train_loss)
    a1.set_yscale("log")
    a1.set_xlabel("step")
    a1.set_ylabel("train loss")
    for m in metrics:
        if m in history:
            a2.plot(history.step, history[m], label=m)
    a2.set_xlabel("step")
    a2.set_ylim(-0.02, 1.02)
    a2.legend(fontsize=8)
    for a in (a1, a2):
        a.grid(alpha=0.3)
    fig.tight_layout()
    return fig
