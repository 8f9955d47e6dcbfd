"""The docs say what is true now (issue 37): no date of a run or session, and no call of the maintainers' GPU tool.

README.md, collection/README.md (the collection's page), docs/**/*.md, CHANGELOG.md, each role's README and the code the collection ships (modules' documentation
included) are read by its users; a reader has no GPU tool and no use for when something was run. A date may stand only inside a generated block (``<!-- BEGIN ... generated
... -->`` to ``<!-- END ... -->``), which its command rewrites. The maintainers' runbook for the GPU machines,
scripts/device/README.md, is not shipped and is not checked here.
"""
import glob
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# 2026-12-04, 2026-12 (a month), Dec 4 / December 4, and a clock time in UTC (a session's time of day).
DATE = re.compile(r"\b20[2-3]\d-(0[1-9]|1[0-2])\b"
                  r"|\b(Jan(uary)?|Feb(ruary)?|Mar(ch)?|Apr(il)?|May|June?|July?|Aug(ust)?|Sept?(ember)?|Oct(ober)?"
                  r"|Nov(ember)?|Dec(ember)?)\.? [0-3]?\d\b"
                  r"|\b[0-2]\d:[0-5]\d(:[0-5]\d)? UTC\b")
# The GPU tool's vocabulary: its call lines (run(kind=..., carry=[...])) and the words of its lending.
DEVICE_TOOL = re.compile(r"\brun\((kind|command|carry)=|\bcarry=\[|budget_left|\bdevice time\b|\bdevice tool\b"
                         r"|`device` tool|\bdevice machine|\blease\b|\blent\b|\bwarm machine\b", re.IGNORECASE)
BEGIN = re.compile(r"^<!-- BEGIN .*generated.*-->\s*$", re.IGNORECASE)
END = re.compile(r"^<!-- END .*-->\s*$")


def offending_lines(text):
    """(line number, line) of each line outside a generated block that names a date or the GPU tool's vocabulary."""
    found, generated = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if BEGIN.match(line):
            generated = True
        elif END.match(line):
            generated = False
        elif not generated and (DATE.search(line) or DEVICE_TOOL.search(line)):
            found.append((number, line))
    return found


def _relative(paths):
    return sorted(os.path.relpath(path, REPO) for path in paths)


USER_DOCS = _relative([os.path.join(REPO, "README.md"), os.path.join(REPO, "CHANGELOG.md"),
                       os.path.join(REPO, "collection", "CHANGELOG.md"),
                       os.path.join(REPO, "collection", "README.md")]
                      + glob.glob(os.path.join(REPO, "docs", "**", "*.md"), recursive=True))
ROLE_READMES = _relative(glob.glob(os.path.join(REPO, "roles", "*", "README.md")))


def _assert_clean(relative):
    with open(os.path.join(REPO, relative), encoding="utf-8") as handle:
        found = offending_lines(handle.read())
    assert not found, "%s names a run's date or the GPU tool (say what is true now and its command):\n%s" % (
        relative, "\n".join("  %s:%d: %s" % (relative, number, line.strip()[:160]) for number, line in found))


def test_the_check_finds_dates_and_tool_calls_outside_generated_blocks_only():
    text = "\n".join([
        "Measured on 2026-12-04: 272 tok/s.",                                   # 1: a run's date
        "Before it, the run of Dec 4 at 07:38 UTC passed.",                     # 2: month name and a clock time
        "#   run(kind=\"nvidia-h200\", carry=[\".device/carry\"])",             # 3: a tool call
        "No machine of 8 GPUs was lent to the device machine.",                 # 4: the tool's lending
        "<!-- BEGIN REAL SERVER: generated from tests/fixtures by x.py -->",
        "| run | 2026-12-04: sglang 0.5.17 |",                                   # inside the block: allowed
        "<!-- END REAL SERVER -->",
        "Markdown 2 tables; the 0.5.17 notes; 4 x 1024 tokens; NCCL 2.28.9.",  # 8: versions are not dates
        "The server is released on demand; leased words only as `lease`.",    # 9: `lease` as a word
    ])
    assert [number for number, _line in offending_lines(text)] == [1, 2, 3, 4, 9]


def test_every_user_doc_is_checked():
    assert "README.md" in USER_DOCS and "CHANGELOG.md" in USER_DOCS
    assert os.path.join("collection", "README.md") in USER_DOCS  # the collection's page, the operators' guide
    assert any(path.startswith("docs" + os.sep) for path in USER_DOCS)
    assert ROLE_READMES


@pytest.mark.parametrize("relative", USER_DOCS)
def test_user_doc_names_no_run_date_or_gpu_tool(relative):
    _assert_clean(relative)


@pytest.mark.parametrize("relative", ROLE_READMES)
def test_role_readme_names_no_run_date_or_gpu_tool(relative):
    _assert_clean(relative)


# What else the collection ships and ansible-doc shows: modules (their DOCUMENTATION and EXAMPLES), module_utils,
# plugins, roles' tasks, defaults, specs and files, playbooks.
SHIPPED_CODE = _relative([path for pattern in ("library/*.py", "module_utils/*.py", "filter_plugins/*.py",
                                               "action_plugins/*.py", "roles/*/*/*", "playbooks/**/*.yml",
                                               "deploy.yml")
                          for path in glob.glob(os.path.join(REPO, pattern), recursive=True)
                          if os.path.isfile(path) and not path.endswith(".md")])


def test_shipped_code_is_checked():
    assert "library/sglang_model_fetch.py" in SHIPPED_CODE and "playbooks/deploy.yml" in SHIPPED_CODE
    assert "roles/sglang_model/defaults/main.yml" in SHIPPED_CODE


@pytest.mark.parametrize("relative", SHIPPED_CODE)
def test_shipped_code_names_no_run_date_or_gpu_tool(relative):
    _assert_clean(relative)
