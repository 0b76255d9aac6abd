// logprobs through the official openai client: the model's own distribution (log-softmax of the raw
// logits, before temperature and truncation), chat and completions, whole and streamed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { GOLDEN_64, startServer } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => assert.equal((await server.stop()).code, 0));

const messages = [{ role: 'user', content: 'Tell me a story' }];

function checkEntry(entry, k, greedy) {
  assert.ok(entry.logprob <= 0, `logprob ${entry.logprob} <= 0`);
  assert.equal(entry.top_logprobs.length, k);
  assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, 'utf8')]);
  let sum = 0;
  for (const alt of entry.top_logprobs) {
    assert.ok(alt.logprob <= 0);
    sum += Math.exp(alt.logprob);
  }
  assert.ok(sum <= 1 + 1e-6, `exp-sum of top_logprobs ${sum} <= 1`);
  if (greedy) {
    assert.equal(entry.top_logprobs[0].token, entry.token, 'the greedy token has the highest logprob');
    assert.equal(entry.top_logprobs[0].logprob, entry.logprob);
  }
}

describe('chat logprobs', () => {
  test('greedy: one entry per token, the chosen token leads its top_logprobs', async () => {
    const r = await client.chat.completions.create({
      messages,
      max_tokens: 16,
      temperature: 0,
      logprobs: true,
      top_logprobs: 5,
    });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    for (const entry of content) checkEntry(entry, 5, true);
    assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
  });

  test('streamed logprobs equal the whole response at temperature 0', async () => {
    const body = { messages, max_tokens: 16, temperature: 0, logprobs: true, top_logprobs: 3 };
    const whole = await client.chat.completions.create(body);
    const stream = await client.chat.completions.create({ ...body, stream: true });
    const streamed = [];
    for await (const chunk of stream) {
      for (const c of chunk.choices) streamed.push(...(c.logprobs?.content ?? []));
    }
    assert.deepEqual(streamed, whole.choices[0].logprobs.content);
  });

  test('at temperature 1.5 the logprobs are still the raw distribution: top_logprobs 0, sampled token <= 0', async () => {
    const r = await client.chat.completions.create({ messages, max_tokens: 8, temperature: 1.5, seed: 3, logprobs: true });
    for (const entry of r.choices[0].logprobs.content) checkEntry(entry, 0, false);
  });

  test('without logprobs the choice has logprobs: null', async () => {
    const r = await client.chat.completions.create({ messages, max_tokens: 2 });
    assert.equal(r.choices[0].logprobs, null);
  });

  test('out-of-range values are a 400 naming the field', async () => {
    const bad = [
      [{ logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
      [{ logprobs: true, top_logprobs: -1 }, 'top_logprobs'],
      [{ top_logprobs: 2 }, 'top_logprobs'],
      [{ logprobs: 'yes' }, 'logprobs'],
    ];
    for (const [extra, param] of bad) {
      await assert.rejects(client.chat.completions.create({ messages, max_tokens: 1, ...extra }), (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.param, param);
        return true;
      });
    }
  });
});

describe('completions logprobs', () => {
  test('greedy golden text with parallel tokens, logprobs, top_logprobs and text_offset, whole and streamed', async () => {
    const body = { prompt: 'Once upon a time', max_tokens: 64, temperature: 0, logprobs: 5 };
    const r = await client.completions.create(body);
    assert.equal(r.choices[0].text, GOLDEN_64);
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.length, 64);
    assert.equal(lp.tokens.join(''), GOLDEN_64);
    let offset = 0;
    for (let i = 0; i < 64; i++) {
      assert.ok(lp.token_logprobs[i] <= 0);
      assert.equal(lp.text_offset[i], offset);
      offset += Buffer.byteLength(lp.tokens[i]);
      const top = Object.entries(lp.top_logprobs[i]);
      assert.ok(top.length >= 5 && top.length <= 6);
      const best = Math.max(...top.map(([, v]) => v));
      assert.equal(lp.top_logprobs[i][lp.tokens[i]], best, 'the greedy token has the highest logprob');
      assert.ok(top.reduce((s, [, v]) => s + Math.exp(v), 0) <= 1 + 1e-6);
    }
    const stream = await client.completions.create({ ...body, stream: true });
    const tokens = [];
    const offsets = [];
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        tokens.push(...(c.logprobs?.tokens ?? []));
        offsets.push(...(c.logprobs?.text_offset ?? []));
      }
    }
    assert.deepEqual(tokens, lp.tokens);
    assert.deepEqual(offsets, lp.text_offset);
  });

  test('out-of-range values are a 400 naming the field', async () => {
    for (const extra of [{ logprobs: 6 }, { logprobs: -1 }, { logprobs: true }, { logprobs: 1, echo: true }]) {
      await assert.rejects(client.completions.create({ prompt: 'x', max_tokens: 1, ...extra }), (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.param, 'logprobs');
        return true;
      });
    }
  });
});
