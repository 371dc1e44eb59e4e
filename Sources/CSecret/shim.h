#ifndef TOKENCTL_CSECRET_SHIM_H
#define TOKENCTL_CSECRET_SHIM_H

// libsecret's API, as the system-library module CSecret (pkg-config libsecret-1). tokenctl's own
// C over it (the item schema, the lean Service proxy, the calls Swift cannot make) is the C
// target CSecretShim, whose bodies are in a .c file: a system-library target holds headers only.
//
// The D-Bus object path API (secret-paths.h: search → paths, GetSecrets by path) is behind this
// define ("subject to change" since libsecret 0.18, unchanged since); it reads one secret without
// building a SecretItem proxy, i.e. without the item's GetAll and signal subscriptions.
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>

#endif
