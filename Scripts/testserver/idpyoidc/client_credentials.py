"""The client credentials grant (RFC 6749 §4.4) for server.py, replacing idpyoidc 5.0.0's own
helper (idpyoidc/server/oauth2/token_helper/client_credentials.py), which cannot serve these
tests (measured; the lines are those of the 5.0.0 wheel):

- a client's second request fails: `_mngr.get(["client_credentials", client_id])` returns a
  ClientSessionInfo, which line 42 indexes as a dict (TypeError; server.py answers 400);
- its grant gets no usage rules, so the access token it issues cannot be the subject of a token
  exchange (RFC 8693): "Minting of access_token not supported";
- every client's grant hangs under the one user "client_credentials" with an empty `sub`, so an
  exchanged token cannot say whose token it was exchanged for;
- it answers token_type "access_token" (the token class), not "Bearer" (RFC 6749 §7.1).

This helper keeps everything else of idpyoidc's (client authentication, the JWT access token,
its lifetime from the usage rules, the scope: always the client's `allowed_scopes`, whatever
the request asks) and fixes those four: one new grant per request under the path
[client_id, client_id] (the client is its own resource owner, RFC 6749 §4.4) with sub =
client_id and the usage rules of idpyoidc's authz configuration (per client:
`token_usage_rules`), token_type "Bearer". It is configured through the token endpoint's
`grant_types_helpers`, idpyoidc's own way to replace a grant's helper.
"""

from idpyoidc.server.oauth2.token_helper import client_credentials
from idpyoidc.time_util import utc_time_sans_frac


class ClientCredentials(client_credentials.ClientCredentials):
    def process_request(self, req, **kwargs):
        context = self.endpoint.upstream_get("context")
        mngr = context.session_manager
        client_id = req["client_id"]
        if not req.get("authenticated", False):
            return self.error_cls(error="invalid_client", error_description="client not authenticated")
        supported = context.cdb[client_id].get("grant_types_supported")
        if supported and "client_credentials" not in supported:
            return self.error_cls(error="unauthorized_client", error_description="Unsupported grant type")

        allowed = context.cdb[client_id].get("allowed_scopes", [])
        branch_id = mngr.add_grant(
            [client_id, client_id],
            token_usage_rules=context.authz.usage_rules(client_id),
            scope=allowed,
            sub=client_id,
        )
        info = mngr.get_session_info(branch_id, grant=True)
        token = self._mint_token(
            token_class="access_token",
            grant=info["grant"],
            session_id=branch_id,
            client_id=client_id,
            based_on=None,
            scope=allowed,
            token_type="Bearer",
        )
        resp = {"access_token": token.value, "token_type": "Bearer", "scope": allowed}
        if token.expires_at:
            resp["expires_in"] = token.expires_at - utc_time_sans_frac()
        return resp
