#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Files a kdag-bench run into bench/results: one table per card and suite.

    tools/bench-results.py CARD RUN.json [RUN.md]

For every suite in RUN.json (kdag-bench --json), writes
bench/results/CARD/SUITE.json (the machine, the suite's results and its
skips) and bench/results/CARD/SUITE.md (the run's header lines from RUN.md,
when given, then the suite's rows of its table), replacing that suite's
previous run; then rewrites bench/results/README.md's index from the
files present. CARD names the machine: h100, h200, build-machine,
null-driver. Older runs leave the tree (git keeps them).
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "..", "bench", "results")
INDEX_BEGIN = "<!-- index: tools/bench-results.py writes what follows -->"


def key(suite, mode):
    """A suite's file name: cold-mode runs (--mode cold) have their own."""
    return suite if mode in ("batch", "") else f"{suite}-{mode}"


def split(card, run_json, run_md):
    with open(run_json) as f:
        run = json.load(f)
    header, rows = [], {}
    if run_md:
        with open(run_md) as f:
            lines = f.read().splitlines()
        table_head = [l for l in lines if l.startswith("| suite |") or l.startswith("|---")][:2]
        for l in lines:
            if l.startswith("|"):
                cells = [c.strip() for c in l.strip("|").split("|")]
                if len(cells) > 3 and cells[0] not in ("suite", "") and not cells[0].startswith("---"):
                    rows.setdefault(key(cells[0], cells[3]), []).append(l)
            elif not rows and not l.startswith("# "):
                header.append(l)
    out = os.path.join(RESULTS, card)
    os.makedirs(out, exist_ok=True)
    suites = sorted({key(r["suite"], r.get("mode", "")) for r in run["results"]})
    for s in suites:
        part = dict(run)
        part["results"] = [r for r in run["results"] if key(r["suite"], r.get("mode", "")) == s]
        part["skipped"] = [k for k in run.get("skipped", []) if k.get("suite") == s]
        with open(os.path.join(out, s + ".json"), "w") as f:
            json.dump(part, f, indent=1)
            f.write("\n")
        if s in rows:
            with open(os.path.join(out, s + ".md"), "w") as f:
                f.write(f"# kdag-bench: {s} on {card}\n")
                f.write("\n".join(header).rstrip() + "\n\n")
                f.write("\n".join(table_head + rows[s]) + "\n")
    return suites


def index():
    path = os.path.join(RESULTS, "README.md")
    with open(path) as f:
        text = f.read()
    text = text.split(INDEX_BEGIN)[0].rstrip() + "\n\n" + INDEX_BEGIN + "\n\n"
    text += "| card | suite | table | data | machine |\n|---|---|---|---|---|\n"
    for card in sorted(d for d in os.listdir(RESULTS) if os.path.isdir(os.path.join(RESULTS, d))):
        for name in sorted(os.listdir(os.path.join(RESULTS, card))):
            if not name.endswith(".json"):
                continue
            s = name[:-5]
            with open(os.path.join(RESULTS, card, name)) as f:
                m = json.load(f).get("machine", {})
            where = m.get("gpu_name") if m.get("gpu") else m.get("host_cpu", "")
            md = f"[{s}.md]({card}/{s}.md)" if os.path.exists(os.path.join(RESULTS, card, s + ".md")) else ""
            text += f"| {card} | {s} | {md} | [{s}.json]({card}/{name}) | {where} |\n"
    with open(path, "w") as f:
        f.write(text)


def main(argv):
    if len(argv) not in (3, 4) or not re.fullmatch(r"[a-z0-9-]+", argv[1]):
        print(__doc__, file=sys.stderr)
        return 2
    suites = split(argv[1], argv[2], argv[3] if len(argv) == 4 else None)
    index()
    print(f"bench/results/{argv[1]}: {', '.join(suites)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
