#ifndef TOKENCTL_CCURL_SHIM_H
#define TOKENCTL_CCURL_SHIM_H

// libcurl is loaded with dlopen the first time tokenctl speaks HTTP, not linked: libcurl and
// the ~30 libraries it pulls in (TLS, SSH, LDAP, Kerberos, IDN...) would otherwise be mapped
// by every `tokenctl` run that only reads the Secret Service (cache misses, status, logout
// --no-revoke). Only the header is used at build time; every call goes through the table below.
#include <curl/curl.h>
#include <stddef.h>
#include "../CLazyLoader/lazy_loader.h"

// The soname of libcurl's current ABI (Debian: libcurl4, libcurl4t64).
#define TOKENCTL_CURL_SONAME "libcurl.so.4"

// Every libcurl function tokenctl calls. curl_easy_setopt and curl_easy_getinfo are variadic,
// and curl.h may define them as type-checking macros too: the wrappers below call them as
// `(tokenctl_curl.curl_easy_setopt)(…)`, which no function-like macro matches.
#define TOKENCTL_CURL_FUNCTIONS(X) \
    X(curl_global_init) \
    X(curl_easy_init) \
    X(curl_easy_cleanup) \
    X(curl_easy_reset) \
    X(curl_easy_perform) \
    X(curl_easy_strerror) \
    X(curl_easy_setopt) \
    X(curl_easy_getinfo) \
    X(curl_slist_append) \
    X(curl_slist_free_all)

// The table, its one state and its loader (Sources/CLazyLoader/lazy_loader.h); libcurl's global
// initialisation runs once, right after the load.
TOKENCTL_LAZY_LIBRARY(tokenctl_curl, TOKENCTL_CURL_FUNCTIONS, TOKENCTL_CURL_SONAME, api.curl_global_init(CURL_GLOBAL_DEFAULT))
#define tokenctl_curl (tokenctl_curl_state()->api)

// The functions tokenctl calls, through the table (call tokenctl_curl_load first).
static inline CURL *tokenctl_curl_easy_init(void) { return tokenctl_curl.curl_easy_init(); }
static inline void tokenctl_curl_easy_cleanup(CURL *handle) { tokenctl_curl.curl_easy_cleanup(handle); }
static inline void tokenctl_curl_easy_reset(CURL *handle) { tokenctl_curl.curl_easy_reset(handle); }
static inline CURLcode tokenctl_curl_easy_perform(CURL *handle) { return tokenctl_curl.curl_easy_perform(handle); }
static inline const char *tokenctl_curl_easy_strerror(CURLcode code) { return tokenctl_curl.curl_easy_strerror(code); }
static inline struct curl_slist *tokenctl_curl_slist_append(struct curl_slist *list, const char *string) {
    return tokenctl_curl.curl_slist_append(list, string);
}
static inline void tokenctl_curl_slist_free_all(struct curl_slist *list) {
    if (tokenctl_curl.curl_slist_free_all) tokenctl_curl.curl_slist_free_all(list);
}

// curl_easy_setopt and curl_easy_getinfo are variadic: Swift cannot call them.
// One typed wrapper per argument type.
static inline CURLcode tokenctl_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return (tokenctl_curl.curl_easy_setopt)(handle, option, value);
}

static inline CURLcode tokenctl_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return (tokenctl_curl.curl_easy_setopt)(handle, option, value);
}

static inline CURLcode tokenctl_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return (tokenctl_curl.curl_easy_setopt)(handle, option, value);
}

static inline CURLcode tokenctl_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return (tokenctl_curl.curl_easy_setopt)(handle, option, value);
}

typedef size_t (*tokenctl_curl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode tokenctl_curl_setopt_callback(CURL *handle, CURLoption option, tokenctl_curl_data_callback callback) {
    return (tokenctl_curl.curl_easy_setopt)(handle, option, callback);
}

static inline CURLcode tokenctl_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return (tokenctl_curl.curl_easy_getinfo)(handle, info, value);
}

#endif
