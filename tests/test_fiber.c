/* test_fiber.c — the CPU backend's fibers: the assembly context switch keeps
 * callee-saved registers and the floating-point control state, many fibers
 * ping-pong in order, a fiber can use most of its 64 KiB stack, the stack is
 * ABI-aligned and has a guard page below it. Pure C, no kernel compiler. */
#include <fenv.h>
#include <stdint.h>

#include "harness.h"
#include "backend/cpu/fiber.h"

/* ---- callee-saved registers and FP control state ---------------------- */

static void *main_sp, *fib_sp;
static volatile int fib_round_ok = 1;
static volatile int fib_rounds;

/* Two helpers in assembly, so that the test controls every callee-saved
 * register exactly:
 *   test_switch_known(save, to, out): loads known values into all of them,
 *     switches, and stores what they hold after the switch back into out[];
 *   test_switch_junk(save, to): loads junk into all of them and switches.
 * Both preserve the registers for their own caller. */
void test_switch_known(void **save, void *to, uint64_t *out);
void test_switch_junk(void **save, void *to);
#define N_KNOWN 20

#if defined(__x86_64__)
/* out: rbx rbp r12 r13 r14 r15 */
#define N_REGS 6
__asm__(".text\n"
        ".globl test_switch_known\n"
        ".type test_switch_known,@function\n"
        "test_switch_known:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  pushq %rdx\n"
        "  movq $0x1111111111111111, %rbx\n  movq $0x2222222222222222, %rbp\n"
        "  movq $0x3333333333333333, %r12\n  movq $0x4444444444444444, %r13\n"
        "  movq $0x5555555555555555, %r14\n  movq $0x6666666666666666, %r15\n"
        "  call alloy_fiber_switch\n"
        "  movq (%rsp), %rax\n"
        "  movq %rbx, 0(%rax)\n  movq %rbp, 8(%rax)\n  movq %r12, 16(%rax)\n"
        "  movq %r13, 24(%rax)\n  movq %r14, 32(%rax)\n  movq %r15, 40(%rax)\n"
        "  popq %rdx\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size test_switch_known, .-test_switch_known\n"
        ".globl test_switch_junk\n"
        ".type test_switch_junk,@function\n"
        "test_switch_junk:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  movq $-1, %rbx\n  movq $-2, %rbp\n  movq $-3, %r12\n"
        "  movq $-4, %r13\n  movq $-5, %r14\n  movq $-6, %r15\n"
        "  call alloy_fiber_switch\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size test_switch_junk, .-test_switch_junk\n");
static const uint64_t known[N_REGS] = {0x1111111111111111ull, 0x2222222222222222ull,
                                       0x3333333333333333ull, 0x4444444444444444ull,
                                       0x5555555555555555ull, 0x6666666666666666ull};
#elif defined(__aarch64__)
/* out: x19..x29, then the bits of d8..d15 */
#define N_REGS 19
#define SAVE_ALL                                                                         \
    "  sub sp, sp, #176\n  stp x29, x30, [sp, #0]\n"                                    \
    "  stp x19, x20, [sp, #16]\n  stp x21, x22, [sp, #32]\n  stp x23, x24, [sp, #48]\n" \
    "  stp x25, x26, [sp, #64]\n  stp x27, x28, [sp, #80]\n"                             \
    "  stp d8, d9, [sp, #96]\n  stp d10, d11, [sp, #112]\n"                              \
    "  stp d12, d13, [sp, #128]\n  stp d14, d15, [sp, #144]\n"
#define RESTORE_ALL                                                                      \
    "  ldp x29, x30, [sp, #0]\n"                                                         \
    "  ldp x19, x20, [sp, #16]\n  ldp x21, x22, [sp, #32]\n  ldp x23, x24, [sp, #48]\n" \
    "  ldp x25, x26, [sp, #64]\n  ldp x27, x28, [sp, #80]\n"                             \
    "  ldp d8, d9, [sp, #96]\n  ldp d10, d11, [sp, #112]\n"                              \
    "  ldp d12, d13, [sp, #128]\n  ldp d14, d15, [sp, #144]\n"                           \
    "  add sp, sp, #176\n  ret\n"
__asm__(".text\n"
        ".globl test_switch_known\n"
        ".type test_switch_known,%function\n"
        "test_switch_known:\n" SAVE_ALL
        "  str x2, [sp, #160]\n"
        "  mov x19, #19\n  mov x20, #20\n  mov x21, #21\n  mov x22, #22\n  mov x23, #23\n"
        "  mov x24, #24\n  mov x25, #25\n  mov x26, #26\n  mov x27, #27\n  mov x28, #28\n"
        "  mov x29, #29\n"
        "  mov x9, #108\n  fmov d8, x9\n  mov x9, #109\n  fmov d9, x9\n"
        "  mov x9, #110\n  fmov d10, x9\n  mov x9, #111\n  fmov d11, x9\n"
        "  mov x9, #112\n  fmov d12, x9\n  mov x9, #113\n  fmov d13, x9\n"
        "  mov x9, #114\n  fmov d14, x9\n  mov x9, #115\n  fmov d15, x9\n"
        "  bl alloy_fiber_switch\n"
        "  ldr x2, [sp, #160]\n"
        "  stp x19, x20, [x2, #0]\n  stp x21, x22, [x2, #16]\n  stp x23, x24, [x2, #32]\n"
        "  stp x25, x26, [x2, #48]\n  stp x27, x28, [x2, #64]\n  str x29, [x2, #80]\n"
        "  str d8, [x2, #88]\n  str d9, [x2, #96]\n  str d10, [x2, #104]\n"
        "  str d11, [x2, #112]\n  str d12, [x2, #120]\n  str d13, [x2, #128]\n"
        "  str d14, [x2, #136]\n  str d15, [x2, #144]\n" RESTORE_ALL
        ".size test_switch_known, .-test_switch_known\n"
        ".globl test_switch_junk\n"
        ".type test_switch_junk,%function\n"
        "test_switch_junk:\n" SAVE_ALL
        "  mov x19, #-1\n  mov x20, #-1\n  mov x21, #-1\n  mov x22, #-1\n  mov x23, #-1\n"
        "  mov x24, #-1\n  mov x25, #-1\n  mov x26, #-1\n  mov x27, #-1\n  mov x28, #-1\n"
        "  fmov d8, x19\n  fmov d9, x19\n  fmov d10, x19\n  fmov d11, x19\n"
        "  fmov d12, x19\n  fmov d13, x19\n  fmov d14, x19\n  fmov d15, x19\n"
        "  bl alloy_fiber_switch\n" RESTORE_ALL
        ".size test_switch_junk, .-test_switch_junk\n");
static const uint64_t known[N_REGS] = {19,  20,  21,  22,  23,  24,  25,  26,  27, 28,
                                       29,  108, 109, 110, 111, 112, 113, 114, 115};
#endif

static void switch_with_junk(void) { test_switch_junk(&fib_sp, main_sp); }

/* 1/3 under each rounding mode, computed with the FPU/SIMD unit at run time. */
static double third_near, third_up, third_tz;
static double third(void) {
    volatile double one = 1.0, three = 3.0;
    return one / three;
}

static void junk_fiber(void *arg) {
    (void)arg;
    /* This fiber rounds toward zero; main rounds to nearest or upward. */
    fesetround(FE_TOWARDZERO);
    for (;;) {
        fib_rounds++;
        if (fegetround() != FE_TOWARDZERO || third() != third_tz) fib_round_ok = 0;
        switch_with_junk();
    }
}

static void test_registers_and_fp_state(void) {
    fesetround(FE_UPWARD);
    third_up = third();
    fesetround(FE_TOWARDZERO);
    third_tz = third();
    fesetround(FE_TONEAREST);
    third_near = third();
    CHECK(third_up > third_tz);
    alloy_fiber_stack st;
    CHECK(alloy_fiber_stack_alloc(&st, 64 * 1024) == 0);
    fib_sp = alloy_fiber_make(&st, junk_fiber, NULL);
    volatile uint64_t seed = 0x1234567;
    uint64_t a0 = seed * 3, a1 = seed * 5, a2 = seed * 7, a3 = seed * 11, a4 = seed * 13,
             a5 = seed * 17, a6 = seed * 19, a7 = seed * 23, a8 = seed * 29, a9 = seed * 31;
    double d0 = (double)seed * 1.5, d1 = (double)seed * 2.5, d2 = (double)seed * 3.5,
           d3 = (double)seed * 4.5, d4 = (double)seed * 5.5, d5 = (double)seed * 6.5,
           d6 = (double)seed * 7.5, d7 = (double)seed * 8.5, d8 = (double)seed * 9.5;
    int fp_ok = 1, regs_ok = 1;
    const int rounds = 100;
    for (int it = 0; it < rounds; it++) {
        fesetround(it & 1 ? FE_UPWARD : FE_TONEAREST);
        uint64_t out[N_KNOWN] = {0};
        test_switch_known(&main_sp, fib_sp, out);
        for (int r = 0; r < N_REGS; r++)
            if (out[r] != known[r]) regs_ok = 0;
        if (fegetround() != (it & 1 ? FE_UPWARD : FE_TONEAREST)) fp_ok = 0;
        if (third() != (it & 1 ? third_up : third_near)) fp_ok = 0;
        a0 += a1 ^ a2; a1 += a2 ^ a3; a2 += a3 ^ a4; a3 += a4 ^ a5; a4 += a5 ^ a6;
        a5 += a6 ^ a7; a6 += a7 ^ a8; a7 += a8 ^ a9; a8 += a9 ^ a0; a9 += a0 ^ a1;
        d0 += d1 * 0.5; d1 += d2 * 0.25; d2 += d3 * 0.125; d3 += d4 * 0.5; d4 += d5 * 0.25;
        d5 += d6 * 0.125; d6 += d7 * 0.5; d7 += d8 * 0.25; d8 += d0 * 0.125;
    }
    fesetround(FE_TONEAREST);
    /* The same computation without switches. */
    uint64_t b0 = seed * 3, b1 = seed * 5, b2 = seed * 7, b3 = seed * 11, b4 = seed * 13,
             b5 = seed * 17, b6 = seed * 19, b7 = seed * 23, b8 = seed * 29, b9 = seed * 31;
    double e0 = (double)seed * 1.5, e1 = (double)seed * 2.5, e2 = (double)seed * 3.5,
           e3 = (double)seed * 4.5, e4 = (double)seed * 5.5, e5 = (double)seed * 6.5,
           e6 = (double)seed * 7.5, e7 = (double)seed * 8.5, e8 = (double)seed * 9.5;
    for (int it = 0; it < rounds; it++) {
        fesetround(it & 1 ? FE_UPWARD : FE_TONEAREST);
        __asm__ volatile("" ::: "memory");
        b0 += b1 ^ b2; b1 += b2 ^ b3; b2 += b3 ^ b4; b3 += b4 ^ b5; b4 += b5 ^ b6;
        b5 += b6 ^ b7; b6 += b7 ^ b8; b7 += b8 ^ b9; b8 += b9 ^ b0; b9 += b0 ^ b1;
        e0 += e1 * 0.5; e1 += e2 * 0.25; e2 += e3 * 0.125; e3 += e4 * 0.5; e4 += e5 * 0.25;
        e5 += e6 * 0.125; e6 += e7 * 0.5; e7 += e8 * 0.25; e8 += e0 * 0.125;
    }
    fesetround(FE_TONEAREST);
    CHECK(a0 == b0 && a1 == b1 && a2 == b2 && a3 == b3 && a4 == b4);
    CHECK(a5 == b5 && a6 == b6 && a7 == b7 && a8 == b8 && a9 == b9);
    CHECK(d0 == e0 && d1 == e1 && d2 == e2 && d3 == e3 && d4 == e4);
    CHECK(d5 == e5 && d6 == e6 && d7 == e7 && d8 == e8);
    CHECK(regs_ok);
    CHECK(fp_ok);
    CHECK(fib_round_ok);
    CHECK(fib_rounds == rounds);
    alloy_fiber_stack_free(&st);
}

/* ---- many fibers ping-pong -------------------------------------------- */

#define RING 200
#define LAPS 50
static void *ring_sp[RING];
static void *ring_main;
static int ring_trace[RING * LAPS + 1];
static int ring_len;
static int ring_count[RING];

static void ring_fiber(void *arg) {
    int id = (int)(intptr_t)arg;
    for (int lap = 0; lap < LAPS; lap++) {
        ring_count[id]++;
        ring_trace[ring_len++] = id;
        if (id == RING - 1 && lap == LAPS - 1) alloy_fiber_switch(&ring_sp[id], ring_main);
        else alloy_fiber_switch(&ring_sp[id], ring_sp[(id + 1) % RING]);
    }
    for (;;) alloy_fiber_switch(&ring_sp[id], ring_main); /* not reached */
}

static void test_ping_pong(void) {
    static alloy_fiber_stack st[RING];
    for (int i = 0; i < RING; i++) {
        CHECK(alloy_fiber_stack_alloc(&st[i], 16 * 1024) == 0);
        ring_sp[i] = alloy_fiber_make(&st[i], ring_fiber, (void *)(intptr_t)i);
    }
    alloy_fiber_switch(&ring_main, ring_sp[0]);
    CHECK(ring_len == RING * LAPS);
    int order_ok = 1;
    for (int k = 0; k < ring_len; k++) order_ok &= ring_trace[k] == k % RING;
    CHECK(order_ok);
    for (int i = 0; i < RING; i++) CHECK(ring_count[i] == LAPS);
    for (int i = 0; i < RING; i++) alloy_fiber_stack_free(&st[i]);
}

/* ---- deep stack use and alignment ------------------------------------- */

static void *deep_main, *deep_sp;
static uint64_t deep_result;
static int deep_aligned;

static __attribute__((noinline)) uint64_t deep(int depth) {
    volatile unsigned char frame[1024];
    for (int i = 0; i < 1024; i++) frame[i] = (unsigned char)(i * 7 + depth);
    uint64_t s = depth ? deep(depth - 1) : 0;
    for (int i = 0; i < 1024; i += 64) s += frame[i];
    return s;
}

static void deep_fiber(void *arg) {
    int depth = (int)(intptr_t)arg;
    _Alignas(16) volatile double probe[2] = {1, 2};
    deep_aligned = ((uintptr_t)probe % 16) == 0;
    deep_result = deep(depth);
    for (;;) alloy_fiber_switch(&deep_sp, deep_main);
}

static void test_deep_stack(void) {
    size_t size = alloy_fiber_stack_size();
    if (!getenv("ALLOY_CPU_STACK_SIZE")) CHECK(size == 64 * 1024);
    alloy_fiber_stack st;
    CHECK(alloy_fiber_stack_alloc(&st, 64 * 1024) == 0);
    /* ~48 frames of a bit more than 1 KiB: about 52 KiB of the 64 KiB. */
    const int depth = 47;
    deep_sp = alloy_fiber_make(&st, deep_fiber, (void *)(intptr_t)depth);
    alloy_fiber_switch(&deep_main, deep_sp);
    uint64_t want = deep(depth); /* same function on the main stack */
    CHECK(deep_result == want);
    CHECK(deep_aligned);
    /* The fiber really used the bottom part of its stack. */
    const unsigned char *lo = st.lo;
    size_t untouched = 0;
    while (untouched < (size_t)((char *)st.hi - (char *)st.lo) && lo[untouched] == 0) untouched++;
    CHECK(untouched < 16 * 1024);
    alloy_fiber_stack_free(&st);
}

/* ---- guard page ------------------------------------------------------- */

static void test_guard_page(void) {
    alloy_fiber_stack st;
    CHECK(alloy_fiber_stack_alloc(&st, 64 * 1024) == 0);
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) {
        SKIP("/proc/self/maps is not readable");
        alloy_fiber_stack_free(&st);
        return;
    }
    char line[512];
    int guard_found = 0, stack_rw = 0;
    uintptr_t guard_lo = (uintptr_t)st.map, guard_hi = (uintptr_t)st.lo;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
        if (lo <= guard_lo && guard_hi <= hi && perms[0] == '-' && perms[1] == '-' &&
            perms[2] == '-')
            guard_found = 1;
        if (lo <= (uintptr_t)st.lo && (uintptr_t)st.hi <= hi && perms[0] == 'r' &&
            perms[1] == 'w')
            stack_rw = 1;
    }
    fclose(f);
    CHECK(guard_found);
    CHECK(stack_rw);
    CHECK((char *)st.lo - (char *)st.map >= 4096);
    alloy_fiber_stack_free(&st);
}

int main(void) {
    RUN(test_registers_and_fp_state);
    RUN(test_ping_pong);
    RUN(test_deep_stack);
    RUN(test_guard_page);
    return harness_finish();
}
