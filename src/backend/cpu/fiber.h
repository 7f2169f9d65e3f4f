/* fiber.h — minimal cooperative fibers for the CPU backend.
 *
 * Kernels that synchronise (threadgroup barriers, SIMD operations) run every
 * GPU thread of a threadgroup as a fiber on one worker OS thread. A fiber is a
 * stack plus a saved stack pointer; the context switch is a few instructions
 * of assembly (x86-64 SysV and AArch64 AAPCS64) that push the callee-saved
 * registers and the floating-point control state on the old stack, swap stack
 * pointers and pop them from the new one. It never enters the kernel (unlike
 * swapcontext, which saves the signal mask with a system call).
 *
 * Stacks are mmap'd with a PROT_NONE guard page below them: a kernel thread
 * that overflows its stack (default 64 KiB, ALLOY_CPU_STACK_SIZE) hits the
 * guard page and the process gets SIGSEGV instead of silently corrupting the
 * neighbouring fiber. */
#ifndef ALLOY_CPU_FIBER_H
#define ALLOY_CPU_FIBER_H

#include <stddef.h>

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "alloy CPU fibers support x86-64 and AArch64 only"
#endif

typedef struct alloy_fiber_stack {
    void *map;      /* mmap'd region: guard page, then the usable stack */
    size_t map_len; /* guard + stack */
    void *lo;       /* lowest usable address (just above the guard page) */
    void *hi;       /* one past the highest usable address (16-byte aligned) */
} alloy_fiber_stack;

/* Usable stack size in bytes: ALLOY_CPU_STACK_SIZE (bytes, or with a K/M
 * suffix; at least 16 KiB) or 64 KiB, rounded up to whole pages. Read once. */
size_t alloy_fiber_stack_size(void);

/* Maps a stack of `size` usable bytes (rounded up to pages) with a guard page
 * below it. Returns 0 on success, -1 when out of memory / mappings. */
int alloy_fiber_stack_alloc(alloy_fiber_stack *st, size_t size);
void alloy_fiber_stack_free(alloy_fiber_stack *st);

/* Prepares a fresh context on `st` that, when first switched to, calls
 * entry(arg) with a clean frame and the creating thread's FP control state.
 * `entry` must never return (switch away for good instead). Returns the
 * initial saved stack pointer, to be passed to alloy_fiber_switch. */
void *alloy_fiber_make(const alloy_fiber_stack *st, void (*entry)(void *), void *arg);

/* Saves the current context into *save_sp and resumes the context whose
 * saved stack pointer is `to_sp`. Returns when someone switches back to
 * *save_sp. */
void alloy_fiber_switch(void **save_sp, void *to_sp);

#endif
