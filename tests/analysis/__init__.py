"""Tests of scalestudy.analysis (torch-free: collected where torch is missing)."""
