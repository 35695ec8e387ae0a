"""A streamable-HTTP MCP server (the official MCP Python SDK) that admits
only callers with an agentkit agent-identity token, checked with PyJWT
against the host's published keys: the third party of the agent-identity
test.

Usage: identity_server.py <port> <jwks url> <issuer> <audience>

Every request needs `Authorization: Bearer <JWT>` whose EdDSA signature
verifies with a key of <jwks url> (fetched by PyJWT's PyJWKClient, which
refetches on an unknown `kid`), whose `iss` is <issuer>, `aud` is
<audience>, and which has not expired; anything else is answered 401.
Its one tool, `whoami`, answers the verified claims of the token its
own request carried.
"""

import json
import sys

import jwt
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse

PORT, JWKS_URL, ISSUER, AUDIENCE = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
KEYS = jwt.PyJWKClient(JWKS_URL, cache_keys=True)


def verify(authorization):
    """The token's claims, or an exception saying why it is refused."""
    if not authorization or not authorization.startswith("Bearer "):
        raise ValueError("no bearer token")
    token = authorization[len("Bearer "):]
    key = KEYS.get_signing_key_from_jwt(token)
    return jwt.decode(
        token,
        key.key,
        algorithms=["EdDSA"],
        audience=AUDIENCE,
        issuer=ISSUER,
        options={"require": ["exp", "iat", "iss", "aud", "sub"]},
    )


class RequireIdentity(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        try:
            verify(request.headers.get("authorization"))
        except Exception as e:  # every refusal is a 401
            print(f"refused: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            return JSONResponse({"error": "unauthorized", "reason": type(e).__name__}, status_code=401)
        return await call_next(request)


server = MCPServer("identity-checker")


@server.tool()
def whoami(ctx: Context) -> str:
    """Answer the verified claims of the caller's agent-identity token."""
    claims = verify(ctx.request_context.request.headers.get("authorization"))
    return json.dumps(claims, sort_keys=True)


if __name__ == "__main__":
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    app.add_middleware(RequireIdentity)
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
