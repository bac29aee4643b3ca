"""Tests of the scripts in tools/."""
