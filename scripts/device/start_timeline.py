"""Where a server start's time goes: the span between SGLang's own start-up log lines, and what the start wrote
to the service user's compile caches (Triton, FlashInfer's JIT, torch's inductor, DeepGEMM) while it ran.

Pure functions over a log's lines and two snapshots of the cache folders (the legs take them before the start and
when the server is ready); tests/unit/test_start_timeline.py runs them on real captured logs.
"""
import os
import re

LINE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: [A-Z]+\d+)*\] (.*)")
# SGLang 0.5.17's start-up lines, in the order a start passes them: (marker, text it begins with, first or last)
MARKERS = (
    ("arguments_parsed", "server_args=", "first"),
    ("distributed_init", "Init torch distributed begin", "first"),
    ("weights_loading", "Load weight begin", "first"),
    ("weights_loaded", "Load weight end", "last"),
    ("kv_cache_allocated", "Memory pool end", "last"),
    ("fusion_workspace_ready", "FlashInfer AllReduce Fusion enabled", "first"),
    ("cuda_graphs_capturing", "Capture ", "first"),
    ("cuda_graphs_captured", "Capture ", "last"),
    ("http_up", "Application startup complete", "first"),
    ("ready", "The server is fired up and ready to roll", "first"),
)


def _seconds(stamp):
    """Seconds of the day from 'YYYY-MM-DD HH:MM:SS' (a start never spans days in these runs; days add 86400)."""
    day, clock = stamp.split(" ")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    return int(day.replace("-", "")) * 86400 + hours * 3600 + minutes * 60 + seconds


def markers(lines):
    """{marker: seconds since the first timestamped line} for each marker the log has."""
    stamped = []
    for line in lines:
        found = LINE.search(line)
        if found:
            stamped.append((_seconds(found.group(1)), found.group(2)))
    if not stamped:
        return {}
    origin = stamped[0][0]
    out = {}
    for name, prefix, which in MARKERS:
        wanted = "CUDA graph begin" if name.endswith("capturing") else "CUDA graph end"
        hits = [t for t, text in stamped if text.startswith(prefix) and (prefix != "Capture " or wanted in text)]
        if hits:
            out[name] = (hits[0] if which == "first" else hits[-1]) - origin
    return out


def phases(lines):
    """[{"from", "to", "seconds"}] between consecutive markers of the log, in time order: where a start spent its
    time (a long span after kv_cache_allocated is the fused all-reduce's kernel being built or loaded, one inside
    the CUDA-graph capture is Triton compiling the kernels each batch size runs)."""
    found = sorted(markers(lines).items(), key=lambda item: item[1])
    return [{"from": a, "to": b, "seconds": tb - ta} for (a, ta), (b, tb) in zip(found, found[1:])]


def snapshot(roots):
    """{path: [size, mtime]} of every regular file under ROOTS (links not followed; missing roots skipped)."""
    files = {}
    for root in roots:
        for folder, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if os.path.stat.S_ISREG(info.st_mode):
                    files[path] = [info.st_size, info.st_mtime]
    return files


def cache_kind(path):
    """Which compile cache a file belongs to, by the folders its tools use."""
    for kind, needle in (("triton", "/.triton/"), ("flashinfer_jit", "/flashinfer/"), ("inductor", "/torchinductor_"),
                         ("deep_gemm", "deep_gemm"), ("tvm_ffi", "tvm"), ("torch_extensions", "torch_extensions")):
        if needle in path:
            return kind
    return "other"


def growth(before, after, started_at):
    """{kind: {"files", "bytes", "first_s", "last_s"}} of the files a start added or rewrote (relative to
    STARTED_AT, in seconds): which caches it filled, and over which part of the start it wrote them."""
    out = {}
    for path, (size, mtime) in after.items():
        if before.get(path) == [size, mtime]:
            continue
        entry = out.setdefault(cache_kind(path), {"files": 0, "bytes": 0, "first_s": None, "last_s": None})
        offset = round(mtime - started_at, 1)
        entry["files"] += 1
        entry["bytes"] += size
        entry["first_s"] = offset if entry["first_s"] is None else min(entry["first_s"], offset)
        entry["last_s"] = offset if entry["last_s"] is None else max(entry["last_s"], offset)
    return out
