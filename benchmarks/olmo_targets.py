"""The OLMo ladder's own targets: `scalestudy predict --select` on the ladder
of Bhagia et al. 2024 (190M-1.3B at 1-10x Chinchilla, every checkpoint),
predicting their 7B-4T and 13B-5T runs, against the paper's published chain.

    PYTHONPATH=src python benchmarks/olmo_targets.py OLMO_LADDER_CHECKOUT [--n-boot 100]

OLMO_LADDER_CHECKOUT is a copy of github.com/allenai/OLMo-ladder (Apache-2.0;
checked at commit 67a3f44); its src/scripts/paper/data/ladder-runs/ holds the
runs. Not bundled: the targets stay outside the repository, so that no choice
of the method is tuned to them (the bundled ladder, benchmarks/data/olmo_ladder,
holds the ladder's runs up to 3B, not these). Per the paper's protocol (its
src/scripts/paper/README.md and src/scaling/utils.py): the task loss is the
5-shot bits per byte of the correct answer, the metric its 5-shot accuracy
(length-normalised), a run's final point and a target's value the mean of its
last five evaluations (the 7B's file has one); the c4 loss predicted alone.
Every choice (form, path, link) is --select's, by held-out error on the
ladder itself. Prints each task's prediction, the 13B's mean relative error
(the paper's: 6.8% on these seven tasks), how many of the 14 accuracies lie
inside their 95% intervals and the intervals' mean width, and the c4 loss's
errors (the paper's 13B: -3.8%).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from scalestudy.analysis.predict.stage import predict

TASKS = ("hellaswag_val", "arc_challenge_test", "arc_easy_test", "piqa_val", "csqa_val",
         "socialiqa_val", "openbookqa_test")
SIZES = {"190M": 190354176, "370M": 371262464, "760M": 758220288, "1B": 1279395840}
TARGETS = {"7B-4T": ("peteish7_eval_anneal.csv", 6887575552, 3945065873408),
           "13B-5T": ("peteish13_eval_final.csv", 13202396160, 5000088518656)}
PAPER_13B = 0.068  # the paper's chain: mean relative error over these seven tasks


def read(path: Path) -> pd.DataFrame:
    """One run's evaluations: step, tokens, the c4 loss, and each task's bits
    per byte and accuracy."""
    raw = pd.read_csv(path)
    # The 13B's evaluations log no tokens: its D is the paper's (TARGETS).
    tokens = (raw["throughput/total_tokens"] if "throughput/total_tokens" in raw
              else np.full(len(raw), np.nan))
    out = pd.DataFrame({"step": raw["_step"] if "_step" in raw else np.arange(len(raw)),
                        "tokens": tokens,
                        "loss": raw["eval/c4_en-validation/CrossEntropyLoss"]})
    for task in TASKS:
        name = task.rsplit("_", 1)[0]
        out[f"{name}_bpb"] = raw[f"eval/downstream_bpb/{task}_rc_5shot_bpb"]
        out[f"{name}_acc"] = raw[f"eval/downstream/{task}_rc_5shot_len_norm"]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--n-boot", type=int, default=100)
    args = parser.parse_args(argv)
    runs_dir = args.checkout / "src/scripts/paper/data/ladder-runs"
    ladder = pd.concat([read(runs_dir / f"{size}-{k}xC.csv").assign(run=f"{size}-{k}xC",
                                                                    params=n)
                        for size, n in SIZES.items() for k in (1, 2, 5, 10)],
                       ignore_index=True)
    targets = pd.DataFrame([{"target": name, "params": n, "tokens": d,
                             **read(runs_dir / file).tail(5).mean(numeric_only=True)
                             .drop(["step", "tokens"]).to_dict()}
                            for name, (file, n, d) in TARGETS.items()])
    at = list(zip(targets["params"], targets["tokens"], strict=True))
    options = {"n_boot": args.n_boot, "final_evals": 5, "select": True, "quiet": True}
    rows = []
    for task in TASKS:
        name = task.rsplit("_", 1)[0]
        result = predict(ladder, None, at, by=[], metric=f"{name}_acc",
                         task_loss=f"{name}_bpb", **options)
        print(f"{name}: {result.fit['method'].iloc[0]}")
        for j, r in enumerate(result.predictions.itertuples()):
            actual = targets[f"{name}_acc"].iloc[j]
            rows.append({"task": name, "target": targets["target"].iloc[j],
                         "predicted": r.metric, "low": r.metric_low, "high": r.metric_high,
                         "actual": actual, "task_loss": r.task_loss,
                         "task_loss_actual": targets[f"{name}_bpb"].iloc[j]})
            print(f"  {rows[-1]['target']}: bpb {r.task_loss:.3f} (actual "
                  f"{rows[-1]['task_loss_actual']:.3f}); accuracy {r.metric:.3f} "
                  f"[{r.metric_low:.3f}, {r.metric_high:.3f}] (actual {actual:.3f})")
    table = pd.DataFrame(rows)
    table["relative_error"] = (table["predicted"] - table["actual"]).abs() / table["actual"]
    table["inside"] = (table["low"] <= table["actual"]) & (table["actual"] <= table["high"])
    b13 = table[table["target"] == "13B-5T"]
    print(f"13B accuracy: mean relative error {b13['relative_error'].mean():.1%} "
          f"({b13['relative_error'].min():.1%}-{b13['relative_error'].max():.1%}); the "
          f"paper's {PAPER_13B:.1%}")
    print(f"inside their 95% intervals: {int(table['inside'].sum())} of {len(table)}; mean "
          f"width {(table['high'] - table['low']).mean():.3f}")
    c4 = predict(ladder, None, at, by=[], **options)
    print(f"c4 loss: {c4.fit['method'].iloc[0]}")
    for j, r in enumerate(c4.predictions.itertuples()):
        actual = targets["loss"].iloc[j]
        print(f"  {targets['target'].iloc[j]}: {r.loss:.4f} [{r.loss_low:.4f}, "
              f"{r.loss_high:.4f}] (actual {actual:.4f}): {r.loss / actual - 1:+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
