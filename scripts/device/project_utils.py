"""Lets a device script import the project's module_utils where ansible-core is not installed (the GPU machine's
image, a CPU venv): those files import each other as ``ansible.module_utils.<name>``, as Ansible ships them, so
there this checkout's module_utils folder stands in for that package. Where ansible-core finds them (the tests'
venv), nothing is changed."""
import os
import sys
import types

MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "module_utils")


def importable():
    try:
        import ansible.module_utils.finite_numbers  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        return
    except ImportError:
        pass
    package = types.ModuleType("ansible.module_utils")
    package.__path__ = [MODULE_UTILS]
    sys.modules["ansible"] = types.ModuleType("ansible")
    sys.modules["ansible"].__path__ = []
    sys.modules["ansible.module_utils"] = package
    if MODULE_UTILS not in sys.path:
        sys.path.append(MODULE_UTILS)
