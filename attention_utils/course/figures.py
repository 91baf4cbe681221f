"""Make the images that the README and the lessons show, from code: `python -m attention_utils.course.figures`.

Each figure is written once per language (name_en.png, name_zh.png) so a Chinese page shows
Chinese labels.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from ..data import TOKENS, example_inputs  # noqa: E402
from ..language import LANGUAGES, text  # noqa: E402
from ..plotting.fonts import set_language  # noqa: E402


def attention_pipeline() -> plt.Figure:
    """The running example through self-attention: inputs, scores, weights, context vectors."""
    inputs = example_inputs()
    scores = inputs @ inputs.T
    weights = torch.softmax(scores, dim=-1)
    # Titles name each matrix: A for the weights and Z for the context vectors (lesson 4's Z);
    # W is kept for the projection matrices W_q, W_k, W_v that lesson 4 introduces.
    panels = [
        (inputs, text("inputs\nX (6 × 3)", "输入\nX（6 × 3）"), ["x₁", "x₂", "x₃"]),
        (scores, text("attention scores\nX Xᵀ", "注意力分数\nX Xᵀ"), TOKENS),
        (weights, text("attention weights\nA = softmax(X Xᵀ), row by row", "注意力权重\nA = softmax(X Xᵀ)，逐行计算"), TOKENS),
        (weights @ inputs, text("context vectors\nZ = A X", "上下文向量\nZ = A X"), ["z₁", "z₂", "z₃"]),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(12.5, 5.5), layout="constrained",
                             gridspec_kw={"width_ratios": [3, 6, 6, 3]})
    for ax, (matrix, title, columns) in zip(axes, panels):
        # weights on the fixed 0-1 scale that lessons 3 and 4 teach, so near-even weights look near-even
        low, high = (0.0, 1.0) if matrix is weights else (matrix.min().item(), matrix.max().item())
        image = ax.imshow(matrix.numpy(), cmap="Blues", vmin=low, vmax=high)
        fig.colorbar(image, ax=ax, location="bottom", shrink=0.8)  # each panel says what its colours mean
        rows, cols = matrix.shape
        for i in range(rows):
            for j in range(cols):
                value = matrix[i, j].item()
                shade = "white" if value > low + 0.6 * (high - low) else "black"
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color=shade)
        ax.set_title(title, fontsize=11)
        ax.set_xticks(range(len(columns)), columns, rotation=45 if len(columns) == 6 else 0, fontsize=8)
        ax.set_yticks(range(6), TOKENS, fontsize=8)
    fig.suptitle(text("Self-attention on the running example “Your journey starts with one step”",
                      "例句“Your journey starts with one step”的自注意力"), fontsize=13)
    return fig


FIGURES = {"attention_pipeline": attention_pipeline}


def write_all(out: Path) -> list[Path]:
    """Write every figure in every language into `out`; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for language in LANGUAGES:
        set_language(language)
        for name, make in FIGURES.items():
            fig = make()
            path = out / f"{name}_{language}.png"
            fig.savefig(path, dpi=110, metadata={"Software": None})
            plt.close(fig)
            written.append(path)
    set_language("en")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description="Regenerate the figures in figures/.")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    for path in write_all(parser.parse_args().out):
        print(path)


if __name__ == "__main__":
    main()
