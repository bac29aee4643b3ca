"""Writes train.csv, val.csv and test.csv beside this file: short English
sentences labelled by topic (cooking, sport, weather), each a template of its
topic filled with words of its topic, drawn with a fixed seed. The example of
the files task (docs/files.md) and its tests' data; run it again to get the
same bytes: python tests/data/files/make_files.py"""

import csv
import random
from pathlib import Path

TOPICS = {
    "cooking": (["The {a} needs more {b} before it goes in the oven.",
                 "Stir the {a} slowly and add a pinch of {b}.",
                 "She baked {a} with fresh {b} for dinner."],
                ["soup", "bread", "sauce", "pie", "stew", "dough"],
                ["salt", "butter", "garlic", "pepper", "basil", "flour"]),
    "sport": (["The {a} scored twice in the second {b}.",
               "Our {a} trained hard for the {b} on Sunday.",
               "A late {a} decided the {b} in the final minute."],
              ["striker", "team", "captain", "keeper", "goal", "runner"],
              ["half", "match", "final", "league", "race", "game"]),
    "weather": (["Expect {a} in the north and {b} later today.",
                 "The forecast says {a} tonight, then {b} by morning.",
                 "Heavy {a} turned into {b} over the hills."],
                ["rain", "snow", "fog", "wind", "sunshine", "hail"],
                ["clear skies", "thunder", "frost", "drizzle", "storms", "mild air"]),
}
SIZES = {"train": 16, "val": 4, "test": 4}  # rows per topic


def main() -> None:
    rng = random.Random(0)
    seen = set()
    for split, n in SIZES.items():
        rows = []
        for topic, (templates, first, second) in TOPICS.items():
            while sum(label == topic for _, label in rows) < n:
                text = rng.choice(templates).format(a=rng.choice(first), b=rng.choice(second))
                if text not in seen:  # no sentence in two splits, nor twice in one
                    seen.add(text)
                    rows.append((text, topic))
        rng.shuffle(rows)
        with open(Path(__file__).with_name(f"{split}.csv"), "w", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["text", "label"])
            writer.writerows(rows)


if __name__ == "__main__":
    main()
