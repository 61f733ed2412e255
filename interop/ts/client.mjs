// The official MCP TypeScript SDK as a client of `toolwire serve --http`:
// lists the tools, makes three calls and prints what it got as one JSON
// object on stdout. cmd/toolwire/interop_test.go runs it and checks that.
//
//   node client.mjs http://127.0.0.1:PORT/mcp
//
// The SDK must resolve from this file's directory: scripts/npm-deps.sh
// installs it into $TOOLWIRE_NPM_DIR (default ~/.cache/toolwire-npm), and
// the test runs a copy of this file next to a node_modules link to there.
// By hand: ln -s ~/.cache/toolwire-npm/node_modules interop/ts/node_modules
//
// The client declares no capabilities, elicitation included, so toolwire
// cannot ask its user to approve a write or destructive call and must
// refuse one. Exit 0 when every request got a response (an isError result
// is a response), 1 on any protocol or transport failure, 2 on bad usage.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

if (process.argv.length !== 3) {
  console.error('usage: node client.mjs URL');
  process.exit(2);
}
const transport = new StreamableHTTPClientTransport(new URL(process.argv[2]));
const client = new Client({ name: 'toolwire-interop-ts', version: '1.0.0' }, { capabilities: {} });
let closing = false; // closing aborts the server-to-client stream: not worth a word
client.onerror = (err) => closing || console.error('client.mjs: transport:', err?.message ?? err);

try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const out = {
    server: client.getServerVersion(),
    protocolVersion: transport.protocolVersion,
    tools: tools.map((t) => ({ name: t.name, annotations: t.annotations ?? null })),
    echo: await client.callTool({ name: 'demo__echo', arguments: { text: 'from typescript' } }),
    delete: await client.callTool({ name: 'demo__delete_note', arguments: { title: 'x' } }),
    invalid: await client.callTool({ name: 'demo__add', arguments: { a: 'nope' } }),
  };
  console.log(JSON.stringify(out, null, 2));
  closing = true;
  await transport.terminateSession();
  await client.close();
} catch (err) {
  console.error('client.mjs:', err?.stack ?? err);
  await client.close().catch(() => {});
  process.exit(1);
}
