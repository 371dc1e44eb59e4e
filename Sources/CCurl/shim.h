#ifndef TOKENCTL_CCURL_SHIM_H
#define TOKENCTL_CCURL_SHIM_H

// libcurl is loaded with dlopen the first time tokenctl speaks HTTP, not linked: libcurl and
// the ~30 libraries it pulls in (TLS, SSH, LDAP, Kerberos, IDN...) would otherwise be mapped
// by every `tokenctl` run that only reads the Secret Service (cache misses, status, logout
// --no-revoke). Only the header is used at build time; every call goes through the table below.
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

// The soname of libcurl's current ABI (Debian: libcurl4, libcurl4t64).
#define TOKENCTL_CURL_SONAME "libcurl.so.4"

struct tokenctl_curl_api {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *handle);
    CURLcode (*easy_perform)(CURL *handle);
    const char *(*easy_strerror)(CURLcode code);
    CURLcode (*easy_setopt)(CURL *handle, CURLoption option, ...);
    CURLcode (*easy_getinfo)(CURL *handle, CURLINFO info, ...);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *string);
    void (*slist_free_all)(struct curl_slist *list);
};

struct tokenctl_curl_state {
    struct tokenctl_curl_api api;
    const char *error;
    pthread_once_t once;
};

// The one loader state of the process. A function-local static, since Swift emits a header's
// functions but never its global variables; and a weak, never-inlined function, since every
// Swift module that uses this header (with cross-module optimization, also the modules that
// inline TokenctlCore's code) emits its own copy: a `static inline` copy would give each module
// its own state, loaded in one and empty in another. The linker keeps one weak definition.
__attribute__((weak, noinline)) struct tokenctl_curl_state *tokenctl_curl_state(void) {
    static struct tokenctl_curl_state state = { .once = PTHREAD_ONCE_INIT };
    return &state;
}

#define tokenctl_curl (tokenctl_curl_state()->api)

static inline void tokenctl_curl_load_once(void) {
    void *library = dlopen(TOKENCTL_CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        tokenctl_curl_state()->error = dlerror();
        return;
    }
    struct tokenctl_curl_api api;
    api.global_init = (CURLcode (*)(long))dlsym(library, "curl_global_init");
    api.easy_init = (CURL *(*)(void))dlsym(library, "curl_easy_init");
    api.easy_cleanup = (void (*)(CURL *))dlsym(library, "curl_easy_cleanup");
    api.easy_perform = (CURLcode (*)(CURL *))dlsym(library, "curl_easy_perform");
    api.easy_strerror = (const char *(*)(CURLcode))dlsym(library, "curl_easy_strerror");
    api.easy_setopt = (CURLcode (*)(CURL *, CURLoption, ...))dlsym(library, "curl_easy_setopt");
    api.easy_getinfo = (CURLcode (*)(CURL *, CURLINFO, ...))dlsym(library, "curl_easy_getinfo");
    api.slist_append = (struct curl_slist *(*)(struct curl_slist *, const char *))dlsym(library, "curl_slist_append");
    api.slist_free_all = (void (*)(struct curl_slist *))dlsym(library, "curl_slist_free_all");
    if (!api.global_init || !api.easy_init || !api.easy_cleanup || !api.easy_perform || !api.easy_strerror
        || !api.easy_setopt || !api.easy_getinfo || !api.slist_append || !api.slist_free_all) {
        tokenctl_curl_state()->error = TOKENCTL_CURL_SONAME " lacks a libcurl function tokenctl needs";
        return;
    }
    api.global_init(CURL_GLOBAL_DEFAULT);
    tokenctl_curl = api;
}

// Load libcurl once (thread-safe). Returns NULL on success, else why it could not be loaded.
static inline const char *tokenctl_curl_load(void) {
    pthread_once(&tokenctl_curl_state()->once, tokenctl_curl_load_once);
    return tokenctl_curl.easy_init ? NULL : (tokenctl_curl_state()->error ? tokenctl_curl_state()->error : "unknown error");
}

// The functions tokenctl calls, through the table (call tokenctl_curl_load first).
static inline CURL *tokenctl_curl_easy_init(void) { return tokenctl_curl.easy_init(); }
static inline void tokenctl_curl_easy_cleanup(CURL *handle) { tokenctl_curl.easy_cleanup(handle); }
static inline CURLcode tokenctl_curl_easy_perform(CURL *handle) { return tokenctl_curl.easy_perform(handle); }
static inline const char *tokenctl_curl_easy_strerror(CURLcode code) { return tokenctl_curl.easy_strerror(code); }
static inline struct curl_slist *tokenctl_curl_slist_append(struct curl_slist *list, const char *string) {
    return tokenctl_curl.slist_append(list, string);
}
static inline void tokenctl_curl_slist_free_all(struct curl_slist *list) {
    if (tokenctl_curl.slist_free_all) tokenctl_curl.slist_free_all(list);
}

// curl_easy_setopt and curl_easy_getinfo are variadic: Swift cannot call them.
// One typed wrapper per argument type.
static inline CURLcode tokenctl_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return tokenctl_curl.easy_setopt(handle, option, value);
}

static inline CURLcode tokenctl_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return tokenctl_curl.easy_setopt(handle, option, value);
}

static inline CURLcode tokenctl_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return tokenctl_curl.easy_setopt(handle, option, value);
}

static inline CURLcode tokenctl_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return tokenctl_curl.easy_setopt(handle, option, value);
}

typedef size_t (*tokenctl_curl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode tokenctl_curl_setopt_callback(CURL *handle, CURLoption option, tokenctl_curl_data_callback callback) {
    return tokenctl_curl.easy_setopt(handle, option, callback);
}

static inline CURLcode tokenctl_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return tokenctl_curl.easy_getinfo(handle, info, value);
}

#endif
