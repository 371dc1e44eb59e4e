#ifndef TOKENCTL_CSECRET_SHIM_H
#define TOKENCTL_CSECRET_SHIM_H

#include <libsecret/secret.h>

// The tokenctl item schema as a C constant: building SecretSchema's 32-element
// attribute tuple in Swift is unreadable. DONT_MATCH_NAME lets lookups find items
// written by other tools (secret-tool) with the same attributes.
static inline const SecretSchema *tokenctl_secret_schema(void) {
    static const SecretSchema schema = {
        "io.github.tokenctl.Session",
        SECRET_SCHEMA_DONT_MATCH_NAME,
        {
            { "application", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "profile", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "issuer", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "client_id", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "kind", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { NULL, 0 },
        }
    };
    return &schema;
}

// A GHashTable of owned strings: g_str_hash/g_str_equal/g_free are passed as
// function pointers, which Swift imports awkwardly through gpointer casts.
static inline GHashTable *tokenctl_attributes_new(void) {
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

static inline void tokenctl_attributes_insert(GHashTable *table, const char *key, const char *value) {
    g_hash_table_insert(table, g_strdup(key), g_strdup(value));
}

// g_object_unref takes a gpointer; SecretService/SecretItem/SecretCollection are distinct
// opaque types in Swift, so one typed helper each keeps the casts out of Swift.
static inline void tokenctl_object_unref(void *object) {
    if (object) g_object_unref(object);
}

// SecretService, SecretCollection and SecretItem are GDBusProxy subclasses; the cast is a
// macro in C (G_DBUS_PROXY). Every D-Bus call they make then times out after `milliseconds`.
static inline void tokenctl_proxy_set_timeout(void *proxy, int milliseconds) {
    g_dbus_proxy_set_default_timeout(G_DBUS_PROXY(proxy), milliseconds);
}

// The remote D-Bus error name (e.g. org.freedesktop.DBus.Error.ServiceUnknown), or NULL.
// Caller frees with g_free.
static inline char *tokenctl_error_remote_name(const GError *error) {
    return g_dbus_error_get_remote_error(error);
}

static inline const char *tokenctl_error_domain_name(const GError *error) {
    return g_quark_to_string(error->domain);
}

// Overwrite a secret's bytes before they are freed (g_free does not scrub).
static inline void tokenctl_secure_free_string(char *string) {
    if (string) {
        volatile char *p = string;
        while (*p) *p++ = 0;
        g_free(string);
    }
}

#endif
