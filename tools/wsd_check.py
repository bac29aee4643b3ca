"""The warmup-stable-decay check (config/studies/wsd_check.yaml): each wsd
budget's final validation loss against the cosine run of the same budget, and
what one trunk per size with its cooldown branches cost against a run per budget.

    python tools/wsd_check.py results/wsd_check/runs.parquet \
        results/wsd_check_cosine/runs.parquet

Per size and budget: the mean over seeds of (wsd - cosine) upstream loss with
its standard deviation over seeds, beside the seed noise (the standard
deviation of the cosine runs' losses over seeds). Then per architecture, the
cells whose mean difference is within the seed noise, and the FLOPs and wall
seconds of the wsd chain (every trunk, plus each branch's own cooldown:
steps - fork_step steps, wall_seconds - fork_seconds) against the cosine runs'
sum, from the records (wall seconds as measured on the machine that ran them).
"""

from __future__ import annotations

import sys

import pandas as pd

from scalestudy.records import read_records

KEYS = ["arch", "size", "budget", "seed"]


def pretraining(path: str) -> pd.DataFrame:
    runs = read_records(path)
    return runs[(runs["stage"] == "upstream") & runs["budget"].notna()
                & (runs["status"] == "ok")]


def compare(wsd: pd.DataFrame, cosine: pd.DataFrame) -> pd.DataFrame:
    both = wsd.merge(cosine, on=KEYS, suffixes=("_wsd", "_cos"))
    both["diff"] = both["upstream_loss_wsd"] - both["upstream_loss_cos"]
    return both.groupby(["arch", "size", "budget"]).agg(
        seeds=("diff", "size"), diff_mean=("diff", "mean"), diff_sd=("diff", "std"),
        seed_sd=("upstream_loss_cos", "std"), wsd=("upstream_loss_wsd", "mean"),
        cosine=("upstream_loss_cos", "mean")).reset_index()


def costs(wsd: pd.DataFrame, cosine: pd.DataFrame) -> dict:
    branch = wsd["fork_step"].notna()
    own_steps = wsd["steps"] - wsd["fork_step"].where(branch, 0)
    own_wall = wsd["wall_seconds"] - wsd["fork_seconds"].where(branch, 0)
    return {"wsd_flops": float((own_steps * wsd["flops_per_step"]).sum()),
            "cosine_flops": float(cosine["train_flops"].sum()),
            "wsd_wall": float(own_wall.sum()), "cosine_wall": float(cosine["wall_seconds"].sum())}


def main(argv: list[str]) -> int:
    wsd, cosine = pretraining(argv[0]), pretraining(argv[1])
    table = compare(wsd, cosine)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for arch, rows in table.groupby("arch"):
        within = int((rows["diff_mean"].abs() <= rows["seed_sd"]).sum())
        c = costs(wsd[wsd["arch"] == arch], cosine[cosine["arch"] == arch])
        print(f"{arch}: |wsd - cosine| within the seed noise in {within} of {len(rows)} "
              f"cells; FLOPs: wsd {c['wsd_flops']:.3g} vs cosine {c['cosine_flops']:.3g} "
              f"({1 - c['wsd_flops'] / c['cosine_flops']:.0%} saved); wall seconds: wsd "
              f"{c['wsd_wall']:.0f} vs cosine {c['cosine_wall']:.0f} "
              f"({1 - c['wsd_wall'] / c['cosine_wall']:.0%} saved)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
