"""A generated block of README.md between two marker lines: rewritten from the fixtures, or checked to be current."""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
README = os.path.join(REPO, "README.md")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "device")


def load_fixture(fixtures, name):
    """The JSON of tests/fixtures/device/<name> (``fixtures``: that folder), or None where there is none."""
    path = os.path.join(fixtures, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def replace_block(text, begin, end, block):
    start, stop = text.index(begin) + len(begin), text.index(end)
    return text[:start] + "\n" + block + "\n" + text[stop:]


def write_or_check(readme, begin, end, block, script, check):
    """0 when README.md's block is (check) or now is (write) ``block``; 1, with a message, otherwise."""
    with open(readme, encoding="utf-8") as handle:
        text = handle.read()
    if begin not in text or end not in text:
        print("README.md has no %s ... %s block" % (begin, end), file=sys.stderr)
        return 1
    wanted = replace_block(text, begin, end, block)
    if check:
        if wanted != text:
            print("README.md's block differs from tests/fixtures/device: run %s" % os.path.relpath(script, REPO),
                  file=sys.stderr)
            return 1
        return 0
    with open(readme, "w", encoding="utf-8") as handle:
        handle.write(wanted)
    return 0


def main(argv, doc, readme, begin, end, render, script):
    """The command line of a figures script: rewrite its block, or with --check exit 1 when it is stale."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when README.md's block is stale")
    args = parser.parse_args(argv)
    return write_or_check(readme, begin, end, render(), script, args.check)
