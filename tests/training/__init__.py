"""Tests of scalestudy.training."""
