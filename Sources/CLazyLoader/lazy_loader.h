#ifndef TOKENCTL_LAZY_LOADER_H
#define TOKENCTL_LAZY_LOADER_H

// The one loader of the libraries tokenctl opens with dlopen on first use (libcurl, OpenSSL's
// libcrypto, libgcrypt, libqrencode; CCurl, CCrypto, CGcrypt and CQRencode include this header). Not a module of
// its own: only those shims include it, by path.
//
// TOKENCTL_LAZY_LIBRARY(prefix, FUNCTIONS, soname, after_load) defines, for the functions FUNCTIONS(X)
// lists (each a real function of the library's header, not a macro):
//   struct prefix##_api       one pointer per function, typed from the header's declaration
//   prefix##_state()          the process's one loader state
//   prefix                    the table (`prefix.name(...)` calls a function)
//   prefix##_open(...)        open a library by soname into a table: NULL, or why not
//   prefix##_load()           load `soname` once (thread-safe): NULL, or why not; then runs
//                             `after_load`, a statement that may call the table through `api`
//
// The state is a function-local static in a weak, never-inlined function: Swift emits a
// header's functions but never its global variables, and every Swift module that uses the
// header (with cross-module optimization, also the modules that inline TokenctlCore's code)
// emits its own copy; a `static inline` copy would give each module its own state, loaded in one
// and empty in another. The linker keeps one weak definition.
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

// Open `soname` and look up `count` functions by `names`, in order, into `functions`. Returns
// NULL on success, else why not (dlerror's text, or the first function the library lacks),
// written to `message`. A library that lacks a function is closed again.
static inline const char *tokenctl_lazy_open(const char *soname, const char *const *names, void **functions, size_t count,
                                             char *message, size_t size) {
    void *library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *why = dlerror();
        snprintf(message, size, "%s", why ? why : "dlopen failed");
        return message;
    }
    for (size_t index = 0; index < count; index++) {
        functions[index] = dlsym(library, names[index]);
        if (functions[index] == NULL) {
            snprintf(message, size, "%s lacks a function tokenctl needs (%s)", soname, names[index]);
            dlclose(library);
            return message;
        }
    }
    return NULL;
}

#define TOKENCTL_LAZY_FIELD(name) __typeof__(name) *name;
#define TOKENCTL_LAZY_NAME(name) #name,
#define TOKENCTL_LAZY_ASSIGN(name) api->name = (__typeof__(name) *)functions[index++];

#define TOKENCTL_LAZY_LIBRARY(prefix, FUNCTIONS, soname, after_load) \
    struct prefix##_api { FUNCTIONS(TOKENCTL_LAZY_FIELD) }; \
    struct prefix##_state { \
        struct prefix##_api api; \
        const char *error; \
        char message[256]; \
        pthread_once_t once; \
        int loaded; \
    }; \
    __attribute__((weak, noinline)) struct prefix##_state *prefix##_state(void) { \
        static struct prefix##_state state = { .once = PTHREAD_ONCE_INIT }; \
        return &state; \
    } \
    static inline const char *prefix##_open(const char *library, struct prefix##_api *api, char *message, size_t size) { \
        static const char *const names[] = { FUNCTIONS(TOKENCTL_LAZY_NAME) }; \
        void *functions[sizeof names / sizeof names[0]]; \
        const char *error = tokenctl_lazy_open(library, names, functions, sizeof names / sizeof names[0], message, size); \
        if (error != NULL) return error; \
        size_t index = 0; \
        FUNCTIONS(TOKENCTL_LAZY_ASSIGN) \
        (void)index; \
        return NULL; \
    } \
    static inline void prefix##_load_once(void) { \
        struct prefix##_state *state = prefix##_state(); \
        struct prefix##_api api; \
        state->error = prefix##_open(soname, &api, state->message, sizeof state->message); \
        if (state->error == NULL) { \
            after_load; \
            state->api = api; \
            state->loaded = 1; \
        } \
    } \
    static inline const char *prefix##_load(void) { \
        pthread_once(&prefix##_state()->once, prefix##_load_once); \
        return prefix##_state()->loaded ? NULL : (prefix##_state()->error ? prefix##_state()->error : "unknown error"); \
    }

#endif
