// SIGTERM is graceful: an in-flight stream still ends properly, new work is refused, the process exits 0.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { collectStream, startServer } from './helpers.mjs';

test('SIGTERM lets an in-flight stream finish and exits 0', async () => {
  const server = await startServer();
  const client = server.client();
  const stream = await client.completions.create({
    prompt: 'Once upon a time',
    max_tokens: 400,
    temperature: 0,
    stream: true,
    hearth: { ignore_eos: true },
  });
  const it = stream[Symbol.asyncIterator]();
  const first = await it.next();
  assert.equal(first.done, false);
  server.proc.kill('SIGTERM');
  const rest = await collectStream({ [Symbol.asyncIterator]: () => it });
  assert.ok(['length', 'abort'].includes(rest.finish), `finish_reason ${rest.finish}`);
  const { code } = await server.exited;
  assert.equal(code, 0);
  await assert.rejects(fetch(`${server.baseURL}/health`));
});
