"""Figures for the series, one module per kind: heatmaps, 3D vectors, labelled points, and the fonts they use.

`fonts` sets the language of plot text and a Chinese font that works offline; `heatmaps` draws attention
weights as grids (lessons 1-8, 12); `vectors_3d` draws embeddings as arrows (lessons 2-3); `labels` writes
labels beside points without overlap (figures of lessons 14 on); `arguments` checks what all of them take.
"""
