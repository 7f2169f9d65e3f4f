// barrier_rounds: a barrier microbenchmark (bench/bench_cpu_pocl.c). Each
// round, every thread writes one cell of a threadgroup buffer, waits at a
// barrier, and adds its neighbour's cell; the buffer alternates between two
// halves, so one barrier per round is race-free (a half is written again
// only two rounds later, after the barrier that follows every read of it).
// rounds: a 0-d int32 scalar (the body sees a value); out (grid,) fp32:
// out[g] = sum over rounds r of (r + (t+1) % n), t the thread's index in
// its group of n threads (exact in fp32 for the benchmark's sizes).
// Launch: grid = (G*n, 1, 1) threads, threadgroup = (n, 1, 1), n <= 256.
//! name: barrier_rounds
//! inputs: rounds
//! outputs: out
//! body:
threadgroup float buf[2][256];
uint t = thread_index_in_threadgroup;
uint n = threads_per_threadgroup.x;
float acc = 0.0f;
for (int r = 0; r < rounds; ++r) {
    buf[r & 1][t] = float(r + int(t));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    acc += buf[r & 1][(t + 1) % n];
}
out[thread_position_in_grid.x] = acc;
