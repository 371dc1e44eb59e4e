// The bodies of CQRencode.h: libqrencode's table, its one loader state, and tokenctl's calls.
#include "CQRencode.h"

TOKENCTL_LAZY_DEFINE(tokenctl_qrencode, TOKENCTL_QRENCODE_FUNCTIONS, TOKENCTL_QRENCODE_SONAME, (void)0)
#define tokenctl_qrencode (tokenctl_qrencode_state.api)

QRcode *tokenctl_qrcode_encode_string(const char *string, int version, QRecLevel level, QRencodeMode hint, int casesensitive) {
    return tokenctl_qrencode.QRcode_encodeString(string, version, level, hint, casesensitive);
}

void tokenctl_qrcode_free(QRcode *code) { tokenctl_qrencode.QRcode_free(code); }
