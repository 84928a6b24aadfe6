"""Summarise a CSV as a Markdown report: each row's first column is its name and its last
its value; rows whose last column is not a number (a header) are skipped. Standard
library only."""

import csv
import sys


def main(source: str, target: str) -> None:
    with open(source, newline="", encoding="utf-8") as f:
        rows = [(row[0], float(row[-1])) for row in csv.reader(f) if len(row) >= 2 and row[-1].replace(".", "", 1).isdigit()]
    if not rows:
        sys.exit(f"{source}: no row ends in a number")
    total = sum(value for _, value in rows)
    top = max(rows, key=lambda row: row[1])
    widest = max(value for _, value in rows)
    lines = ["# Report", "", "| name | value | share |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {value:g} | {value / total:.0%} |" for name, value in rows]
    lines += ["", f"Total: {total:g} over {len(rows)} rows; largest: {top[0]} ({top[1]:g}).", "", "```"]
    lines += [f"{name:>12} {'#' * round(30 * value / widest)}" for name, value in rows]
    lines += ["```", ""]
    with open(target, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print(f"wrote {target}: {len(rows)} rows, total {total:g}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: report.py INPUT.csv OUTPUT.md")
    main(sys.argv[1], sys.argv[2])
