"""peer_util.py — what the peer scripts (bench_*_torch.py) share with each
other and with `alloy bench`: reading its output (either form of its table)
and its timing method (wall clock around back-to-back calls, the median of
batches)."""
import json
import time


def lines(path):
    """(record, None) for each JSON line of the `alloy bench` output at path,
    (None, text) for every other line (stripped); lines that look like JSON
    but do not parse are skipped."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    yield json.loads(line), None
                except ValueError:
                    continue
            else:
                yield None, line


def median_per_call(fn, sync, per, reps=9):
    """Seconds per call: the median of `reps` batches of `per` back-to-back
    calls of fn, each batch closed by sync()."""
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(per):
            fn()
        sync()
        ts.append((time.perf_counter() - t0) / per)
    return sorted(ts)[reps // 2]
