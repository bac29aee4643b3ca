"""Tests of the Snakemake workflow (workflow/, config/): dry runs and real runs (torch-free)."""
