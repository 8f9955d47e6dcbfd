"""Loads a file of this checkout that no package makes importable (a role's host script, a filter plugin, a script
under scripts/) as a module, so tests call its functions the way the file's own users run it."""
import importlib.util
import os

from tests.helpers.ansible_run import REPO


def load_file(path, name):
    """The file at `path` (relative to the checkout) executed as a fresh module called `name` (not in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
