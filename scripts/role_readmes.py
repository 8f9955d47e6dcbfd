#!/usr/bin/env python3
"""Each role's README.md: its variables table, generated from the role's meta/argument_specs.yml.

A role's README is prose a person writes (purpose, requirements, example, its docs page) around one generated
block, the variables of each entry point, between the BEGIN/END markers below. This script writes that block
(and a first README for a role without one); tests/unit/test_role_readmes.py fails when a block differs from the
argument specs, so the table and the specs cannot drift apart.

    scripts/role_readmes.py            # rewrite the generated blocks (and create missing READMEs)
    scripts/role_readmes.py --check    # exit 1 and name the roles whose README is missing or stale
"""
from __future__ import annotations

import argparse
import os
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "<!-- BEGIN ARGUMENT SPECS: generated from meta/argument_specs.yml by scripts/role_readmes.py -->"
END = "<!-- END ARGUMENT SPECS -->"
COLLECTION = "gpufleet.sglang"


def load_specs(role_dir):
    """{entry point: spec} of a role, or None when it has no meta/argument_specs.yml."""
    path = os.path.join(role_dir, "meta", "argument_specs.yml")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return (yaml.safe_load(handle) or {}).get("argument_specs") or {}


def _text(text):
    """Prose for Markdown: one line, and <placeholders> shown as text, not taken for HTML tags."""
    return " ".join(str(text).split()).replace("<", "&lt;").replace(">", "&gt;")


def _cell(text):
    """Text for one Markdown table cell: one line, pipes escaped."""
    return _text(text).replace("|", "\\|")


def _default(option):
    if "default" not in option:
        return ""
    value = option["default"]
    if isinstance(value, str):
        return "`%s`" % " ".join(value.split()).replace("|", "\\|") if value else '`""`'
    return "`%s`" % _cell(yaml.safe_dump(value, default_flow_style=True, width=10 ** 6).strip()
                          .removesuffix("\n...").removesuffix(" ..."))


def _type(option):
    kind = option.get("type", "str")
    if kind == "list" and option.get("elements"):
        kind = "list of %s" % option["elements"]
    if option.get("choices"):
        kind += " (%s)" % ", ".join(str(c) for c in option["choices"])
    return kind


def _description(value):
    return _text(" ".join(value) if isinstance(value, list) else str(value or ""))


def _row(name, option):
    return "| `%s` | %s | %s | %s | %s |" % (
        name, _cell(_type(option)), _default(option), "yes" if option.get("required") else "",
        _cell(_description(option.get("description"))))


def render_block(role, specs):
    """The generated block: per entry point, its summary and a table of its options.

    An option another entry point takes exactly as `main` describes it (same type, default, requirement and
    description) is named in one line instead of repeating main's row, so a role whose entry points share most of
    their variables lists each once.
    """
    lines = [BEGIN]
    main_rows = {name: _row(name, option or {}) for name, option in ((specs.get("main") or {}).get("options")
                                                                     or {}).items()}
    for entry in sorted(specs, key=lambda name: (name != "main", name)):
        spec = specs[entry] or {}
        title = "Entry point `%s`" % entry
        if entry != "main":
            title += " (`tasks_from: %s`)" % entry
        lines += ["", "### %s" % title, ""]
        if spec.get("short_description"):
            lines += [_cell(spec["short_description"]), ""]
        options = spec.get("options") or {}
        if not options:
            lines.append("No variables.")
            continue
        rows = {name: _row(name, options[name] or {}) for name in sorted(options)}
        shared = [name for name in rows if entry != "main" and main_rows.get(name) == rows[name]]
        if shared and len(shared) == len(main_rows):
            lines.append("Every variable of `main`, as described there.")
        elif shared:
            lines.append("As in `main`: %s." % ", ".join("`%s`" % name for name in shared))
        own = [row for name, row in rows.items() if name not in shared]
        if own:
            if shared:
                lines += ["", "Its own, or described differently:", ""]
            lines += ["| Variable | Type | Default | Required | Description |", "|---|---|---|---|---|"] + own
    lines += ["", END]
    return "\n".join(lines)


def first_readme(role, specs):
    """A README for a role that has none: purpose from its specs, the generated block, an example to edit."""
    main = specs.get("main") or {}
    required = [name for name, option in (main.get("options") or {}).items() if (option or {}).get("required")]
    example = ["- name: Apply %s" % role,
               "  hosts: \"{{ sglang_hosts | default('blackwell') }}\"",
               "  roles:",
               "    - role: %s.%s" % (COLLECTION, role)]
    if required:
        example.append("      vars:")
        example += ["        %s: ...  # required" % name for name in required]
    return "\n".join([
        "# %s.%s" % (COLLECTION, role), "",
        _cell(main.get("short_description", "")), "",
        _description(main.get("description")), "",
        "## Variables", "",
        "Defaults are in `defaults/main.yml`; Ansible checks every value against `meta/argument_specs.yml` before "
        "the role changes anything.", "",
        render_block(role, specs), "",
        "## Example", "",
        "```yaml", *example, "```", ""])


def updated(text, block):
    """README text with its generated block replaced; ValueError when the markers are missing or out of order."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError("no %s ... %s block" % (BEGIN, END))
    return text[:start] + block + text[end + len(END):]


def roles(repo=REPO):
    """(name, directory) of every role that has argument specs."""
    root = os.path.join(repo, "roles")
    return [(name, os.path.join(root, name)) for name in sorted(os.listdir(root))
            if load_specs(os.path.join(root, name)) is not None]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="report missing or stale READMEs, change nothing")
    args = parser.parse_args(argv)
    stale = []
    for role, role_dir in roles():
        specs = load_specs(role_dir)
        path = os.path.join(role_dir, "README.md")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            try:
                want = updated(text, render_block(role, specs))
            except ValueError as exc:
                print("%s: %s" % (path, exc), file=sys.stderr)
                return 1
        else:
            text, want = None, first_readme(role, specs)
        if want != text:
            stale.append(role)
            if not args.check:
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(want)
    if stale:
        print("%s: %s" % ("stale or missing" if args.check else "written", ", ".join(stale)))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
