#!/usr/bin/env python3
"""Local OAuth 2.0 test authorization server for tokenctl's end-to-end tests.

Standard library only, except DPoP proof verification, which imports python3-cryptography
when a request carries a proof (without it every proof is refused).  Binds 127.0.0.1, writes the port to --port-file once
listening (atomically: temp file + rename), serves until SIGTERM/SIGINT.

    python3 Scripts/testserver/authserver.py --port 0 --port-file PATH [--pid-file PATH] [--verbose]

Issuer: http://127.0.0.1:PORT (no trailing slash), or --issuer URL (default $TK_AUTHSERVER_ISSUER):
the public URL when a TLS front (Scripts/lib/squid.sh's nginx) serves this server under a name.

Public endpoints
  GET  /.well-known/openid-configuration      (404 when discovery_oidc is false)
  GET  /.well-known/oauth-authorization-server (RFC 8414)
  POST /token    grant_type=refresh_token | authorization_code (PKCE S256) |
                 urn:ietf:params:oauth:grant-type:device_code |
                 client_credentials (RFC 6749 §4.4: a client of "client_secrets" only, with its
                 secret; no refresh token, no ID token) |
                 urn:ietf:params:oauth:grant-type:jwt-bearer (RFC 7523 §2.1, built from §3:
                 the assertion's ES256 signature verified with the JWKS that config
                 "jwt_bearer_issuers" registers for its iss; sub required; aud must name this
                 issuer or its token endpoint; exp required and not past, nbf not future; a
                 jti seen before is a replay; each failure invalid_grant with what failed; the
                 token's sub is the assertion's)
  POST /revoke   token, [token_type_hint], [client_id]   (RFC 7009, always 200)
  POST /device_authorization   client_id, [scope]       (RFC 8628)
  GET  /authorize              answers at once with a 302 to redirect_uri (no login page):
                               code, or what "authorize_mode" says
  GET  /jwks                   the keys that sign ID tokens (RS256 kid "test-rsa", ES256 kid "test-ec";
                               with rotate_signing_key, RS256 kid "test-rsa-2" instead of "test-rsa")
  GET|POST /resource           a protected resource (RFC 6750, RFC 9449 §7): see DPoP below

Confidential clients: a client_id listed in config "client_secrets" must send its secret
(HTTP Basic or client_secret in the form) to /token, /revoke and /device_authorization.  Any
other client_id is public: the jwt-bearer grant takes it with no client authentication (RFC
7523 §3.1: optional), the client_credentials grant refuses it (RFC 6749 §4.4).

Test control (JSON in / JSON out)
  POST /_test/issue        {"client_id", "sub"?, "scope"?} -> {"refresh_token", "family"}
  POST /_test/config       partial config, merged -> full config (unknown keys: 400)
  GET  /_test/log          every /token, /revoke, /jwks and discovery request, in order
  GET  /_test/token-status?token=X -> {"active", "kind", "spent", "family_revoked", "jkt"}
                           (jkt: the DPoP key thumbprint the token's family is bound to, or null)
  POST /_test/reset        state, log and config back to defaults (the DPoP nonce and the
                           seen-jti set too)
  GET  /_test/stats        {"token_requests", "issued", "invalid_grant", "reuse_detected",
                            "dpop_proofs_valid", "dpop_proofs_invalid"}
  POST /_test/device/approve {"user_code", "sub"?}   approve a pending device code
  POST /_test/device/deny    {"user_code"}

Config keys (defaults in DEFAULT_CONFIG):
  access_ttl, grace_seconds, rotate, date_offset_seconds, delay_seconds,
  faults, discovery_oidc, discovery_issuer_override, advertise_revocation,
  revoke_fault_status, id_token_alg, id_token_bad_signature, id_token_claims, omit_id_token,
  rotate_signing_key,
  omit_refresh_token, discovery_raw, discovery_omit, device_script, device_response_override,
  device_interval, device_expires_in, client_secrets, auth_methods, authorize_mode,
  jwt_access_tokens, omit_expires_in, allowed_resources,
  dpop_algs, dpop_iat_window, dpop_nonce_required, dpop_resource_nonce_required,
  dpop_nonce_rotate_after, dpop_downgrade, dpop_wrong_cnf, refresh_answer_overrides, persona,
  device_flow_disabled, numbers_as_strings, created_at_offset_seconds, device_endpoint_missing,
  entra_tenant, entra_user_tenant, aadsts_errors, keycloak_errors, jwt_bearer_issuers.
device_script entries: "approve", any error code (answered 400 {"error": code}, or the persona's
status; "expired_token" also counts as reported, see auth0), or an object {"status", "body"}
answered exactly so (a 200 without access_token, say), touching nothing.  The
/device_authorization log entry carries the "device_code" it issued (so a test can poll too).

Log (/_test/log): entries {"time", "path", ..., "status", "outcome"}.  /token entries also carry
"received" (when the request arrived, before any delay), "client_port", "client_secret_sent",
"client_auth" (how the client authenticated: "basic", "post", "assertion" or "none") and, for a 200,
"issued_refresh_token" (the refresh token the answer carried, or null).  /token, /revoke and
/resource entries carry "dpop": null when the request had no DPoP header, else the decoded
proof {"jkt", "jti", "htm", "htu", "iat", "nonce", ["ath"], "valid", ["error"]} (jkt: RFC 7638
thumbprint of the header's jwk; error: what failed).  /token entries also carry "token_type"
(what a 200 issued: "Bearer" or "DPoP"; null otherwise).  /resource entries: "method",
"scheme" ("DPoP", "Bearer" or null), "access_token", "dpop", and outcome "ok", "invalid_token",
"invalid_dpop_proof", "use_dpop_nonce" or "bearer_for_bound_token".  /authorize entries log
"dpop_jkt".  A faulted request's proof is decoded and checked for the log, but not against
state (jti, nonce) and not counted in the stats.

DPoP (RFC 9449; verification written from the RFC, ES256 only):
  Discovery advertises "dpop_signing_alg_values_supported": dpop_algs (absent when [] or null).
  A request carries a proof when it has a DPoP header; POST /token, POST /revoke and /resource
  check it (§4.3): exactly one header; compact JWS; header typ "dpop+jwt", alg in dpop_algs
  (and ES256), no crit, jwk an EC P-256 public key (a private member such as "d": refused);
  ES256 signature (raw r || s) valid for that jwk; claims jti (non-empty string never seen
  before since start/reset), htm = the request method, htu = issuer + path (scheme and host
  compared case-insensitively, default port dropped, the claim's query and fragment ignored,
  path exact), iat within dpop_iat_window seconds of the server clock (time + date_offset_seconds);
  at /resource ath = base64url(SHA-256(access token)) is required.  With dpop_nonce_required
  (/token, /revoke) or dpop_resource_nonce_required (/resource) the nonce claim must be the
  server's current nonce (one nonce, shared; random, made lazily, replaced after every
  dpop_nonce_rotate_after accepted uses when that is > 0) and every answer of those endpoints
  carries "DPoP-Nonce: <current>".
  Refusals at /token and /revoke: 400 {"error": "invalid_dpop_proof", "error_description": why},
  or 400 {"error": "use_dpop_nonce", ...} (nonce missing or stale) with DPoP-Nonce.
  Binding: a token request (any grant) with a valid proof issues token_type "DPoP"; the family
  records the proof's jkt (the first binding stays), the access token record its jkt, and a
  JWT access token (jwt_access_tokens) gets "cnf": {"jkt": jkt} (with dpop_wrong_cnf a random
  other thumbprint).  Refreshing a bound family's token needs a valid proof with the family's
  key, else 400 invalid_grant "DPoP proof required" / "DPoP key mismatch", and the refresh
  token is not spent (no rotation, no reuse detection).  /authorize's dpop_jkt parameter
  (§10) binds the code: the token request's proof must have that jkt, else 400 invalid_grant
  "dpop_jkt mismatch".  /revoke of a token whose family is bound needs a proof with its key,
  else 400 invalid_grant (same descriptions).  dpop_downgrade: a server that ignores DPoP;
  proofs are still checked and logged but never refused, nothing is bound or enforced, no
  nonce, tokens are Bearer (at /token and /revoke; /resource is unaffected).
  /resource (GET or POST): "Authorization: DPoP <at>" with a valid proof (htu issuer +
  "/resource", ath, the token's jkt) -> 200 {"ok": true, "sub", "token_type": "DPoP"};
  "Authorization: Bearer <at>" for an unbound active token -> 200 {..., "token_type": "Bearer"}.
  Refusals are 401 with a JSON body {"error", "error_description"} and
  WWW-Authenticate: DPoP error="<error>", error_description="<why>":
    invalid_dpop_proof (bad or missing proof, or a key other than the token's),
    use_dpop_nonce (with DPoP-Nonce), invalid_token (no token; a token that is unknown,
    expired or revoked, whose challenge is Bearer when it was presented as Bearer; an unbound
    token presented as DPoP), and a bound token presented as Bearer: error "invalid_token",
    error_description "DPoP-bound token presented as Bearer" (log outcome
    bearer_for_bound_token).  A proof sent along with a Bearer token is checked too.

Faults (config "faults", a queue consumed one entry per /token request, before
normal handling; a faulted request never touches token state):
  {"status": 503, "body": "...", "content_type": "text/html",
   "headers": {"Retry-After": "2"}, "count": 2}   respond exactly that (count default 1;
                                                   a dict/list body is sent as JSON)
  {"hang": 30}      sleep 30 s, then close the connection without answering
  {"close": true}   close the connection without any response
  {"delay": 2}      sleep 2 s, then handle normally (this one does touch state)
  A status fault's body (a string, or the string values of a dict/list body) may hold
  "{refresh_token}", "{client_secret}" and "{request}": replaced by the refresh token, the
  client secret (form or HTTP Basic) and the whole form body the request sent, as a server
  whose error_description echoes the request does:
  {"status": 400, "body": {"error": "invalid_grant",
   "error_description": "refresh token {refresh_token} is revoked"}}
Config "delay_seconds" makes every /token request sleep before it is handled
(after its fault entry, if any, was taken from the queue).

Answer overrides (config "refresh_answer_overrides", a queue consumed one entry per refresh
that the server grants, grace replays aside, after the faults): the refresh is granted as usual (the refresh token
sent is spent and a new pair issued, so the family and reuse detection go on), and the entry's
members are merged into the 200 answer before it is sent, a null value removing the member:
  {"access_token": "at with spaces"}   a rotated refresh token with an unusable access token
  {"access_token": null}               ... with none at all
  {"refresh_token": 42}                an unusable refresh token (the issued one is lost)
The log entry of such a refresh has outcome "issued" and "overridden": [the members' names].

Personas (config "persona", or --persona NAME for the server's default): a provider as it
really behaves on the wire, from its public documentation (PERSONAS below).  Setting a
persona first sets the config keys it implies (PERSONAS[name]["config"]: lifetimes, discovery,
device interval...), then the other keys of the same /_test/config request, so a test may
still shorten an interval; its "wire" switches shape every /token and device answer:
  github-oauth-app  GitHub OAuth App: endpoints POST /login/device/code, GET /login/oauth/authorize,
                    POST /login/oauth/access_token (the generic paths still work); no discovery
                    (404); errors with HTTP 200 (authorization_pending, slow_down, bad_refresh_token,
                    incorrect_client_credentials, device_flow_disabled...); answers form-encoded
                    unless the request's Accept names application/json; token_type "bearer",
                    scope comma-separated ("repo,gist"); no expires_in, no refresh token, no
                    id_token, tokens that never expire; device answers without
                    verification_uri_complete, verification_uri ISSUER/login/device, expires_in
                    900, interval 5; polling before the interval has passed (since the code was
                    issued, or since the previous poll) gets slow_down, and every slow_down
                    carries the raised "interval" (+5 s).
  github-app        GitHub App user tokens: the same, but expires_in 28800 (8 h), a refresh token
                    (ghr_...) with refresh_token_expires_in 15897600 (about 6 months), scope "";
                    a refresh kills the refresh token used and the access token it came with; a
                    spent, unknown or expired refresh token gets 200 error=bad_refresh_token (no
                    family revocation).
  google            Google: discovery as usual; refresh answers carry no refresh_token (no
                    rotation, the stored one stays); a code exchange gives a refresh token only
                    when /authorize had access_type=offline and prompt=consent; the scope
                    offline_access is refused (400 invalid_scope at /authorize and at the device
                    endpoint); ID tokens' iss is the issuer without its scheme (as Google's
                    "accounts.google.com"); device answers name verification_url (not _uri), no
                    _complete; a dead refresh token gets invalid_grant "Token has been expired or
                    revoked."; /revoke answers 400 invalid_token for a token it does not know.
                    Set "client_secrets" for the client: Google requires its secret.
  entra             Microsoft Entra ID (learn.microsoft.com/entra/identity-platform).  Every OAuth error is 400 JSON (401 for
                    invalid_client) shaped as Entra's: "error", "error_description"
                    "AADSTSnnnn: text\r\nTrace ID: <uuid>\r\nCorrelation ID: <uuid>\r\nTimestamp:
                    <YYYY-MM-DD HH:MM:SSZ>", "error_codes": [nnnn], "trace_id", "correlation_id",
                    "timestamp", "error_uri" (ISSUER/error?code=nnnn); the code is the server's own
                    (authorization_pending 70016, expired_token 70020, authorization_declined 65004,
                    invalid_grant 70008, invalid_client 7000215, invalid_scope 70011, ...: the
                    AADSTS table in this file).  Device answers: verification_uri ISSUER/devicelogin, no
                    verification_uri_complete, a "message" ("To sign in, use a web browser to open
                    the page ISSUER/devicelogin and enter the code XXXX-XXXX to authenticate."),
                    expires_in 900, interval 5; a denied code (/_test/device/deny, or
                    "access_denied" in device_script) polls as authorization_declined.  Discovery
                    has no revocation_endpoint (advertise_revocation false) and names an
                    end_session_endpoint.  A refresh rotates WITHOUT revoking: the new refresh
                    token and the old one both stay valid (token-status "spent": false).
                    Token answers carry ext_expires_in; ID tokens carry "tid" (the user's tenant,
                    a GUID), "ver": "2.0" and "oid".
                    Tenants (config "entra_tenant"): null (the default) serves the root paths only,
                    issuer ISSUER, ID tokens' iss ISSUER.  "common", "organizations", "consumers"
                    or a tenant GUID also serves that tenant's paths:
                      GET  /TENANT/v2.0/.well-known/openid-configuration
                      POST /TENANT/oauth2/v2.0/token, POST /TENANT/oauth2/v2.0/devicecode,
                      GET  /TENANT/oauth2/v2.0/authorize, GET /TENANT/discovery/v2.0/keys
                    (other tenants' paths: 404), and its discovery names those endpoints
                    (end_session_endpoint ISSUER/TENANT/oauth2/v2.0/logout) and, as issuer, the
                    literal template "ISSUER/{tenantid}/v2.0" for common and organizations, else
                    "ISSUER/GUID/v2.0" (consumers: 9188040d-6c67-4c5b-b112-36a304b66dad).  ID tokens
                    issued at any path then carry tid = GUID and iss = "ISSUER/GUID/v2.0", where GUID
                    is the tenant's own, or for common and organizations config "entra_user_tenant"
                    (default 8eaef023-2b34-4da1-9baa-8bc8c9d6a490).  A test of a multi-tenant
                    profile: POST /_test/config {"persona": "entra", "entra_tenant": "common"}, then
                    log in with --issuer ISSUER/common/v2.0 (discovery at
                    ISSUER/common/v2.0/.well-known/openid-configuration answers issuer
                    "ISSUER/{tenantid}/v2.0"); the ID token's iss is "ISSUER/<entra_user_tenant>/v2.0"
                    and its tid entra_user_tenant.  A mismatch to provoke: "id_token_claims"
                    {"tid": OTHER} (iss keeps entra_user_tenant) or {"iss": ...}.
  keycloak          Keycloak with Revoke Refresh Token on and Refresh Token Max Reuse 0 (Keycloak's
                    Server Administration Guide): access_ttl 300; each refresh token works once; reusing a spent one gets 400
                    invalid_grant "Maximum allowed refresh token reuse exceeded" and the whole
                    session (family) dies, the fresh token too, which then gets invalid_grant
                    "Session not active"; an unknown refresh token gets "Invalid refresh token".
                    Revocation as the server's own (RFC 7009).  Client errors (a wrong or missing
                    secret of a client in "client_secrets", at /token and the device endpoint):
                    401 unauthorized_client "Invalid client or Invalid client credentials".
POST /_test/revoke-all: the provider ends every session (families and access tokens revoked).
GitHub's revocation (github-* personas, and any server): DELETE /api/v3/applications/{client_id}/token
with Basic client_id:client_secret and {"access_token": ...}: 204 (the token and its grant
revoked), 404 unknown token or bad credentials, 422 no token; logged as "/applications/token".
  okta              Okta's org authorization server (developer.okta.com): endpoints /oauth2/v1/token,
                    /oauth2/v1/device/authorize, /oauth2/v1/revoke, /oauth2/v1/authorize,
                    /oauth2/v1/keys, advertised by discovery; DPoP with a mandatory nonce
                    (dpop_nonce_required: a proof without the current nonce gets 400 use_dpop_nonce
                    "Authorization server requires nonce in DPoP proof." and a DPoP-Nonce header,
                    at /token and /revoke); rotation with a grace window (grace_seconds 30) in which
                    the spent token still works, reuse after it revokes the family (invalid_grant
                    "The refresh token is invalid or expired."); with rotate false persistent
                    refresh tokens: the refresh answer carries the same refresh token again (a
                    refresh_answer_overrides entry {"refresh_token": null} leaves it out); a
                    refresh token only for the offline_access scope; device verification_uri
                    ISSUER/activate.  Rate limits (429 without a body) are a faults entry:
                    {"status": 429, "body": "", "content_type": null}.
  auth0             Auth0 (auth0.com/docs): endpoints /oauth/token, /oauth/device/code,
                    /oauth/revoke, /authorize, /.well-known/jwks.json; device polls answered 403
                    authorization_pending / access_denied / expired_token, 429 slow_down, each with
                    Auth0's error_description; expired_token exactly once (by time or script),
                    then 403 invalid_grant "Invalid or expired device code." to every later poll;
                    rotation with a reuse interval (grace_seconds, the API's leeway, 30): within
                    it only the previous refresh token (the one spent last) may be used again,
                    the second-to-last revokes the family (403 invalid_grant "Unknown or invalid
                    refresh token."); a JWT access token (aud = the audience) only when the
                    device, authorize or refresh request (or /_test/issue) named an audience, an
                    opaque one otherwise; a refresh token only for the offline_access scope.
  gitlab            GitLab (docs.gitlab.com/api/oauth2): endpoints /oauth/token, /oauth/authorize_device,
                    /oauth/revoke, /oauth/authorize, /oauth/discovery/keys; token answers carry
                    created_at (the server's clock + created_at_offset_seconds), expires_in 7200,
                    token_type "Bearer"; strict one-use rotation with no grace: a spent refresh
                    token gets 400 invalid_grant with GitLab's long generic description, and the
                    newer pair lives on; a refresh kills the access token the refresh token came
                    with; device answers with verification_uri ISSUER/oauth/device,
                    verification_uri_complete, expires_in 300, interval 5, and a success without
                    a refresh token.  Config "device_endpoint_missing": the device endpoint
                    answers 404 with an HTML page (GitLab before 17.2, or the flag off).
Config "aadsts_errors" (any persona; shaped as the entra persona's errors): a queue consumed one
entry per /token request (refresh, device poll or code exchange), after "faults" and before
normal handling; the request touches no token state (nothing is spent or rotated) and is
logged with outcome "AADSTSnnnn":
  {"code": 90024, "error"?: "temporarily_unavailable", "description"?: "text", "status"?: 400}
  error, text and status default from the code (the AADSTS table; status 401 for invalid_client),
  e.g. [{"code": 90024}, {"code": 700082}] answers the next request temporarily_unavailable
  AADSTS90024 and the one after invalid_grant AADSTS700082.
Config "keycloak_errors": a queue of invalid_grant descriptions ("Token is not active",
"Session not active", "Stale token", "Stale refresh token", "Maximum allowed refresh token reuse
exceeded", "Refresh token expired", "Client session not active"), consumed one per /token
request like aadsts_errors: 400 {"error": "invalid_grant", "error_description": TEXT}, and the
session of the refresh token sent ends (its family is revoked); logged as "keycloak_invalid_grant".
Config "device_flow_disabled": the device endpoint answers device_flow_disabled ("Device Flow
must be explicitly enabled for this App"; 400, or 200 under a GitHub persona); the string
"unauthorized_client" instead answers {"error": "unauthorized_client"} (400, or 200 under a GitHub
persona, whose error_description defaults to the code), as GitHub Enterprise Server does.  Config
"numbers_as_strings": numeric members of token and device answers sent as JSON strings.

Token model: /_test/issue creates a family (sub, client_id, scope) and its first
refresh token.  Refresh tokens are strictly one-time-use when "rotate" is true:
a spent token replayed within grace_seconds of being spent gets a fresh pair;
replayed later it gets invalid_grant ("refresh token reuse detected") and the
whole family is revoked.  token-status reports a spent refresh token as not
active even while it is still inside the grace period.
"""

import argparse
import base64
import copy
import email.utils
import hashlib
import hmac
import http.server
import json
import os
import secrets
import signal
import sys
import threading
import time
import urllib.parse

JWT_KEY = b"tokenctl-test-key"

# A fixed 2048-bit RSA test key (RS256 ID tokens); public half served at /jwks.
RSA_N = int(
    "e4fd17f8208c1bad4d3b13c0a8b69db05755fcec2b56cf87c9ab0ebeaa8a3bb9548878a470583a89a44720eff88fdb1abd0fe1cc4fefebdb31d3c0cef1b9f0e00a5104d66fc38a25be6bb1105100013776e35b4fc95b983075d191bcbbc8de5e2766fa5e5baafaa9921b2c580eb4c434b00387f12749d2d28b58074b40b71486e95d4d453ea43184609ab71fbfbfbfee1311fb432d2e3ec72ef9d35c99f826acd329a8536f4b30838966b35e5b7bf0d2c72f2ba5e883b766a75a0beb38f5a6f24aa83a172f0cf6825530d88dca343d7355ab37f25a3dbb81bb93eb21480b353556b4b6770480bee0cfef445275128b595672465ef0c0fea367cd93268e3afecb", 16)
RSA_D = int(
    "3f3a6353f028bfbbaa87957cad193f91618c2cba497d3ef08f8edc1369a3a1ba1acd540293c2c8e718a54b42f7af4120b0f3a1b5789d16d2ff7f28cdfb910c21d0b76e4e87adc687857cd6f75a6655efaab43c925b571f3ec2498ba44175c570da10653188be3d58752f6b9f24f064fce75d123c544cde19a4c039c35dab2fcf4b01bcb728452bc43cebec998412330983e366006e32798c73886c0399299d04f7dc45db6c37f141961ad069ddd8162a1e8b4d34d9a2a8b16e8dd2dec29947ba8d2d561454300d308a7983ccbbeb3b6e4e2298640ce0e44949ae820d36d3eeed11af1585fe64ef78215dafb9f47f536b587c23849eadfe334a898173573cf11", 16)
RSA_E = 65537
RSA_KID = "test-rsa"

# The key RS256 ID tokens are signed with after a key rotation (config "rotate_signing_key"):
# another fixed 2048-bit test key, made once with `openssl genpkey -algorithm RSA`.
RSA2_N = int(
    "991f17e35da15031f93e1b78756e8e7ecda19f3715262870fbb85b768471b4f9e7680049ef211d5b7ee57c1ed4c92129a2b4371ca066893d54eacbd7a8b63c466556c33cc08e6d7a225fdacb739ce274e70de8253df497c7e59326ed313837ac9575721e20be6376390500c17e2d560539a42b18443a166fd8c8a1d0939f07a942a23fc0e6a6a7ac73401abcebc4035b8bb2f55e09e8fac55de34665ae185d2768347b1373833710ab75e0788d14cc982a41d6bbeacbd57e82e6201cfe846d9ff64648b1da815fadd9adf47b39b1f92fd0cbf76cf65ec831b4ea63c86f0eff204e74b616991398aeeb0e7aee78f9a48cef6a006989f59a3080a77d8b7f1c9399", 16)
RSA2_D = int(
    "16b227264a5088c47f7f172f49a8b37254246aa70d7974711abe7ec0186d8a37a8771fe3d59000fbf8d92706a2df950cc8d311802abe4805513ae42ff90fd9eb4d4608f64e4c4e29d64282f9b90f3df9b9edb3c52163c9c39561b4595ffc47344b8af6f9443d341ce7e2b7f3f631de18342d033e3b8ea898b7773594e6eca183d8366875ef5706d157efda3f4e24adb5a9cd8d132f82f9e5183e2bc80cbacf1fb0876ab6acf9e20c0846c88720c0a7e6097335eefcb039e91523794fd31645e6f56e1523d6c429acce1bb45b0c68400ec5ab09345545f5230f7645e53b800ffe4c54c60f0c1bb687575011018c4294abc820b63a0755da9f36fd909878efea29", 16)
RSA2_KID = "test-rsa-2"

# P-256 (FIPS 186-4 D.1.2.3) for ES256 ID tokens; a fixed test private key.
P256_P = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffff
P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551
P256_A = P256_P - 3
P256_G = (0x6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296,
          0x4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5)
EC_D = 0x2f1f8c6b8f5f0a6d9e3c4b5a69788796a5b4c3d2e1f00112233445566778899a % P256_N
EC_KID = "test-ec"


def ec_add(p, q):
    if p is None:
        return q
    if q is None:
        return p
    if p[0] == q[0] and (p[1] + q[1]) % P256_P == 0:
        return None
    if p == q:
        m = (3 * p[0] * p[0] + P256_A) * pow(2 * p[1], -1, P256_P)
    else:
        m = (q[1] - p[1]) * pow(q[0] - p[0], -1, P256_P)
    x = (m * m - p[0] - q[0]) % P256_P
    return (x, (m * (p[0] - x) - p[1]) % P256_P)


def ec_mul(k, point):
    result = None
    while k:
        if k & 1:
            result = ec_add(result, point)
        point = ec_add(point, point)
        k >>= 1
    return result


EC_PUBLIC = ec_mul(EC_D, P256_G)


def es256_sign(signing_input):
    # ECDSA (FIPS 186-4 §6.4) with a random nonce; JOSE wants raw r || s (RFC 7518 §3.4).
    z = int.from_bytes(hashlib.sha256(signing_input).digest(), "big")
    while True:
        k = secrets.randbelow(P256_N - 1) + 1
        r = ec_mul(k, P256_G)[0] % P256_N
        s = pow(k, -1, P256_N) * (z + r * EC_D) % P256_N
        if r and s:
            return r.to_bytes(32, "big") + s.to_bytes(32, "big")
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"

DEFAULT_CONFIG = {
    "access_ttl": 3600,
    "grace_seconds": 0,
    "rotate": True,
    "date_offset_seconds": 0,
    "delay_seconds": 0.0,
    "faults": [],
    # Members merged into the answers of the next granted refreshes, one entry each (see the header).
    "refresh_answer_overrides": [],
    "discovery_oidc": True,
    "discovery_issuer_override": None,
    "advertise_revocation": True,
    "revoke_fault_status": None,
    # Access tokens as JWTs whose iat/exp are on the server's (possibly offset) clock.
    "jwt_access_tokens": False,
    # Leave expires_in out of token responses (the client must rely on the JWT exp).
    "omit_expires_in": False,
    # ID tokens: "RS256" or "ES256" (signed with a /jwks key), "HS256" or "none".
    "id_token_alg": "RS256",
    "id_token_bad_signature": False,
    # Key rotation: RS256 ID tokens are signed with the second key (kid "test-rsa-2"), and /jwks
    # lists that key instead of "test-rsa".
    "rotate_signing_key": False,
    # Claims merged into every ID token (a null value removes the claim).
    "id_token_claims": {},
    "omit_id_token": False,
    "omit_refresh_token": False,
    # Discovery: a raw body instead of the document, or keys left out of it.
    "discovery_raw": None,
    "discovery_omit": [],
    # Device flow: answers consumed one per poll before normal handling
    # ("authorization_pending", "slow_down", "access_denied", "expired_token", "approve").
    "device_script": [],
    "device_response_override": {},
    "device_interval": 1,
    "device_expires_in": 600,
    "client_secrets": {},
    "auth_methods": ["none", "client_secret_basic", "client_secret_post"],
    # /authorize: "approve", "deny" (error=access_denied), "deny_without_state" (the same without
    # the state, as some servers answer a denial), "wrong_state", "no_code".
    "authorize_mode": "approve",
    # Refresh with resource indicators (RFC 8707): the resources the server serves; any other
    # is refused with invalid_target. None: every absolute URI is accepted.
    "allowed_resources": None,
    # DPoP (RFC 9449): the proof algorithms accepted and advertised in discovery
    # (dpop_signing_alg_values_supported; [] or null: not advertised, and every proof is refused).
    # Only ES256 is implemented.
    "dpop_algs": ["ES256"],
    # A proof's iat must be within this many seconds of the server's (offset) clock.
    "dpop_iat_window": 60,
    # Proofs must carry the server's current nonce: at /token and /revoke, and at /resource.
    "dpop_nonce_required": False,
    "dpop_resource_nonce_required": False,
    # The nonce is replaced after this many accepted uses (0: never).
    "dpop_nonce_rotate_after": 0,
    # A server that ignores DPoP: proofs are still checked and logged, but never refused,
    # never bind anything, and tokens are issued as Bearer.
    "dpop_downgrade": False,
    # Bound JWT access tokens (jwt_access_tokens) carry cnf.jkt of another, random key.
    "dpop_wrong_cnf": False,
    # A provider's wire behaviour (PERSONAS); None: this server's own, standard behaviour.
    "persona": None,
    # The device endpoint answers device_flow_disabled (GitHub, when the app's owner has not
    # switched the device flow on).
    "device_flow_disabled": False,
    # Numeric members of token and device answers as JSON strings (early GitHub App answers).
    "numbers_as_strings": False,
    # Token answers carry created_at (GitLab): the server's clock plus this many seconds
    # (negative: issued in the past, as a slow answer or a token handed out again would be).
    "created_at_offset_seconds": 0,
    # The device authorization endpoint answers 404 with an HTML page (a GitLab before 17.2, or
    # its oauth2_device_grant_flow feature flag off).
    "device_endpoint_missing": False,
    # Entra (see the header): the tenant of the /{tenant}/... paths (None: the root paths
    # only), the user's home tenant for ID tokens' tid, and AADSTS errors for the next /token
    # requests, one entry each.
    "entra_tenant": None,
    "entra_user_tenant": "8eaef023-2b34-4da1-9baa-8bc8c9d6a490",
    "aadsts_errors": [],
    # Keycloak (see the header): invalid_grant descriptions for the next /token requests.
    "keycloak_errors": [],
    # The JWT bearer grant (RFC 7523 §2.1): trusted assertion issuers, {iss: {"keys": [JWK]}}.
    "jwt_bearer_issuers": {},
}

# Providers as they behave on the wire (each one's public documentation).  "config": the config keys a persona
# implies, set when the persona is; "wire": the switches that shape its answers (read through
# wire(), None when no persona is set).  A new persona (google, entra...) is one more entry here,
# plus whatever new "wire" switch it needs, read where the answer is made.
GITHUB_WIRE = {
        "errors_with_200": True,          # an OAuth error body comes with HTTP 200
    "form_unless_json": True,         # form-encoded unless Accept names application/json
    "token_type": "bearer",
    "device_verification_path": "/login/device",
    "device_uri_complete": False,     # no verification_uri_complete
    "poll_interval_rule": True,       # an early poll gets slow_down; slow_down carries "interval"
    "dead_refresh_error": "bad_refresh_token",
    "client_error": "incorrect_client_credentials",
    "error_style": "github",          # GitHub's error_description and error_uri defaults
}
ENTRA_WIRE = {
    "error_style": "entra",           # AADSTS codes in error_description and error_codes (entra_error)
    "token_type": "Bearer",
    "access_prefix": "eyJ0eXAiOiJKV1QiLCJub25jZSI6",
    "scope_style": "space",
    "client_error": "invalid_client",
    "device_verification_path": "/devicelogin",
    "device_uri_complete": False,     # no verification_uri_complete
    "device_message": True,           # a "message" member in the device answer
    "denied_error": "authorization_declined",
    "rotation_keeps_old": True,       # a refresh rotates, and the old refresh token stays valid
    "id_token_tid": True,             # ID tokens carry tid (and iss per tenant, see entra_tenant)
}
KEYCLOAK_WIRE = {
    "error_style": "keycloak",
    "token_type": "Bearer",
    "access_prefix": "eyJhbGciOiJSUzI1NiIsInR5cCI6",
    "scope_style": "space",
    "client_error": "unauthorized_client",
    "device_verification_path": "/device",
    "device_uri_complete": True,
    "keycloak_texts": True,           # invalid_grant with Keycloak's descriptions; reuse kills the session
    # Keycloak's answer to a wrong or rotated client secret (401, at /token and the device endpoint).
    "descriptions": {"unauthorized_client": "Invalid client or Invalid client credentials"},
}
# Google (developers.google.com/identity/protocols/oauth2): no rotation (a refresh answer has no refresh_token), a refresh
# token only for access_type=offline with prompt=consent, offline_access refused, ID tokens
# whose iss has no scheme, verification_url, 400 invalid_token from /revoke.
GOOGLE_WIRE = {
    "token_type": "Bearer",
    "access_prefix": "ya29.",
    "scope_style": "space",
    "iss_schemeless": True,
    "device_verification_url": True,      # "verification_url", not "verification_uri"
    "device_uri_complete": False,
    "device_verification_path": "/device",
    "refresh_needs_offline_consent": True,
    "refuses_scopes": ["offline_access"],
    "revoke_unknown_invalid_token": True,
    "dead_refresh_description": "Token has been expired or revoked.",
}
OKTA_WIRE = {
    # Okta's org authorization server: https://{org}/oauth2/v1/... (the generic paths still work).
    "paths": {"token": "/oauth2/v1/token", "device": "/oauth2/v1/device/authorize",
              "revoke": "/oauth2/v1/revoke", "authorize": "/oauth2/v1/authorize", "jwks": "/oauth2/v1/keys"},
    "device_verification_path": "/activate",
    "device_uri_complete": True,
    "descriptions": {
        "use_dpop_nonce": "Authorization server requires nonce in DPoP proof.",
        "invalid_grant": "The refresh token is invalid or expired.",
        "authorization_pending": "The device authorization is pending. Please try again later.",
        "slow_down": "The client is polling too frequently.",
        "access_denied": "The resource owner or authorization server denied the request.",
        "expired_token": "The device code has expired.",
    },
    "persistent_refresh_echo": True,  # rotate off: the refresh answer carries the same refresh token
    "refresh_needs_offline_access": True,
}
AUTH0_WIRE = {
    "paths": {"token": "/oauth/token", "device": "/oauth/device/code", "revoke": "/oauth/revoke",
              "authorize": "/authorize", "jwks": "/.well-known/jwks.json"},
    "device_verification_path": "/activate",
    "device_uri_complete": True,
    # Auth0 answers device polls and dead grants with 403, slow_down with 429.
    "error_status": {"authorization_pending": 403, "access_denied": 403, "expired_token": 403,
                     "invalid_grant": 403, "slow_down": 429},
    "descriptions": {
        "authorization_pending": "User has yet to authorize device code.",
        "slow_down": "You are polling faster than the specified interval of 5 seconds.",
        "access_denied": "User cancelled the confirmation prompt or consent page; the code expired; there was an error.",
        "expired_token": "The device code has expired.",
        "invalid_grant": "Unknown or invalid refresh token.",
    },
    "device_invalid_grant_description": "Invalid or expired device code.",
    "expired_token_once": True,       # expired_token to one poll, invalid_grant to every later one
    "reuse_only_previous": True,      # within the leeway (grace_seconds) only the previous token
    "jwt_with_audience": True,        # a JWT access token with audience, an opaque one without
    "refresh_needs_offline_access": True,
}
GITLAB_WIRE = {
    "paths": {"token": "/oauth/token", "device": "/oauth/authorize_device", "revoke": "/oauth/revoke",
              "authorize": "/oauth/authorize", "jwks": "/oauth/discovery/keys"},
    "device_verification_path": "/oauth/device",
    "device_uri_complete": True,
    "token_type": "Bearer",
    "created_at": True,
    "descriptions": {
        "invalid_grant": "The provided authorization grant is invalid, expired, revoked, does not match the "
                         "redirection URI used in the authorization request, or was issued to another client.",
        "authorization_pending": "The authorization request is still pending as the end user hasn't yet "
                                 "completed the user-interaction steps.",
        "slow_down": "The authorization request is still pending and polling should continue, but the "
                     "interval MUST be increased by 5 seconds for this and all subsequent requests.",
        "access_denied": "The resource owner or authorization server denied the request.",
        "expired_token": "The device_code has expired, and the device authorization session has concluded.",
    },
    "reuse_keeps_family": True,       # a spent token is refused; the newer pair lives on
    "refresh_kills_access_token": True,
    "device_without_refresh_token": True,
}
PERSONAS = {
    "google": {
        "config": {"rotate": False, "grace_seconds": 0, "discovery_oidc": True, "device_interval": 5,
                   "device_expires_in": 1800},
        "wire": GOOGLE_WIRE,
    },
    "github-oauth-app": {
        "config": {"omit_expires_in": True, "omit_refresh_token": True, "omit_id_token": True,
                   "discovery_oidc": False, "device_interval": 5, "device_expires_in": 900},
        "wire": dict(GITHUB_WIRE, access_prefix="gho_", scope_style="comma", access_never_expires=True),
    },
    "github-app": {
        "config": {"access_ttl": 28800, "rotate": True, "grace_seconds": 0, "omit_id_token": True,
                   "omit_expires_in": False, "omit_refresh_token": False,
                   "discovery_oidc": False, "device_interval": 5, "device_expires_in": 900},
        "wire": dict(GITHUB_WIRE, access_prefix="ghu_", refresh_prefix="ghr_", scope_style="empty",
                     refresh_token_expires_in=15897600, refresh_kills_access_token=True),
    },
    "okta": {
        "config": {"access_ttl": 3600, "rotate": True, "grace_seconds": 30, "dpop_nonce_required": True,
                   "discovery_oidc": True, "device_interval": 5, "device_expires_in": 600},
        "wire": OKTA_WIRE,
    },
    "auth0": {
        "config": {"access_ttl": 86400, "rotate": True, "grace_seconds": 30, "discovery_oidc": True,
                   "device_interval": 5, "device_expires_in": 900},
        "wire": AUTH0_WIRE,
    },
    "gitlab": {
        "config": {"access_ttl": 7200, "rotate": True, "grace_seconds": 0, "discovery_oidc": True,
                   "device_interval": 5, "device_expires_in": 300},
        "wire": GITLAB_WIRE,
    },
    "entra": {
        "config": {"advertise_revocation": False, "access_ttl": 3600, "rotate": True, "grace_seconds": 0,
                   "device_interval": 5, "device_expires_in": 900, "omit_refresh_token": False},
        "wire": ENTRA_WIRE,
    },
    "keycloak": {
        "config": {"access_ttl": 300, "rotate": True, "grace_seconds": 0, "advertise_revocation": True,
                   "device_interval": 5, "device_expires_in": 600, "omit_refresh_token": False},
        "wire": KEYCLOAK_WIRE,
    },
}

# Entra's AADSTS codes: the error each comes with and its text (entra-docs reference-error-codes.md),
# for the answers the entra persona makes and for "aadsts_errors" entries that give only a code.
AADSTS = {
    50173: ("invalid_grant", "The provided grant has expired due to it being revoked, a fresh auth token is needed."),
    700082: ("invalid_grant", "The refresh token has expired due to inactivity. The token was issued on 2026-09-01T00:00:00.0000000Z and was inactive for 90.00:00:00."),
    70008: ("invalid_grant", "The provided authorization code or refresh token has expired due to inactivity. Send a new interactive authorization request for this user and resource."),
    700084: ("invalid_grant", "The refresh token was issued to a single page app (SPA), and therefore has a fixed, limited lifetime of 1.00:00:00, which cannot be extended."),
    70043: ("invalid_grant", "The refresh token has expired or is invalid due to sign-in frequency checks by conditional access."),
    50132: ("invalid_grant", "The session is not valid due to password expiration or recent password change."),
    50133: ("invalid_grant", "Session is invalid due to expiration or recent password change."),
    54005: ("invalid_grant", "OAuth2 Authorization code was already redeemed, please retry with a new valid code or use an existing refresh token."),
    50089: ("invalid_grant", "Flow token expired - Authentication failed."),
    70000: ("invalid_grant", "Provided grant is invalid or malformed."),
    50076: ("invalid_grant", "Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication to access '00000003-0000-0000-c000-000000000000'."),
    50079: ("interaction_required", "Due to a configuration change made by your administrator, or because you moved to a new location, you must enroll in multi-factor authentication."),
    50078: ("interaction_required", "Presented multi-factor authentication has expired due to policies configured by your administrator, you must refresh your multi-factor authentication to access '00000003-0000-0000-c000-000000000000'."),
    65001: ("invalid_grant", "The user or administrator has not consented to use the application. Send an interactive authorization request for this user and resource."),
    50058: ("interaction_required", "A silent sign-in request was sent but no user is signed in."),
    53003: ("invalid_grant", "Access has been blocked by Conditional Access policies. The access policy does not allow token issuance."),
    7000218: ("invalid_client", "The request body must contain the following parameter: 'client_assertion' or 'client_secret'."),
    700025: ("invalid_client", "Client is public so neither 'client_assertion' nor 'client_secret' should be presented."),
    7000215: ("invalid_client", "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID."),
    50011: ("invalid_request", "The redirect URI 'http://127.0.0.1:1/' specified in the request does not match the redirect URIs configured for the application."),
    70004: ("invalid_request", "The provided value for the input parameter 'redirect_uri' is not valid."),
    700016: ("unauthorized_client", "Application with identifier 'cli' was not found in the directory 'contoso'."),
    50194: ("invalid_request", "Application 'cli' is not configured as a multi-tenant application. Usage of the /common endpoint is not supported for such applications created after '10/15/2018'. Use a tenant-specific endpoint or configure the application to be multi-tenant."),
    70011: ("invalid_scope", "The provided request must include a 'scope' input parameter. The provided value for the input parameter 'scope' is not valid."),
    9002313: ("invalid_request", "Invalid request. Request is malformed or invalid."),
    50033: ("temporarily_unavailable", "A transient error has occurred. Try again."),
    90006: ("temporarily_unavailable", "The server encountered an unexpected error. Try again."),
    90024: ("temporarily_unavailable", "RequestBudgetExceededError - A transient error has occurred. Try again."),
    90055: ("temporarily_unavailable", "TenantThrottlingError - There are too many incoming requests. This exception is thrown for blocked tenants."),
    50196: ("invalid_request", "The server terminated an operation because it encountered a client request loop. Please contact your app vendor."),
    # What the entra persona's own answers carry (entra_error_code).
    70016: ("authorization_pending", "OAuth 2.0 device flow error. Authorization is pending. Continue polling."),
    70020: ("expired_token", "The provided value for the input parameter 'device_code' is not valid. This device code has expired."),
    65004: ("authorization_declined", "User declined to consent to access the app."),
    900144: ("invalid_request", "The request body must contain the following parameter: 'grant_type'."),
}
# The AADSTS code of an error the entra persona answers by itself.
ENTRA_CODE_OF = {"authorization_pending": 70016, "expired_token": 70020, "authorization_declined": 65004,
                 "access_denied": 65004, "invalid_grant": 70008, "invalid_client": 7000215,
                 "unauthorized_client": 700016, "invalid_scope": 70011, "invalid_request": 900144,
                 "unsupported_grant_type": 70003, "slow_down": 70016}
ENTRA_CONSUMERS_TENANT = "9188040d-6c67-4c5b-b112-36a304b66dad"

# Keycloak's invalid_grant descriptions (TokenManager.java in github.com/keycloak/keycloak).
KEYCLOAK_TEXTS = ["Token is not active", "Session not active", "Stale token", "Stale refresh token",
                  "Maximum allowed refresh token reuse exceeded", "Refresh token expired",
                  "Client session not active", "Invalid refresh token"]


def entra_error(obj, issuer, code=None):
    """An OAuth error body as Entra shapes it: AADSTSnnnn: text, then \\r\\n Trace ID, Correlation
    ID and Timestamp lines, error_codes [n], trace_id, correlation_id, timestamp, error_uri."""
    code = code or obj.get("_aadsts") or ENTRA_CODE_OF.get(obj["error"], 90014)
    text = obj.get("error_description") or AADSTS.get(code, ("", "An error occurred."))[1]
    trace, correlation = str(uuid_like()), str(uuid_like())
    stamp = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())
    shaped = {k: v for k, v in obj.items() if not k.startswith("_")}
    shaped.update({
        "error_description": "AADSTS%d: %s\r\nTrace ID: %s\r\nCorrelation ID: %s\r\nTimestamp: %s"
                             % (code, text, trace, correlation, stamp),
        "error_codes": [code], "timestamp": stamp, "trace_id": trace, "correlation_id": correlation,
        "error_uri": issuer + "/error?code=%d" % code})
    return shaped


def uuid_like():
    h = secrets.token_hex(16)
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def entra_tenant_ids():
    """(the tenant whose /{tenant}/... paths are served or None, the ID tokens' tid).  LOCK held."""
    tenant = STATE.config.get("entra_tenant")
    if tenant == "consumers":
        return tenant, ENTRA_CONSUMERS_TENANT
    if tenant in (None, "common", "organizations"):
        return tenant, STATE.config.get("entra_user_tenant")
    return tenant, tenant


def entra_issuer(root):
    """Discovery's issuer at the tenant's paths: the literal {tenantid} template for common and
    organizations, else the tenant's own.  LOCK held."""
    tenant, tid = entra_tenant_ids()
    return root + ("/{tenantid}/v2.0" if tenant in ("common", "organizations") else "/%s/v2.0" % tid)

GITHUB_DESCRIPTIONS = {
    "authorization_pending": "The authorization request is still pending.",
    "slow_down": "Too many requests have been made in the same timeframe.",
    "expired_token": "The device_code has expired.",
    "access_denied": "The authorization request was denied.",
    "bad_refresh_token": "The refresh token passed is incorrect or expired.",
    "incorrect_client_credentials": "The client_id and/or client_secret passed are incorrect.",
    "device_flow_disabled": "Device Flow must be explicitly enabled for this App",
    "bad_verification_code": "The code passed is incorrect or expired.",
}


def wire():
    """The current persona's wire switches, or None.  LOCK held (or a config snapshot read)."""
    persona = STATE.config.get("persona")
    return PERSONAS[persona]["wire"] if persona in PERSONAS else None

LOCK = threading.Lock()


class State:
    """All mutable server state; every access holds LOCK."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.config = copy.deepcopy(DEFAULT_CONFIG)
        self.families = {}  # id -> {"sub", "client_id", "scope", "revoked", "jkt"}
        self.refresh = {}  # token -> {"family", "client_id", "spent_at", "revoked"}
        self.access = {}  # token -> {"family", "client_id", "expires_at", "revoked", "jkt", ...}
        self.devices = {}  # device_code -> {"user_code", "client_id", "scope", "status", "sub", "expires_at"}
        self.codes = {}  # code -> {"client_id", "redirect_uri", "challenge", "nonce", "scope", "used", "dpop_jkt"}
        self.log = []
        self.stats = {"token_requests": 0, "issued": 0, "invalid_grant": 0, "reuse_detected": 0,
                      "dpop_proofs_valid": 0, "dpop_proofs_invalid": 0}
        self.dpop_nonce = None  # created lazily by dpop_nonce()
        self.dpop_nonce_uses = 0
        self.dpop_jti_seen = set()
        self.assertion_jti_seen = set()  # (iss, jti) of JWT bearer assertions (RFC 7523 §3 item 7)


STATE = State()


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def make_jwt(claims):
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = b64url(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = (header + "." + payload).encode("ascii")
    sig = hmac.new(JWT_KEY, signing_input, hashlib.sha256).digest()
    return header + "." + payload + "." + b64url(sig)


def int_bytes(value):
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def rsa_signing_key():
    """(kid, n, d) of the RS256 key in use: the second one after a rotation."""
    if STATE.config.get("rotate_signing_key"):
        return RSA2_KID, RSA2_N, RSA2_D
    return RSA_KID, RSA_N, RSA_D


def rs256_sign(signing_input):
    # RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8017 §8.2), by hand: the standard library has no RSA.
    _, n, d = rsa_signing_key()
    digest_info = bytes.fromhex("3031300d060960864801650304020105000420") + hashlib.sha256(signing_input).digest()
    k = (n.bit_length() + 7) // 8
    em = b"\x00\x01" + b"\xff" * (k - len(digest_info) - 3) + b"\x00" + digest_info
    return pow(int.from_bytes(em, "big"), d, n).to_bytes(k, "big")


def make_id_token(claims):
    cfg = STATE.config
    alg = cfg.get("id_token_alg") or "RS256"
    for k, v in (cfg.get("id_token_claims") or {}).items():
        if v is None:
            claims.pop(k, None)
        else:
            claims[k] = v
    header = {"alg": alg, "typ": "JWT"}
    if alg == "RS256":
        header["kid"] = rsa_signing_key()[0]
    elif alg == "ES256":
        header["kid"] = EC_KID
    h = b64url(json.dumps(header, separators=(",", ":")).encode())
    p = b64url(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = (h + "." + p).encode("ascii")
    if alg == "RS256":
        sig = rs256_sign(signing_input)
    elif alg == "ES256":
        sig = es256_sign(signing_input)
    elif alg == "HS256":
        sig = hmac.new(JWT_KEY, signing_input, hashlib.sha256).digest()
    else:
        sig = b""
    if cfg.get("id_token_bad_signature") and sig:
        sig = bytes([sig[0] ^ 1]) + sig[1:]
    return h + "." + p + "." + b64url(sig)


def jwks_document():
    kid, n, _ = rsa_signing_key()
    return {"keys": [{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                      "n": b64url(int_bytes(n)), "e": b64url(int_bytes(RSA_E))},
                     {"kty": "EC", "kid": EC_KID, "use": "sig", "alg": "ES256", "crv": "P-256",
                      "x": b64url(EC_PUBLIC[0].to_bytes(32, "big")), "y": b64url(EC_PUBLIC[1].to_bytes(32, "big"))}]}


# -- DPoP (RFC 9449), written from the RFC -------------------------------------
# check_dpop_proof is pure (no STATE, no LOCK: the signature check runs outside the lock);
# settle_dpop_proof then does the checks on server state (jti replay, nonce) with LOCK held.

B64URL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
# Members that only a private JWK has (RFC 7518 §6.2.2, §6.3.2, §6.4.1).
JWK_PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "oth", "k")
DEFAULT_PORTS = {"http": 80, "https": 443}


def b64url_decode(text):
    """Strict base64url without padding (RFC 7515 §2); ValueError otherwise."""
    if not isinstance(text, str) or not set(text) <= B64URL_CHARS or len(text) % 4 == 1:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwk_thumbprint(jwk):
    """RFC 7638 thumbprint of an EC public JWK: SHA-256 of the required members, lexicographic order."""
    canonical = json.dumps({"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"], "y": jwk["y"]},
                           separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode("ascii")).digest())


def access_token_hash(token):
    """The ath of RFC 9449 §4.2: base64url(SHA-256(ASCII of the access token))."""
    return b64url(hashlib.sha256(token.encode("ascii")).digest())


def normalized_uri(uri):
    """RFC 3986 §6.2.2/§6.2.3 normalisation for htu: scheme and host lower-cased, default port
    removed; query and fragment dropped; the path kept as it is.  None when not an absolute URI."""
    if not isinstance(uri, str):
        return None
    try:
        parts = urllib.parse.urlsplit(uri)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not scheme or not parts.netloc or parts.hostname is None:
        return None
    if port == DEFAULT_PORTS.get(scheme):
        port = None
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else None
    return (scheme, userinfo, parts.hostname.lower(), port, parts.path)


def htu_matches(claim, request_uri):
    expected = normalized_uri(request_uri)
    return expected is not None and normalized_uri(claim) == expected


def check_dpop_proof(values, method, request_uri, algs, iat_window, clock, access_token=None):
    """Every check of RFC 9449 §4.3 that needs no server state.

    values: the request's DPoP header values (None or [] when it carries no proof);
    clock: the server's time; access_token: the token presented at a protected resource
    (then ath is required).  Returns (info, error): info None when there is no proof, else
    the decoded proof for the log (jkt, jti, htm, htu, iat, nonce, ath when present); error
    None when these checks pass, else what failed."""
    if not values:
        return None, None
    info = {"jkt": None, "jti": None, "htm": None, "htu": None, "iat": None, "nonce": None}
    if len(values) != 1:
        return info, "more than one DPoP header"
    parts = values[0].strip().split(".")
    if len(parts) != 3:
        return info, "malformed proof: not a compact JWS"
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except ValueError:  # binascii.Error, UnicodeDecodeError and JSONDecodeError included
        return info, "malformed proof: bad base64url or JSON"
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return info, "malformed proof: header or claims not a JSON object"
    for k in ("jti", "htm", "htu", "iat", "nonce"):
        info[k] = claims.get(k)
    if "ath" in claims:
        info["ath"] = claims["ath"]
    jwk = header.get("jwk")
    if (isinstance(jwk, dict) and jwk.get("kty") == "EC" and jwk.get("crv") == "P-256"
            and isinstance(jwk.get("x"), str) and isinstance(jwk.get("y"), str)):
        info["jkt"] = jwk_thumbprint(jwk)
    if header.get("typ") != "dpop+jwt":
        return info, "typ is not dpop+jwt"
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in (algs or []) or alg != "ES256":
        return info, "alg %s not supported" % json.dumps(alg)
    if "crit" in header:
        return info, "crit header not supported"
    if not isinstance(jwk, dict):
        return info, "jwk header missing"
    private = [k for k in JWK_PRIVATE_MEMBERS if k in jwk]
    if private:
        return info, "jwk contains private key members: " + ", ".join(private)
    if info["jkt"] is None:
        return info, "jwk is not an EC P-256 public key"
    try:
        x, y = b64url_decode(jwk["x"]), b64url_decode(jwk["y"])
    except ValueError:
        return info, "jwk x or y is not base64url"
    if len(x) != 32 or len(y) != 32:
        return info, "jwk x or y is not 32 bytes"
    if len(signature) != 64:
        return info, "signature is not 64 bytes (raw r || s)"
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
    except ImportError:
        return info, "cannot verify: python3-cryptography is not installed"
    try:
        key = ec.EllipticCurvePublicNumbers(int.from_bytes(x, "big"), int.from_bytes(y, "big"),
                                            ec.SECP256R1()).public_key()
    except ValueError:
        return info, "jwk is not a point on P-256"
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    try:
        key.verify(der, (parts[0] + "." + parts[1]).encode("ascii"), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return info, "signature invalid"
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        return info, "jti missing"
    if claims.get("htm") != method:
        return info, "htm mismatch"
    if not htu_matches(claims.get("htu"), request_uri):
        return info, "htu mismatch"
    iat = claims.get("iat")
    if not isinstance(iat, (int, float)) or isinstance(iat, bool) or iat != iat or abs(iat) == float("inf"):
        return info, "iat missing or not a number"
    if abs(iat - clock) > float(iat_window):
        return info, "iat outside the accepted window"
    nonce = claims.get("nonce")
    if nonce is not None and not isinstance(nonce, str):
        return info, "nonce is not a string"
    if access_token is not None:
        ath = claims.get("ath")
        if not isinstance(ath, str):
            return info, "ath missing"
        try:
            expected = access_token_hash(access_token)
        except UnicodeEncodeError:
            expected = None
        if ath != expected:
            return info, "ath mismatch"
    return info, None


def dpop_nonce():
    """The server's current DPoP nonce, made on first use.  LOCK held."""
    if STATE.dpop_nonce is None:
        STATE.dpop_nonce = secrets.token_urlsafe(24)
        STATE.dpop_nonce_uses = 0
    return STATE.dpop_nonce


def settle_dpop_proof(info, error, nonce_required, expected_jkt=None):
    """With LOCK held: finish the checks of a proof check_dpop_proof gave (info, error): the key
    (expected_jkt, at /resource), jti replay, then the nonce.  Records the verdict in info
    ("valid", "error") and in the stats.  Returns None (valid, or no proof),
    "invalid_dpop_proof" or "use_dpop_nonce"."""
    if info is None:
        return None
    verdict = "invalid_dpop_proof" if error else None
    if error is None and expected_jkt is not None and info["jkt"] != expected_jkt:
        error, verdict = "DPoP key mismatch: the proof's key is not the token's", "invalid_dpop_proof"
    if error is None:
        if info["jti"] in STATE.dpop_jti_seen:
            error, verdict = "jti reused", "invalid_dpop_proof"
        else:
            STATE.dpop_jti_seen.add(info["jti"])
    if error is None and nonce_required:
        if info.get("nonce") is None:
            error, verdict = "nonce missing", "use_dpop_nonce"
        elif info["nonce"] != dpop_nonce():
            error, verdict = "nonce stale", "use_dpop_nonce"
        else:
            STATE.dpop_nonce_uses += 1
            rotate_after = int(STATE.config.get("dpop_nonce_rotate_after") or 0)
            if rotate_after > 0 and STATE.dpop_nonce_uses >= rotate_after:
                STATE.dpop_nonce = None
                dpop_nonce()
    info["valid"] = error is None
    if error is not None:
        info["error"] = error
    STATE.stats["dpop_proofs_valid" if error is None else "dpop_proofs_invalid"] += 1
    return verdict


def dpop_settings(path):
    """(algs, iat_window, clock, nonce_required, downgrade) for a request to path.  LOCK held.
    dpop_downgrade turns the nonce off at /token and /revoke, not at /resource."""
    cfg = STATE.config
    downgrade = bool(cfg.get("dpop_downgrade"))
    key = "dpop_resource_nonce_required" if path == "/resource" else "dpop_nonce_required"
    return (list(cfg.get("dpop_algs") or []), float(cfg.get("dpop_iat_window") or 0),
            time.time() + float(cfg.get("date_offset_seconds") or 0),
            bool(cfg.get(key)) and not (downgrade and path != "/resource"), downgrade)


class Closed(Exception):
    """Raised to drop the connection without sending a response."""


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Clients keep connections alive (tokenctl's refresh --all does): a response's headers and
    # body are two writes, and with Nagle's algorithm the second waits for the client's delayed
    # ACK, 40 ms a response. Servers in the field set TCP_NODELAY (nginx, Go, Java, Node).
    disable_nagle_algorithm = True
    server_version = "tokenctl-testserver/1"
    sys_version = ""
    verbose = False

    # -- plumbing ---------------------------------------------------------

    def log_message(self, fmt, *args):
        if self.verbose:
            sys.stderr.write("authserver: %s - %s\n" % (self.address_string(), fmt % args))

    def date_time_string(self, timestamp=None):
        # Used by send_response for the Date header: honour date_offset_seconds.
        with LOCK:
            offset = STATE.config.get("date_offset_seconds") or 0
        return email.utils.formatdate(time.time() + float(offset), usegmt=True)

    public_issuer = None

    @property
    def issuer(self):
        return self.public_issuer or "http://127.0.0.1:%d" % self.server.server_address[1]

    def request_url(self):
        """The URL this request was sent to, without its query (a proof's htu names it: a
        persona's token endpoint is not /token)."""
        return self.issuer + urllib.parse.urlsplit(self.path).path

    def read_body(self):
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        if not length:
            return b""
        return self.rfile.read(int(length))

    def send(self, status, body=b"", content_type="application/json", headers=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            content_type = "application/json"
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        if body or content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Pragma", "no-cache")
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status, obj):
        self.send(status, json.dumps(obj).encode(), "application/json")

    def send_answer(self, status, obj, headers=None, shape=None):
        """A /token or device answer, shaped by the persona's wire switches (`shape`: wire() and
        numbers_as_strings, read under LOCK by the caller): errors with 200, numbers as strings,
        form-encoded unless JSON was asked for."""
        wire_switches, numbers_as_strings = shape or (None, False)
        if not isinstance(obj, dict):
            return self.send(status, obj, headers=headers)
        obj = dict(obj)
        if wire_switches and wire_switches.get("errors_with_200") and "error" in obj:
            obj.setdefault("error_description", GITHUB_DESCRIPTIONS.get(obj["error"], obj["error"]))
            obj.setdefault("error_uri", "https://docs.github.com/developers/apps/authorizing-oauth-apps")
            if wire_switches.get("errors_with_200"):
                status = 200
        if wire_switches and "error" in obj and wire_switches.get("error_style") == "entra":
            obj = entra_error(obj, self.issuer)
        obj = {k: v for k, v in obj.items() if not k.startswith("_")}
        if numbers_as_strings:
            obj = {k: (str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v) for k, v in obj.items()}
        accept = (self.headers.get("Accept") or "").lower()
        if wire_switches and wire_switches.get("form_unless_json") and "application/json" not in accept:
            pairs = [(k, "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)) for k, v in obj.items()]
            return self.send(status, urllib.parse.urlencode(pairs), "application/x-www-form-urlencoded", headers)
        self.send(status, obj, headers=headers)

    def drop(self):
        self.close_connection = True
        raise Closed()

    def dispatch(self, method):
        parsed = urllib.parse.urlsplit(self.path)
        path = parsed.path
        try:
            body = self.read_body() if method in ("POST", "DELETE") else b""
            route = ROUTES.get((method, path)) or self.entra_route(method, path)
            if route is None and method == "DELETE" and path.startswith("/api/v3/applications/") \
                    and path.endswith("/token"):
                route = Handler.github_delete_token
            if route is None:
                if method == "GET" and path.startswith("/.well-known/"):
                    with LOCK:
                        log_request(path, 404, "not_found")
                self.send_json(404, {"error": "not_found"})
                return
            route(self, body, urllib.parse.parse_qs(parsed.query))
        except Closed:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def entra_route(self, method, path):
        """The handler of an Entra tenant path (/{tenant}/oauth2/v2.0/token...) when the entra
        persona serves that tenant (config entra_tenant), else None."""
        parts = path.split("/", 2)
        if len(parts) < 3 or not parts[1]:
            return None
        with LOCK:
            serves = wire() is not None and wire().get("error_style") == "entra" and \
                STATE.config.get("entra_tenant") == parts[1]
        return ENTRA_ROUTES.get((method, "/" + parts[2])) if serves else None

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")

    # -- discovery --------------------------------------------------------

    def discovery(self, body, query, oidc, tenant_paths=False):
        with LOCK:
            cfg = STATE.config
            raw = cfg.get("discovery_raw")
            if (oidc or wire() is not None) and not cfg["discovery_oidc"]:
                # (a GitHub persona has neither discovery document)
                log_request(self.path, 404, "not_found")
                status, doc = 404, {"error": "not_found"}
            elif raw is not None:
                log_request(self.path, 200, "discovery_raw")
                status, doc = 200, None
            elif tenant_paths:
                doc = self.entra_discovery()
                status = 200
                log_request(self.path, 200, "discovery")
            else:
                issuer = self.issuer
                paths = dict({"token": "/token", "device": "/device_authorization", "revoke": "/revoke",
                              "authorize": "/authorize", "jwks": "/jwks"}, **((wire() or {}).get("paths") or {}))
                doc = {
                    "issuer": cfg["discovery_issuer_override"] or issuer,
                    "token_endpoint": issuer + paths["token"],
                    "grant_types_supported": ["refresh_token", "authorization_code", DEVICE_GRANT],
                    "token_endpoint_auth_methods_supported": list(cfg.get("auth_methods") or []),
                    "scopes_supported": ["openid", "offline_access", "profile", "email"],
                    "device_authorization_endpoint": issuer + paths["device"],
                    "authorization_endpoint": issuer + paths["authorize"],
                    "jwks_uri": issuer + paths["jwks"],
                    "code_challenge_methods_supported": ["S256"],
                    "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                }
                if wire() and wire().get("error_style") == "entra":
                    doc["end_session_endpoint"] = issuer + "/logout"
                if cfg["advertise_revocation"]:
                    doc["revocation_endpoint"] = issuer + paths["revoke"]
                if cfg.get("dpop_algs"):
                    doc["dpop_signing_alg_values_supported"] = list(cfg["dpop_algs"])
                for k in cfg.get("discovery_omit") or []:
                    doc.pop(k, None)
                status = 200
                log_request(self.path, 200, "discovery")
        if doc is None:
            self.send(200, raw, "application/json")
            return
        self.send_json(status, doc)

    def oidc_discovery(self, body, query):
        self.discovery(body, query, True)

    def entra_tenant_discovery(self, body, query):
        self.discovery(body, query, True, tenant_paths=True)

    def entra_discovery(self):
        """Entra's discovery document at /{tenant}/v2.0/.well-known/openid-configuration: its
        endpoints under /{tenant}/, no revocation_endpoint.  LOCK held."""
        cfg = STATE.config
        base = self.issuer + "/" + cfg["entra_tenant"]
        doc = {
            "issuer": cfg["discovery_issuer_override"] or entra_issuer(self.issuer),
            "token_endpoint": base + "/oauth2/v2.0/token",
            "authorization_endpoint": base + "/oauth2/v2.0/authorize",
            "device_authorization_endpoint": base + "/oauth2/v2.0/devicecode",
            "end_session_endpoint": base + "/oauth2/v2.0/logout",
            "jwks_uri": base + "/discovery/v2.0/keys",
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "scopes_supported": ["openid", "profile", "email", "offline_access"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "claims_supported": ["sub", "iss", "aud", "exp", "iat", "nonce", "tid", "oid", "ver"],
            "cloud_instance_name": "microsoftonline.com",
        }
        for k in cfg.get("discovery_omit") or []:
            doc.pop(k, None)
        return doc

    def as_discovery(self, body, query):
        self.discovery(body, query, False)

    # -- /token -----------------------------------------------------------

    def token(self, body, query):
        form = parse_form(body)
        grant_type = form.get("grant_type")
        rt = form.get("refresh_token")
        client_id = form.get("client_id") or basic_client_id(self.headers.get("Authorization"))
        proofs = self.headers.get_all("DPoP")
        received = time.time()
        with LOCK:
            STATE.stats["token_requests"] += 1
            fault = take_fault()
            delay = float(STATE.config.get("delay_seconds") or 0)
            entry = {"grant_type": grant_type, "client_id": client_id, "refresh_token": rt,
                     "scope": form.get("scope"), "audience": form.get("audience"),
                     "resource": form.get_all("resource"),
                     "client_secret_sent": bool(form.get("client_secret") or basic_secret(self.headers.get("Authorization"))),
                     "client_auth": client_auth_kind(form, self.headers.get("Authorization")),
                     "client_port": self.client_address[1], "received": received}
            if fault is not None and "delay" not in fault:
                # A faulted request never touches state: its proof is decoded for the log, not settled.
                algs, window, clock, _, _ = dpop_settings("/token")
                info, error = check_dpop_proof(proofs, "POST", self.request_url(), algs, window, clock)
                if info is not None:
                    info["valid"] = error is None
                    if error is not None:
                        info["error"] = error
                kind = "hang" if "hang" in fault else "close" if fault.get("close") else "status"
                log_request("/token", fault.get("status") if kind == "status" else None,
                            "fault", fault=kind, dpop=info, token_type=None, **entry)
        if fault is None:
            with LOCK:
                injected = take_injected_error(rt)
                if injected is not None:
                    log_request("/token", injected[0], injected[2], token_type=None, **entry)
                    shape = (wire() if injected[1].get("_aadsts") is None else ENTRA_WIRE, False)
            if injected is not None:
                return self.send_answer(injected[0], injected[1], shape=shape)
        if fault is not None and "delay" in fault:
            time.sleep(float(fault["delay"]))
            fault = None
        if delay > 0:
            time.sleep(delay)
        if fault is not None:
            if "hang" in fault:
                time.sleep(float(fault["hang"]))
                self.drop()
            if fault.get("close"):
                self.drop()
            echoed = {"{refresh_token}": rt or "",
                      "{client_secret}": form.get("client_secret") or basic_secret(self.headers.get("Authorization")) or "",
                      "{request}": body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)}
            self.send(int(fault.get("status", 500)), echo_into(fault.get("body", ""), echoed),
                      fault.get("content_type", "text/plain"), fault.get("headers"))
            return

        with LOCK:
            algs, window, clock, nonce_required, downgrade = dpop_settings("/token")
        info, error = check_dpop_proof(proofs, "POST", self.request_url(), algs, window, clock)
        headers = {}
        with LOCK:
            verdict = settle_dpop_proof(info, error, nonce_required)
            # With dpop_downgrade the proof is ignored: nothing refused, nothing bound, Bearer.
            dpop = None if downgrade else DPoP(info["jkt"] if info is not None and verdict is None else None)
            auth_error = check_client_secret(client_id, form, self.headers.get("Authorization"))
            if verdict is not None and not downgrade:
                status, obj, outcome = 400, {"error": verdict, "error_description": info["error"]}, verdict
            elif auth_error is not None and wire() is not None:
                code = wire().get("client_error", "invalid_client")
                status, obj, outcome = 401, {"error": code}, code
            elif auth_error is not None:
                status, obj, outcome = 401, {"error": "invalid_client"}, "invalid_client"
            elif grant_type == DEVICE_GRANT:
                status, obj, outcome = device_grant(self.issuer, form.get("device_code"), client_id, dpop)
            elif grant_type == "authorization_code":
                status, obj, outcome = code_grant(self.issuer, form, client_id, dpop)
            elif grant_type == "client_credentials":
                status, obj, outcome = client_credentials_grant(self.issuer, client_id, form, dpop)
            elif grant_type == JWT_BEARER_GRANT:
                status, obj, outcome = jwt_bearer_grant(self.issuer, form, client_id, dpop)
            else:
                status, obj, outcome = token_grant(self.issuer, grant_type, rt, client_id, form.get("scope"),
                                                   form.get("audience"), form.get_all("resource"), dpop)
                if "_overridden" in obj:
                    entry["overridden"] = obj.pop("_overridden")
            status, obj = persona_error(status, obj, grant_type)
            if status == 200:
                STATE.stats["issued"] += 1
            elif obj.get("error") == "invalid_grant":
                STATE.stats["invalid_grant"] += 1
            if outcome == "reuse_detected":
                STATE.stats["reuse_detected"] += 1
            if nonce_required:
                headers["DPoP-Nonce"] = dpop_nonce()
            if wire() and wire().get("errors_with_200") and "error" in obj:
                status = 200  # as sent (send_answer): the log shows what went over the wire
            log_request("/token", status, outcome, dpop=copy.deepcopy(info),
                        token_type=obj.get("token_type") if "error" not in obj else None,
                        issued_refresh_token=obj.get("refresh_token") if "error" not in obj else None, **entry)
            shape = (wire(), bool(STATE.config.get("numbers_as_strings")))
        self.send_answer(status, obj, headers=headers, shape=shape)

    # -- /revoke ----------------------------------------------------------

    def revoke(self, body, query):
        form = parse_form(body)
        token = form.get("token")
        client_id = form.get("client_id") or basic_client_id(self.headers.get("Authorization"))
        entry = {"token_type_hint": form.get("token_type_hint"), "client_id": client_id,
                 "refresh_token": token}
        with LOCK:
            algs, window, clock, nonce_required, downgrade = dpop_settings("/revoke")
        info, error = check_dpop_proof(self.headers.get_all("DPoP"), "POST", self.request_url(),
                                       algs, window, clock)
        headers = {}
        with LOCK:
            fault_status = STATE.config.get("revoke_fault_status")
            if fault_status:
                # Answered exactly so, touching no state: the proof is decoded for the log only.
                if info is not None:
                    info["valid"] = error is None
                    if error is not None:
                        info["error"] = error
                log_request("/revoke", int(fault_status), "fault", dpop=info, **entry)
                status, obj = int(fault_status), b""
            else:
                verdict = settle_dpop_proof(info, error, nonce_required)
                dpop = None if downgrade else DPoP(info["jkt"] if info is not None and verdict is None else None)
                if verdict is not None and not downgrade:
                    status, obj, outcome = 400, {"error": verdict, "error_description": info["error"]}, verdict
                elif check_client_secret(client_id, form, self.headers.get("Authorization")) is not None:
                    status, obj, outcome = 401, b"", "invalid_client"
                elif not token:
                    status, obj, outcome = 400, {"error": "invalid_request",
                                                 "error_description": "missing token"}, "invalid_request"
                else:
                    w = wire()
                    if w and w.get("revoke_unknown_invalid_token") and not token_status(token).get("active"):
                        outcome, obj = "unknown", None  # Google: a revoked token is one it does not know
                    else:
                        outcome, obj = revoke_token(token, client_id, dpop)
                    status = 200 if obj is None else 400
                    obj = b"" if obj is None else obj
                    if outcome == "unknown" and wire() and wire().get("revoke_unknown_invalid_token"):
                        status, obj = 400, {"error": "invalid_token"}  # Google: not 200 as RFC 7009 says
                if nonce_required:
                    headers["DPoP-Nonce"] = dpop_nonce()
                log_request("/revoke", status, outcome, dpop=copy.deepcopy(info), **entry)
        self.send(status, obj, None if obj == b"" else "application/json", headers)

    def github_delete_token(self, body, query):
        """GitHub's revocation (not RFC 7009): DELETE /api/v3/applications/{client_id}/token with
        Basic client_id:client_secret and {"access_token": ...}: 204, 404 for a token it does not
        know (or bad credentials), 422 for a malformed body.  The token's grant dies with it."""
        client_id = urllib.parse.unquote(self.path.split("?")[0][len("/api/v3/applications/"):-len("/token")])
        auth = self.headers.get("Authorization")
        try:
            token = json.loads(body or b"{}").get("access_token")
        except (ValueError, AttributeError):
            token = None
        with LOCK:
            expected = (STATE.config.get("client_secrets") or {}).get(client_id)
            entry = {"client_id": client_id, "basic_client_id": basic_client_id(auth), "access_token": token,
                     "method": "DELETE"}
            if basic_client_id(auth) != client_id or basic_secret(auth) is None or \
                    (expected is not None and basic_secret(auth) != expected):
                status, obj, outcome = 404, {"message": "Not Found"}, "bad_credentials"
            elif not isinstance(token, str) or not token:
                status, obj, outcome = 422, {"message": "Validation Failed"}, "invalid_request"
            else:
                rec = STATE.access.get(token)
                if rec is None or rec["revoked"] or rec["client_id"] != client_id:
                    status, obj, outcome = 404, {"message": "Not Found"}, "unknown"
                else:
                    rec["revoked"] = True
                    STATE.families[rec["family"]]["revoked"] = True
                    status, obj, outcome = 204, b"", "revoked"
            log_request("/applications/token", status, outcome, **entry)
        self.send(status, obj, None if obj == b"" else "application/json")

    # -- protected resource (RFC 9449 §7, RFC 6750) ------------------------------

    def resource(self, body, query):
        method = self.command
        scheme, _, token = (self.headers.get("Authorization") or "").strip().partition(" ")
        scheme, token = scheme.lower(), token.strip()
        if scheme not in ("dpop", "bearer") or not token:
            scheme, token = None, None
        with LOCK:
            algs, window, clock, nonce_required, _ = dpop_settings("/resource")
        info, error = check_dpop_proof(self.headers.get_all("DPoP"), method, self.issuer + "/resource",
                                       algs, window, clock, access_token=token or "")
        with LOCK:
            rec = STATE.access.get(token) if token else None
            fam = STATE.families[rec["family"]] if rec is not None else None
            active = (rec is not None and not rec["revoked"] and not fam["revoked"]
                      and time.time() < rec["expires_at"])
            # With the DPoP scheme the proof's key must be the one the token is bound to.
            expected_jkt = rec.get("jkt") if active and scheme == "dpop" else None
            verdict = settle_dpop_proof(info, error, nonce_required, expected_jkt)
            challenge = "DPoP"
            if scheme is None:
                outcome, description = "invalid_token", "no access token (Authorization: DPoP or Bearer)"
            elif verdict is not None:
                outcome, description = verdict, info["error"]
            elif scheme == "dpop" and info is None:
                outcome, description = "invalid_dpop_proof", "DPoP proof required"
            elif not active:
                outcome, description = "invalid_token", "access token unknown, expired or revoked"
                challenge = "DPoP" if scheme == "dpop" else "Bearer"
            elif scheme == "dpop" and rec.get("jkt") is None:
                outcome, description = "invalid_token", "access token is not DPoP-bound"
            elif scheme == "bearer" and rec.get("jkt") is not None:
                outcome, description = "bearer_for_bound_token", "DPoP-bound token presented as Bearer"
            else:
                outcome, description = "ok", None
            headers = {}
            if outcome == "ok":
                status, obj = 200, {"ok": True, "sub": fam["sub"], "token_type": "DPoP" if scheme == "dpop" else "Bearer"}
            else:
                error_code = "invalid_token" if outcome == "bearer_for_bound_token" else outcome
                status, obj = 401, {"error": error_code, "error_description": description}
                headers["WWW-Authenticate"] = '%s error="%s", error_description="%s"' % (
                    challenge, error_code, description.replace("\\", "\\\\").replace('"', '\\"'))
            if nonce_required:
                headers["DPoP-Nonce"] = dpop_nonce()
            log_request("/resource", status, outcome, method=method,
                        scheme={"dpop": "DPoP", "bearer": "Bearer"}.get(scheme), access_token=token,
                        dpop=copy.deepcopy(info))
        self.send(status, obj, headers=headers)

    # -- device authorization (RFC 8628) ---------------------------------------

    def device_authorization(self, body, query):
        form = parse_form(body)
        client_id = form.get("client_id") or basic_client_id(self.headers.get("Authorization"))
        # Answers go out after LOCK is released: send_response's Date header takes it.
        with LOCK:
            cfg = STATE.config
            if cfg.get("device_endpoint_missing"):
                log_request("/device_authorization", 404, "not_found", client_id=client_id)
                status, doc = 404, None
            elif not client_id:
                log_request("/device_authorization", 400, "invalid_request")
                status, doc = 400, {"error": "invalid_request"}
            elif check_client_secret(client_id, form, self.headers.get("Authorization")) is not None:
                log_request("/device_authorization", 401, "invalid_client", client_id=client_id)
                code = (wire() or {}).get("client_error", "invalid_client")
                status, doc = 401, {"error": code}
                words = ((wire() or {}).get("descriptions") or {}).get(code)
                if words:
                    doc["error_description"] = words
            elif wire() and set((form.get("scope") or "").split()) & set(wire().get("refuses_scopes") or []):
                log_request("/device_authorization", 400, "invalid_scope", client_id=client_id, scope=form.get("scope"))
                status, doc = 400, {"error": "invalid_scope",
                                    "error_description": "Some requested scopes were invalid. {invalid=[offline_access]}"}
            elif cfg.get("device_flow_disabled") == "unauthorized_client":
                # GitHub Enterprise Server's word for it.
                log_request("/device_authorization", 400, "unauthorized_client", client_id=client_id)
                status, doc = 400, {"error": "unauthorized_client"}
            elif cfg.get("device_flow_disabled"):
                log_request("/device_authorization", 400, "device_flow_disabled", client_id=client_id)
                status, doc = 400, {"error": "device_flow_disabled",
                                    "error_description": GITHUB_DESCRIPTIONS["device_flow_disabled"]}
            else:
                status, doc = 200, self.new_device_code(form, client_id, cfg)
            shape = (wire(), bool(cfg.get("numbers_as_strings")))
        if doc is None:
            # What a Rails application answers for a route it does not have.
            return self.send(404, "<!DOCTYPE html>\n<html><head><title>The page you're looking for could not be found (404)</title></head>"
                                  "<body><h1>404</h1><p>Page not found</p></body></html>\n", "text/html; charset=utf-8")
        self.send_answer(status, doc, shape=shape)

    def new_device_code(self, form, client_id, cfg):
        """LOCK held."""
        device_code = "dc_" + secrets.token_urlsafe(24)
        user_code = secrets.token_hex(2).upper() + "-" + secrets.token_hex(2).upper()
        expires_in = int(cfg["device_expires_in"])
        w = wire()
        oidc_default = not w or w.get("error_style") in ("entra", "keycloak")
        STATE.devices[device_code] = {"user_code": user_code, "client_id": client_id,
                                      "scope": form.get("scope") or ("openid offline_access" if oidc_default else ""),
                                      "audience": form.get("audience"),
                                      "status": "pending", "sub": "alice",
                                      "expires_at": time.time() + expires_in,
                                      # the interval in force, and when the code was issued or last polled
                                      "interval": float(cfg["device_interval"]), "last_poll": time.time()}
        doc = {"device_code": device_code, "user_code": user_code,
               "verification_uri": self.issuer + ((w or {}).get("device_verification_path") or "/device"),
               "verification_uri_complete": (self.issuer + ((w or {}).get("device_verification_path") or "/device")
                                             + "?user_code=" + user_code),
               "expires_in": expires_in, "interval": cfg["device_interval"]}
        if w and not w.get("device_uri_complete"):
            del doc["verification_uri_complete"]
        if w and w.get("device_verification_url"):
            doc["verification_url"] = doc.pop("verification_uri")
        if w and w.get("device_message"):
            # Entra: the user's instructions, localized by the server.
            doc["message"] = ("To sign in, use a web browser to open the page %s and enter the code %s to "
                              "authenticate." % (doc["verification_uri"], user_code))
        for k, v in (cfg.get("device_response_override") or {}).items():
            if v is None:
                doc.pop(k, None)
            else:
                doc[k] = v
        log_request("/device_authorization", 200, "issued", client_id=client_id, scope=form.get("scope"),
                    audience=form.get("audience"), resource=form.get("resource"), device_code=device_code)
        return doc

    def t_device(self, body, query, approve):
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return self.send_json(400, {"error": "invalid_json"})
        found = False
        with LOCK:
            for rec in STATE.devices.values():
                if rec["user_code"] == req.get("user_code"):
                    rec["status"] = "approved" if approve else "denied"
                    rec["sub"] = req.get("sub") or rec["sub"]
                    found = True
                    break
        if found:
            self.send_json(200, {"ok": True})
        else:
            self.send_json(404, {"error": "unknown user_code"})

    def t_device_approve(self, body, query):
        self.t_device(body, query, True)

    def t_device_deny(self, body, query):
        self.t_device(body, query, False)

    # -- authorization endpoint (no login page: answers at once) ------------

    def authorize(self, body, query):
        q = {k: v[0] for k, v in query.items()}
        redirect_uri = q.get("redirect_uri", "")
        with LOCK:
            mode = STATE.config.get("authorize_mode") or "approve"
            w = wire()
            refused_scope = bool(w and set((q.get("scope") or "").split()) & set(w.get("refuses_scopes") or []))
            log_request("/authorize", 400 if refused_scope else 302, "invalid_scope" if refused_scope else mode,
                        client_id=q.get("client_id"), redirect_uri=redirect_uri,
                        scope=q.get("scope"), nonce=q.get("nonce"), state=q.get("state"),
                        code_challenge_method=q.get("code_challenge_method"), audience=q.get("audience"),
                        dpop_jkt=q.get("dpop_jkt"), access_type=q.get("access_type"), prompt=q.get("prompt"))
            # (the 400 goes out after LOCK is released: send_response's Date header takes it)
            refused = (refused_scope or not redirect_uri.startswith("http://127.0.0.1:")
                       or q.get("response_type") != "code")
            params = {"state": q.get("state", "")}
            if refused:
                pass
            elif mode in ("deny", "deny_without_state"):
                params.update({"error": "access_denied", "error_description": "The user denied the request"})
                if mode == "deny_without_state":
                    del params["state"]
            elif mode == "no_code":
                pass
            else:
                if mode == "wrong_state":
                    params["state"] = "forged-" + secrets.token_hex(4)
                code = "code_" + secrets.token_urlsafe(24)
                STATE.codes[code] = {"client_id": q.get("client_id"), "redirect_uri": redirect_uri,
                                     "challenge": q.get("code_challenge"), "method": q.get("code_challenge_method"),
                                     "nonce": q.get("nonce"), "scope": q.get("scope") or "openid offline_access",
                                     "used": False, "dpop_jkt": q.get("dpop_jkt"), "audience": q.get("audience"),
                                     "offline_consent": q.get("access_type") == "offline" and q.get("prompt") == "consent"}
                params["code"] = code
        if refused:
            return self.send_json(400, {"error": "invalid_scope" if refused_scope else "invalid_request"})
        self.send(302, b"", None, {"Location": redirect_uri + "?" + urllib.parse.urlencode(params)})

    def jwks(self, body, query):
        with LOCK:
            document = jwks_document()
            log_request("/jwks", 200, "served", kids=[key["kid"] for key in document["keys"]])
        self.send_json(200, document)

    # -- test control -----------------------------------------------------

    def t_issue(self, body, query):
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return self.send_json(400, {"error": "invalid_json"})
        client_id = req.get("client_id")
        if not client_id:
            return self.send_json(400, {"error": "invalid_request", "error_description": "client_id required"})
        with LOCK:
            family = new_family(req.get("sub") or "alice", client_id, req.get("scope") or "openid offline_access",
                                req.get("audience"))
            rt = new_refresh(family, client_id)
        self.send_json(200, {"refresh_token": rt, "family": family})

    def t_config(self, body, query):
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return self.send_json(400, {"error": "invalid_json"})
        if not isinstance(req, dict):
            return self.send_json(400, {"error": "invalid_request", "error_description": "object expected"})
        unknown = sorted(set(req) - set(DEFAULT_CONFIG))
        if unknown:
            return self.send_json(400, {"error": "invalid_request",
                                        "error_description": "unknown config keys: " + ", ".join(unknown)})
        if "faults" in req and not isinstance(req["faults"], list):
            return self.send_json(400, {"error": "invalid_request", "error_description": "faults must be a list"})
        overrides = req.get("refresh_answer_overrides", [])
        if not isinstance(overrides, list) or not all(isinstance(o, dict) for o in overrides):
            return self.send_json(400, {"error": "invalid_request",
                                        "error_description": "refresh_answer_overrides must be a list of objects"})
        persona = req.get("persona")
        if persona is not None and persona not in PERSONAS:
            return self.send_json(400, {"error": "invalid_request",
                                        "error_description": "unknown persona: %s (known: %s)" % (persona, ", ".join(sorted(PERSONAS)))})
        with LOCK:
            if persona is not None:
                # The config a persona implies first; the request's other keys may still change it.
                for k, v in PERSONAS[persona]["config"].items():
                    STATE.config[k] = copy.deepcopy(v)
            for k, v in req.items():
                STATE.config[k] = copy.deepcopy(v)
            cfg = copy.deepcopy(STATE.config)
        self.send_json(200, cfg)

    def t_log(self, body, query):
        with LOCK:
            data = copy.deepcopy(STATE.log)
        self.send_json(200, data)

    def t_status(self, body, query):
        token = (query.get("token") or [""])[0]
        with LOCK:
            result = token_status(token)
        self.send_json(200, result)

    def t_reset(self, body, query):
        with LOCK:
            STATE.reset()
        self.send_json(200, {"ok": True})

    def t_revoke_all(self, body, query):
        """The provider ends every session (an admin's revoke, a password change): every family
        and access token revoked; the persona answers the next refresh its own way."""
        with LOCK:
            for fam in STATE.families.values():
                fam["revoked"] = True
            for rec in STATE.access.values():
                rec["revoked"] = True
            log_request("/_test/revoke-all", 200, "revoked")
        self.send_json(200, {"ok": True})

    def t_stats(self, body, query):
        with LOCK:
            data = dict(STATE.stats)
        self.send_json(200, data)


ROUTES = {
    ("GET", "/.well-known/openid-configuration"): Handler.oidc_discovery,
    ("GET", "/.well-known/oauth-authorization-server"): Handler.as_discovery,
    ("POST", "/token"): Handler.token,
    ("POST", "/revoke"): Handler.revoke,
    ("GET", "/resource"): Handler.resource,
    ("POST", "/resource"): Handler.resource,
    ("POST", "/device_authorization"): Handler.device_authorization,
    # GitHub's fixed paths (github-* personas; the handlers are the same).
    ("POST", "/login/device/code"): Handler.device_authorization,
    ("POST", "/login/oauth/access_token"): Handler.token,
    ("GET", "/login/oauth/authorize"): Handler.authorize,
    # Okta's org authorization server, Auth0's and GitLab's paths (their personas; the same handlers).
    ("POST", "/oauth2/v1/token"): Handler.token,
    ("POST", "/oauth2/v1/device/authorize"): Handler.device_authorization,
    ("POST", "/oauth2/v1/revoke"): Handler.revoke,
    ("GET", "/oauth2/v1/authorize"): Handler.authorize,
    ("GET", "/oauth2/v1/keys"): Handler.jwks,
    ("POST", "/oauth/token"): Handler.token,
    ("POST", "/oauth/device/code"): Handler.device_authorization,
    ("POST", "/oauth/authorize_device"): Handler.device_authorization,
    ("POST", "/oauth/revoke"): Handler.revoke,
    ("GET", "/oauth/authorize"): Handler.authorize,
    ("GET", "/.well-known/jwks.json"): Handler.jwks,
    ("GET", "/oauth/discovery/keys"): Handler.jwks,
    ("GET", "/authorize"): Handler.authorize,
    ("GET", "/jwks"): Handler.jwks,
    ("POST", "/_test/device/approve"): Handler.t_device_approve,
    ("POST", "/_test/device/deny"): Handler.t_device_deny,
    ("POST", "/_test/issue"): Handler.t_issue,
    ("POST", "/_test/config"): Handler.t_config,
    ("GET", "/_test/log"): Handler.t_log,
    ("GET", "/_test/token-status"): Handler.t_status,
    ("POST", "/_test/reset"): Handler.t_reset,
    ("POST", "/_test/revoke-all"): Handler.t_revoke_all,
    ("GET", "/_test/stats"): Handler.t_stats,
}
# Entra's paths under /{tenant}/ (the entra persona with entra_tenant; Handler.entra_route).
ENTRA_ROUTES = {
    ("GET", "/v2.0/.well-known/openid-configuration"): Handler.entra_tenant_discovery,
    ("POST", "/oauth2/v2.0/token"): Handler.token,
    ("POST", "/oauth2/v2.0/devicecode"): Handler.device_authorization,
    ("GET", "/oauth2/v2.0/authorize"): Handler.authorize,
    ("GET", "/discovery/v2.0/keys"): Handler.jwks,
}


# -- helpers below are called with LOCK held (except the pure ones) ----------


class Form(dict):
    """The first value of each field; get_all gives every value of a repeated one (resource)."""

    def __init__(self, pairs):
        super().__init__()
        self.pairs = pairs
        for k, v in pairs:
            self.setdefault(k, v)

    def get_all(self, key):
        return [v for k, v in self.pairs if k == key]


def parse_form(body):
    return Form(urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def basic_client_id(auth):
    if not auth or not auth.lower().startswith("basic "):
        return None
    try:
        raw = base64.b64decode(auth[6:].strip()).decode()
        return urllib.parse.unquote_plus(raw.split(":", 1)[0]) or None
    except (ValueError, UnicodeDecodeError):
        return None


def basic_secret(auth):
    if not auth or not auth.lower().startswith("basic "):
        return None
    try:
        raw = base64.b64decode(auth[6:].strip()).decode()
        return urllib.parse.unquote_plus(raw.split(":", 1)[1]) if ":" in raw else None
    except (ValueError, UnicodeDecodeError):
        return None


def client_auth_kind(form, auth):
    """How a request authenticated its client, for the log: "basic" (an Authorization header),
    "post" (client_secret in the form), "assertion" (client_assertion), or "none" (a public
    client, RFC 6749 §3.2.1: at most its client_id)."""
    if auth:
        return "basic"
    if form.get("client_secret"):
        return "post"
    if form.get("client_assertion"):
        return "assertion"
    return "none"


def check_client_secret(client_id, form, auth):
    """None when the client needs no secret or sent the right one; else a reason."""
    expected = (STATE.config.get("client_secrets") or {}).get(client_id)
    if expected is None:
        return None
    sent = form.get("client_secret") or basic_secret(auth)
    return None if sent == expected else "bad client secret"


def new_family(sub, client_id, scope, audience=None):
    family = "fam_" + secrets.token_hex(8)
    STATE.families[family] = {"sub": sub, "client_id": client_id, "scope": scope, "revoked": False, "jkt": None,
                              "audience": audience, "last_spent": None}
    return family


def persona_error(status, obj, grant_type):
    """LOCK held.  A persona's own words and HTTP status for an error answer of /token (GitHub's
    are put in by send_answer).  invalid_grant gets the persona's words for a refresh only."""
    w = wire()
    if not w or w.get("errors_with_200") or not isinstance(obj, dict) or "error" not in obj:
        return status, obj
    obj = dict(obj)
    code = obj["error"]
    words = w.get("descriptions") or {}
    if code in words and (code != "invalid_grant" or grant_type == "refresh_token"):
        obj["error_description"] = words[code]
    return (w.get("error_status") or {}).get(code, status), obj


def wants_refresh_token(scope):
    """Okta and Auth0 issue a refresh token only for the offline_access scope.  LOCK held."""
    w = wire()
    return not (w and w.get("refresh_needs_offline_access")) or "offline_access" in (scope or "").split()


class DPoP:
    """What a request's DPoP proof means to a grant or a revocation: jkt is the thumbprint of
    the key of its valid proof, None when it carried none (or an invalid one).  Grants get None
    instead of a DPoP when dpop_downgrade is on: the server then ignores DPoP altogether."""

    def __init__(self, jkt):
        self.jkt = jkt


def dpop_binding_error(dpop, bound_jkt):
    """None when a request with `dpop` may use what is bound to bound_jkt, else the error body."""
    if dpop is None or bound_jkt is None:
        return None
    if dpop.jkt is None:
        return {"error": "invalid_grant", "error_description": "DPoP proof required"}
    if dpop.jkt != bound_jkt:
        return {"error": "invalid_grant", "error_description": "DPoP key mismatch"}
    return None


def device_grant(issuer, device_code, client_id, dpop=None):
    rec = STATE.devices.get(device_code)
    if rec is None or rec["client_id"] != client_id:
        return 400, {"error": "invalid_grant"}, "invalid"
    w = wire()
    if w and w.get("expired_token_once") and rec.get("expired_reported"):
        # Auth0: expired_token to one poll, invalid_grant to every later one.
        return 400, {"error": "invalid_grant", "error_description": w["device_invalid_grant_description"]}, \
            "invalid_after_expiry"
    if w and w.get("poll_interval_rule"):
        # GitHub: a poll before the interval has passed (since the code was issued, or since the
        # previous poll) gets slow_down, and the interval grows by 5 s.
        now = time.time()
        early = now - rec["last_poll"] < rec["interval"]
        rec["last_poll"] = now
        if early:
            rec["interval"] += 5
            return 400, {"error": "slow_down", "interval": int(rec["interval"])}, "slow_down_early"
    script = STATE.config.get("device_script") or []
    if script:
        step = script.pop(0)
        if isinstance(step, dict):
            # Answered exactly so, touching nothing: {"status": 200, "body": {...}}.
            return int(step.get("status", 200)), copy.deepcopy(step.get("body") or {}), "scripted"
        if step == "approve":
            rec["status"] = "approved"
        elif step == "slow_down" and w and w.get("poll_interval_rule"):
            rec["interval"] += 5
            return 400, {"error": step, "interval": int(rec["interval"])}, step
        elif isinstance(step, str):
            if step == "expired_token":
                rec["expired_reported"] = True
            if step == "access_denied" and w and w.get("denied_error"):
                step = w["denied_error"]
            return 400, {"error": step}, step
    if time.time() > rec["expires_at"]:
        rec["expired_reported"] = True
        return 400, {"error": "expired_token"}, "expired_token"
    if rec["status"] == "pending":
        return 400, {"error": "authorization_pending"}, "authorization_pending"
    if rec["status"] == "denied":
        denied = (w and w.get("denied_error")) or "access_denied"
        return 400, {"error": denied}, denied
    if rec["status"] == "used":
        return 400, {"error": "invalid_grant"}, "invalid"
    rec["status"] = "used"
    family = new_family(rec["sub"], client_id, rec["scope"], rec.get("audience"))
    # GitLab's documented device answer has no refresh token; Okta and Auth0 need offline_access.
    with_refresh = wants_refresh_token(rec["scope"]) and not (w and w.get("device_without_refresh_token"))
    return 200, issue_pair(issuer, family, client_id, rec["scope"], with_refresh, audience=rec.get("audience"),
                           dpop=dpop), "issued"


def code_grant(issuer, form, client_id, dpop=None):
    rec = STATE.codes.get(form.get("code"))
    if rec is None or rec["used"] or rec["client_id"] != client_id:
        return 400, {"error": "invalid_grant"}, "invalid"
    rec["used"] = True
    if form.get("redirect_uri") != rec["redirect_uri"]:
        return 400, {"error": "invalid_grant", "error_description": "redirect_uri mismatch"}, "invalid"
    verifier = form.get("code_verifier") or ""
    if rec["method"] != "S256" or b64url(hashlib.sha256(verifier.encode()).digest()) != rec["challenge"]:
        return 400, {"error": "invalid_grant", "error_description": "PKCE verification failed"}, "invalid"
    if dpop is not None and rec.get("dpop_jkt") and dpop.jkt != rec["dpop_jkt"]:
        # RFC 9449 §10: the code is bound to the key /authorize was given (dpop_jkt).
        return 400, {"error": "invalid_grant", "error_description": "dpop_jkt mismatch"}, "dpop_jkt_mismatch"
    family = new_family("alice", client_id, rec["scope"], rec.get("audience"))
    w = wire()
    # Google: a refresh token only for access_type=offline with prompt=consent; Okta and Auth0
    # only for the offline_access scope.
    with_refresh = wants_refresh_token(rec["scope"]) and \
        not (w and w.get("refresh_needs_offline_consent") and not rec.get("offline_consent"))
    return 200, issue_pair(issuer, family, client_id, rec["scope"], with_refresh, nonce=rec["nonce"],
                           audience=rec.get("audience"), dpop=dpop), "issued"


def log_request(path, status, outcome, **fields):
    entry = {"time": time.time(), "path": path}
    entry.update(fields)
    entry["status"] = status
    entry["outcome"] = outcome
    STATE.log.append(entry)



def echo_into(body, echoed):
    """A fault's body with the request's values put in for their placeholders (see Faults)."""
    if isinstance(body, str):
        for placeholder, value in echoed.items():
            body = body.replace(placeholder, value)
        return body
    if isinstance(body, dict):
        return {key: echo_into(value, echoed) for key, value in body.items()}
    if isinstance(body, list):
        return [echo_into(value, echoed) for value in body]
    return body

def take_fault():
    faults = STATE.config.get("faults") or []
    if not faults:
        return None
    fault = faults[0]
    count = int(fault.get("count", 1))
    if count <= 1:
        faults.pop(0)
    else:
        fault["count"] = count - 1
    return dict(fault)


def take_injected_error(rt):
    """The next "aadsts_errors" or "keycloak_errors" entry as (status, body, outcome), or None.
    An AADSTS entry touches no state; a Keycloak text ends the session of the refresh token
    sent (its family), as Keycloak's would be."""
    entries = STATE.config.get("aadsts_errors") or []
    if entries:
        entry = entries.pop(0)
        code = int(entry["code"])
        error = entry.get("error") or AADSTS.get(code, ("invalid_request", ""))[0]
        obj = {"error": error, "_aadsts": code}
        if entry.get("description"):
            obj["error_description"] = entry["description"]
        status = int(entry.get("status") or (401 if error == "invalid_client" else 400))
        return status, obj, "AADSTS%d" % code
    texts = STATE.config.get("keycloak_errors") or []
    if texts:
        text = texts.pop(0)
        rec = STATE.refresh.get(rt) if rt else None
        if rec is not None:
            STATE.families[rec["family"]]["revoked"] = True
        return 400, {"error": "invalid_grant", "error_description": text}, "keycloak_invalid_grant"
    return None


def new_refresh(family, client_id, access_token=None):
    w = wire()
    rt = (w.get("refresh_prefix") or "rt_") + secrets.token_urlsafe(32) if w else "rt_" + secrets.token_urlsafe(32)
    STATE.refresh[rt] = {"family": family, "client_id": client_id, "spent_at": None, "revoked": False,
                         "issued_at": time.time(), "access_token": access_token}
    return rt


def issue_pair(issuer, fam_id, rec_client, scope, rotate, nonce=None, audience=None, resources=(), dpop=None):
    fam = STATE.families[fam_id]
    # A valid proof binds the pair, and the family (its first binding stays: the callers have
    # refused a proof with another key by now).
    jkt = dpop.jkt if dpop is not None else None
    if jkt is not None and fam.get("jkt") is None:
        fam["jkt"] = jkt
    # The server's own clock, which tests may set off from the client's.
    now = int(time.time() + (STATE.config.get("date_offset_seconds") or 0))
    ttl = int(STATE.config["access_ttl"])
    w = wire()
    audience = audience or fam.get("audience")
    # Auth0: a JWT for an API (audience), an opaque token good for /userinfo only without one.
    jwt = (bool(audience) and bool(w.get("jwt_with_audience"))) if w and "jwt_with_audience" in w \
        else bool(STATE.config.get("jwt_access_tokens"))
    if jwt:
        claims = {"iss": issuer, "sub": fam["sub"], "aud": audience or rec_client, "iat": now, "exp": now + ttl,
                  "jti": secrets.token_urlsafe(16)}
        if jkt is not None:
            claims["cnf"] = {"jkt": b64url(secrets.token_bytes(32)) if STATE.config.get("dpop_wrong_cnf") else jkt}
        at = make_jwt(claims)
    else:
        at = "at_" + secrets.token_urlsafe(32)
    if w and w.get("access_prefix"):
        at = w["access_prefix"] + secrets.token_hex(18)
    never = bool(w and w.get("access_never_expires"))
    STATE.access[at] = {"family": fam_id, "client_id": rec_client, "expires_at": float("inf") if never else time.time() + ttl,
                        "revoked": False, "scope": scope, "audience": audience, "resource": list(resources),
                        "jkt": jkt}
    resp = {
        "access_token": at,
        "token_type": "DPoP" if jkt is not None else "Bearer",
        "expires_in": ttl,
        "scope": scope,
    }
    if w and w.get("token_type") and jkt is None:
        resp["token_type"] = w["token_type"]
    if w and w.get("scope_style"):
        # GitHub: OAuth App scopes comma-separated; GitHub App user tokens "".
        resp["scope"] = (",".join((scope or "").split()) if w["scope_style"] == "comma"
                         else scope if w["scope_style"] == "space" else "")
    if w and w.get("created_at"):
        # GitLab: when the token was made, on the server's clock.
        resp["created_at"] = now + int(STATE.config.get("created_at_offset_seconds") or 0)
    if w and w.get("error_style") == "entra":
        resp["ext_expires_in"] = ttl
    id_claims = {"iss": issuer, "sub": fam["sub"], "aud": rec_client, "iat": now, "exp": now + ttl,
                 "email": fam["sub"] + "@example.test"}
    if nonce:
        id_claims["nonce"] = nonce
    if w and w.get("iss_schemeless"):
        id_claims["iss"] = issuer.split("://", 1)[1]  # Google's "accounts.google.com"
    if w and w.get("id_token_tid"):
        # Entra: the user's tenant, and at the tenant's paths the issuer of that tenant.
        tenant, tid = entra_tenant_ids()
        id_claims.update({"tid": tid, "ver": "2.0", "oid": "00000000-0000-0000-66f3-3332eca7ea81"})
        if tenant is not None:
            id_claims["iss"] = issuer + "/%s/v2.0" % tid
    if not STATE.config.get("omit_id_token"):
        resp["id_token"] = make_id_token(id_claims)
    if STATE.config.get("omit_expires_in"):
        del resp["expires_in"]
    if rotate and not STATE.config.get("omit_refresh_token"):
        resp["refresh_token"] = new_refresh(fam_id, rec_client, access_token=at)
        if w and w.get("refresh_token_expires_in"):
            resp["refresh_token_expires_in"] = w["refresh_token_expires_in"]
    return resp


def machine_token(issuer, sub, client_id, form, dpop):
    """LOCK held.  An access token with no refresh token and no ID token (RFC 6749 §4.4.3)."""
    scope = form.get("scope")
    family = new_family(sub, client_id, scope, form.get("audience"))
    resp = issue_pair(issuer, family, client_id, scope, rotate=False, audience=form.get("audience"),
                      resources=form.get_all("resource"), dpop=dpop)
    resp.pop("id_token", None)
    resp.pop("refresh_token", None)
    return resp


def client_credentials_grant(issuer, client_id, form, dpop):
    """LOCK held.  RFC 6749 §4.4: only a confidential client (its secret already checked by
    the caller) gets a token; its sub is the client."""
    if client_id is None or client_id not in (STATE.config.get("client_secrets") or {}):
        return 401, {"error": "invalid_client", "error_description": "a confidential client only"}, "invalid_client"
    return 200, machine_token(issuer, client_id, client_id, form, dpop), "issued"


def verify_es256(parts, jwk):
    """Whether the compact JWS PARTS verifies with the EC P-256 JWK (python3-cryptography)."""
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
        x, y, signature = b64url_decode(jwk["x"]), b64url_decode(jwk["y"]), b64url_decode(parts[2])
        key = ec.EllipticCurvePublicNumbers(int.from_bytes(x, "big"), int.from_bytes(y, "big"),
                                            ec.SECP256R1()).public_key()
        if len(signature) != 64:
            return False
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        key.verify(der, (parts[0] + "." + parts[1]).encode("ascii"), ec.ECDSA(hashes.SHA256()))
        return True
    except (ImportError, InvalidSignature, KeyError, TypeError, ValueError):
        return False


def jwt_bearer_grant(issuer, form, client_id, dpop):
    """LOCK held.  RFC 7523 §2.1 with the checks of §3, in its order; a failure is
    invalid_grant (§3.1) with what failed.  Client authentication is optional (§3.1): a
    client_id is recorded when one is sent."""
    def refuse(why):
        return 400, {"error": "invalid_grant", "error_description": why}, "invalid_grant"
    assertion = form.get("assertion")
    if not assertion:
        return 400, {"error": "invalid_request", "error_description": "missing assertion"}, "invalid_request"
    parts = assertion.split(".")
    if len(parts) != 3:
        return refuse("the assertion is not a compact JWS")
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
    except ValueError:
        return refuse("the assertion is not base64url JSON")
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return refuse("the assertion's header or claims are not a JSON object")
    trusted = (STATE.config.get("jwt_bearer_issuers") or {}).get(claims.get("iss"))
    if not isinstance(trusted, dict):
        return refuse("iss is not a trusted issuer")  # §3 item 1
    if header.get("alg") != "ES256":
        return refuse("alg is not ES256")
    keys = [k for k in trusted.get("keys") or [] if header.get("kid") in (None, k.get("kid"))]
    if not any(verify_es256(parts, k) for k in keys):
        return refuse("signature invalid")  # §3 item 9
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub:
        return refuse("sub missing")  # §3 item 2
    aud = claims.get("aud")
    audiences = aud if isinstance(aud, list) else [aud]
    if issuer not in audiences and issuer + "/token" not in audiences:
        return refuse("aud does not name this server")  # §3 item 3
    now = time.time() + (STATE.config.get("date_offset_seconds") or 0)
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or isinstance(exp, bool):
        return refuse("exp missing")  # §3 item 4
    if exp <= now:
        return refuse("the assertion has expired")
    nbf = claims.get("nbf")
    if isinstance(nbf, (int, float)) and not isinstance(nbf, bool) and nbf > now:
        return refuse("the assertion is not valid yet")  # §3 item 5
    jti = claims.get("jti")
    if jti is not None:
        if (claims["iss"], jti) in STATE.assertion_jti_seen:
            return refuse("the assertion was used before (jti)")  # §3 item 7
        STATE.assertion_jti_seen.add((claims["iss"], jti))
    return 200, machine_token(issuer, sub, client_id, form, dpop), "issued"


def token_grant(issuer, grant_type, rt, client_id, scope, audience=None, resources=(), dpop=None):
    """Returns (status, body, outcome)."""
    if not grant_type:
        return 400, {"error": "invalid_request", "error_description": "missing grant_type"}, "invalid_request"
    if grant_type != "refresh_token":
        return 400, {"error": "unsupported_grant_type"}, "unsupported_grant_type"
    if not rt or not client_id:
        return 400, {"error": "invalid_request",
                     "error_description": "missing refresh_token or client_id"}, "invalid_request"
    rec = STATE.refresh.get(rt)
    w = wire()
    bad = {"error": "invalid_grant",
           "error_description": (w or {}).get("dead_refresh_description") or "refresh token is invalid or revoked"}
    if w and w.get("dead_refresh_error"):
        # GitHub: a spent, unknown, revoked or expired refresh token is bad_refresh_token (with
        # HTTP 200, see send_answer); nothing else is revoked.
        dead = {"error": w["dead_refresh_error"]}
        if rec is None or rec["revoked"] or rec["spent_at"] is not None or STATE.families[rec["family"]]["revoked"]:
            return 400, dead, "bad_refresh_token"
        lifetime = w.get("refresh_token_expires_in")
        if lifetime and time.time() > rec.get("issued_at", 0) + lifetime:
            return 400, dead, "bad_refresh_token"
    keycloak = bool(w and w.get("keycloak_texts"))
    if rec is None or rec["revoked"]:
        return 400, dict(bad, error_description="Invalid refresh token") if keycloak else bad, "invalid"
    fam = STATE.families[rec["family"]]
    if fam["revoked"]:
        # Keycloak: the session is gone (ended, or killed by a reuse).
        return 400, dict(bad, error_description="Session not active") if keycloak else bad, "invalid"
    if rec["client_id"] != client_id:
        bad = {"error": "invalid_grant", "error_description": "refresh token was issued to another client"}
        return 400, bad, "invalid"
    # A bound family needs a proof with its key; a refused request spends nothing (checked
    # before the spent/reuse logic, so a stolen bound token cannot revoke the family either).
    bad = dpop_binding_error(dpop, fam.get("jkt"))
    if bad is not None:
        return 400, bad, "dpop_proof_required" if dpop.jkt is None else "dpop_key_mismatch"
    granted = fam["scope"]
    if scope:
        if not set(scope.split()) <= set(granted.split()):
            return 400, {"error": "invalid_scope"}, "invalid_scope"
        granted = " ".join(scope.split())
    allowed = STATE.config.get("allowed_resources")
    for resource in resources:
        if ":" not in resource or "#" in resource or (allowed is not None and resource not in allowed):
            return 400, {"error": "invalid_target"}, "invalid_target"
    cfg = STATE.config
    rotate = bool(cfg["rotate"])
    now = time.time()
    if rec["spent_at"] is not None:
        grace = float(cfg["grace_seconds"] or 0)
        # Auth0: within the leeway only the previous token (the one spent last) may be used
        # again; the one before it revokes the family.
        replayable = not (w and w.get("reuse_only_previous")) or fam.get("last_spent") == rt
        if grace > 0 and now - rec["spent_at"] < grace and replayable:
            return 200, issue_pair(issuer, rec["family"], client_id, granted, True, audience=audience,
                                   resources=resources, dpop=dpop), "grace_replay"
        if not (w and w.get("reuse_keeps_family")):
            fam["revoked"] = True
        reuse = "Maximum allowed refresh token reuse exceeded" if keycloak else "refresh token reuse detected"
        return 400, {"error": "invalid_grant", "error_description": reuse}, "reuse_detected"
    resp = issue_pair(issuer, rec["family"], client_id, granted, rotate, audience=audience, resources=resources,
                      dpop=dpop)
    if rotate and not (w and w.get("rotation_keeps_old")):
        # (Entra rotates without revoking: the old refresh token stays valid.)
        rec["spent_at"] = now
        fam["last_spent"] = rt
    elif w and w.get("persistent_refresh_echo"):
        # Okta's persistent refresh tokens: the same one comes back.
        resp["refresh_token"] = rt
    if w and w.get("refresh_kills_access_token") and rec.get("access_token") in STATE.access:
        # GitHub App: using a refresh token also kills the access token it came with.
        STATE.access[rec["access_token"]]["revoked"] = True
    overrides = cfg.get("refresh_answer_overrides") or []
    if overrides:
        override = overrides.pop(0)
        for key, value in override.items():
            if value is None:
                resp.pop(key, None)
            else:
                resp[key] = copy.deepcopy(value)
        resp["_overridden"] = sorted(override)
    return 200, resp, "issued"


def revoke_token(token, client_id, dpop=None):
    """Returns (outcome, error body or None).  A token of a bound family needs a proof with its key."""
    rec = STATE.refresh.get(token)
    if rec is not None:
        if client_id and rec["client_id"] != client_id:
            return "client_mismatch", None
        bad = dpop_binding_error(dpop, STATE.families[rec["family"]].get("jkt"))
        if bad is not None:
            return ("dpop_proof_required" if dpop.jkt is None else "dpop_key_mismatch"), bad
        STATE.families[rec["family"]]["revoked"] = True
        return "revoked", None
    rec = STATE.access.get(token)
    if rec is not None:
        if client_id and rec["client_id"] != client_id:
            return "client_mismatch", None
        bad = dpop_binding_error(dpop, STATE.families[rec["family"]].get("jkt"))
        if bad is not None:
            return ("dpop_proof_required" if dpop.jkt is None else "dpop_key_mismatch"), bad
        rec["revoked"] = True
        return "revoked", None
    return "unknown", None


def token_status(token):
    rec = STATE.refresh.get(token)
    if rec is not None:
        fam_revoked = STATE.families[rec["family"]]["revoked"]
        spent = rec["spent_at"] is not None
        return {"active": not (spent or fam_revoked or rec["revoked"]), "kind": "refresh",
                "spent": spent, "family_revoked": fam_revoked, "jkt": STATE.families[rec["family"]].get("jkt")}
    rec = STATE.access.get(token)
    if rec is not None:
        fam_revoked = STATE.families[rec["family"]]["revoked"]
        active = not fam_revoked and not rec["revoked"] and time.time() < rec["expires_at"]
        return {"active": active, "kind": "access", "spent": False, "family_revoked": fam_revoked,
                "scope": rec.get("scope"), "audience": rec.get("audience"), "resource": rec.get("resource"),
                "jkt": STATE.families[rec["family"]].get("jkt")}
    return {"active": False, "kind": "unknown", "spent": False, "family_revoked": False, "jkt": None}


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True


def write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description="tokenctl OAuth test authorization server")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--pid-file")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--persona", choices=sorted(PERSONAS),
                    help="the persona this server starts with and returns to on /_test/reset")
    ap.add_argument("--exit-with-parent", action="store_true",
                    help="stop when the process that started us ends (tests that crash leave nothing behind)")
    ap.add_argument("--issuer", default=os.environ.get("TK_AUTHSERVER_ISSUER") or None,
                    help="the issuer URL to publish instead of http://127.0.0.1:PORT (a TLS front's)")
    args = ap.parse_args()

    Handler.verbose = args.verbose
    Handler.public_issuer = args.issuer.rstrip("/") if args.issuer else None
    if args.persona:
        DEFAULT_CONFIG.update(copy.deepcopy(PERSONAS[args.persona]["config"]))
        DEFAULT_CONFIG["persona"] = args.persona
        STATE.reset()
    server = Server(("127.0.0.1", args.port), Handler)
    port = server.server_address[1]

    def on_signal(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    if args.exit_with_parent:
        parent = os.getppid()

        def watch_parent():
            while os.getppid() == parent:
                time.sleep(0.5)
            server.shutdown()

        threading.Thread(target=watch_parent, daemon=True).start()

    if args.pid_file:
        write_atomic(args.pid_file, "%d\n" % os.getpid())
    if args.port_file:
        write_atomic(args.port_file, "%d\n" % port)
    if args.verbose:
        sys.stderr.write("authserver: listening on http://127.0.0.1:%d\n" % port)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
