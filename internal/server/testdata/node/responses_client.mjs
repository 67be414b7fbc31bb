// Drives datachat's POST /v1/responses with OpenAI's official npm client and
// with the Vercel AI SDK's default OpenAI provider (which speaks the
// Responses API).
//
//   node responses_client.mjs BASE_URL API_KEY CONVERSATION_ID QUESTION
//
// Asks QUESTION six times in the conversation: responses.create without and
// with streaming, the responses.stream helper, responses.create continuing
// the first answer by previous_response_id, the AI SDK's generateText and
// streamText; then a forced tool_choice, which must be refused. Prints what
// it saw as one JSON object.
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';

const [baseURL, apiKey, conversationID, question] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
const headers = { 'X-Conversation-ID': conversationID };
const out = {};

const plain = await client.responses.create({ model: 'datachat', input: question }, { headers });
out.plain = {
  id: plain.id,
  object: plain.object,
  status: plain.status,
  output_text: plain.output_text,
  usage: plain.usage,
  output: plain.output,
};

const stream = await client.responses.create({ model: 'datachat', input: question, stream: true }, { headers });
const streamed = { types: [], text: '', completed: null };
for await (const event of stream) {
  streamed.types.push(event.type);
  if (event.type === 'response.output_text.delta') streamed.text += event.delta;
  if (event.type === 'response.completed') {
    // output_text is the client's own sum of a whole response; an event's
    // response carries the output items.
    const text = event.response.output
      .flatMap((item) => item.content ?? [])
      .filter((part) => part.type === 'output_text')
      .map((part) => part.text)
      .join('');
    streamed.completed = { status: event.response.status, output_text: text, usage: event.response.usage };
  }
}
out.streamed = streamed;

const helper = client.responses.stream({ model: 'datachat', input: question }, { headers });
let deltas = 0;
helper.on('response.output_text.delta', () => deltas++);
const final = await helper.finalResponse();
out.helper = { output_text: final.output_text, deltas };

const next = await client.responses.create({ model: 'datachat', input: question, previous_response_id: plain.id });
out.next = { output_text: next.output_text, previous_response_id: next.previous_response_id };

const provider = createOpenAI({ baseURL, apiKey });
const generated = await generateText({ model: provider('datachat'), prompt: question, headers, maxRetries: 0 });
out.aiGenerate = { text: generated.text, finishReason: generated.finishReason, usage: generated.usage };

const result = streamText({ model: provider('datachat'), prompt: question, headers, maxRetries: 0 });
let text = '';
for await (const part of result.textStream) text += part;
out.aiStream = { text, finishReason: await result.finishReason, usage: await result.usage };

try {
  await client.responses.create({
    model: 'datachat',
    input: question,
    tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} }, strict: false }],
    tool_choice: 'required',
  });
  out.forced = { status: 0, message: 'no error' };
} catch (e) {
  out.forced = { status: e.status, param: e.param, message: e.message };
}

console.log(JSON.stringify(out));
