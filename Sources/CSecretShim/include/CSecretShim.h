#ifndef TOKENCTL_CSECRETSHIM_H
#define TOKENCTL_CSECRETSHIM_H

// tokenctl's C over libsecret and GDBus: what Swift cannot write readably or at all (a C
// constant, macros, variadic calls, a GObject subclass). The bodies are in secret_shim.c; the
// libsecret API itself is CSecret's (included by path, so that both see the same declarations).
#include "../../CSecret/shim.h"

// The tokenctl item schema as a C constant: building SecretSchema's 32-element
// attribute tuple in Swift is unreadable. DONT_MATCH_NAME lets lookups find items
// written by other tools (secret-tool) with the same attributes.
const SecretSchema *tokenctl_secret_schema(void);

// A GHashTable of owned strings: g_str_hash/g_str_equal/g_free are passed as
// function pointers, which Swift imports awkwardly through gpointer casts.
GHashTable *tokenctl_attributes_new(void);
void tokenctl_attributes_insert(GHashTable *table, const char *key, const char *value);

// g_object_unref takes a gpointer; SecretService/SecretItem/SecretCollection are distinct
// opaque types in Swift, so one typed helper each keeps the casts out of Swift.
void tokenctl_object_unref(void *object);

// SecretService, SecretCollection and SecretItem are GDBusProxy subclasses; the cast is a
// macro in C (G_DBUS_PROXY). Every D-Bus call they make then times out after `milliseconds`.
void tokenctl_proxy_set_timeout(void *proxy, int milliseconds);

// A SecretService proxy that sends nothing to the Secret Service while it is built (an instance
// of a minimal subclass; see secret_shim.c), every call under `timeout_ms` from the first.
SecretService *tokenctl_secret_service_open(int timeout_ms, GError **error);

// The remote D-Bus error name (e.g. org.freedesktop.DBus.Error.ServiceUnknown), or NULL.
// Caller frees with g_free.
char *tokenctl_error_remote_name(const GError *error);

const char *tokenctl_error_domain_name(const GError *error);

// The first call of a connection to the Secret Service (a blocking Properties.Get of the
// Service's Collections): see secret_shim.c for why (gnome-keyring 42 aborts otherwise).
gboolean tokenctl_secret_service_prime(SecretService *service, int timeout_ms, GCancellable *cancellable, GError **error);

// Item.SetSecret on the item at `path` of the daemon whose unique bus name is `owner`, with the
// secret encoded for the service's open session, without an item proxy: see secret_shim.c.
gboolean tokenctl_item_set_secret(SecretService *service, const char *owner, const char *path,
                                  SecretValue *value, int timeout_ms, GCancellable *cancellable, GError **error);

// The unique name that owns the proxy's well-known name now (a restarted daemon has a new one),
// or NULL. Caller frees with g_free. G_DBUS_PROXY is a macro.
char *tokenctl_proxy_name_owner(void *proxy);

// The process id of the connection owning `name` on the bus (org.freedesktop.DBus
// GetConnectionUnixProcessID), or 0: its argument is built with g_variant_new, which is
// variadic. Names the Secret Service provider in hints (gnome-keyring, KeePassXC, KWallet).
guint32 tokenctl_bus_name_owner_pid(GDBusConnection *bus, const char *name, int timeout_ms);

#endif
