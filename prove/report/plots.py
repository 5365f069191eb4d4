"""The PNG plots beside results/runtime_prove.md: the correct rate per cell, and the latency
distributions (approve to outcome, resume after a crash)."""

from __future__ import annotations

from pathlib import Path

from prove.harness.scenarios import SYSTEMS
from prove.report.cells import LABEL


def make_plots(doc: dict, where: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["rows"]
    labels = [r["scenario"] + (f" {r['variant']}" if r["variant"] else "") + f" t{r['tier']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows) + 2), 4.5))
    width = 0.27
    colors = {"runtime": "#2b7bba", "temporal": "#e07b39", "temporal_check": "#7a9a3a", "dbos": "#8e5fb5"}
    for i, s in enumerate(SYSTEMS):
        xs, ys = [], []
        for j, r in enumerate(rows):
            c = r["cells"][s]
            if c:
                xs.append(j + (i - 1) * width)
                ys.append(100 * c["correct"] / c["n"])
        ax.bar(xs, ys, width, label=LABEL[s], color=colors[s])
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=70, fontsize=7)
    ax.set_ylabel("correct %")
    ax.set_ylim(0, 105)
    ax.set_title(f"Correct rate per cell (n = {doc['header']['seeds_per_cell']} per cell)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(where / "runtime_prove_correct.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric, title in (
        (axes[0], "latency_approve_to_outcome_s", "approve → outcome, every run (s)"),
        (axes[1], "resume", "resume after crash (s)"),
    ):
        data, names = [], []
        for s in SYSTEMS:
            vals = []
            for c in doc["cells"].values():
                if c["system"] != s:
                    continue
                if metric == "resume":
                    vals += c.get("_resume_values", [])
                else:
                    vals += [x for x in c[metric]["values"] if x is not None]
            data.append(vals or [float("nan")])
            names.append(LABEL[s])
        ax.boxplot(data, showfliers=True)
        ax.set_xticks(range(1, len(names) + 1))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(where / "runtime_prove_latency.png", dpi=110)
    plt.close(fig)
