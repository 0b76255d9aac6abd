// Model names as apps send them, through the official openai client: with one model served any name
// works and the response names the served model; --model-alias adds listed names; --strict-model-names restores
// 404s for every other name. Any API key value works when the server has none.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MODEL_ID, startServer } from './helpers.mjs';

describe('lenient model names (the default)', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer(['--model-alias', 'house-assistant']);
    client = server.client('sk-any-value-works');
  });
  after(async () => assert.equal((await server.stop()).code, 0));

  test('fixed app model names are served by the one model, whose name the response carries', async () => {
    for (const model of ['gpt-4o-mini', 'gpt-3.5-turbo', 'house-assistant', MODEL_ID]) {
      const chat = await client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'Hi' }],
        max_tokens: 2,
      });
      assert.equal(chat.model, MODEL_ID, model);
      const done = await client.completions.create({ model, prompt: 'Once', max_tokens: 2 });
      assert.equal(done.model, MODEL_ID, model);
    }
  });

  test('/v1/models lists the model and its aliases; retrieving an alias or any name works', async () => {
    const list = await client.models.list();
    assert.deepEqual(
      list.data.map((m) => m.id),
      [MODEL_ID, 'house-assistant'],
    );
    assert.equal((await client.models.retrieve('house-assistant')).id, 'house-assistant');
    assert.equal((await client.models.retrieve('gpt-4o-mini')).id, MODEL_ID);
  });
});

describe('--strict-model-names', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer(['--strict-model-names', '--model-alias', 'gpt-4o-mini', '--model-alias', 'house']);
    client = server.client();
  });
  after(async () => assert.equal((await server.stop()).code, 0));

  test('the model id and its aliases are served; any other name is a 404 naming it', async () => {
    for (const model of [MODEL_ID, 'gpt-4o-mini', 'house']) {
      const r = await client.completions.create({ model, prompt: 'Once', max_tokens: 1 });
      assert.equal(r.model, MODEL_ID);
    }
    await assert.rejects(client.completions.create({ model: 'gpt-17', prompt: 'x' }), (e) => {
      assert.equal(e.status, 404);
      assert.match(e.message, /gpt-17/);
      assert.equal(e.code, 'model_not_found');
      return true;
    });
    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-17', messages: [{ role: 'user', content: 'x' }] }),
      { status: 404 },
    );
    await assert.rejects(client.models.retrieve('gpt-17'), { status: 404 });
    assert.equal((await client.models.retrieve('house')).id, 'house');
    assert.deepEqual(
      (await client.models.list()).data.map((m) => m.id),
      [MODEL_ID, 'gpt-4o-mini', 'house'],
    );
  });
});
