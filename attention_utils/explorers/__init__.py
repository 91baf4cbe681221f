"""Explorers: the drawing code of each lesson's interactive figures, so a lesson calls one in one line."""
