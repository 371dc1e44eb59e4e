#!/usr/bin/env python3
"""JOSE helpers for the glewlwyd tests (Debian's python3-jwt and python3-cryptography).

  glewlwyd_jwt.py jwk KEY.pem            public JWK of an EC P-256 key, kid = its RFC 7638
                                         thumbprint, alg ES256, use sig (one line of JSON)
  glewlwyd_jwt.py cert-jwk CERT.pem      public JWK of a certificate's key with x5c [the DER]
                                         (a self_signed_tls_client_auth client's jwks entry)
  glewlwyd_jwt.py x5t CERT.pem           base64url SHA-256 of the certificate's DER (RFC 8705 §3.1)
  glewlwyd_jwt.py assertion --client-id ID --aud URL (--secret S | --key KEY.pem [--kid K|none])
                                         a client assertion (RFC 7523 §2.2, §3): HS256 with the
                                         secret (client_secret_jwt) or ES256 with the key
                                         (private_key_jwt); iss = sub = ID, a fresh jti, exp in
                                         60 s. Printed without a trailing newline.
  glewlwyd_jwt.py claims JWT             the payload of a JWT, unverified, as JSON
  glewlwyd_jwt.py verify JWT JWKS.json ISS   verify the signature with the issuer's JWKS and
                                         its iss claim; prints the claims
"""
import base64
import hashlib
import json
import sys
import time
import uuid

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def ec_public_jwk(pub) -> dict:
    nums = pub.public_numbers()
    if not isinstance(pub.curve, ec.SECP256R1):
        raise SystemExit("only EC P-256 keys")
    return {"kty": "EC", "crv": "P-256",
            "x": b64u(nums.x.to_bytes(32, "big")), "y": b64u(nums.y.to_bytes(32, "big"))}


def full_coordinates(jwk: dict) -> dict:
    """An EC JWK with x and y padded to the curve's 32 bytes. glewlwyd 2.7.5 publishes a
    coordinate with leading zero bytes dropped (about one key in 128), which RFC 7518 §6.2.1.2
    forbids and PyJWT refuses ("Coords should be 32 bytes for curve P-256")."""
    if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
        return jwk
    fixed = dict(jwk)
    for name in ("x", "y"):
        raw = base64.urlsafe_b64decode(jwk[name] + "=" * (-len(jwk[name]) % 4))
        fixed[name] = base64.urlsafe_b64encode(raw.rjust(32, b"\0")).rstrip(b"=").decode()
    return fixed


def thumbprint(jwk: dict) -> str:
    # RFC 7638 §3.2: the required members only, lexicographic order, no whitespace.
    members = {k: jwk[k] for k in ("crv", "kty", "x", "y")}
    return b64u(hashlib.sha256(json.dumps(members, separators=(",", ":"), sort_keys=True).encode()).digest())


def load_key(path):
    with open(path, "rb") as f:
        return serialization.load_pem_private_key(f.read(), password=None)


def load_cert(path):
    with open(path, "rb") as f:
        return x509.load_pem_x509_certificate(f.read())


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "jwk":
        jwk = ec_public_jwk(load_key(args[0]).public_key())
        jwk.update({"kid": thumbprint(jwk), "alg": "ES256", "use": "sig"})
        print(json.dumps(jwk))
    elif cmd == "cert-jwk":
        cert = load_cert(args[0])
        jwk = ec_public_jwk(cert.public_key())
        jwk.update({"kid": thumbprint(jwk), "use": "sig",
                    "x5c": [base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()]})
        print(json.dumps(jwk))
    elif cmd == "x5t":
        cert = load_cert(args[0])
        print(b64u(hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).digest()))
    elif cmd == "assertion":
        opts = dict(zip(args[::2], args[1::2]))
        now = int(time.time())
        cid = opts["--client-id"]
        claims = {"iss": cid, "sub": cid, "aud": opts["--aud"], "jti": str(uuid.uuid4()),
                  "iat": now, "exp": now + 60}
        if "--secret" in opts:
            token = jwt.encode(claims, opts["--secret"], algorithm="HS256")
        else:
            key = load_key(opts["--key"])
            kid = opts.get("--kid") or thumbprint(ec_public_jwk(key.public_key()))
            headers = {} if kid == "none" else {"kid": kid}
            token = jwt.encode(claims, key, algorithm="ES256", headers=headers)
        sys.stdout.write(token)
    elif cmd == "claims":
        print(json.dumps(jwt.decode(args[0], options={"verify_signature": False})))
    elif cmd == "verify":
        token, jwks_file, iss = args
        with open(jwks_file) as f:
            jwks = json.load(f)
        kid = jwt.get_unverified_header(token).get("kid")
        keys = [k for k in jwks["keys"] if kid is None or k.get("kid") == kid]
        if not keys:
            raise SystemExit(f"no key {kid} in the JWKS")
        key = jwt.PyJWK(full_coordinates(keys[0])).key
        alg = jwt.get_unverified_header(token)["alg"]
        print(json.dumps(jwt.decode(token, key, algorithms=[alg], issuer=iss,
                                    options={"verify_aud": False})))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
