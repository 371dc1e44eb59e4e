#!/usr/bin/env python3
"""Administer the private glewlwyd of Scripts/lib/glewlwyd.sh through its admin API.

Talks to glewlwyd's own port on 127.0.0.1 (plain HTTP, not through nginx), logged in as the
admin user with a session cookie (POST /api/auth/, docs/API.md "Authentication").

  glewlwyd_control.py --api URL --user U --password P setup --issuer ISS --sign-key PEM \
      --sign-pub PEM --scope NAME
  glewlwyd_control.py --api URL --user U --password P add-client < client.json
  glewlwyd_control.py --api URL --user U --password P delete-client CLIENT_ID

setup: the client module gets the property tls_client_auth_subject_dn, a scope NAME (no
password required) is created, and the OIDC plugin instance "oidc" is added with client
credentials and every client authentication method on (see glewlwyd.sh for why each key).
add-client: POST /api/client/ with the JSON on stdin; fields not given get defaults
(confidential, enabled, authorization_type [client_credentials], scope [NAME of setup]).
Exit status 0 on success; 1 with glewlwyd's answer on stderr otherwise.
"""
import argparse
import http.cookiejar
import json
import sys
import urllib.error
import urllib.request


class Admin:
    def __init__(self, api, user, password):
        self.api = api.rstrip("/")
        jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        status, body = self.call("POST", "/auth/", {"username": user, "password": password})
        if status != 200:
            raise SystemExit(f"glewlwyd_control: admin login failed: {status} {body}")

    def call(self, method, path, payload=None):
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.api + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with self.opener.open(req, timeout=20) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def must(self, method, path, payload=None):
        status, body = self.call(method, path, payload)
        if status != 200:
            raise SystemExit(f"glewlwyd_control: {method} {path}: {status} {body}")
        return json.loads(body) if body.strip() else None


def plugin_parameters(args):
    with open(args.sign_key) as f:
        key = f.read()
    with open(args.sign_pub) as f:
        pub = f.read()
    return {
        "iss": args.issuer,
        # Tokens are JWTs signed ES256 with our key; the public JWK is at /api/oidc/jwks.
        "jwt-type": "ecdsa",
        "jwt-key-size": "256",
        "key": key,
        "cert": pub,
        "jwks-show": True,
        "jwks-x5c": [],
        "access-token-duration": 3600,
        "refresh-token-duration": 1209600,
        "code-duration": 600,
        "refresh-token-rolling": True,
        "refresh-token-one-use": "never",
        "allow-non-oidc": True,
        "auth-type-code-enabled": True,
        "auth-type-code-revoke-replayed": False,
        "auth-type-token-enabled": False,
        "auth-type-id-token-enabled": True,
        "auth-type-none-enabled": False,
        "auth-type-password-enabled": False,
        # The client credentials grant (docs/OIDC.md "Authentication types enabled").
        "auth-type-client-enabled": True,
        "auth-type-device-enabled": False,
        "auth-type-refresh-enabled": True,
        "scope": [],
        "additional-parameters": [],
        "claims": [],
        "allowed-scope": ["openid", args.scope],
        "secret-type": "pairwise",
        "address-claim": {"type": "no", "formatted": "", "street_address": "", "locality": "",
                          "region": "", "postal_code": "", "country": "", "mandatory": False},
        "name-claim": "no",
        "email-claim": "no",
        "scope-claim": "no",
        "pkce-allowed": False,
        "introspection-revocation-allowed": False,
        "register-client-allowed": False,
        "session-management-allowed": False,
        # client_secret_jwt and private_key_jwt: the assertion is a JWT "request" the plugin
        # must be allowed to parse, and the client's keys live in these client properties.
        "request-parameter-allow": True,
        "request-uri-allow-https-non-secure": False,
        "request-maximum-exp": 3600,
        "client-pubkey-parameter": "pubkey",
        "client-jwks-parameter": "jwks",
        "client-jwks_uri-parameter": "jwks_uri",
        "client-enc-parameter": "enc",
        "client-alg-parameter": "alg",
        "client-alg_kid-parameter": "alg_kid",
        "encrypt-out-token-allow": False,
        # RFC 8705: the certificate comes from nginx in a header (one line, see glewlwyd.sh),
        # the /mtls/ aliases are published, self-signed certificates are allowed.
        "client-cert-source": "header",
        "client-cert-header-name": "SSL_CLIENT_CERT",
        "client-cert-use-endpoint-aliases": True,
        "client-cert-self-signed-allowed": True,
        "oauth-dpop-allowed": False,
        "resource-allowed": False,
        "oauth-rar-allowed": False,
        "oauth-par-allowed": False,
        "device-authorization-expiration": 600,
        "device-authorization-interval": 5,
    }


def setup(admin, args):
    # A client module's data-format lists the properties it keeps; the Debian schema's has
    # tls_client_auth_san_* but not tls_client_auth_subject_dn, which is then silently dropped.
    mod = admin.must("GET", "/mod/client/database")
    fmt = mod["parameters"]["data-format"]
    if "tls_client_auth_subject_dn" not in fmt:
        fmt["tls_client_auth_subject_dn"] = {"multiple": False, "read": True, "write": True}
        admin.must("PUT", "/mod/client/database", {k: mod[k] for k in
                   ("module", "name", "display_name", "order_rank", "parameters", "readonly")
                   if k in mod})
        admin.must("PUT", "/mod/client/database/reset")
    status, _ = admin.call("GET", "/scope/" + args.scope)
    if status == 404:
        admin.must("POST", "/scope/", {"name": args.scope, "display_name": args.scope,
                                       "description": "tokenctl machine sign-in tests",
                                       "password_required": False, "scheme": {}})
    status, _ = admin.call("GET", "/mod/plugin/oidc")
    body = {"module": "oidc", "name": "oidc", "display_name": "OpenID Connect",
            "enabled": True, "parameters": plugin_parameters(args)}
    if status == 404:
        admin.must("POST", "/mod/plugin/", body)
    else:
        admin.must("PUT", "/mod/plugin/oidc", body)
        admin.must("PUT", "/mod/plugin/oidc/reset")


def add_client(admin, args):
    client = json.load(sys.stdin)
    client.setdefault("confidential", True)
    client.setdefault("enabled", True)
    client.setdefault("name", client.get("client_id", ""))
    client.setdefault("authorization_type", ["client_credentials"])
    client.setdefault("scope", [args.scope])
    client.setdefault("redirect_uri", [])
    status, _ = admin.call("GET", "/client/" + client["client_id"])
    if status == 200:
        admin.must("DELETE", "/client/" + client["client_id"])
    admin.must("POST", "/client/", client)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--api", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--scope", default="machine")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup")
    s.add_argument("--issuer", required=True)
    s.add_argument("--sign-key", required=True)
    s.add_argument("--sign-pub", required=True)
    sub.add_parser("add-client")
    d = sub.add_parser("delete-client")
    d.add_argument("client_id")
    args = p.parse_args()
    admin = Admin(args.api, args.user, args.password)
    if args.cmd == "setup":
        setup(admin, args)
    elif args.cmd == "add-client":
        add_client(admin, args)
    else:
        admin.must("DELETE", "/client/" + args.client_id)


if __name__ == "__main__":
    main()
