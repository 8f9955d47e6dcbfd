# -*- coding: utf-8 -*-
"""sglang_unit_values runs on the controller: the values it checks are the controller's, so no host is contacted.

Each check used to be a module run on the host (~0.3 s of Python start-up there for a pure function of the task's
arguments); a no-op deploy runs five of them per host. The rules stay in module_utils/unit_values.py, shared with
library/sglang_unit_values.py, which documents the options and still works wherever this plugin is not on the
action plugin path.
"""
from __future__ import annotations

from ansible.plugins.action import ActionBase

try:
    from ansible.module_utils import unit_values
except ImportError:  # the checkout: module_utils/ is on ansible.cfg's module_utils path, which modules see, not plugins
    import ansible.module_utils
    from ansible import constants as C

    ansible.module_utils.__path__.extend(p for p in C.DEFAULT_MODULE_UTILS_PATH
                                         if p not in ansible.module_utils.__path__)
    from ansible.module_utils import unit_values

ARGUMENT_SPEC = {"values": {"type": "dict", "required": True}, "context": {"type": "str", "default": "settings"}}


class ActionModule(ActionBase):
    """Refuse values a unit, an EnvironmentFile or a start-up hook would read differently; changes nothing."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]  # raises on bad arguments
        values = args["values"]
        errors = unit_values.check_all(values)
        result.update(changed=False, checked=sorted(values))
        if errors:
            result.update(failed=True, errors=errors, msg=unit_values.refusal(args["context"], errors))
        return result
