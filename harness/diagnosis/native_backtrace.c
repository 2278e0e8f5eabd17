/* The native frames of a fatal signal in an isolated worker (harness.diagnosis.native_stack).
 *
 * faulthandler prints only the Python frames of a crash: for a segmentation fault inside a runtime's native code
 * (the first GPU runs' AOTInductor loader) the innermost one is the Python function that called into C++. This
 * handler prints the native frames too. The worker loads this library and calls
 * yolo26_bench_install_native_backtrace() after faulthandler is enabled, so this handler runs first: it prints the
 * faulting address, the faulting instruction and the native backtrace, puts the previous handler (faulthandler's)
 * back and returns. A fault raised by the hardware then happens again at the same instruction and reaches
 * faulthandler, which prints the Python frames and ends the process with the same signal; a signal sent by a
 * process (kill, raise, abort) is sent again. Nothing else changes: the process dies of the same signal.
 *
 * Format (parsed by harness.diagnosis.native_stack):
 *   === native fault: signal 11 (code 1) at address 0x0
 *   pc: /path/lib.so +0x1a2b symbol+0x10
 *   #0 /path/lib.so +0x1a2b symbol+0x10
 *   ...
 *   === end of native fault
 * A frame without a symbol prints "?+0x0". Only write(2) and dladdr are called while printing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#define MAX_FRAMES 64

static const int SIGNALS[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
#define NSIG_HANDLED (sizeof SIGNALS / sizeof SIGNALS[0])
static struct sigaction previous[NSIG_HANDLED];

static void put(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void put_hex(unsigned long v) {
    char buf[2 + 2 * sizeof v + 1];
    char *p = buf + sizeof buf - 1;
    *p = '\0';
    do {
        *--p = "0123456789abcdef"[v & 0xf];
        v >>= 4;
    } while (v);
    *--p = 'x';
    *--p = '0';
    put(p);
}

static void put_dec(long v) {
    char buf[24];
    char *p = buf + sizeof buf - 1;
    int neg = v < 0;
    unsigned long u = neg ? (unsigned long)(-v) : (unsigned long)v;
    *p = '\0';
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (neg) *--p = '-';
    put(p);
}

static void put_frame(void *addr) {
    Dl_info d;
    if (addr && dladdr(addr, &d) && d.dli_fname) {
        put(d.dli_fname);
        put(" +");
        put_hex((unsigned long)((char *)addr - (char *)d.dli_fbase));
        put(" ");
        put(d.dli_sname ? d.dli_sname : "?");
        put("+");
        put_hex(d.dli_saddr ? (unsigned long)((char *)addr - (char *)d.dli_saddr) : 0UL);
    } else {
        put("? ");
        put_hex((unsigned long)addr);
        put(" ?+0x0");
    }
    put("\n");
}

static void *fault_pc(void *ucv) {
    ucontext_t *uc = (ucontext_t *)ucv;
    if (!uc) return 0;
#if defined(__x86_64__)
    return (void *)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (void *)uc->uc_mcontext.pc;
#else
    return 0;
#endif
}

static void on_fault(int sig, siginfo_t *si, void *ucv) {
    size_t i;
    void *frames[MAX_FRAMES];
    int n;
    put("\n=== native fault: signal ");
    put_dec(sig);
    put(" (code ");
    put_dec(si ? si->si_code : 0);
    put(") at address ");
    put_hex(si ? (unsigned long)si->si_addr : 0UL);
    put("\npc: ");
    put_frame(fault_pc(ucv));
    n = backtrace(frames, MAX_FRAMES);
    for (int k = 0; k < n; k++) {
        put("#");
        put_dec(k);
        put(" ");
        put_frame(frames[k]);
    }
    put("=== end of native fault\n");
    for (i = 0; i < NSIG_HANDLED; i++) {
        if (SIGNALS[i] == sig) sigaction(sig, &previous[i], 0);
    }
    /* sent by a process (si_code <= 0): send it again; it arrives once this handler returns */
    if (!si || si->si_code <= 0) raise(sig);
}

/* Install the handler in front of the ones in place (faulthandler's). Returns 0, or -1 when sigaction failed. */
int yolo26_bench_install_native_backtrace(void) {
    void *warm[1];
    struct sigaction sa;
    size_t i;
    backtrace(warm, 1); /* loads the unwinder now, not inside the handler */
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < NSIG_HANDLED; i++) {
        if (sigaction(SIGNALS[i], &sa, &previous[i]) != 0) return -1;
    }
    return 0;
}
