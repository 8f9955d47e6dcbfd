# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the deployment reads from a model directory on the host: the hidden size and architecture in its config.json.

The hidden size sizes every all-reduce of a verify step (tokens x hidden), so the fusion and PCIe IPC canaries prove
the model's own shape with it. One reader for both (the sglang_model_config module for fusion_patch,
sglang_allreduce_paths for PCIe IPC), so the two canaries can never disagree about the model. The architecture is
the class SGLang loads (the first of ``architectures``, as SGLang takes it); the fusion proof checks it against the
architectures whose layers call the fused kernel."""
from __future__ import annotations

import json
import os

# Where multimodal wrappers keep the language model's settings (Kimi-K2.5: text_config).
NESTED = ("text_config", "language_config")


class ModelConfigError(Exception):
    """A model directory whose hidden size cannot be read; the message says which file and why."""


def config_path(model_path):
    return os.path.join(model_path, "config.json")


def hidden_size(config, source="config.json"):
    """The integer hidden_size of a parsed config.json (top level, else text_config or language_config). Pure."""
    if not isinstance(config, dict):
        raise ModelConfigError("%s is not a JSON object" % source)
    for holder in (config,) + tuple(config.get(name) for name in NESTED):
        value = holder.get("hidden_size") if isinstance(holder, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    raise ModelConfigError("%s has no positive integer hidden_size (top level, %s)" % (source, " or ".join(NESTED)))


def _read_config(model_path, what):
    """(path, parsed config.json) of ``model_path``; ModelConfigError saying WHAT could not be read, and why."""
    path = config_path(model_path)
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return path, json.load(handle)
    except (OSError, ValueError) as exc:
        raise ModelConfigError("cannot read the model's %s from %s: %s" % (what, path, exc))


def read_hidden_size(model_path):
    """hidden_size from ``model_path``/config.json; ModelConfigError naming the file and the reason."""
    path, config = _read_config(model_path, "hidden_size")
    return hidden_size(config, path)


def architecture(config, source="config.json"):
    """The architecture SGLang loads for a parsed config.json: the first name of its top-level ``architectures``. Pure."""
    if not isinstance(config, dict):
        raise ModelConfigError("%s is not a JSON object" % source)
    names = config.get("architectures")
    if not isinstance(names, list) or not names or not isinstance(names[0], str) or not names[0]:
        raise ModelConfigError("%s has no architectures list naming the model's class" % source)
    return names[0]


def read_architecture(model_path):
    """The architecture from ``model_path``/config.json; ModelConfigError naming the file and the reason."""
    path, config = _read_config(model_path, "architecture")
    return architecture(config, path)
