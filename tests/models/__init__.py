"""Tests of scalestudy.models: the registry-wide checks, then one file per mechanism."""
