// The official A2A JavaScript SDK (@a2a-js/sdk) reading an agentkit
// agent's extended agent card. Usage:
// node a2a_extended.cjs <agent base URL> <JSONRPC|HTTP+JSON> <bearer token>
// (with NODE_PATH naming the node_modules that hold the SDK).
//
// Over the chosen binding, `Client.getAgentCard()` (which asks for the
// extended card when the public one says there is one): first without a
// credential (refused), then with the bearer token on every request.
// Prints what it saw as one JSON object.

const {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  RestTransportFactory,
} = require("@a2a-js/sdk/client");

function factory(binding, fetchImpl) {
  const overrides = { preferredTransports: [binding] };
  if (fetchImpl) {
    overrides.transports = [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })];
  }
  return new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, overrides));
}

async function main(base, binding, token) {
  const out = {};
  const cardUrl = `${base}/.well-known/agent-card.json`;
  const anonymous = await factory(binding).createFromUrl(cardUrl, "");
  try {
    await anonymous.getAgentCard();
    out.withoutCredential = null;
  } catch (e) {
    out.withoutCredential = `${e.constructor.name}: ${e.message}`;
  }
  const withToken = (input, init = {}) => {
    const headers = new Headers(init.headers || {});
    headers.set("authorization", `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
  const client = await factory(binding, withToken).createFromUrl(cardUrl, "");
  const card = await client.getAgentCard();
  out.skills = card.skills.map((s) => [s.id, s.tags]);
  out.extendedAgentCard = card.capabilities.extendedAgentCard;
  console.log(JSON.stringify(out));
}

main(process.argv[2], process.argv[3], process.argv[4]).catch((e) => {
  console.error(e);
  process.exit(1);
});
