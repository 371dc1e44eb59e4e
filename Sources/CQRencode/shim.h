#ifndef TOKENCTL_CQRENCODE_SHIM_H
#define TOKENCTL_CQRENCODE_SHIM_H

// libqrencode is loaded with dlopen the first time tokenctl draws a QR code (the device flow on
// a terminal), not linked: every engine start would otherwise map and relocate it, and only
// `login --device` uses it. Only the header is used at build time; every call goes through the
// table below. The QR code is a convenience: when the library cannot be loaded, the device flow
// shows the link and the code without it.
#include <qrencode.h>
#include <stddef.h>
#include "../CLazyLoader/lazy_loader.h"

// The soname of libqrencode's current ABI (Debian: libqrencode4).
#define TOKENCTL_QRENCODE_SONAME "libqrencode.so.4"

// Every libqrencode function tokenctl calls (neither is variadic or a macro).
#define TOKENCTL_QRENCODE_FUNCTIONS(X) \
    X(QRcode_encodeString) \
    X(QRcode_free)

// The table, its one state and its loader (Sources/CLazyLoader/lazy_loader.h):
// tokenctl_qrencode_open (a test points it at another library) and tokenctl_qrencode_load.
TOKENCTL_LAZY_LIBRARY(tokenctl_qrencode, TOKENCTL_QRENCODE_FUNCTIONS, TOKENCTL_QRENCODE_SONAME, (void)0)
#define tokenctl_qrencode (tokenctl_qrencode_state()->api)

// The functions tokenctl calls, through the table (call tokenctl_qrencode_load first). Neither
// is variadic or a macro.
static inline QRcode *tokenctl_qrcode_encode_string(const char *string, int version, QRecLevel level, QRencodeMode hint, int casesensitive) {
    return tokenctl_qrencode.QRcode_encodeString(string, version, level, hint, casesensitive);
}
static inline void tokenctl_qrcode_free(QRcode *code) { tokenctl_qrencode.QRcode_free(code); }

#endif
