"""filter_plugins/sglang_model_paths.py: a current link of a verified revision reads as the revision's folder."""
import pytest
from ansible.errors import AnsibleFilterError

from tests.helpers.script_module import load_file

folder = load_file("filter_plugins/sglang_model_paths.py", "sglang_model_paths").sglang_model_folder
REVISIONS = {"kimi": {"current": "/srv/models/kimi/current", "path": "/srv/models/kimi/r2"},
             "draft": {"current": "/srv/models/draft/current", "path": "/shared/draft-v1"}}


def test_a_current_link_reads_as_the_revision_it_will_point_at():
    assert folder("/srv/models/kimi/current", REVISIONS) == "/srv/models/kimi/r2"
    assert folder("/srv/models/draft/current", REVISIONS) == "/shared/draft-v1"


def test_any_other_path_is_left_as_it_is():
    assert folder("/srv/models/kimi/r1", REVISIONS) == "/srv/models/kimi/r1"
    assert folder("", REVISIONS) == "" and folder("/srv/models/kimi/current", {}) == "/srv/models/kimi/current"


def test_revisions_of_the_wrong_shape_are_refused_by_name():
    with pytest.raises(AnsibleFilterError, match="sglang_model_revisions"):
        folder("/x", ["kimi"])
