#ifndef TOKENCTL_CCURL_H
#define TOKENCTL_CCURL_H

// libcurl is loaded with dlopen the first time tokenctl speaks HTTP, not linked: libcurl and
// the ~30 libraries it pulls in (TLS, SSH, LDAP, Kerberos, IDN...) would otherwise be mapped
// by every `tokenctl` run that only reads the Secret Service (cache misses, status, logout
// --no-revoke). Only the header is used at build time (Debian: libcurl4-openssl-dev); every
// call goes through the table that curl.c loads, and the bodies are in curl.c.
#include <curl/curl.h>
#include <stddef.h>
#include "CLazyLoader.h"

// The soname of libcurl's current ABI (Debian: libcurl4, libcurl4t64).
#define TOKENCTL_CURL_SONAME "libcurl.so.4"

// Every libcurl function tokenctl calls. curl_easy_setopt and curl_easy_getinfo are variadic,
// and curl.h may define them as type-checking macros too: curl.c calls them as
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

// struct tokenctl_curl_api, tokenctl_curl_open and tokenctl_curl_load (CLazyLoader.h);
// libcurl's global initialisation runs once, right after the load.
TOKENCTL_LAZY_DECLARE(tokenctl_curl, TOKENCTL_CURL_FUNCTIONS)

// The functions tokenctl calls, through the table (call tokenctl_curl_load first).
CURL *tokenctl_curl_easy_init(void);
void tokenctl_curl_easy_cleanup(CURL *handle);
void tokenctl_curl_easy_reset(CURL *handle);
CURLcode tokenctl_curl_easy_perform(CURL *handle);
const char *tokenctl_curl_easy_strerror(CURLcode code);
struct curl_slist *tokenctl_curl_slist_append(struct curl_slist *list, const char *string);
// Does nothing before libcurl is loaded (a list can only exist after).
void tokenctl_curl_slist_free_all(struct curl_slist *list);

// curl_easy_setopt and curl_easy_getinfo are variadic: Swift cannot call them.
// One typed wrapper per argument type.
CURLcode tokenctl_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode tokenctl_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode tokenctl_curl_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode tokenctl_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
// A `struct curl_blob` option (CURLOPT_SSLCERT_BLOB, CURLOPT_SSLKEY_BLOB, libcurl 7.71): the
// bytes are copied by libcurl (CURL_BLOB_COPY), so the caller's buffer may go right after.
CURLcode tokenctl_curl_setopt_blob(CURL *handle, CURLoption option, const void *data, size_t length);

// CURLOPT_SSL_CTX_FUNCTION and CURLOPT_SSL_CTX_DATA (OpenSSL builds only: otherwise
// CURLE_NOT_BUILT_IN): `callback` gets the handle, the connection's SSL_CTX and `data`, before
// the handshake of every new connection, and returns a CURLcode's value (0: go on).
typedef int (*tokenctl_curl_ssl_context_callback)(void *handle, void *sslContext, void *data);
CURLcode tokenctl_curl_setopt_ssl_context(CURL *handle, tokenctl_curl_ssl_context_callback callback, void *data);

typedef size_t (*tokenctl_curl_data_callback)(char *data, size_t size, size_t count, void *context);

CURLcode tokenctl_curl_setopt_callback(CURL *handle, CURLoption option, tokenctl_curl_data_callback callback);
CURLcode tokenctl_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);
// A string CURLINFO (CURLINFO_CAINFO: the CA bundle libcurl uses by default); owned by libcurl.
CURLcode tokenctl_curl_getinfo_string(CURL *handle, CURLINFO info, const char **value);
// After a transfer with CURLOPT_CERTINFO: the value of the line that starts with `field` (as
// "Subject:" or "Issuer:") of certificate `index` of the chain (0: the server's own), or NULL.
// Owned by libcurl, valid until the handle's next transfer or cleanup.
const char *tokenctl_curl_certinfo_field(CURL *handle, int index, const char *field);

#endif
