"""Reading the command line as the real server would: `--config FILE` merged in, then checked against the
installed SGLang's own flag definitions (module_utils/sglang_cli_args.py, read from source) when the lab put
that reader beside the stand-in, else against the stand-in's own table (flag_table.py). Bad flags exit 2.
"""
import json
import os
import sys
import sysconfig

from sglang_standin.config import STANDIN
from sglang_standin.flag_table import PROG, build_parser, human_readable_int

CLI_ARGS_ENV = "SGLANG_STANDIN_CLI_ARGS"


def _site_packages():
    """The running interpreter's site-packages, the one holding sglang when there is one."""
    candidates = []
    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        if paths.get(key) and paths[key] not in candidates:
            candidates.append(paths[key])
    for entry in sys.path:
        if entry.endswith("site-packages") and entry not in candidates:
            candidates.append(entry)
    for path in candidates:
        if os.path.isdir(os.path.join(path, "sglang")):
            return path
    return candidates[0] if candidates else None


def _cli_args_module():
    """sglang_cli_args from $SGLANG_STANDIN_CLI_ARGS, or (None, why not).

    It imports its sibling as ``ansible.module_utils.pkg_versions`` (it is an Ansible module_utils file), so the
    directory must hold pkg_versions.py too (lab/install-standins.sh copies both). The deployed venv has no Ansible:
    the directory is put on that package's path, or a stand-in package is made whose path is the directory.
    """
    import importlib  # pylint: disable=import-outside-toplevel
    import types  # pylint: disable=import-outside-toplevel
    directory = os.environ.get(CLI_ARGS_ENV)
    if not directory:
        return None, "$%s is not set" % CLI_ARGS_ENV
    if not os.path.isfile(os.path.join(directory, "sglang_cli_args.py")):
        return None, "no sglang_cli_args.py in %s ($%s)" % (directory, CLI_ARGS_ENV)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        try:
            package = importlib.import_module("ansible.module_utils")
        except ImportError:
            ansible = sys.modules.setdefault("ansible", types.ModuleType("ansible"))
            if not hasattr(ansible, "__path__"):
                ansible.__path__ = []
            package = types.ModuleType("ansible.module_utils")
            package.__path__ = []
            sys.modules["ansible.module_utils"] = package
            ansible.module_utils = package
        if directory not in package.__path__:
            package.__path__.append(directory)
        module = importlib.import_module("sglang_cli_args")
    except Exception as exc:  # pylint: disable=broad-except  (a helper that fails must not stop the lab)
        return None, "cannot import sglang_cli_args from %s (%s: %s)" % (directory, type(exc).__name__, exc)
    if not (hasattr(module, "known_flags") and hasattr(module, "check_argv")):
        return None, "%s/sglang_cli_args.py has no known_flags/check_argv" % directory
    return module, None


def _usage_error(message):
    sys.stderr.write("usage: %s [-h] --model-path MODEL_PATH [options]   (%s)\n%s: error: %s\n"
                     % (PROG, STANDIN, PROG, message))
    sys.stderr.flush()
    sys.exit(2)


def _check_with_sglang(module, argv):
    """(flags, errors, parsed) from SGLang's own definitions in this interpreter's site-packages, or a reason."""
    site = _site_packages()
    try:
        flags = module.known_flags(site)
    except Exception as exc:  # pylint: disable=broad-except  (no sglang here, or a layout it does not know)
        return None, "sglang_cli_args.known_flags(%s) failed (%s: %s)" % (site, type(exc).__name__, exc)
    try:
        errors, parsed = module.check_argv(flags, list(argv), allow_abbrev=True)  # argparse's default, as the CLI
    except TypeError:
        errors, parsed = module.check_argv(flags, list(argv))
    version = getattr(flags, "version", None) or "?"
    return (flags, errors, parsed), "SGLang %s's own flag definitions (sglang_cli_args, %d flags, %s)" % (
        version, len(flags), site)


# dests of SGLang <= 0.5.9's add_argument("--tensor-parallel-size", "--tp-size", ...) style -> the field names
OLD_DESTS = {"tensor_parallel_size": "tp_size", "pipeline_parallel_size": "pp_size",
             "data_parallel_size": "dp_size", "cuda_graph_max_bs": "cuda_graph_max_bs_decode"}


def _read_yaml_mapping(path):
    """The top-level mapping of a YAML options file: PyYAML when the venv has it (SGLang needs it), else the
    subset the sglang_server role writes (``key: "JSON string"``, ``key: scalar``, ``key: true``)."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        import yaml  # pylint: disable=import-outside-toplevel
        data = yaml.safe_load(text)
    except ImportError:
        data = {}
        for line in text.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, _, raw = line.partition(":")
            raw = raw.strip()
            value = json.loads(raw) if raw.startswith('"') else {"true": True, "false": False}.get(raw, raw)
            data[key.strip()] = value
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError("Config file must contain a dictionary at root level")
    return data


def merge_config(argv):
    """``--config FILE`` as sglang 0.5.21's ConfigArgumentMerger does it: the file's options first, then the
    command line (which wins). The merged list stays in memory: the process arguments show only the path."""
    if "--config" not in argv:
        return argv
    index = argv.index("--config")
    if index == len(argv) - 1:
        _usage_error("No config file specified after --config flag!")
    path = argv[index + 1]
    if not path.endswith((".yaml", ".yml")) or not os.path.exists(path):
        _usage_error("Config file must be YAML format and exist, got: %s" % path)
    merged = []
    for key, value in _read_yaml_mapping(path).items():
        if isinstance(value, bool):
            merged += ["--%s" % key] if value else []
        elif isinstance(value, list):
            merged += ["--%s" % key] + [str(item) for item in value] if value else []
        else:
            merged += ["--%s" % key, str(value)]
    return merged + argv[:index] + argv[index + 2:]


def parse_flags(argv):
    """(namespace, extra {dest: value} the stand-in has no flag for, how the flags were checked)."""
    parser = build_parser()
    if "-h" in argv or "--help" in argv:
        parser.parse_args(["--help"])  # prints the stand-in's help, exits 0
    module, why_not = _cli_args_module()
    if module is not None:
        result, how = _check_with_sglang(module, argv)
        if result is not None:
            _flags, errors, parsed = result
            if errors:
                _usage_error("; ".join(str(e) for e in ([errors] if isinstance(errors, str) else errors)))
            # SGLang's definitions decide; the stand-in's parser only supplies defaults and types.
            model = parsed.get("model_path")
            namespace = parser.parse_args(["--model-path", str(model)])
            actions = {action.dest: action for action in parser._actions}  # pylint: disable=protected-access
            extra = {}
            for dest, value in parsed.items():
                dest = OLD_DESTS.get(dest, dest)
                if dest not in actions:
                    extra[dest] = value
                    continue
                kind = actions[dest].type
                if kind in (int, float, human_readable_int) and value is not None \
                        and not isinstance(value, (list, bool)):
                    value = kind(value)
                setattr(namespace, dest, value)
            return namespace, extra, how
        why_not = how
    namespace = parser.parse_args(argv)  # unknown or ambiguous flags: exit 2 with argparse's message
    return namespace, {}, "the stand-in's own list of sglang 0.5.21 flags (%s)" % why_not
