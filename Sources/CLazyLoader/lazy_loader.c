// The body of CLazyLoader.h's one function: the dlopen and dlsym of every lazily loaded library.
#include "CLazyLoader.h"
#include <stdio.h>

const char *tokenctl_lazy_open(const char *soname, const char *const *names, void **functions, size_t count,
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
