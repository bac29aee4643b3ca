"""Tests of scalestudy.analysis.frontier."""
