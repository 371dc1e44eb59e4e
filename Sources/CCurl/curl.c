// The bodies of CCurl.h: libcurl's table, its one loader state, and tokenctl's calls through it.
#include "CCurl.h"
#include <string.h>

TOKENCTL_LAZY_DEFINE(tokenctl_curl, TOKENCTL_CURL_FUNCTIONS, TOKENCTL_CURL_SONAME, api.curl_global_init(CURL_GLOBAL_DEFAULT))
#define tokenctl_curl (tokenctl_curl_state.api)

CURL *tokenctl_curl_easy_init(void) { return tokenctl_curl.curl_easy_init(); }
void tokenctl_curl_easy_cleanup(CURL *handle) { tokenctl_curl.curl_easy_cleanup(handle); }
void tokenctl_curl_easy_reset(CURL *handle) { tokenctl_curl.curl_easy_reset(handle); }
CURLcode tokenctl_curl_easy_perform(CURL *handle) { return tokenctl_curl.curl_easy_perform(handle); }
const char *tokenctl_curl_easy_strerror(CURLcode code) { return tokenctl_curl.curl_easy_strerror(code); }

struct curl_slist *tokenctl_curl_slist_append(struct curl_slist *list, const char *string) {
    return tokenctl_curl.curl_slist_append(list, string);
}

void tokenctl_curl_slist_free_all(struct curl_slist *list) {
    if (tokenctl_curl.curl_slist_free_all) tokenctl_curl.curl_slist_free_all(list);
}

CURLcode tokenctl_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return (tokenctl_curl.curl_easy_setopt)(handle, option, value);
}

CURLcode tokenctl_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return (tokenctl_curl.curl_easy_setopt)(handle, option, value);
}

CURLcode tokenctl_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return (tokenctl_curl.curl_easy_setopt)(handle, option, value);
}

CURLcode tokenctl_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return (tokenctl_curl.curl_easy_setopt)(handle, option, value);
}

CURLcode tokenctl_curl_setopt_blob(CURL *handle, CURLoption option, const void *data, size_t length) {
    struct curl_blob blob = {.data = (void *)data, .len = length, .flags = CURL_BLOB_COPY};
    return (tokenctl_curl.curl_easy_setopt)(handle, option, &blob);
}

CURLcode tokenctl_curl_setopt_ssl_context(CURL *handle, tokenctl_curl_ssl_context_callback callback, void *data) {
    CURLcode code = (tokenctl_curl.curl_easy_setopt)(handle, CURLOPT_SSL_CTX_FUNCTION, (curl_ssl_ctx_callback)callback);
    return code != CURLE_OK ? code : (tokenctl_curl.curl_easy_setopt)(handle, CURLOPT_SSL_CTX_DATA, data);
}

CURLcode tokenctl_curl_setopt_callback(CURL *handle, CURLoption option, tokenctl_curl_data_callback callback) {
    return (tokenctl_curl.curl_easy_setopt)(handle, option, callback);
}

CURLcode tokenctl_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return (tokenctl_curl.curl_easy_getinfo)(handle, info, value);
}

CURLcode tokenctl_curl_getinfo_string(CURL *handle, CURLINFO info, const char **value) {
    char *result = NULL;
    CURLcode code = (tokenctl_curl.curl_easy_getinfo)(handle, info, &result);
    *value = result;
    return code;
}

const char *tokenctl_curl_certinfo_field(CURL *handle, int index, const char *field) {
    struct curl_certinfo *info = NULL;
    if ((tokenctl_curl.curl_easy_getinfo)(handle, CURLINFO_CERTINFO, &info) != CURLE_OK || !info) return NULL;
    if (index < 0 || index >= info->num_of_certs) return NULL;
    size_t length = strlen(field);
    for (struct curl_slist *line = info->certinfo[index]; line; line = line->next) {
        if (strncmp(line->data, field, length) == 0) return line->data + length;
    }
    return NULL;
}
