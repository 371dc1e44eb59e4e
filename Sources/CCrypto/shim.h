#ifndef TOKENCTL_CCRYPTO_SHIM_H
#define TOKENCTL_CCRYPTO_SHIM_H

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>
#include <sys/random.h>

// OPENSSL_free is a macro (it passes __FILE__/__LINE__ to CRYPTO_free): not imported by Swift.
static inline void tokenctl_openssl_free(void *pointer) {
    OPENSSL_free(pointer);
}

// getrandom(2) is not part of Swift's Glibc module; it feeds PKCE, state and nonce.
static inline ssize_t tokenctl_getrandom(void *buffer, size_t length) {
    return getrandom(buffer, length, 0);
}

// EVP_PKEY_PUBLIC_KEY is a macro expression (a selection bit mask): not imported by Swift.
static inline int tokenctl_evp_pkey_public_key_selection(void) {
    return EVP_PKEY_PUBLIC_KEY;
}

// OSSL_PARAM_BLD_push_* keep the key (and a UTF-8 value) by pointer until
// OSSL_PARAM_BLD_to_param: a Swift string argument dies after the call, so the names
// come from C string literals with static storage.
static inline const char *tokenctl_param_rsa_n(void) { return OSSL_PKEY_PARAM_RSA_N; }
static inline const char *tokenctl_param_rsa_e(void) { return OSSL_PKEY_PARAM_RSA_E; }
static inline const char *tokenctl_param_group_name(void) { return OSSL_PKEY_PARAM_GROUP_NAME; }
static inline const char *tokenctl_param_public_key(void) { return OSSL_PKEY_PARAM_PUB_KEY; }
static inline const char *tokenctl_curve_p256(void) { return SN_X9_62_prime256v1; }

// EVP_PKEY_ED25519 is a macro aliasing NID_ED25519; RSA_PKCS1_PSS_PADDING is a plain #define
// Swift imports, kept here beside the rest for one place to look.
static inline int tokenctl_evp_pkey_ed25519(void) { return EVP_PKEY_ED25519; }
static inline int tokenctl_rsa_pkcs1_pss_padding(void) { return RSA_PKCS1_PSS_PADDING; }

#endif
