// Process start-up of both executables: the static front (`tokenctl`) and the engine.
//
// 1. argc/argv for the hit path, captured by an .init_array function: glibc calls those with
//    (argc, argv, envp), also in a static executable. The hit path reads them from here rather
//    than through Swift's `CommandLine`, whose lazy globals cost a swift_once and two pages.
//
// 2. Swift's own argv source, `_swift_stdlib_getUnsafeArgvArgc`, defined here so that the
//    linker never pulls the runtime's CommandLine.cpp.o out of libswiftCore.a. On Linux that
//    object has a static initializer (ArgvGrabber) that, in every process and before main,
//    fopen()s /proc/self/maps and sscanf()s each line to locate the stack and walk back from
//    `environ` to argv: about 5 page faults and tens of microseconds of a ~0.6 ms hit. Those
//    two symbols are all the object exports (checked with nm on Swift 6.3.1): should a later
//    runtime export more from it, the link fails with duplicate symbols rather than silently
//    changing behaviour. `CommandLine.arguments`/`unsafeArgv` keep working (the front passes
//    `CommandLine.unsafeArgv` to execv; the engine parses `CommandLine.arguments`) and honour the
//    same override hook. glibc passes (argc, argv, envp) to .init_array functions of a
//    dynamically linked executable too, so the engine links this file for the same saving.
#include "CProcessStartup.h"

#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>

static int captured_argc;
static char **captured_argv;
static char *empty_argv[] = { NULL };

// 3. No core dumps, before any secret is read: a crash of either executable must not write
//    the refresh token to disk (a 47 MB core held it five times). RLIMIT_CORE 0 stops the
//    kernel's core file; PR_SET_DUMPABLE 0 also stops a core pipe handler (systemd-coredump,
//    apport) and ptrace attaches by other processes of the user. Both are inherited by nothing
//    tokenctl runs that matters: children get RLIMIT_CORE 0, and dumpable resets on execve.
static void disable_core_dumps(void) {
    struct rlimit none = { 0, 0 };
    setrlimit(RLIMIT_CORE, &none);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

static void capture_arguments(int argc, char **argv, char **envp) {
    (void)envp;
    disable_core_dumps();
    captured_argc = argc;
    captured_argv = argv;
}

__attribute__((section(".init_array"), used))
static void (*const capture_arguments_entry)(int, char **, char **) = capture_arguments;

int tokenctl_front_argc(void) { return captured_argv ? captured_argc : 0; }
char *const *tokenctl_front_argv(void) { return captured_argv ? captured_argv : empty_argv; }

// The runtime's override hook (used by test harnesses), kept with the same meaning.
static char **override_argv;
static int override_argc;

void _swift_stdlib_overrideUnsafeArgvArgc(char **argv, int argc) {
    override_argv = argv;
    override_argc = argc;
}

// SWIFT_CC(swift) in the runtime, hence swiftcall here.
__attribute__((swiftcall)) char **_swift_stdlib_getUnsafeArgvArgc(int *outArgLen) {
    if (override_argv) {
        *outArgLen = override_argc;
        return override_argv;
    }
    if (!captured_argv) {
        *outArgLen = 0;
        return empty_argv;
    }
    *outArgLen = captured_argc;
    return captured_argv;
}
