#ifndef TOKENCTL_CQRENCODE_H
#define TOKENCTL_CQRENCODE_H

// libqrencode is loaded with dlopen the first time tokenctl draws a QR code (the device flow on
// a terminal), not linked: every engine start would otherwise map and relocate it, and only
// `login --device` uses it. Only the header is used at build time (Debian: libqrencode-dev);
// every call goes through the table that qrencode.c loads. The QR code is a convenience: when
// the library cannot be loaded, the device flow shows the link and the code without it.
#include <qrencode.h>
#include <stddef.h>
#include "CLazyLoader.h"

// The soname of libqrencode's current ABI (Debian: libqrencode4).
#define TOKENCTL_QRENCODE_SONAME "libqrencode.so.4"

// Every libqrencode function tokenctl calls (neither is variadic or a macro).
#define TOKENCTL_QRENCODE_FUNCTIONS(X) \
    X(QRcode_encodeString) \
    X(QRcode_free)

// struct tokenctl_qrencode_api, tokenctl_qrencode_open (a test points it at another library)
// and tokenctl_qrencode_load (CLazyLoader.h).
TOKENCTL_LAZY_DECLARE(tokenctl_qrencode, TOKENCTL_QRENCODE_FUNCTIONS)

// The functions tokenctl calls, through the table (call tokenctl_qrencode_load first).
QRcode *tokenctl_qrcode_encode_string(const char *string, int version, QRecLevel level, QRencodeMode hint, int casesensitive);
void tokenctl_qrcode_free(QRcode *code);

#endif
