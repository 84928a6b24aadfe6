/*
 * Preloaded (LD_PRELOAD) into skillhost by scripts/startup-order.py: records which pages of
 * the executable's code a run touches, in the order it first touches them.
 *
 * A run of the binary named by SKILLHOST_ORDER_EXE (other programs the host spawns are left
 * alone) makes its executable's code mapping inaccessible before any of that code runs. The
 * first touch of each page faults; the handler here makes that page executable again and
 * appends the offset in the file of the address touched (8 bytes, native order) to
 * SKILLHOST_ORDER_OUT.<pid>. The
 * kernel maps pages around a fault and reads ahead, so the pages a process has mapped say
 * little about the code it ran; a fault per page says exactly that.
 *
 * The program installs SIGSEGV handlers of its own (Rust's stack-overflow guard, wasmtime's
 * trap handler): `sigaction` is wrapped so that they are kept here and called for every fault
 * that is not a first touch, while this handler stays the one the kernel calls. It runs with
 * SA_NODEFER: a handler of the program's whose page was not touched yet faults inside it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static sigaction_fn real_sigaction;
static uintptr_t code_start, code_end, code_offset;
static int out = -1;
/* The SIGSEGV handler the program asked for (SIG_DFL until it asks). */
static struct sigaction program_handler;

static void on_segv(int sig, siginfo_t *info, void *context) {
    uintptr_t addr = (uintptr_t)info->si_addr;
    if (info->si_code == SEGV_ACCERR && addr >= code_start && addr < code_end) {
        uintptr_t page = addr & ~(uintptr_t)4095;
        if (mprotect((void *)page, 4096, PROT_READ | PROT_EXEC) != 0)
            _exit(125);
        uint64_t offset = addr - code_start + code_offset;
        if (write(out, &offset, sizeof offset) != sizeof offset)
            _exit(125);
        return;
    }
    if (program_handler.sa_flags & SA_SIGINFO) {
        program_handler.sa_sigaction(sig, info, context);
    } else if (program_handler.sa_handler == SIG_DFL) {
        /* The fault happens again on return, and kills as it would have. */
        struct sigaction dfl = {0};
        dfl.sa_handler = SIG_DFL;
        real_sigaction(SIGSEGV, &dfl, NULL);
    } else if (program_handler.sa_handler != SIG_IGN) {
        program_handler.sa_handler(sig);
    }
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (!real_sigaction)
        real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (sig != SIGSEGV || out < 0)
        return real_sigaction(sig, act, old);
    if (old)
        *old = program_handler;
    if (act)
        program_handler = *act;
    return 0;
}

__attribute__((constructor)) static void track(void) {
    const char *exe_wanted = getenv("SKILLHOST_ORDER_EXE");
    const char *out_prefix = getenv("SKILLHOST_ORDER_OUT");
    char exe[PATH_MAX], line[PATH_MAX + 256], path[PATH_MAX], perms[8], name[PATH_MAX + 32];
    if (!exe_wanted || !out_prefix)
        return;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = 0;
    if (strcmp(exe, exe_wanted) != 0)
        return;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return;
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, end, offset;
        path[0] = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095s", &start, &end, perms, &offset, path) < 4)
            continue;
        if (perms[2] == 'x' && strcmp(path, exe) == 0) {
            code_start = start;
            code_end = end;
            code_offset = offset;
            break;
        }
    }
    fclose(maps);
    if (!code_start)
        return;
    snprintf(name, sizeof name, "%s.%d", out_prefix, (int)getpid());
    out = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0)
        return;
    real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    struct sigaction mine = {0};
    mine.sa_sigaction = on_segv;
    mine.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&mine.sa_mask);
    program_handler.sa_handler = SIG_DFL;
    if (real_sigaction(SIGSEGV, &mine, NULL) != 0 || mprotect((void *)code_start, code_end - code_start, PROT_NONE) != 0) {
        close(out);
        out = -1;
    }
}
