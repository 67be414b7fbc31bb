// Drives datachat's OpenAI-compatible API with OpenAI's official npm client.
//
//   node openai_client.mjs BASE_URL API_KEY CONVERSATION_ID QUESTION
//
// Lists the models, asks QUESTION once without streaming and once streaming
// (with usage and the SQL shown), in the conversation, then tries a wrong
// key; prints what it saw as one JSON object.
import OpenAI from 'openai';

const [baseURL, apiKey, conversationID, question] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
const headers = { 'X-Conversation-ID': conversationID };
const out = {};

const models = await client.models.list();
out.models = models.data.map((m) => m.id);

const whole = await client.chat.completions.create(
  { model: 'datachat', messages: [{ role: 'user', content: question }] },
  { headers },
);
out.whole = {
  content: whole.choices[0].message.content,
  finish_reason: whole.choices[0].finish_reason,
  usage: whole.usage,
  object: whole.object,
};

const stream = await client.chat.completions.create(
  {
    model: 'datachat',
    messages: [{ role: 'user', content: question }],
    stream: true,
    stream_options: { include_usage: true },
    datachat_show_sql: true, // datachat's extension: the SQL in the answer
  },
  { headers },
);
const streamed = { content: '', chunks: 0, finish_reason: null, usage: null, roles: [] };
for await (const chunk of stream) {
  streamed.chunks++;
  if (chunk.usage) streamed.usage = chunk.usage;
  for (const choice of chunk.choices) {
    if (choice.delta?.role) streamed.roles.push(choice.delta.role);
    if (choice.delta?.content) streamed.content += choice.delta.content;
    if (choice.finish_reason) streamed.finish_reason = choice.finish_reason;
  }
}
out.streamed = streamed;

try {
  const wrong = new OpenAI({ baseURL, apiKey: 'dck_wrong', maxRetries: 0 });
  await wrong.chat.completions.create({ model: 'datachat', messages: [{ role: 'user', content: question }] });
  out.wrongKey = { error: 'no error' };
} catch (e) {
  out.wrongKey = { name: e.constructor.name, status: e.status, code: e.code, type: e.type, message: e.message };
}

console.log(JSON.stringify(out));
