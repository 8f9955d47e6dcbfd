"""The one CUDA-graph timer of the all-reduce scripts (allreduce_canary.py, allreduce_bench.py import it from the
folder they are installed in together): a kernel timed as SGLang runs decode, a chain of calls captured in one CUDA
graph and replayed. Importable without torch (it is passed in)."""


def graph_time_us(torch, fn, iters, reps):
    """This rank's mean time of fn() in microseconds inside a CUDA graph (iters calls per graph, replayed reps
    times), after three warm-up calls on a side stream (capture needs them off the default stream)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _warmup in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _step in range(iters):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _rep in range(reps):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    elapsed_us = start.elapsed_time(end) * 1000.0 / (iters * reps)
    del graph  # a captured NCCL graph alive at teardown can hang destroy_process_group
    torch.cuda.synchronize()
    return elapsed_us


def slowest_rank_us(torch, dist, elapsed_us):
    """The largest of every rank's time: what a decode step waits for."""
    value = torch.tensor([elapsed_us], device="cuda")
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return value.item()
