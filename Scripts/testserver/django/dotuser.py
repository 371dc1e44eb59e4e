#!/usr/bin/env python3
"""Plays the user of the django-oauth-toolkit test server, through its own HTML pages:
sign in with the login form, then approve (or deny) a device code or an authorization request.

    python dotuser.py device --base http://127.0.0.1:PORT --user-code CODE [--deny]
    python dotuser.py authorize --base http://127.0.0.1:PORT --url AUTHORIZATION_URL [--deny]

Prints the final page (for `authorize`: what the loopback redirect answered). Exit 0 on success.
Runs with the test virtualenv's python (it uses `requests`).
"""
import argparse
import html.parser
import sys

import requests

USER, PASSWORD = "alice", "wonderland-pass"


class Forms(html.parser.HTMLParser):
    """Every <form> with its inputs (name -> value), in document order."""

    def __init__(self):
        super().__init__()
        self.forms = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.forms.append({"action": attrs.get("action"), "fields": {}})
        elif tag == "input" and self.forms and attrs.get("name") and attrs.get("type") not in ("submit", "button"):
            self.forms[-1]["fields"][attrs["name"]] = attrs.get("value") or ""


def forms(text):
    parser = Forms()
    parser.feed(text)
    return parser.forms


def sign_in(session, base):
    page = session.get(base + "/accounts/login/", timeout=10)
    fields = forms(page.text)[0]["fields"]
    fields.update({"username": USER, "password": PASSWORD})
    answer = session.post(base + "/accounts/login/", data=fields, timeout=10, allow_redirects=False)
    if answer.status_code != 302:
        sys.exit("dotuser: sign-in failed (HTTP %d)" % answer.status_code)


def device(session, base, user_code, deny):
    page = session.get(base + "/o/device/", timeout=10)
    fields = forms(page.text)[0]["fields"]
    fields["user_code"] = user_code
    confirm = session.post(page.url, data=fields, timeout=10)
    if "device-confirm" not in confirm.url:
        sys.exit("dotuser: the user code was not accepted: %s" % confirm.text[:500])
    fields = forms(confirm.text)[0]["fields"]
    fields["action"] = "deny" if deny else "accept"
    done = session.post(confirm.url, data=fields, timeout=10)
    print(done.text)
    return done.ok


def authorize(session, url, deny):
    page = session.get(url, timeout=10)
    consent = [f for f in forms(page.text) if "redirect_uri" in f["fields"]]
    if not consent:
        sys.exit("dotuser: no consent form at %s (HTTP %d): %s" % (url, page.status_code, page.text[:500]))
    fields = consent[0]["fields"]
    if not deny:
        fields["allow"] = "Authorize"
    # The server answers with a redirect to tokenctl's loopback listener; follow it like a browser.
    done = session.post(page.url, data=fields, timeout=10)
    print(done.text)
    return done.ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=["device", "authorize"])
    ap.add_argument("--base", required=True)
    ap.add_argument("--user-code")
    ap.add_argument("--url")
    ap.add_argument("--deny", action="store_true")
    args = ap.parse_args()
    session = requests.Session()
    sign_in(session, args.base)
    ok = device(session, args.base, args.user_code, args.deny) if args.action == "device" else authorize(session, args.url, args.deny)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
