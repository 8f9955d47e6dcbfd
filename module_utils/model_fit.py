# -*- coding: utf-8 -*-
"""Whether the server's model can fit its GPUs, judged before a deploy changes anything (the deploy preflight).

The rule is a floor, never a guess: the server's tensor-parallel (times pipeline-parallel) ranks each hold at least
1/ranks of the weights, so a model whose weight files, divided by its ranks, exceed one GPU's memory cannot load,
and SGLang refuses a static pool (--mem-fraction-static of the GPU's memory, weights included) smaller than the
weights it holds. A model that passes may still not fit (activations, KV cache, CUDA graphs): that is the server's
to find out. Only what is really known decides:

* the weights: the revision's manifest or verification record as the host holds them (``read_weights``, run on the
  host by the sglang_model_weights module): a model not on the host yet, from a mirror or a hub, has no verdict;
* the GPUs: the host's nvidia_gpu facts (memory.total of each GPU);
* the server: sglang_server_tp_size (else the GPU count), --pp-size and --quantization in its extra arguments
  (a model quantized as it loads holds less than its files: no verdict), sglang_server_mem_fraction_static.

``server_model`` says which of sglang_model_models the server loads; ``fit_problem`` is the verdict; pure, no I/O
except ``read_weights``.
"""
from __future__ import annotations

import math
import os

from ansible.module_utils import model_manifest as mm
from ansible.module_utils import model_store
from ansible.module_utils import safe_files

# The files a checkpoint's weights are in (safetensors, PyTorch pickles, GGUF); config, tokenizer and the rest are
# not loaded onto the GPU.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
MIB = 1024 * 1024


def weight_bytes(files):
    """(bytes, count) of the weight files among a manifest's FILES ([{name, size, ...}])."""
    weights = [entry for entry in files if entry["name"].lower().endswith(WEIGHT_SUFFIXES)]
    return sum(entry["size"] for entry in weights), len(weights)


def server_model(model_path, models, models_dir):
    """The entry of MODELS (sglang_model_models) the server loads from MODEL_PATH (sglang_server_model_path): the one
    whose current link (<MODELS_DIR>/<name>/current) or, for a path source, whose folder it is; None: none of them
    (a folder the role does not manage)."""
    if not isinstance(model_path, str) or not model_path or not isinstance(models, list):
        return None
    wanted = os.path.normpath(model_path)
    for model in models:
        if not isinstance(model, dict) or not isinstance(model.get("name"), str):
            continue
        source = model.get("source") if isinstance(model.get("source"), dict) else {}
        places = [os.path.join(models_dir or "", model["name"], model_store.CURRENT)]
        if source.get("type") == "path" and isinstance(source.get("path"), str):
            places.append(source["path"])
        if any(isinstance(place, str) and os.path.normpath(place) == wanted for place in places):
            return model
    return None


def read_weights(models_dir, name, revision, manifest=None):
    """{'known': True, 'weight_bytes', 'weight_files', 'total_bytes', 'read_from'} of a revision as the host holds
    it: its verification record (root's alone, model_store.read_record), else the path source's MANIFEST on the
    host; {'known': False, 'why'} where neither is there (nothing is fetched to find out)."""
    try:
        record = model_store.read_record(models_dir, name, revision)
    except mm.ModelError as exc:
        return {"known": False, "why": "its record cannot be trusted: %s" % exc}
    if record is not None:
        files, where = record["files"], model_store.record_path(models_dir, name, revision)
    elif manifest:
        try:
            data = safe_files.read_regular(manifest, model_store.MANIFEST_LIMIT)
            files, where = mm.parse_manifest(data, "manifest %s" % manifest), manifest
        except (OSError, safe_files.UnsafeFile, mm.ModelError) as exc:
            return {"known": False, "why": "its manifest %s cannot be read: %s" % (
                manifest, getattr(exc, "strerror", None) or exc)}
    else:
        return {"known": False, "why": "the host holds no record of revision %s of %s (not fetched yet, or an hf "
                                       "branch or tag, recorded under its commit)" % (revision, name)}
    found, count = weight_bytes(files)
    return {"known": True, "weight_bytes": found, "weight_files": count, "total_bytes": mm.total_bytes(files),
            "read_from": where}


def _fraction(value):
    """sglang_server_mem_fraction_static as a number in (0, 1], else None (unset, or refused by sglang_server)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if 0 < number <= 1 and math.isfinite(number) else None


def fit_problem(model, weights, ranks, gpu_mib, mem_fraction=None, quantization=None):
    """(problem or None, why): whether MODEL's WEIGHTS (read_weights' answer) can fit RANKS GPU ranks (tp x pp) of
    GPU_MIB MiB each (the host's largest GPU: a floor that holds on any of them), with MEM_FRACTION (None: not
    set) the share SGLang's static pool may take, weights included. QUANTIZATION: the server's --quantization or
    --torchao-config, if any (weights quantized as they load: no verdict). WHY says what was compared, or why
    nothing was."""
    if not isinstance(weights, dict) or not weights.get("known"):
        return None, "no verdict on the model's fit: %s" % ((weights or {}).get("why") or "its size is not known")
    if not weights.get("weight_files"):
        return None, "no verdict on the model's fit: %s lists no weight files (%s)" % (
            weights.get("read_from"), ", ".join(WEIGHT_SUFFIXES))
    if quantization not in (None, ""):
        return None, ("no verdict on the model's fit: the server quantizes the weights as it loads them "
                      "(%s), so they need less memory than their files" % quantization)
    if not gpu_mib or not ranks:
        return None, "no verdict on the model's fit: the GPUs' memory or the server's ranks are not known"
    fraction = _fraction(mem_fraction)
    budget = gpu_mib * MIB * (fraction or 1.0)
    per_rank = weights["weight_bytes"] / float(ranks)
    held = "%s of weight files (%d, %s) over %d rank(s) is %s a GPU" % (
        mm.human(weights["weight_bytes"]), weights["weight_files"], weights["read_from"], ranks,
        mm.human(int(math.ceil(per_rank))))
    where = ("sglang_server_mem_fraction_static %g of %d MiB = %s, the static pool SGLang puts the weights in"
             % (fraction, gpu_mib, mm.human(int(budget))) if fraction else
             "the GPU's whole memory, %d MiB" % gpu_mib)
    if per_rank <= budget:
        return None, "the weights fit: %s, within %s" % (held, where)
    needed = int(math.ceil(weights["weight_bytes"] / budget))
    fix = ("spread it over %d or more ranks (sglang_server_tp_size, on hosts with that many GPUs, or "
           "sglang_server_multinode_group)" % needed)
    if fraction and per_rank <= gpu_mib * MIB:
        fix += ", raise sglang_server_mem_fraction_static (the weights alone take %.2f of the GPU)" % (
            per_rank / (gpu_mib * MIB))
    return ("%s cannot fit its GPUs: each tensor-parallel rank holds at least 1/%d of the weights, and %s is more "
            "than %s; %s, or serve a smaller or quantized revision" % (model, ranks, held, where, fix)), "too large"
