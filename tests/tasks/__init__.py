"""Tests of scalestudy.tasks: the data contract and each task."""
