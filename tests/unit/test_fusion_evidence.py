"""What the device run reads about the fused all-reduce (scripts/device/fusion_evidence.py): FlashInfer's API log in
FlashInfer 0.6.18's level-1 format, and the role's proof as ansible-playbook prints a failed assert."""
import json

from tests.helpers.script_module import load_file

evidence = load_file("scripts/device/fusion_evidence.py", "fusion_evidence")
STAMP = "[2026-12-05 14:02:11]"


def test_calls_are_counted_per_api_name_and_the_fused_kernel_apart():
    lines = ["%s FlashInfer API Call: create_allreduce_fusion_workspace" % STAMP,
             "%s FlashInfer API Call: allreduce_fusion" % STAMP, "%s FlashInfer API Call: allreduce_fusion" % STAMP,
             "%s FlashInfer API Call: TrtllmAllReduceFusion.allreduce_fusion" % STAMP,
             "%s FlashInfer API Call: rmsnorm" % STAMP, "unrelated line naming allreduce_fusion"]
    counts = evidence.api_call_counts(lines)
    assert counts == {"create_allreduce_fusion_workspace": 1, "allreduce_fusion": 3, "rmsnorm": 1}
    assert evidence.fused_kernel_calls(counts) == 3


def test_a_server_that_never_called_it_counts_zero():
    assert evidence.fused_kernel_calls(evidence.api_call_counts(["%s FlashInfer API Call: rmsnorm" % STAMP])) == 0
    assert evidence.fused_kernel_calls(None) == 0


def test_a_passed_proof_and_a_failed_one_with_its_own_message():
    assert evidence.proof_outcome(0, "PLAY RECAP") == ("passed", "the role's proof passed")
    failed = {"assertion": "x", "changed": False, "evaluated_to": False,
              "msg": "sglang on localhost serves, but not what its unit starts:\n fusion was turned off at start-up: "
                     "[TP0] ... Skipping allreduce fusion."}
    output = "TASK [x]\nfatal: [localhost]: FAILED! => %s\n\nPLAY RECAP" % json.dumps(failed)
    outcome, message = evidence.proof_outcome(2, output)
    assert outcome == "failed"
    assert message.startswith("sglang on localhost serves, but not what its unit starts: fusion was turned off")
    assert "\n" not in message


def test_a_failure_without_a_task_message_says_so():
    assert evidence.proof_outcome(4, "ERROR! the playbook could not be parsed") == (
        "failed", "ansible-playbook ended with rc 4 and no failed task's message")
