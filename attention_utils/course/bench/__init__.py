"""The benchmark of the series: implementations, the process-isolating harness, and the report.

Run it with `make bench` (python -m attention_utils.course.bench); the lessons never import it,
they read its saved results through `attention_utils.results`.
"""
