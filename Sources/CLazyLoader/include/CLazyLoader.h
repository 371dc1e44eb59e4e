#ifndef TOKENCTL_CLAZYLOADER_H
#define TOKENCTL_CLAZYLOADER_H

// The one loader of the libraries tokenctl opens with dlopen on first use (libcurl, OpenSSL's
// libcrypto, libgcrypt, libqrencode: the C targets CCurl, CCrypto, CGcrypt and CQRencode).
// This header declares and defines nothing that has a body: its two macros are expanded by
// those targets, TOKENCTL_LAZY_DECLARE in the target's header and TOKENCTL_LAZY_DEFINE in its
// one .c file, so that each library has one table and one loader state per process.
//
// For the functions FUNCTIONS(X) lists (each a real function of the library's header, not a
// macro):
//
// TOKENCTL_LAZY_DECLARE(prefix, FUNCTIONS) declares
//   struct prefix##_api       one pointer per function, typed from the header's declaration
//   prefix##_open(...)        open a library by soname into a table: NULL, or why not (tests
//                             point it at another library)
//   prefix##_load()           load the library once (thread-safe): NULL, or why not
//
// TOKENCTL_LAZY_DEFINE(prefix, FUNCTIONS, soname, after_load) defines, in the .c file,
//   prefix##_state            the process's one loader state (static: this file's), whose
//                             `api` member is the loaded table
//   prefix##_open, prefix##_load; the first successful load runs `after_load`, a statement
//                             that may call the new table through `api`
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

// Open `soname` and look up `count` functions by `names`, in order, into `functions`. Returns
// NULL on success, else why not (dlerror's text, or the first function the library lacks),
// written to `message`. A library that lacks a function is closed again. (lazy_loader.c)
const char *tokenctl_lazy_open(const char *soname, const char *const *names, void **functions, size_t count,
                               char *message, size_t size);

#define TOKENCTL_LAZY_FIELD(name) __typeof__(name) *name;
#define TOKENCTL_LAZY_NAME(name) #name,
#define TOKENCTL_LAZY_ASSIGN(name) api->name = (__typeof__(name) *)functions[index++];

#define TOKENCTL_LAZY_DECLARE(prefix, FUNCTIONS) \
    struct prefix##_api { FUNCTIONS(TOKENCTL_LAZY_FIELD) }; \
    const char *prefix##_open(const char *library, struct prefix##_api *api, char *message, size_t size); \
    const char *prefix##_load(void);

#define TOKENCTL_LAZY_DEFINE(prefix, FUNCTIONS, soname, after_load) \
    static struct { \
        struct prefix##_api api; \
        const char *error; \
        char message[256]; \
        pthread_once_t once; \
        int loaded; \
    } prefix##_state = { .once = PTHREAD_ONCE_INIT }; \
    const char *prefix##_open(const char *library, struct prefix##_api *api, char *message, size_t size) { \
        static const char *const names[] = { FUNCTIONS(TOKENCTL_LAZY_NAME) }; \
        void *functions[sizeof names / sizeof names[0]]; \
        const char *error = tokenctl_lazy_open(library, names, functions, sizeof names / sizeof names[0], message, size); \
        if (error != NULL) return error; \
        size_t index = 0; \
        FUNCTIONS(TOKENCTL_LAZY_ASSIGN) \
        (void)index; \
        return NULL; \
    } \
    static void prefix##_load_once(void) { \
        struct prefix##_api api; \
        prefix##_state.error = prefix##_open(soname, &api, prefix##_state.message, sizeof prefix##_state.message); \
        if (prefix##_state.error == NULL) { \
            after_load; \
            prefix##_state.api = api; \
            prefix##_state.loaded = 1; \
        } \
    } \
    const char *prefix##_load(void) { \
        pthread_once(&prefix##_state.once, prefix##_load_once); \
        return prefix##_state.loaded ? NULL : (prefix##_state.error ? prefix##_state.error : "unknown error"); \
    }

#endif
