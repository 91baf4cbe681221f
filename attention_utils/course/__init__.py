"""The course's workshop: what builds, measures and publishes the series; lessons never import it.

publish.py (one-language and student copies, clean runs), site.py (slides, site, JupyterLab copies),
figures.py (the figures in figures/), templates/ (nbconvert) and bench/ (the benchmark).
"""
