#!/usr/bin/env python3
"""The drift reporter from a checkout: module_utils/drift_report.py's command line (see its docstring).

An installed collection runs the same logic as the sglang_drift_report module.
"""
import os
import sys

import ansible.module_utils

# module_utils/ is found the way `module_utils = ./module_utils` (ansible.cfg) makes Ansible find it.
ansible.module_utils.__path__.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                  "module_utils"))
from ansible.module_utils import drift_report  # noqa: E402  pylint: disable=wrong-import-position

if __name__ == "__main__":
    sys.exit(drift_report.main())
