// The Responses API (POST /v1/responses) through real clients on stories260K: the openai SDK's responses.create
// and responses.stream (the typed events, in order), tools forced by tool_choice and a tool result sent back with
// previous_response_id (the follow-up's prompt is the stored turn's exact ids, so cached_tokens covers the whole
// previous turn), GET and DELETE of stored responses per cache_salt, the 400s naming what is not implemented, and
// the Vercel AI SDK's default openai(model) provider (which speaks the Responses API).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, streamText, tool } from 'ai';
import { MODEL_ID, startServer } from './helpers.mjs';

const BLOCK = 16; // hearth serve's default --block-size
const INSTRUCTIONS = 'You tell short stories to children.';
const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', enum: ['Oslo', 'Paris'] } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
};

// The ids of the previous turn that the follow-up computed again: at most the last, partial block and the last
// sampled id (whose K/V was never computed).
function assertCoversPreviousTurn(first, second) {
  const turn = first.usage.input_tokens + first.usage.output_tokens;
  assert.ok(second.usage.hearth.previous_response_tokens >= turn - 1, JSON.stringify(second.usage));
  assert.ok(
    second.usage.input_tokens_details.cached_tokens >= Math.floor((turn - 1) / BLOCK) * BLOCK,
    JSON.stringify({ first: first.usage, second: second.usage }),
  );
}

// A streamed response through responses.stream: the response of its last event. (The SDK's finalResponse() takes
// only response.completed; an answer cut by max_output_tokens ends with response.incomplete, as OpenAI's does.)
async function streamed(client, params) {
  let last;
  for await (const event of client.responses.stream(params)) last = event;
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), last.type);
  return last.response;
}

describe('responses', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = server.client();
  });
  after(async () => assert.equal((await server.stop()).code, 0));

  test('responses.create answers as the chat route does, and the response is stored', async () => {
    const r = await client.responses.create({
      model: MODEL_ID,
      instructions: INSTRUCTIONS,
      input: 'Tell me a story about Tom the cat.',
      max_output_tokens: 24,
      temperature: 0,
    });
    assert.equal(r.object, 'response');
    assert.match(r.id, /^resp_[0-9a-f]{32}$/);
    assert.equal(r.status, 'incomplete');
    assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(r.output.length, 1);
    assert.equal(r.output[0].type, 'message');
    assert.equal(r.output[0].role, 'assistant');
    assert.equal(r.output[0].content[0].type, 'output_text');
    assert.ok(r.output_text.length > 0);
    assert.equal(r.instructions, INSTRUCTIONS);
    assert.equal(r.store, true);
    assert.equal(r.usage.output_tokens, 24);
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + 24);
    assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
    assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
    assert.equal(r.usage.hearth.cache, 'on');

    const chat = await client.chat.completions.create({
      model: MODEL_ID,
      messages: [
        { role: 'system', content: INSTRUCTIONS },
        { role: 'user', content: 'Tell me a story about Tom the cat.' },
      ],
      max_tokens: 24,
      temperature: 0,
    });
    assert.equal(r.output_text, chat.choices[0].message.content);
    assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);

    assert.deepEqual(await client.responses.retrieve(r.id), JSON.parse(JSON.stringify(r)));
    assert.deepEqual(await client.responses.delete(r.id), { id: r.id, object: 'response.deleted', deleted: true });
    await assert.rejects(client.responses.retrieve(r.id), (e) => e.status === 404);
    await assert.rejects(client.responses.delete(r.id), (e) => e.status === 404);
  });

  test('responses.stream sends the typed events in order, ending with the whole response', async () => {
    const params = { model: MODEL_ID, input: 'Once upon a time', max_output_tokens: 20, temperature: 0 };
    const whole = await client.responses.create({ ...params, store: false });
    const types = [];
    let text = '';
    let sequence = -1;
    let last;
    for await (const event of client.responses.stream(params)) {
      types.push(event.type);
      assert.equal(event.sequence_number, sequence + 1);
      sequence = event.sequence_number;
      if (event.type === 'response.output_text.delta') text += event.delta;
      last = event;
    }
    assert.equal(text, whole.output_text);
    assert.deepEqual(types.slice(0, 4), [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
    ]);
    assert.deepEqual(types.slice(-4), [
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.incomplete',
    ]);
    assert.ok(types.includes('response.output_text.delta'));
    assert.equal(last.response.output[0].content[0].text, whole.output_text);
    assert.deepEqual(last.response.usage.output_tokens, 20);
    const stored = await client.responses.retrieve(last.response.id);
    assert.deepEqual(stored.output, last.response.output);
    await assert.rejects(client.responses.retrieve(whole.id), (e) => e.status === 404, 'store: false keeps nothing');
  });

  test('a forced call, its output sent back with previous_response_id, reuses the whole previous turn', async () => {
    for (const stream of [false, true]) {
      const params = {
        model: MODEL_ID,
        instructions: INSTRUCTIONS,
        input: 'What is the weather in Oslo?',
        tools: [weather],
        tool_choice: 'required',
        temperature: 0,
      };
      const first = stream ? await client.responses.stream(params).finalResponse() : await client.responses.create(params);
      assert.equal(first.status, 'completed');
      const calls = first.output.filter((o) => o.type === 'function_call');
      assert.equal(calls.length, 1, JSON.stringify(first.output));
      assert.equal(calls[0].name, 'get_weather');
      assert.match(calls[0].call_id, /^call_/);
      assert.ok(['Oslo', 'Paris'].includes(JSON.parse(calls[0].arguments).city));

      const followUp = {
        model: MODEL_ID,
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: calls[0].call_id, output: 'Sunny, 18 degrees.' }],
        tools: [weather],
        max_output_tokens: 16,
        temperature: 0,
      };
      const second = stream ? await streamed(client, followUp) : await client.responses.create(followUp);
      assert.equal(second.previous_response_id, first.id);
      assertCoversPreviousTurn(first, second);
      // A third turn continues the second the same way.
      const third = await client.responses.create({
        model: MODEL_ID,
        previous_response_id: second.id,
        input: 'And tomorrow?',
        max_output_tokens: 8,
        temperature: 0,
      });
      assertCoversPreviousTurn(second, third);
    }
  });

  test('a text follow-up reuses the previous prompt and answer', async () => {
    const first = await client.responses.create({
      model: MODEL_ID,
      instructions: INSTRUCTIONS,
      input: 'Tell me a story about a dog.',
      max_output_tokens: 32,
      temperature: 0,
    });
    const second = await client.responses.create({
      model: MODEL_ID,
      instructions: INSTRUCTIONS,
      previous_response_id: first.id,
      input: 'What happened next?',
      max_output_tokens: 16,
      temperature: 0,
    });
    assertCoversPreviousTurn(first, second);
    // Other instructions: the conversation is rendered again with them, and only the stored answer ids that the
    // answer memory finds again are reused.
    const other = await client.responses.create({
      model: MODEL_ID,
      instructions: 'You write poems.',
      previous_response_id: first.id,
      input: 'What happened next?',
      max_output_tokens: 4,
      temperature: 0,
    });
    assert.equal(other.usage.hearth.previous_response_tokens, 0);
    assert.equal(other.instructions, 'You write poems.');
  });

  test('stored responses belong to their cache_salt', async () => {
    const r = await client.responses.create({
      model: MODEL_ID,
      input: 'Hello',
      max_output_tokens: 4,
      cache_salt: 'tenant-a',
    });
    const get = (salt) => fetch(`${server.baseURL}/v1/responses/${r.id}${salt ? `?cache_salt=${salt}` : ''}`);
    assert.equal((await get('')).status, 404);
    assert.equal((await get('tenant-b')).status, 404);
    assert.equal((await get('tenant-a')).status, 200);
    const items = await fetch(`${server.baseURL}/v1/responses/${r.id}/input_items?cache_salt=tenant-a`);
    assert.equal(items.status, 404, 'input_items is not implemented');
    await assert.rejects(
      client.responses.create({ model: MODEL_ID, input: 'x', previous_response_id: r.id, cache_salt: 'tenant-b' }),
      (e) => e.status === 400 && e.param === 'previous_response_id',
    );
    const del = await fetch(`${server.baseURL}/v1/responses/${r.id}?cache_salt=tenant-a`, { method: 'DELETE' });
    assert.deepEqual(await del.json(), { id: r.id, object: 'response.deleted', deleted: true });
  });

  test('what is not implemented is a 400 naming it', async () => {
    const cases = [
      [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ background: true }, 'background'],
      [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png' }] }] }, 'input[0].content[0].type'],
      [{ prompt: { id: 'pmpt_1' } }, 'prompt'],
      [{ reasoning: { effort: 'high' } }, 'reasoning.effort'],
    ];
    for (const [body, param] of cases) {
      await assert.rejects(
        client.responses.create({ model: MODEL_ID, input: 'x', ...body }),
        (e) => e.status === 400 && e.param === param,
        param,
      );
    }
  });

  test('text.format json_schema gives JSON that follows the schema', async () => {
    const r = await client.responses.create({
      model: MODEL_ID,
      input: 'A pet',
      text: {
        format: {
          type: 'json_schema',
          name: 'pet',
          strict: true,
          schema: {
            type: 'object',
            properties: { kind: { type: 'string', enum: ['cat', 'dog'] }, age: { type: 'integer' } },
            required: ['kind', 'age'],
            additionalProperties: false,
          },
        },
      },
      temperature: 0.8,
      seed: 3,
    });
    const pet = JSON.parse(r.output_text);
    assert.ok(['cat', 'dog'].includes(pet.kind));
    assert.equal(typeof pet.age, 'number');
    assert.equal(r.text.format.name, 'pet');
  });

  test("the Vercel AI SDK's openai(model) provider: generateText, streamText and a tool call", async () => {
    const openai = createOpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: 'unused' });
    const whole = await client.responses.create({
      model: MODEL_ID,
      input: 'Once upon a time',
      max_output_tokens: 16,
      temperature: 0,
      store: false,
    });
    const generated = await generateText({
      model: openai(MODEL_ID),
      prompt: 'Once upon a time',
      maxOutputTokens: 16,
      temperature: 0,
    });
    assert.equal(generated.text, whole.output_text);
    assert.equal(generated.finishReason, 'length');
    assert.equal(generated.usage.outputTokens, 16);

    const streamed = streamText({ model: openai(MODEL_ID), prompt: 'Once upon a time', maxOutputTokens: 16, temperature: 0 });
    let text = '';
    for await (const delta of streamed.textStream) text += delta;
    assert.equal(text, whole.output_text);

    const called = await generateText({
      model: openai(MODEL_ID),
      prompt: 'What is the weather in Paris?',
      tools: {
        get_weather: tool({
          description: 'The weather in a city',
          inputSchema: jsonSchema({
            type: 'object',
            properties: { city: { type: 'string', enum: ['Oslo', 'Paris'] } },
            required: ['city'],
            additionalProperties: false,
          }),
        }),
      },
      toolChoice: 'required',
      temperature: 0,
    });
    assert.equal(called.toolCalls.length, 1, JSON.stringify(called.response?.body ?? called));
    assert.equal(called.toolCalls[0].toolName, 'get_weather');
    assert.ok(['Oslo', 'Paris'].includes(called.toolCalls[0].input.city));
    assert.equal(called.finishReason, 'tool-calls');
  });
});
