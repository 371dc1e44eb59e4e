#ifndef TOKENCTL_CQRENCODE_SHIM_H
#define TOKENCTL_CQRENCODE_SHIM_H

// libqrencode is loaded with dlopen the first time tokenctl draws a QR code (the device flow on
// a terminal), not linked: every engine start would otherwise map and relocate it, and only
// `login --device` uses it. Only the header is used at build time; every call goes through the
// table below. The QR code is a convenience: when the library cannot be loaded, the device flow
// shows the link and the code without it.
#include <qrencode.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

// The soname of libqrencode's current ABI (Debian: libqrencode4).
#define TOKENCTL_QRENCODE_SONAME "libqrencode.so.4"

struct tokenctl_qrencode_api {
    QRcode *(*encode_string)(const char *string, int version, QRecLevel level, QRencodeMode hint, int casesensitive);
    void (*free_code)(QRcode *code);
};

struct tokenctl_qrencode_state {
    struct tokenctl_qrencode_api api;
    const char *error;
    char message[256];
    pthread_once_t once;
};

// The one loader state of the process. A function-local static, since Swift emits a header's
// functions but never its global variables; and a weak, never-inlined function, since every
// Swift module that uses this header (with cross-module optimization, also the modules that
// inline TokenctlCore's code) emits its own copy: a `static inline` copy would give each module
// its own state, loaded in one and empty in another. The linker keeps one weak definition.
__attribute__((weak, noinline)) struct tokenctl_qrencode_state *tokenctl_qrencode_state(void) {
    static struct tokenctl_qrencode_state state = { .once = PTHREAD_ONCE_INIT };
    return &state;
}

#define tokenctl_qrencode (tokenctl_qrencode_state()->api)

// Open `soname` and fill `api`. Returns NULL on success, else why not (dlerror's text, or that
// the library lacks a function), written to `message`. Separate from the one-time load so a
// test can point it at a library that is absent or not libqrencode.
static inline const char *tokenctl_qrencode_open(const char *soname, struct tokenctl_qrencode_api *api, char *message, size_t size) {
    void *library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *why = dlerror();
        snprintf(message, size, "%s", why ? why : "dlopen failed");
        return message;
    }
    api->encode_string = (QRcode *(*)(const char *, int, QRecLevel, QRencodeMode, int))dlsym(library, "QRcode_encodeString");
    api->free_code = (void (*)(QRcode *))dlsym(library, "QRcode_free");
    if (!api->encode_string || !api->free_code) {
        snprintf(message, size, "%s lacks a function tokenctl needs (%s)", soname,
                 api->encode_string ? "QRcode_free" : "QRcode_encodeString");
        dlclose(library);
        return message;
    }
    return NULL;
}

static inline void tokenctl_qrencode_load_once(void) {
    struct tokenctl_qrencode_state *state = tokenctl_qrencode_state();
    struct tokenctl_qrencode_api api;
    state->error = tokenctl_qrencode_open(TOKENCTL_QRENCODE_SONAME, &api, state->message, sizeof state->message);
    if (state->error == NULL) tokenctl_qrencode = api;
}

// Load libqrencode once (thread-safe). Returns NULL on success, else why it could not be loaded.
static inline const char *tokenctl_qrencode_load(void) {
    pthread_once(&tokenctl_qrencode_state()->once, tokenctl_qrencode_load_once);
    return tokenctl_qrencode.encode_string ? NULL : (tokenctl_qrencode_state()->error ? tokenctl_qrencode_state()->error : "unknown error");
}

// The functions tokenctl calls, through the table (call tokenctl_qrencode_load first). Neither
// is variadic or a macro.
static inline QRcode *tokenctl_qrcode_encode_string(const char *string, int version, QRecLevel level, QRencodeMode hint, int casesensitive) {
    return tokenctl_qrencode.encode_string(string, version, level, hint, casesensitive);
}
static inline void tokenctl_qrcode_free(QRcode *code) { tokenctl_qrencode.free_code(code); }

#endif
