"""The stand-in's own flag table (lab/standins/sglang_standin/flag_table.py) against the real sglang 0.5.21 wheel's
parser definitions, read without a GPU or torch by module_utils/sglang_cli_args.known_flags (as
tests/integration/test_sglang_cli_args_real_wheels.py reads them): the table may leave flags out, but every flag,
alias and abbreviation it accepts the real parser accepts too, for the same field, with the same type and choices.
"""
import argparse
import contextlib
import io
import os
import zipfile

import pytest

from ansible.module_utils import sglang_cli_args as cli
from tests.helpers import wheels
from tests.helpers.script_module import load_file
from tests.helpers.sglang_standin import PACKAGE, flag_table

pytestmark = pytest.mark.wheels

TYPE_NAMES = {int: "int", float: "float", str: "str", flag_table.human_readable_int: None}  # None: a custom parser


@pytest.fixture(scope="module")
def real_flags(tmp_path_factory):
    """sglang 0.5.21's flag table, from the sources of the real wheel (cached in .cache/test-wheels)."""
    root = tmp_path_factory.mktemp("sglang-0.5.21")
    with zipfile.ZipFile(wheels.wheel("sglang", "0.5.21")) as archive:
        archive.extractall(root, [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")
                                  or (name.startswith("sglang/") and name.endswith(".py"))])
    flags = cli.known_flags(str(root))
    assert flags.version == "0.5.21"
    return flags


def table():
    """The stand-in's flags: (option strings, argparse action), --help left out."""
    return [(action.option_strings, action) for action in flag_table.build_parser()._actions  # pylint: disable=protected-access
            if not isinstance(action, argparse._HelpAction)]  # pylint: disable=protected-access


def standin_dest(argv):
    """The field the stand-in's own parser sets from `argv` besides --model-path m, or None when it refuses it."""
    parser = flag_table.build_parser()
    base = parser.parse_args(["--model-path", "m"])
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            parsed = parser.parse_args(argv)
    except SystemExit:
        return None
    changed = [dest for dest, value in vars(parsed).items() if value != getattr(base, dest)]
    assert len(changed) <= 1, changed
    return changed[0] if changed else None


def real_dest(flags, argv):
    """The field the real parser sets from `argv` besides --model-path m, or None when it refuses it."""
    errors, parsed = cli.check_argv(flags, argv, allow_abbrev=True)
    if errors:
        return None
    changed = [dest for dest, value in parsed.items() if (dest, value) != ("model_path", "m")]
    return changed[0] if changed else None


def command_line(action, flag):
    """`flag` given a value it accepts that differs from the stand-in's default (so the field it sets shows), after
    --model-path m unless it sets the model path itself."""
    if action.nargs == 0:
        value = []
    elif action.choices:
        value = [next(choice for choice in action.choices if choice != action.default)]
    else:
        value = {int: ["7"], float: ["0.5"], flag_table.human_readable_int: ["7"]}.get(action.type, ["x-value"])
    return ([] if action.dest == "model_path" else ["--model-path", "m"]) + [flag] + value


def test_every_flag_of_the_table_is_the_real_parsers_with_its_type_and_choices(real_flags):
    for names, action in table():
        entries = [real_flags.get(name) for name in names]
        assert None not in entries, "%s: not a flag of sglang 0.5.21" % names
        entry = entries[0]
        assert all(other is entry for other in entries), "%s: aliases of different flags in sglang 0.5.21" % names
        aliases = sorted(name for name, other in real_flags.items() if other is entry)
        assert sorted(names) == aliases, "%s: sglang 0.5.21 declares %s" % (names, aliases)
        assert action.dest == entry["dest"], names
        assert action.required == entry["required"], names
        assert (action.nargs != 0) == entry["takes_value"], names
        if entry["takes_value"]:
            assert action.nargs == entry["nargs"], names
            assert TYPE_NAMES[action.type] == entry["type"], "%s: %s, sglang 0.5.21: %s" % (
                names, action.type, entry["type"])
            assert list(action.choices or []) == list(entry["choices"] or []), names


def test_no_abbreviation_is_accepted_that_the_real_parser_refuses_or_reads_as_another_flag(real_flags):
    """argparse takes any unambiguous prefix; the table has fewer flags, so a prefix unambiguous here may not be."""
    checked = 0
    for names, action in table():
        for name in names:
            for end in range(3, len(name) + 1):
                argv = command_line(action, name[:end])
                mine = standin_dest(argv)
                if mine is not None:
                    checked += 1
                    assert real_dest(real_flags, argv) == mine, "%s: the stand-in reads %s, sglang 0.5.21 %s" % (
                        argv, mine, real_dest(real_flags, argv))
    assert checked > len(table())  # at least every full flag name was accepted and compared


def test_the_generated_flag_names_are_the_real_parsers(real_flags):
    """sglang_flag_names.py, what abbreviations are matched against, is what scripts/standin_flag_names.py writes."""
    generator = load_file("scripts/standin_flag_names.py", "standin_flag_names")
    with open(os.path.join(PACKAGE, "sglang_flag_names.py"), encoding="utf-8") as handle:
        assert handle.read() == generator.render(real_flags), \
            "stale: run .venv/bin/python scripts/standin_flag_names.py .cache/test-wheels/sglang-0.5.21-*.whl"


def test_human_readable_int_reads_what_sglang_reads():
    """The copy of sglang.srt.utils.common.human_readable_int that types --context-length and --max-total-tokens."""
    read = flag_table.human_readable_int
    assert (read("262144"), read("1k"), read("25.6k"), read("1M"), read("1Ki"), read("2Mi")) == \
        (262144, 1000, 25600, 1000000, 1024, 2 * 1024 * 1024)
    for bad in ("1.5Ki", "1K", "ten"):
        with pytest.raises(argparse.ArgumentTypeError):
            read(bad)
