"""The evidence of sglang_e2e.py's run, from what the legs recorded: h<GPU>x<N>[_shared<R>][_<family>]_sglang_e2e.json
(versions, the model, the patch and its canary, each leg's throughput, proof and fused-kernel calls, the greedy
comparison of the legs and its ties, where the API key could be read), the greedy logprobs beside it, and the
real server's answers that the stand-in imitates (sglang_0.5.17_real_server.json)."""
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # e2e_bed.py beside it, however this is loaded
import e2e_bed as bed  # noqa: E402  pylint: disable=wrong-import-position
import bench_gate  # noqa: E402  pylint: disable=wrong-import-position
import fusion_evidence  # noqa: E402  pylint: disable=wrong-import-position
import greedy_ties  # noqa: E402  pylint: disable=wrong-import-position


def evidence_name(kind):
    """h200x<GPUs>[_shared<ranks>][_<family>]_<kind>.json: the rehearsal's main family (deepseek_v3) and the
    one-GPU run's (qwen3) keep the short names."""
    main_family = "deepseek_v3" if bed.RANKS else "qwen3"
    # a rehearsal's DeepseekV3 runs with the Llama-layout draft first; the Kimi-K2.5 MLA draft's run is named apart
    draft = "_mla_draft" if bed.RANKS and bed.FAMILY == "deepseek_v3" and bed.DRAFT == "mla" else ""
    model = next((word.lower() for name in gpus()["names"] for word in name.split() if word[:1] in "HB"
                  and word[1:].isdigit()), "gpu")  # "NVIDIA H200" -> h200
    return "%sx%d%s%s_%s.json" % (model, bed.gpu_count(), "_shared%d" % bed.RANKS if bed.RANKS else "",
                                  ("" if bed.FAMILY == main_family else "_" + bed.FAMILY) + draft, kind)


def venv_versions():
    code = ("import importlib.metadata as m, json; print(json.dumps({d: m.version(d) for d in "
            "('sglang', 'flashinfer-python', 'torch', 'sglang-kernel', 'transformers')}))")
    out = subprocess.run(["/opt/sglang/current/bin/python", "-c", code], capture_output=True, text=True, check=False)
    return json.loads(out.stdout or "{}")


def gpus():
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, check=False).stdout
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    return {"count": len(rows), "names": [r[0] for r in rows], "compute_capability": sorted({r[1] for r in rows}),
            "driver": sorted({r[2] for r in rows})}


def leg_summary(name, spec, fusion):
    with open(os.path.join(bed.STATE_DIR, "bench-%s-%s.json" % (bed.RUN, name)), encoding="utf-8") as handle:
        report = json.load(handle)
    results = [run["result"] or {} for run in report["runs"]]
    tok_s = [r.get("output_throughput") for r in results if r.get("output_throughput") is not None]
    accept = [r.get("accept_length") for r in results if r.get("accept_length") is not None]
    return report, {"name": name, "speculative": spec, "fusion": fusion,
                    "output_tok_s": round(statistics.median(tok_s), 2) if tok_s else None,
                    "runs": [round(t, 2) for t in tok_s], "completed": min((r.get("completed") or 0) for r in results),
                    "num_prompts": report["settings"]["num_prompts"],
                    "accept_length": round(statistics.median(accept), 3) if accept else None,
                    "server": report.get("server"), "errors": [run["error"] for run in report["runs"] if run["error"]]}


def logprob_requests(state, name):
    """{prompt: {"output_ids", "top_logprobs"}} of one leg's logprob requests (greedy_logprobs; {} where none)."""
    return state["legs"].get(name, {}).get("greedy_logprobs", {})


def completions(report):
    """{prompt: output ids} of the benchmark client's greedy completions (what the legs are compared on)."""
    return {c["prompt"]: c.get("output_ids") for c in report["completions"]}


def gate_correctness(plain, leg):
    """bench_gate.compare_completions of a leg's runner completions against the plain leg's, as the gate judges."""
    result = bench_gate.compare_completions(plain["completions"], leg["completions"])
    return {"match_rate": round(result["match_rate"], 3), "ties": result["ties"],
            "tie_at": {row["prompt"]: row["tie_at"] for row in result["rows"] if row["tie_at"] is not None},
            "tie_max_gap": bench_gate.TIE_MAX_GAP}


def evidence(state):
    versions = venv_versions()
    with open(os.path.join(bed.MODELS, "target", "config.json"), encoding="utf-8") as handle:
        target = json.load(handle)
    with open(os.path.join(bed.MODELS, "draft", "config.json"), encoding="utf-8") as handle:
        draft = json.load(handle)
    reports, legs, not_run = {}, [], []
    for index, (name, _unit, spec, fusion) in enumerate(bed.LEGS):
        if not bed.runnable(index):
            not_run.append({"name": name, "speculative": spec, "fusion": fusion,
                            "reason": "fusion needs two or more GPUs (tensor parallelism); this machine has %d"
                                      % bed.gpu_count()})
            continue
        reports[name], summary = leg_summary(name, spec, fusion)
        recorded = state["legs"].get(name, {})
        summary.update(control=bed.control(index), proof=recorded.get("proof"),
                       proof_message=recorded.get("proof_message"),
                       fused_kernel_calls=fusion_evidence.fused_kernel_calls(recorded.get("flashinfer_api_calls")),
                       flashinfer_api_calls=recorded.get("flashinfer_api_calls"),
                       fusion_log_lines=recorded.get("fusion_log_lines"),
                       fusion_off_lines=recorded.get("fusion_off_lines"),
                       ready_s=recorded.get("ready", {}).get("since_start_s"),
                       first_start=(recorded.get("start") or {}).get("first_on_machine"),
                       start=recorded.get("start"))
        legs.append(summary)
    plain = completions(reports["plain"])
    match, explained = {}, {}
    # each leg against the plain one; a rehearsal also the fused leg against its unfused twin (same speculation)
    pairs = [("plain", n) for n in reports if n != "plain"]
    pairs += [("spec_nofusion", "spec_fusion")] if bed.RANKS and "spec_fusion" in reports else []
    for base, name in pairs:
        key = name if base == "plain" else "%s_vs_%s" % (name, base)
        theirs = completions(reports[base])
        same = [c.get("output_ids") is not None and c.get("output_ids") == theirs.get(c["prompt"])
                for c in reports[name]["completions"]]
        match[key] = round(sum(same) / len(same), 3) if same else None
        found = greedy_ties.mismatches(bed.PROMPTS, theirs, completions(reports[name]), logprob_requests(state, base),
                                       logprob_requests(state, name))
        explained[key] = {"counts": greedy_ties.summary(found), "mismatches": found}
    repeated = {}
    for name in reports:
        found = greedy_ties.repeats(bed.PROMPTS, completions(reports[name]), logprob_requests(state, name))
        repeated[name] = {"counts": greedy_ties.summary(found), "mismatches": found}
    first = state["legs"][state["first_leg"]]
    setup_patch = bed.patch_record("setup")
    doc = {
        "made_by": ("E2E_MODEL=%s E2E_SHARED_GPU_RANKS=%d " % (bed.FAMILY, bed.RANKS) if bed.RANKS
                    else "E2E_MODEL=%s " % bed.FAMILY)
                   + "bash scripts/device/sglang_e2e.sh setup; ... legs (device tool)",
        "mode": "shared-gpu rehearsal" if bed.RANKS else "one rank per GPU",
        "ranks_per_gpu": bed.RANKS or 1,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sglang": versions.get("sglang"), "flashinfer": versions.get("flashinfer-python"),
        "torch": versions.get("torch"), "sglang_kernel": versions.get("sglang-kernel") + " (trimmed for the test bed)"
        if versions.get("sglang-kernel") else None, "transformers": versions.get("transformers"),
        "gpus": gpus(),
        "model": {"family": bed.FAMILY, "architecture": target["architectures"][0],
                  "layers": target["num_hidden_layers"],
                  "hidden_size": target["hidden_size"], "vocab_size": target["vocab_size"],
                  "weights": "random", "decisive": bed.DECISIVE,
                  "draft": {"architecture": draft["architectures"][0], "layers": draft["num_hidden_layers"],
                            "model_type": draft.get("model_type")}},
        # the gates the patch module admitted at setup, and what reverting it (the control leg) did
        "patch_sites": [{k: site.get(k) for k in ("gate", "path", "function", "status")}
                        for site in setup_patch.get("result", {}).get("sites", [])],
        "patch_msg": setup_patch.get("result", {}).get("msg"),
        "fusion_server_args": setup_patch.get("server_args"),
        "fusion_canary": {k: setup_patch.get("canary", {}).get(k) for k in ("passed", "summary")},
        "patch_reverted_for_control": {"msg": bed.patch_record("revert").get("result", {}).get("msg")}
                                      if bed.RANKS else None,
        "server_start": {k: first["server"].get(k) for k in ("argv", "user", "cwd", "environment_files",
                                                               "passed_from_host", "added")},
        "steps": state["steps"],
        # FlashInfer's fused all-reduce kernel: carried from an earlier machine (FlashInfer's prebuilt location) or
        # built here by nvcc (the canary's first call), and what loading it as the server reported (E2E_JIT=build)
        "trtllm_comm": dict(state.get("trtllm_comm") or {}, carried=any(
            s["name"] == "unpack_carried_trtllm_comm" for s in state["steps"]),
                            built_here=state.get("trtllm_comm_built")),
        "fusion_log_line": (first.get("fusion_log_lines") or [""])[0],
        "fusion_off_lines": first.get("fusion_off_lines"),
        "fusion_prove_rc": first.get("prove_rc"),
        "fused_kernel_calls": first.get("flashinfer_api_calls"),
        "health_generate_status": first.get("health_generate_status"),
        # the first server start on the machine (empty compile caches) against the later ones: where its time went
        "first_start": next(({"leg": leg["name"], "ready_s": leg["ready_s"], "phases": leg["start"]["phases"],
                              "cache_growth": leg["start"]["cache_growth"]}
                             for leg in legs if leg.get("first_start")), None),
        "later_starts_ready_s": {leg["name"]: leg["ready_s"] for leg in legs if leg.get("first_start") is False},
        "ready_after_s": {name: state["legs"][name].get("ready", {}).get("since_start_s") for name in reports},
        "stops": {name: state["legs"][name].get("stopped") for name in reports},
        "tp_size": bed.tp_size(),
        "legs": legs,
        "legs_not_run": not_run,
        "greedy_match": match,
        "greedy_max_new_tokens": bed.GREEDY_TOKENS,
        "greedy_mismatches": explained,
        "greedy_tie_bound": greedy_ties.TIE_BOUND,
        "greedy_repeat": repeated,
        "greedy_gaps": {name: [greedy_ties.gaps(logprob_requests(state, name).get(prompt, {}).get("top_logprobs"))
                               for prompt in bed.PROMPTS] for name in reports},
        "completions": {name: [c.get("output_ids") for c in reports[name]["completions"]] for name in reports},
        # the production gate's comparison (module_utils/bench_gate.py) of the runner's completions with the plain
        # leg's, logprobs and all: where they part, and which partings it takes for ties
        "gate_correctness": {name: gate_correctness(reports["plain"], reports[name]) for name in reports
                             if name != "plain"},
        # every leg ran with an API key through the role's options file: where the key could be read on the first
        # leg, and which answers the real server refused without it (the fixture below has them all)
        "api_key": dict(first.get("api_key") or {}, refused_without_key=sorted(
            "%s %s" % (c["method"], c["path"]) for c in first.get("unauthorized") or []
            if c["auth"] == "none" and c["status"] == 401)),
    }
    logprobs = {"made_by": doc["made_by"], "date": doc["date"], "prompts": bed.PROMPTS,
                "legs": {name: logprob_requests(state, name) for name in reports},
                "gate_completions": {name: reports[name]["completions"] for name in reports}}
    fixture = {"sglang": versions.get("sglang"), "recorded": doc["date"], "responses": first.get("responses"),
               "unauthorized": first.get("unauthorized"),
               "log_lines": first.get("log_lines"), "fusion_log_lines": first.get("fusion_log_lines"),
               "client_result_keys": sorted((reports[state["first_leg"]]["runs"][0]["result"] or {}).keys()),
               "client_module": reports[state["first_leg"]]["client"]["module"]}
    # The key in nothing that is kept: the evidence, the fixture, the gate runner's reports (bench-<leg>.json).
    key = bed.api_key()
    doc["api_key"]["in_evidence_and_gate_reports"] = sum(
        json.dumps(part).count(key) for part in (doc, logprobs, fixture, reports))
    for name, content in ((evidence_name("sglang_e2e"), doc), (evidence_name("sglang_greedy_logprobs"), logprobs),
                          ("sglang_0.5.17_real_server.json", fixture)):
        with open(os.path.join(bed.OUT, name), "w", encoding="utf-8") as handle:
            json.dump(content, handle, indent=1)
    return 0
