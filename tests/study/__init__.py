"""Tests of scalestudy.study: a study before it runs."""
