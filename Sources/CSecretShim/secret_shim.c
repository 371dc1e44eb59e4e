// The bodies of CSecretShim.h: tokenctl's C over libsecret and GDBus. One definition of each
// function and of the lean Service's type and parent class per process (a header's bodies
// were emitted again by every Swift module that used it).
#include "CSecretShim.h"

// The tokenctl item schema as a C constant: building SecretSchema's 32-element
// attribute tuple in Swift is unreadable. DONT_MATCH_NAME lets lookups find items
// written by other tools (secret-tool) with the same attributes.
const SecretSchema *tokenctl_secret_schema(void) {
    static const SecretSchema schema = {
        "io.github.tokenctl.Session",
        SECRET_SCHEMA_DONT_MATCH_NAME,
        {
            { "application", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "profile", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "issuer", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "client_id", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "kind", SECRET_SCHEMA_ATTRIBUTE_STRING },
            // A proxy password's item (kind=proxy-password): the proxy's HOST:PORT and the user.
            { "proxy", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "user", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { NULL, 0 },
        }
    };
    return &schema;
}

// A GHashTable of owned strings: g_str_hash/g_str_equal/g_free are passed as
// function pointers, which Swift imports awkwardly through gpointer casts.
GHashTable *tokenctl_attributes_new(void) {
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

void tokenctl_attributes_insert(GHashTable *table, const char *key, const char *value) {
    g_hash_table_insert(table, g_strdup(key), g_strdup(value));
}

// g_object_unref takes a gpointer; SecretService/SecretItem/SecretCollection are distinct
// opaque types in Swift, so one typed helper each keeps the casts out of Swift.
void tokenctl_object_unref(void *object) {
    if (object) g_object_unref(object);
}

// SecretService, SecretCollection and SecretItem are GDBusProxy subclasses; the cast is a
// macro in C (G_DBUS_PROXY). Every D-Bus call they make then times out after `milliseconds`.
void tokenctl_proxy_set_timeout(void *proxy, int milliseconds) {
    g_dbus_proxy_set_default_timeout(G_DBUS_PROXY(proxy), milliseconds);
}

// A SecretService proxy that sends nothing to the Secret Service while it is built: no property
// load (GetAll), no signal subscriptions, no StartServiceByName at construction (a method call
// may still D-Bus-activate a provider), and every call under `timeout_ms` from the first.
// tokenctl reads no Service property and listens to no Service signal; the proxy still follows
// the name's owner (AddMatch and GetNameOwner, answered by the bus daemon), so a restarted
// keyring daemon is found again by a long-running `status --watch`.
//
// SecretService's constructor forces G_DBUS_PROXY_FLAGS_NONE, so the flags are set by a
// minimal subclass's constructor, after it (construct-only properties may be set there).
//
// Why a subclass, measured (2026-12-01, dbus-monitor and hyperfine, `tokenctl-engine token`
// served through the Secret Service, this subclass against the same engine built with
// SECRET_TYPE_SERVICE, 120 runs each): 7 D-Bus method calls instead of 12 (no
// Properties.GetAll, StartServiceByName, two AddMatch and a GetNameOwner), median 19.3 ms
// instead of 20.3 ms. That 1 ms (5 %) is the margin of the fallback's target (at most 1.2
// times `secret-tool lookup`; Scripts/bench measured 1.17 to 1.20).
typedef struct { SecretService parent; } TokenctlLeanService;
typedef struct { SecretServiceClass parent_class; } TokenctlLeanServiceClass;

static GObjectClass *tokenctl_lean_service_parent_class;

static GObject *tokenctl_lean_service_constructor(GType type, guint count, GObjectConstructParam *properties) {
    GObject *object = tokenctl_lean_service_parent_class->constructor(type, count, properties);
    g_object_set(object, "g-flags",
                 G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES | G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS
                     | G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START_AT_CONSTRUCTION,
                 NULL);
    return object;
}

static void tokenctl_lean_service_class_init(gpointer klass, gpointer data) {
    (void)data;
    tokenctl_lean_service_parent_class = G_OBJECT_CLASS(g_type_class_peek_parent(klass));
    G_OBJECT_CLASS(klass)->constructor = tokenctl_lean_service_constructor;
}

static GType tokenctl_lean_service_get_type(void) {
    static gsize type = 0;
    if (g_once_init_enter(&type)) {
        GType registered = g_type_register_static_simple(
            SECRET_TYPE_SERVICE, "TokenctlLeanService", sizeof(TokenctlLeanServiceClass),
            tokenctl_lean_service_class_init, sizeof(TokenctlLeanService), NULL, 0);
        g_once_init_leave(&type, registered);
    }
    return (GType)type;
}

SecretService *tokenctl_secret_service_open(int timeout_ms, GError **error) {
    return g_initable_new(tokenctl_lean_service_get_type(), NULL, error,
                          "g-default-timeout", timeout_ms,
                          "flags", SECRET_SERVICE_NONE,
                          NULL);
}

// The remote D-Bus error name (e.g. org.freedesktop.DBus.Error.ServiceUnknown), or NULL.
// Caller frees with g_free.
char *tokenctl_error_remote_name(const GError *error) {
    return g_dbus_error_get_remote_error(error);
}

const char *tokenctl_error_domain_name(const GError *error) {
    return g_quark_to_string(error->domain);
}

// gnome-keyring 42 aborts (g_variant_new on a NULL value: "assertion 'client' failed") when the
// first message of a connection is a call that needs its per-caller record and, on a busy
// daemon, runs before that record is created (upstream issues 190/196/199; reproduced with
// tokenctl: 4 of 21 loaded trials, 0 of 18 with this). A blocking Properties.Get of the
// Service's Collections, answered from the daemon's main loop after the record is queued,
// makes every later call safe; Ping and Introspect do not (GLib answers them on a worker
// thread). On the proxy's own connection, since the record is per caller; C because
// g_variant_new is variadic.
gboolean tokenctl_secret_service_prime(SecretService *service, int timeout_ms, GCancellable *cancellable, GError **error) {
    GDBusConnection *connection = g_dbus_proxy_get_connection(G_DBUS_PROXY(service));
    GVariant *reply = g_dbus_connection_call_sync(
        connection, "org.freedesktop.secrets", "/org/freedesktop/secrets", "org.freedesktop.DBus.Properties", "Get",
        g_variant_new("(ss)", "org.freedesktop.Secret.Service", "Collections"), G_VARIANT_TYPE("(v)"),
        G_DBUS_CALL_FLAGS_NONE, timeout_ms, cancellable, error);
    if (reply == NULL) return FALSE;
    g_variant_unref(reply);
    return TRUE;
}

// Item.SetSecret on the item at `path` of the daemon whose unique bus name is `owner`, with the
// secret encoded for the service's open session: what secret_item_set_secret does, without the
// item proxy it needs (a Properties.GetAll at the daemon and seven calls to the bus daemon per
// write; measured with a raw client, a refresh's calls at gnome-keyring took 340-370 ms per 100
// profiles this way against 460-500 ms with a search and a proxy for the write). Addressed to the
// unique name, so a call meant for a daemon that has since exited fails (ServiceUnknown) rather
// than reaching its successor, whose paths may name other items. C because
// g_variant_new_tuple takes a C array; the encoded secret may or may not be floating.
gboolean tokenctl_item_set_secret(SecretService *service, const char *owner, const char *path,
                                  SecretValue *value, int timeout_ms, GCancellable *cancellable, GError **error) {
    GVariant *secret = secret_service_encode_dbus_secret(service, value);
    if (secret == NULL) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, "no open session to encode the secret with");
        return FALSE;
    }
    g_variant_take_ref(secret);
    GDBusConnection *connection = g_dbus_proxy_get_connection(G_DBUS_PROXY(service));
    GVariant *reply = g_dbus_connection_call_sync(
        connection, owner, path, "org.freedesktop.Secret.Item", "SetSecret",
        g_variant_new_tuple(&secret, 1), G_VARIANT_TYPE("()"), G_DBUS_CALL_FLAGS_NO_AUTO_START, timeout_ms, cancellable, error);
    g_variant_unref(secret);
    if (reply == NULL) return FALSE;
    g_variant_unref(reply);
    return TRUE;
}

// The unique name that owns the proxy's well-known name now (a restarted daemon has a new one),
// or NULL. Caller frees with g_free. G_DBUS_PROXY is a macro.
char *tokenctl_proxy_name_owner(void *proxy) {
    return g_dbus_proxy_get_name_owner(G_DBUS_PROXY(proxy));
}

// The process id of the connection owning `name` on the bus (org.freedesktop.DBus
// GetConnectionUnixProcessID), or 0: its argument is built with g_variant_new, which is
// variadic. Names the Secret Service provider in hints (gnome-keyring, KeePassXC, KWallet).
guint32 tokenctl_bus_name_owner_pid(GDBusConnection *bus, const char *name, int timeout_ms) {
    GVariant *reply = g_dbus_connection_call_sync(
        bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixProcessID",
        g_variant_new("(s)", name), G_VARIANT_TYPE("(u)"), G_DBUS_CALL_FLAGS_NONE, timeout_ms, NULL, NULL);
    if (reply == NULL) return 0;
    guint32 pid = 0;
    g_variant_get(reply, "(u)", &pid);
    g_variant_unref(reply);
    return pid;
}
