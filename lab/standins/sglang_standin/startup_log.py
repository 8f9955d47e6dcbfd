"""The start-up log, in SGLang 0.5.21's formats (format strings copied from the wheel): the lines the roles read
(server_args, Load weight, the FlashInfer allreduce-fusion lines the fusion proof checks, CUDA graph capture,
max_total_num_tokens), and the stand-in's own first line saying what it is."""
from sglang_standin.allreduce import fusion_backend_error, fusion_variant
from sglang_standin.faults import crash_while_loading, scheduler_crash
from sglang_standin.logs import die, log, standin_note, tp_prefix

FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048  # layer_boundary/residual/add_norm.py: max_token_num of the fusion workspace
FUSION_ERROR_DEFAULTS = {
    # the RuntimeError G3 raises when the multicast granularity query fails (flashinfer_comm_fusion.py), as the real
    # 0.5.17 server logged it on an H200 without multicast (its cuda-python prints the CUresult as <NAME: value>)
    "skipped": "cuMulticastGetGranularity failed for FlashInfer workspace preflight: "
               "<CUresult.CUDA_ERROR_NOT_SUPPORTED: 801>",
    # invented: what create_allreduce_fusion_workspace() could raise without CUDA P2P
    "disabled": "CUDA error: peer access is not supported between these two devices",
}


def local_ranks(args):
    per_node = max(1, args.tp_size // max(1, args.nnodes))
    first = args.node_rank * per_node
    return list(range(first, first + per_node))


def print_fusion_lines(server, variant):
    """The lines SGLang 0.5.21 prints while pre-initializing the fusion workspaces (flashinfer_comm_fusion.py)."""
    args = server.args
    if variant == "none" or args.tp_size <= 1:
        return True  # world_size <= 1: ensure_workspace_initialized() returns before logging anything
    backend = "trtllm" if server.fusion_backend in (None, "auto") else server.fusion_backend
    error = server.cfg["fusion_error"] or FUSION_ERROR_DEFAULTS.get(variant, "")
    site = "/opt/sglang/current/lib/python3/site-packages/sglang/srt/layers/flashinfer_comm_fusion.py"
    if variant == "refused" or fusion_backend_error(server):
        message = fusion_backend_error(server) or "FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs."
        scheduler_crash(server, local_ranks(args)[0], "ValueError", message, [
            (site, 97, "resolve_flashinfer_allreduce_fusion_backend",
             "return _resolve_backend(backend, get_parallel().nnodes > 1)"),
            (site, 47, "_resolve_backend", "raise ValueError(")])
        return False
    for rank in local_ranks(args):
        prefix = tp_prefix(server, rank)
        if variant == "enabled":
            for _workspace in ("moe", "attn"):  # pre_initialize_workspaces(): one manager per group, each logs once
                log("FlashInfer AllReduce Fusion enabled and workspace initialized: "
                    "backend=%s, rank=%d, world_size=%d, max_token_num=%d, hidden_dim=%d"
                    % (backend, rank, args.tp_size, FUSE_ALLREDUCE_MAX_BATCH_SIZE, server.hidden_dim), prefix)
        elif variant == "skipped":
            log("FlashInfer workspace preflight probe failed (%s). Skipping allreduce fusion." % error, prefix)
            log("FlashInfer workspace preflight: cuMemCreate probe failed on at least one rank. Skipping "
                "allreduce fusion to avoid cross-rank desync inside the flashinfer collective.", prefix)
        elif variant == "disabled":
            log("Failed to initialize FlashInfer workspace (backend=%s): %s. Disabling flashinfer allreduce "
                "fusion permanently." % (backend, error), prefix)
    return True


def print_startup(server, checked_with, config_path, config_found):
    args, cfg = server.args, server.cfg
    standin_note("this is a stand-in for sglang.launch_server (sglang-sm120-deploy lab), NOT SGLang: no model is "
                 "loaded, no GPU is used, completions are made up. Flags checked with %s; behaviour from %s%s."
                 % (checked_with, config_path, "" if config_found else " (absent: defaults)"))
    if cfg["allreduce_paths"]:
        standin_note("all-reduce path %s (allreduce_paths%s): tokens_per_s=%s, wrong_output=%s"
                     % (server.allreduce_path, "" if server.allreduce_path in cfg["allreduce_paths"] else
                        " names no override for it", cfg["tokens_per_s"], str(cfg["wrong_output"]).lower()))
    if args.enable_flashinfer_allreduce_fusion and args.flashinfer_allreduce_fusion_backend is None:
        log("--enable-flashinfer-allreduce-fusion is deprecated. "
            "Please use --flashinfer-allreduce-fusion-backend=auto instead.")
    log("server_args=%s" % (server.server_args,))
    for rank in local_ranks(args):
        log("Load weight begin. avail mem=%.2f GB" % 94.41, tp_prefix(server, rank))
    if cfg["exit_on_start"] is not None:
        crash_while_loading(server, local_ranks(args)[0], cfg["exit_on_start"])
    for rank in local_ranks(args):
        prefix = tp_prefix(server, rank)
        log("Load weight end. elapsed=%.2f s, type=%s, avail mem=%.2f GB, mem usage=%.2f GB."
            % (0.01, server.architecture, 21.35, 73.06), prefix)
        log("Memory pool end. avail mem=%.2f GB" % 9.12, prefix)
    if not print_fusion_lines(server, fusion_variant(server)):
        die(1)
    for rank in local_ranks(args):
        capture = "target verify" if server.speculative else "target decode"
        log("Capture %s CUDA graph end. elapsed=%.2f s, mem usage=%.2f GB, avail mem=%.2f GB."
            % (capture, 0.01, 1.25, 7.87), tp_prefix(server, rank))
    if 0 in local_ranks(args):
        log("max_total_num_tokens=%d, chunked_prefill_size=%s, max_prefill_tokens=%d, max_running_requests=%d, "
            "context_len=%d, available_gpu_mem=%.2f GB"
            % (server.max_total_num_tokens, args.chunked_prefill_size or 8192, 16384, server.max_running_requests,
               server.context_len, 7.87), tp_prefix(server, 0))
