// A real OAuth 2.1 authorization server for the tests: oidc-provider (the certified Node
// OpenID Provider) with client-credentials grants, resource indicators and introspection.
//
// Environment: OIDC_PROVIDER (the package's lib/index.js), AUTH_KEYS (a JSON list of private
// JWKs, the first signing), AUTH_CLIENTS (a JSON list of client metadata). Listens on
// 127.0.0.1, port 0, then prints one JSON line: {"issuer": ..., "port": ...}.
//
// Any resource on 127.0.0.1 is known: its tokens are JWTs (RS256, typ at+jwt, aud = the
// resource exactly as requested), or opaque when the resource's path ends in "/opaque"
// (introspection answers only for opaque tokens). POST /_keys with a JSON list of private JWKs
// replaces the signing keys (a rotation), keeping the issuer and the port.
import http from 'node:http';
import { pathToFileURL } from 'node:url';

const { default: Provider, errors } = await import(pathToFileURL(process.env.OIDC_PROVIDER).href);

const SCOPES = 'mcp:tools mcp:admin mcp:read';

function configuration(keys) {
  return {
    scopes: ['openid', 'offline_access', ...SCOPES.split(' ')],
    clients: JSON.parse(process.env.AUTH_CLIENTS),
    jwks: { keys },
    ttl: { ClientCredentials: 300 },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => undefined,
        useGrantedResource: async () => true,
        async getResourceServerInfo(ctx, resource) {
          if (!resource.startsWith('http://127.0.0.1:')) throw new errors.InvalidTarget();
          const opaque = resource.endsWith('/opaque');
          return {
            scope: SCOPES,
            audience: resource,
            accessTokenTTL: 300,
            accessTokenFormat: opaque ? 'opaque' : 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  };
}

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;
let provider = new Provider(issuer, configuration(JSON.parse(process.env.AUTH_KEYS)));
let handler = provider.callback();

server.on('request', (req, res) => {
  if (req.method === 'POST' && req.url === '/_keys') {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      provider = new Provider(issuer, configuration(JSON.parse(body)));
      handler = provider.callback();
      res.writeHead(204).end();
    });
    return;
  }
  handler(req, res);
});

process.stdout.write(JSON.stringify({ issuer, port }) + '\n');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
