"""Shared test setup.

The module's logic lives in ``module_utils/`` and is imported the way Ansible
imports it (``ansible.module_utils.<name>``): we add our directory to that
package's search path, as ``module_utils = ./module_utils`` does for Ansible.
"""
import os
import sys

import ansible.module_utils

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE_UTILS = os.path.join(REPO, "module_utils")
if MODULE_UTILS not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(MODULE_UTILS)
if REPO not in sys.path:
    sys.path.insert(0, REPO)
