// The bodies of CCrypto.h: libcrypto's table, its one loader state, and tokenctl's calls through it.
#include "CCrypto.h"
#include <sys/random.h>

TOKENCTL_LAZY_DEFINE(tokenctl_crypto, TOKENCTL_CRYPTO_FUNCTIONS, TOKENCTL_CRYPTO_SONAME, (void)0)
#define tokenctl_crypto (tokenctl_crypto_state.api)

unsigned long tokenctl_err_get_error(void) { return tokenctl_crypto.ERR_get_error(); }
void tokenctl_err_error_string_n(unsigned long code, char *buffer, size_t length) {
    tokenctl_crypto.ERR_error_string_n(code, buffer, length);
}
void tokenctl_err_clear_error(void) { tokenctl_crypto.ERR_clear_error(); }

void tokenctl_openssl_free(void *pointer) { tokenctl_crypto.CRYPTO_free(pointer, __FILE__, __LINE__); }

int tokenctl_evp_digest(const void *data, size_t count, unsigned char *digest, unsigned int *length,
                        const EVP_MD *type, ENGINE *engine) {
    return tokenctl_crypto.EVP_Digest(data, count, digest, length, type, engine);
}
const EVP_MD *tokenctl_evp_sha256(void) { return tokenctl_crypto.EVP_sha256(); }

BIGNUM *tokenctl_bn_bin2bn(const unsigned char *bytes, int length, BIGNUM *result) {
    return tokenctl_crypto.BN_bin2bn(bytes, length, result);
}
void tokenctl_bn_free(BIGNUM *number) { tokenctl_crypto.BN_free(number); }

OSSL_PARAM_BLD *tokenctl_ossl_param_bld_new(void) { return tokenctl_crypto.OSSL_PARAM_BLD_new(); }
void tokenctl_ossl_param_bld_free(OSSL_PARAM_BLD *builder) { tokenctl_crypto.OSSL_PARAM_BLD_free(builder); }
int tokenctl_ossl_param_bld_push_bn(OSSL_PARAM_BLD *builder, const char *key, const BIGNUM *number) {
    return tokenctl_crypto.OSSL_PARAM_BLD_push_BN(builder, key, number);
}
int tokenctl_ossl_param_bld_push_utf8_string(OSSL_PARAM_BLD *builder, const char *key, const char *value, size_t length) {
    return tokenctl_crypto.OSSL_PARAM_BLD_push_utf8_string(builder, key, value, length);
}
int tokenctl_ossl_param_bld_push_octet_string(OSSL_PARAM_BLD *builder, const char *key, const void *value, size_t length) {
    return tokenctl_crypto.OSSL_PARAM_BLD_push_octet_string(builder, key, value, length);
}
OSSL_PARAM *tokenctl_ossl_param_bld_to_param(OSSL_PARAM_BLD *builder) {
    return tokenctl_crypto.OSSL_PARAM_BLD_to_param(builder);
}
void tokenctl_ossl_param_free(OSSL_PARAM *parameters) { tokenctl_crypto.OSSL_PARAM_free(parameters); }

EVP_PKEY *tokenctl_evp_pkey_new_raw_public_key(int type, ENGINE *engine, const unsigned char *key, size_t length) {
    return tokenctl_crypto.EVP_PKEY_new_raw_public_key(type, engine, key, length);
}
EVP_PKEY_CTX *tokenctl_evp_pkey_ctx_new_from_name(OSSL_LIB_CTX *library, const char *name, const char *properties) {
    return tokenctl_crypto.EVP_PKEY_CTX_new_from_name(library, name, properties);
}
void tokenctl_evp_pkey_ctx_free(EVP_PKEY_CTX *context) { tokenctl_crypto.EVP_PKEY_CTX_free(context); }
int tokenctl_evp_pkey_fromdata_init(EVP_PKEY_CTX *context) { return tokenctl_crypto.EVP_PKEY_fromdata_init(context); }
int tokenctl_evp_pkey_fromdata(EVP_PKEY_CTX *context, EVP_PKEY **key, int selection, OSSL_PARAM *parameters) {
    return tokenctl_crypto.EVP_PKEY_fromdata(context, key, selection, parameters);
}
void tokenctl_evp_pkey_free(EVP_PKEY *key) { tokenctl_crypto.EVP_PKEY_free(key); }
int tokenctl_evp_pkey_get_bits(const EVP_PKEY *key) { return tokenctl_crypto.EVP_PKEY_get_bits(key); }

EVP_MD_CTX *tokenctl_evp_md_ctx_new(void) { return tokenctl_crypto.EVP_MD_CTX_new(); }
void tokenctl_evp_md_ctx_free(EVP_MD_CTX *context) { tokenctl_crypto.EVP_MD_CTX_free(context); }
int tokenctl_evp_digest_verify_init(EVP_MD_CTX *context, EVP_PKEY_CTX **keyContext, const EVP_MD *type,
                                    ENGINE *engine, EVP_PKEY *key) {
    return tokenctl_crypto.EVP_DigestVerifyInit(context, keyContext, type, engine, key);
}
int tokenctl_evp_digest_verify(EVP_MD_CTX *context, const unsigned char *signature, size_t signatureLength,
                               const unsigned char *message, size_t messageLength) {
    return tokenctl_crypto.EVP_DigestVerify(context, signature, signatureLength, message, messageLength);
}
int tokenctl_evp_pkey_ctx_set_rsa_padding(EVP_PKEY_CTX *context, int padding) {
    return tokenctl_crypto.EVP_PKEY_CTX_set_rsa_padding(context, padding);
}
int tokenctl_evp_pkey_ctx_set_rsa_mgf1_md(EVP_PKEY_CTX *context, const EVP_MD *type) {
    return tokenctl_crypto.EVP_PKEY_CTX_set_rsa_mgf1_md(context, type);
}
int tokenctl_evp_pkey_ctx_set_rsa_pss_saltlen(EVP_PKEY_CTX *context, int length) {
    return tokenctl_crypto.EVP_PKEY_CTX_set_rsa_pss_saltlen(context, length);
}

ECDSA_SIG *tokenctl_ecdsa_sig_new(void) { return tokenctl_crypto.ECDSA_SIG_new(); }
void tokenctl_ecdsa_sig_free(ECDSA_SIG *signature) { tokenctl_crypto.ECDSA_SIG_free(signature); }
int tokenctl_ecdsa_sig_set0(ECDSA_SIG *signature, BIGNUM *r, BIGNUM *s) {
    return tokenctl_crypto.ECDSA_SIG_set0(signature, r, s);
}
int tokenctl_i2d_ecdsa_sig(const ECDSA_SIG *signature, unsigned char **output) {
    return tokenctl_crypto.i2d_ECDSA_SIG(signature, output);
}

ssize_t tokenctl_getrandom(void *buffer, size_t length) { return getrandom(buffer, length, 0); }

int tokenctl_evp_pkey_public_key_selection(void) { return EVP_PKEY_PUBLIC_KEY; }

const char *tokenctl_param_rsa_n(void) { return OSSL_PKEY_PARAM_RSA_N; }
const char *tokenctl_param_rsa_e(void) { return OSSL_PKEY_PARAM_RSA_E; }
const char *tokenctl_param_group_name(void) { return OSSL_PKEY_PARAM_GROUP_NAME; }
const char *tokenctl_param_public_key(void) { return OSSL_PKEY_PARAM_PUB_KEY; }
const char *tokenctl_curve_p256(void) { return SN_X9_62_prime256v1; }

int tokenctl_evp_pkey_ed25519(void) { return EVP_PKEY_ED25519; }
int tokenctl_rsa_pkcs1_pss_padding(void) { return RSA_PKCS1_PSS_PADDING; }
