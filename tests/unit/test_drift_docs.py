"""docs/drift.md says what the reporter does: its category table is CATEGORIES (module_utils/drift_categories.py owns
the list), and its tamper table names the categories the lab's drift test (molecule/drift/verify.yml) expects, one
row per tamper (issue 39: an NCCL env-file tamper filed under a category the docs did not give it)."""
import os
import re

import yaml

from ansible.module_utils import drift_categories as dc

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def table(heading_row):
    """The rows (cells) of the docs/drift.md table whose header row starts with HEADING_ROW."""
    with open(os.path.join(ROOT, "docs", "drift.md"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith(heading_row))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_category_table_is_the_reporters_list():
    assert [re.fullmatch(r"`([a-z]+)`", row[0]).group(1) for row in table("| category |")] == list(dc.CATEGORIES)


def test_the_tamper_table_names_the_categories_the_lab_test_expects():
    documented = sorted(re.match(r"`([a-z]+)`", row[1]).group(1) for row in table("| tamper |"))
    assert set(documented) <= set(dc.CATEGORIES)
    with open(os.path.join(ROOT, "molecule", "drift", "verify.yml"), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    (tampers,) = [play["vars"]["drift_tampers"] for play in plays if "drift_tampers" in play.get("vars", {})]
    tested = [category for tamper in tampers for category in tamper["categories"]]
    # `current` switched is a play of its own in verify.yml (another lock's venv installed first).
    switched = [play for play in plays if "switch `current`" in play["name"]]
    assert len(switched) == 1
    assert documented == sorted(tested + ["venv"])
