/* Scripts/lib/curlprobe.c: one GET through libcurl, as tokenctl makes its requests (no
 * proxy, CA or certificate option unless one is given here), printing what libcurl reports:
 * for squid-selftest.sh, which measures how libcurl treats the proxy environment variables,
 * CA settings, proxy refusals and certificates that do not verify.
 *
 *   cc -o curlprobe curlprobe.c -lcurl -lssl -lcrypto
 *   curlprobe [OPTIONS] URL
 *     --cainfo FILE        CURLOPT_CAINFO
 *     --proxy-cainfo FILE  CURLOPT_PROXY_CAINFO
 *     --proxy URL          CURLOPT_PROXY ("" = CURLOPT_PROXY "": no proxy, whatever the environment)
 *     --noproxy LIST       CURLOPT_NOPROXY
 *     --certinfo           CURLOPT_CERTINFO, then print CURLINFO_CERTINFO's subject and issuer
 *     --connect-only       CURLOPT_CONNECT_ONLY (TCP, proxy tunnel and TLS handshake; no request)
 *     --no-verify          CURLOPT_SSL_VERIFYPEER 0 and CURLOPT_SSL_VERIFYHOST 0
 *     --ctx-chain          CURLOPT_SSL_CTX_FUNCTION installing an OpenSSL verify callback that
 *                          records the server certificate's subject and issuer (also when
 *                          verification fails)
 *     --proxy-credentials  CURLOPT_PROXYUSERNAME and CURLOPT_PROXYPASSWORD from the environment
 *                          variables CURLPROBE_PROXY_USER and CURLPROBE_PROXY_PASSWORD (a
 *                          password is never an argument)
 *     --verbose            CURLOPT_VERBOSE (libcurl's own trace, on stderr)
 *   Prints, one per line: result=N name=CURLE_X, error=ERRBUF, response_code=, connect_code=
 *   (CURLINFO_HTTP_CONNECTCODE), verify_result= (CURLINFO_SSL_VERIFYRESULT), proxy_verify_result=,
 *   primary=IP:PORT (the peer libcurl connected to: the proxy when one was used), certs=N and
 *   cert.I.subject= / cert.I.issuer= (--certinfo), chain.subject= / chain.issuer= (--ctx-chain).
 *   Exit status: the CURLcode. The body is counted (body_bytes=), not printed.
 */
#include <curl/curl.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *code_name(CURLcode c) {
    switch (c) {
    case CURLE_OK: return "CURLE_OK";
    case CURLE_UNSUPPORTED_PROTOCOL: return "CURLE_UNSUPPORTED_PROTOCOL";
    case CURLE_COULDNT_RESOLVE_PROXY: return "CURLE_COULDNT_RESOLVE_PROXY";
    case CURLE_COULDNT_RESOLVE_HOST: return "CURLE_COULDNT_RESOLVE_HOST";
    case CURLE_COULDNT_CONNECT: return "CURLE_COULDNT_CONNECT";
    case CURLE_WEIRD_SERVER_REPLY: return "CURLE_WEIRD_SERVER_REPLY";
    case CURLE_HTTP_RETURNED_ERROR: return "CURLE_HTTP_RETURNED_ERROR";
    case CURLE_OPERATION_TIMEDOUT: return "CURLE_OPERATION_TIMEDOUT";
    case CURLE_SSL_CONNECT_ERROR: return "CURLE_SSL_CONNECT_ERROR";
    case CURLE_GOT_NOTHING: return "CURLE_GOT_NOTHING";
    case CURLE_SEND_ERROR: return "CURLE_SEND_ERROR";
    case CURLE_RECV_ERROR: return "CURLE_RECV_ERROR";
    case CURLE_SSL_CERTPROBLEM: return "CURLE_SSL_CERTPROBLEM";
    case CURLE_PEER_FAILED_VERIFICATION: return "CURLE_PEER_FAILED_VERIFICATION";
    case CURLE_SSL_CACERT_BADFILE: return "CURLE_SSL_CACERT_BADFILE";
    case CURLE_PROXY: return "CURLE_PROXY";
    default: return "other";
    }
}

static size_t body_bytes;
static size_t on_body(char *data, size_t size, size_t n, void *user) {
    (void)data;
    (void)user;
    body_bytes += size * n;
    return size * n;
}

static char chain_subject[512], chain_issuer[512];
/* A name as libcurl's CURLINFO_CERTINFO prints it: "O = tokenctl-test, CN = idp.tokenctl.test". */
static void name_line(const X509_NAME *name, char *out, size_t size) {
    BIO *bio = BIO_new(BIO_s_mem());
    if (bio == NULL) return;
    X509_NAME_print_ex(bio, name, 0, XN_FLAG_ONELINE);
    int n = BIO_read(bio, out, (int)size - 1);
    out[n > 0 ? n : 0] = '\0';
    BIO_free(bio);
}
static int on_verify(int preverify_ok, X509_STORE_CTX *store) {
    /* The certificate being verified is the server's own, whichever depth the callback is called
     * for: OpenSSL calls it first for the depth that fails, and the handshake ends there. */
    X509 *cert = X509_STORE_CTX_get0_cert(store);
    if (cert != NULL) {
        name_line(X509_get_subject_name(cert), chain_subject, sizeof chain_subject);
        name_line(X509_get_issuer_name(cert), chain_issuer, sizeof chain_issuer);
    }
    return preverify_ok;
}
static CURLcode on_ssl_ctx(CURL *curl, void *ctx, void *user) {
    (void)curl;
    (void)user;
    SSL_CTX_set_verify((SSL_CTX *)ctx, SSL_CTX_get_verify_mode((SSL_CTX *)ctx), on_verify);
    return CURLE_OK;
}

int main(int argc, char **argv) {
    const char *url = NULL;
    int certinfo = 0, ctx_chain = 0;
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *curl = curl_easy_init();
    if (curl == NULL) return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--cainfo") == 0 && v) { curl_easy_setopt(curl, CURLOPT_CAINFO, v); i++; }
        else if (strcmp(a, "--proxy-cainfo") == 0 && v) { curl_easy_setopt(curl, CURLOPT_PROXY_CAINFO, v); i++; }
        else if (strcmp(a, "--proxy") == 0 && v) { curl_easy_setopt(curl, CURLOPT_PROXY, v); i++; }
        else if (strcmp(a, "--noproxy") == 0 && v) { curl_easy_setopt(curl, CURLOPT_NOPROXY, v); i++; }
        else if (strcmp(a, "--certinfo") == 0) { certinfo = 1; curl_easy_setopt(curl, CURLOPT_CERTINFO, 1L); }
        else if (strcmp(a, "--connect-only") == 0) curl_easy_setopt(curl, CURLOPT_CONNECT_ONLY, 1L);
        else if (strcmp(a, "--no-verify") == 0) {
            curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
            curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        else if (strcmp(a, "--ctx-chain") == 0) { ctx_chain = 1; curl_easy_setopt(curl, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx); }
        else if (strcmp(a, "--proxy-credentials") == 0) {
            const char *user = getenv("CURLPROBE_PROXY_USER"), *password = getenv("CURLPROBE_PROXY_PASSWORD");
            if (user) curl_easy_setopt(curl, CURLOPT_PROXYUSERNAME, user);
            if (password) curl_easy_setopt(curl, CURLOPT_PROXYPASSWORD, password);
        }
        else if (strcmp(a, "--verbose") == 0) curl_easy_setopt(curl, CURLOPT_VERBOSE, 1L);
        else if (a[0] != '-' && url == NULL) url = a;
        else { fprintf(stderr, "curlprobe: bad argument %s\n", a); return 2; }
    }
    if (url == NULL) { fprintf(stderr, "usage: curlprobe [OPTIONS] URL\n"); return 2; }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 20L);
    CURLcode rc = curl_easy_perform(curl);
    long response = 0, connect = 0, verify = 0, proxy_verify = 0, port = 0;
    char *ip = NULL;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response);
    curl_easy_getinfo(curl, CURLINFO_HTTP_CONNECTCODE, &connect);
    curl_easy_getinfo(curl, CURLINFO_SSL_VERIFYRESULT, &verify);
    curl_easy_getinfo(curl, CURLINFO_PROXY_SSL_VERIFYRESULT, &proxy_verify);
    curl_easy_getinfo(curl, CURLINFO_PRIMARY_IP, &ip);
    curl_easy_getinfo(curl, CURLINFO_PRIMARY_PORT, &port);
    printf("result=%d name=%s\nerror=%s\nresponse_code=%ld\nconnect_code=%ld\n", (int)rc, code_name(rc), errbuf,
           response, connect);
    printf("verify_result=%ld\nproxy_verify_result=%ld\nprimary=%s:%ld\nbody_bytes=%zu\n", verify, proxy_verify,
           ip ? ip : "", port, body_bytes);
    if (certinfo) {
        struct curl_certinfo *ci = NULL;
        curl_easy_getinfo(curl, CURLINFO_CERTINFO, &ci);
        int n = ci ? ci->num_of_certs : 0;
        printf("certs=%d\n", n);
        for (int i = 0; i < n; i++) {
            for (struct curl_slist *s = ci->certinfo[i]; s; s = s->next) {
                if (strncmp(s->data, "Subject:", 8) == 0) printf("cert.%d.subject=%s\n", i, s->data + 8);
                if (strncmp(s->data, "Issuer:", 7) == 0) printf("cert.%d.issuer=%s\n", i, s->data + 7);
            }
        }
    }
    if (ctx_chain) printf("chain.subject=%s\nchain.issuer=%s\n", chain_subject, chain_issuer);
    curl_easy_cleanup(curl);
    curl_global_cleanup();
    return (int)rc;
}
