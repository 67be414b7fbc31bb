// Drives datachat's MCP server with the official MCP TypeScript SDK.
//
//   node mcp_client.mjs http URL API_KEY CONVERSATION_ID SQL
//   node mcp_client.mjs stdio SQL COMMAND [ARGS…]
//
// Lists the tools, calls list_datasets, execute_sql with SQL and an
// execute_sql the sandbox refuses; prints what it saw as one JSON object.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [mode, ...rest] = process.argv.slice(2);
let transport;
let sql;
let conv = {};
if (mode === 'http') {
  const [url, apiKey, conversationID, query] = rest;
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${apiKey}` } },
  });
  conv = { conversation_id: conversationID };
  sql = query;
} else if (mode === 'stdio') {
  const [query, command, ...args] = rest;
  transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
  sql = query;
} else {
  throw new Error(`unknown mode ${mode}: want http or stdio`);
}

const client = new Client({ name: 'datachat-client-test', version: '1.0.0' });
await client.connect(transport);
const out = { server: client.getServerVersion() };

const { tools } = await client.listTools();
out.tools = tools.map((t) => ({ name: t.name, required: t.inputSchema.required ?? [] }));

const list = await client.callTool({ name: 'list_datasets', arguments: conv });
out.datasets = list.structuredContent;

const res = await client.callTool({ name: 'execute_sql', arguments: { ...conv, query: sql } });
out.sql = { isError: res.isError ?? false, structured: res.structuredContent, text: res.content?.[0]?.text };

const refused = await client.callTool({
  name: 'execute_sql',
  arguments: { ...conv, query: "SELECT * FROM read_csv('/etc/passwd')" },
});
out.refused = { isError: refused.isError ?? false, text: refused.content?.[0]?.text };

await client.close();
console.log(JSON.stringify(out));
