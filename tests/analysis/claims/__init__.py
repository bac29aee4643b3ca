"""Tests of scalestudy.analysis.claims."""
