/* fiber.c — context switch (assembly) and guarded fiber stacks.
 *
 * The switch pushes the callee-saved registers of the platform ABI plus the
 * floating-point control state (x86-64: MXCSR and the x87 control word;
 * AArch64: FPCR) on the current stack, stores the stack pointer, loads the
 * other one and pops the same frame. Everything else is caller-saved, so the
 * C compiler already spilled it around the call. A new context is a frame
 * whose return address is a small trampoline that calls entry(arg). */
#include "fiber.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The trampoline lives in the assembly below; its address is only taken. */
void alloy_fiber_trampoline(void);

/* AddressSanitizer keeps "shadow" poison for the redzones of the frames of
 * instrumented functions. A fiber that is abandoned or switched away from for
 * good never returns from its frames, so their poison stays on its stack (and
 * on the address range after munmap). A fresh context, and a freed stack,
 * have nothing live on them: clear the poison, or ASan reports the next write
 * there (the initial frame below, or anything later mapped at that address). */
#if defined(__SANITIZE_ADDRESS__)
#define ALLOY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALLOY_ASAN 1
#endif
#endif
#ifdef ALLOY_ASAN
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define ASAN_FRESH(lo, hi) __asan_unpoison_memory_region((lo), (size_t)((char *)(hi) - (char *)(lo)))
#else
#define ASAN_FRESH(lo, hi) ((void)0)
#endif

#if defined(__x86_64__)

#if defined(__CET__)
#define ALLOY_ENDBR "endbr64\n"
#else
#define ALLOY_ENDBR ""
#endif

/* Frame (from the saved stack pointer up): x87 CW @0, MXCSR @8, r15 @16,
 * r14 @24, r13 @32, r12 @40, rbx @48, rbp @56, return address @64. */
__asm__(
    ".text\n"
    ".globl alloy_fiber_switch\n"
    ".hidden alloy_fiber_switch\n"
    ".type alloy_fiber_switch,@function\n"
    ".p2align 4\n"
    "alloy_fiber_switch:\n"
    ALLOY_ENDBR
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $16, %rsp\n"
    "    stmxcsr 8(%rsp)\n"
    "    fnstcw (%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    fldcw (%rsp)\n"
    "    ldmxcsr 8(%rsp)\n"
    "    addq $16, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size alloy_fiber_switch, .-alloy_fiber_switch\n"
    "\n"
    ".globl alloy_fiber_trampoline\n"
    ".hidden alloy_fiber_trampoline\n"
    ".type alloy_fiber_trampoline,@function\n"
    ".p2align 4\n"
    "alloy_fiber_trampoline:\n"
    ALLOY_ENDBR
    "    movq %r13, %rdi\n"
    "    callq *%r12\n"
    "    ud2\n"
    ".size alloy_fiber_trampoline, .-alloy_fiber_trampoline\n");

void *alloy_fiber_make(const alloy_fiber_stack *st, void (*entry)(void *), void *arg) {
    uint32_t mxcsr = 0;
    uint16_t fpucw = 0;
    ASAN_FRESH(st->lo, st->hi);
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpucw));
    /* After `ret` into the trampoline rsp = hi - 16 (16-byte aligned), so
     * the entry function sees the ABI's alignment after its call. */
    uintptr_t hi = (uintptr_t)st->hi & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(hi - 88);
    memset(sp, 0, 88);
    memcpy(&sp[0], &fpucw, sizeof fpucw);
    memcpy(&sp[1], &mxcsr, sizeof mxcsr);
    sp[4] = (uint64_t)(uintptr_t)arg;   /* r13 */
    sp[5] = (uint64_t)(uintptr_t)entry; /* r12 */
    sp[7] = 0;                          /* rbp: ends frame-pointer chains */
    sp[8] = (uint64_t)(uintptr_t)alloy_fiber_trampoline;
    return sp;
}

#elif defined(__aarch64__)

/* Frame (176 bytes): x19..x30 @0..95, d8..d15 @96..159, FPCR @160. FPCR is
 * only written when it differs (writing it can be slow). */
__asm__(
    ".text\n"
    ".globl alloy_fiber_switch\n"
    ".hidden alloy_fiber_switch\n"
    ".type alloy_fiber_switch,%function\n"
    ".p2align 4\n"
    "alloy_fiber_switch:\n"
    "    sub sp, sp, #176\n"
    "    stp x19, x20, [sp, #0]\n"
    "    stp x21, x22, [sp, #16]\n"
    "    stp x23, x24, [sp, #32]\n"
    "    stp x25, x26, [sp, #48]\n"
    "    stp x27, x28, [sp, #64]\n"
    "    stp x29, x30, [sp, #80]\n"
    "    stp d8, d9, [sp, #96]\n"
    "    stp d10, d11, [sp, #112]\n"
    "    stp d12, d13, [sp, #128]\n"
    "    stp d14, d15, [sp, #144]\n"
    "    mrs x10, fpcr\n"
    "    str x10, [sp, #160]\n"
    "    mov x9, sp\n"
    "    str x9, [x0]\n"
    "    mov sp, x1\n"
    "    ldr x9, [sp, #160]\n"
    "    cmp x9, x10\n"
    "    b.eq 1f\n"
    "    msr fpcr, x9\n"
    "1:\n"
    "    ldp x19, x20, [sp, #0]\n"
    "    ldp x21, x22, [sp, #16]\n"
    "    ldp x23, x24, [sp, #32]\n"
    "    ldp x25, x26, [sp, #48]\n"
    "    ldp x27, x28, [sp, #64]\n"
    "    ldp x29, x30, [sp, #80]\n"
    "    ldp d8, d9, [sp, #96]\n"
    "    ldp d10, d11, [sp, #112]\n"
    "    ldp d12, d13, [sp, #128]\n"
    "    ldp d14, d15, [sp, #144]\n"
    "    add sp, sp, #176\n"
    "    ret\n"
    ".size alloy_fiber_switch, .-alloy_fiber_switch\n"
    "\n"
    ".globl alloy_fiber_trampoline\n"
    ".hidden alloy_fiber_trampoline\n"
    ".type alloy_fiber_trampoline,%function\n"
    ".p2align 4\n"
    "alloy_fiber_trampoline:\n"
    "    mov x0, x20\n"
    "    blr x19\n"
    "    brk #0\n"
    ".size alloy_fiber_trampoline, .-alloy_fiber_trampoline\n");

void *alloy_fiber_make(const alloy_fiber_stack *st, void (*entry)(void *), void *arg) {
    uint64_t fpcr;
    ASAN_FRESH(st->lo, st->hi);
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    uintptr_t hi = (uintptr_t)st->hi & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(hi - 176);
    memset(sp, 0, 176);
    sp[0] = (uint64_t)(uintptr_t)entry;                  /* x19 */
    sp[1] = (uint64_t)(uintptr_t)arg;                    /* x20 */
    sp[10] = 0;                                          /* x29: frame chain end */
    sp[11] = (uint64_t)(uintptr_t)alloy_fiber_trampoline; /* x30 */
    sp[20] = fpcr;
    return sp;
}

#endif

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static size_t stack_size_value;
static pthread_once_t stack_size_once = PTHREAD_ONCE_INIT;

static void stack_size_init(void) {
    size_t size = 64 * 1024;
    const char *env = getenv("ALLOY_CPU_STACK_SIZE");
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(env, &end, 10);
        if (!errno && end != env) {
            if (*end == 'k' || *end == 'K') v *= 1024ull;
            else if (*end == 'm' || *end == 'M') v *= 1024ull * 1024ull;
            if (v >= 16 * 1024 && v <= (1ull << 30)) size = (size_t)v;
        }
    }
    size_t pg = page_size();
    stack_size_value = (size + pg - 1) / pg * pg;
}

size_t alloy_fiber_stack_size(void) {
    pthread_once(&stack_size_once, stack_size_init);
    return stack_size_value;
}

int alloy_fiber_stack_alloc(alloy_fiber_stack *st, size_t size) {
    size_t pg = page_size();
    size = (size + pg - 1) / pg * pg;
    size_t len = size + pg;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
#ifdef MAP_STACK
    flags |= MAP_STACK;
#endif
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (m == MAP_FAILED) return -1;
    if (mprotect(m, pg, PROT_NONE) != 0) {
        munmap(m, len);
        return -1;
    }
    st->map = m;
    st->map_len = len;
    st->lo = (char *)m + pg;
    st->hi = (char *)m + len;
    return 0;
}

void alloy_fiber_stack_free(alloy_fiber_stack *st) {
    if (st->map) {
        ASAN_FRESH(st->lo, st->hi);
        munmap(st->map, st->map_len);
    }
    memset(st, 0, sizeof *st);
}
