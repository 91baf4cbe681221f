"""Shared fixtures: a fixed seed and thread count for every package test."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _reproducible():
    torch.manual_seed(0)
    torch.set_num_threads(2)
