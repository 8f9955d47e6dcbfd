#!/usr/bin/python3
"""Check a model and its EAGLE-3 draft before the server is (re)started. Run as the service user.

Offline: only local directories count (a hub id is refused, HF_HUB_OFFLINE=1 serves nothing else).
The draft's architecture must be one the installed SGLang registers as an EAGLE-3 draft, read from its
model sources (EntryClass in sglang/srt/models/*.py), never by import. Prints JSON; exits 1 on problems.
"""
import argparse
import ast
import glob
import json
import os
import sys

WEIGHTS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.gguf")
TOKENIZER = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "tiktoken.model")


def eagle3_architectures(venv):
    names = set()
    for path in glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "sglang", "srt", "models", "*.py")):
        if "eagle3" not in os.path.basename(path):
            continue
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "EntryClass" for t in node.targets):
                values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                names.update(v.id for v in values if isinstance(v, ast.Name))
    return names


def check_dir(path, role, problems, need_tokenizer, need_weights=True):
    info = {"path": path}
    if not os.path.isabs(path):
        problems.append("%s %s is not an absolute local path (hub ids are not fetched: HF_HUB_OFFLINE=1)" % (role, path))
        return info
    if not os.path.isdir(path):
        problems.append("%s directory %s does not exist" % (role, path))
        return info
    if not os.access(path, os.R_OK | os.X_OK):
        problems.append("%s directory %s is not readable by user %s" % (role, path, os.environ.get("USER", os.getuid())))
        return info
    config = os.path.join(path, "config.json")
    try:
        with open(config, encoding="utf-8") as handle:
            info["architectures"] = json.load(handle).get("architectures") or []
    except (OSError, ValueError) as exc:
        problems.append("%s config %s cannot be read as JSON: %s" % (role, config, exc))
    if need_tokenizer and not any(os.path.exists(os.path.join(path, name)) for name in TOKENIZER):
        problems.append("%s %s has no tokenizer (looked for %s)" % (role, path, ", ".join(TOKENIZER)))
    if need_weights and not any(glob.glob(os.path.join(path, pattern)) for pattern in WEIGHTS):
        problems.append("%s %s has no weights (looked for %s)" % (role, path, ", ".join(WEIGHTS)))
    return info


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--venv", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--draft")
    args = parser.parse_args()
    problems = []
    report = {"model": check_dir(args.model, "model", problems, need_tokenizer=True)}
    if args.draft:
        report["draft"] = check_dir(args.draft, "draft", problems, need_tokenizer=False)
        known = eagle3_architectures(args.venv)
        report["eagle3_architectures"] = sorted(known)
        archs = report["draft"].get("architectures")
        if archs is not None and not set(archs) & known:
            problems.append("draft %s declares %s, not an EAGLE-3 draft this SGLang knows (%s)" % (
                args.draft, archs or "no architecture", ", ".join(sorted(known)) or "none found in its sources"))
    report["problems"] = problems
    report["ok"] = not problems
    print(json.dumps(report, sort_keys=True))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
