// Starts a real `hearth serve` on a free port (--port 0; the port is read from its first stdout line) and gives
// tests an openai client and small helpers. HEARTH_BIN overrides the binary, HEARTH_MODEL the model.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export const BIN = process.env.HEARTH_BIN ?? path.join(repoRoot, 'build/src/app/hearth');
export const MODEL =
  process.env.HEARTH_MODEL ??
  [path.join(repoRoot, '../shared/models/stories260K.gguf'), '/work/shared/models/stories260K.gguf'].find((p) =>
    existsSync(p),
  );
export const MODEL_ID = 'stories260K';

// A sanitizer build (AddressSanitizer links libasan) keeps shadow memory and a quarantine of freed blocks, so its
// RSS says nothing about Hearth's: tests that measure the process's memory skip on it.
export const SANITIZED = (() => {
  try {
    return /libasan/.test(execFileSync('ldd', [BIN], { encoding: 'utf8' }));
  } catch {
    return false;
  }
})();

// The llama.cpp reference: "Once upon a time", greedy, 64 tokens (../shared/models/SOURCE.md).
export const GOLDEN_64 =
  ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. " +
  "She wanted to play with it, but it was too high.\nLily's mom said";

// The disk tier is on by default in `hearth serve`; tests turn it off unless they pass their own --kv-disk, so no
// test sees another's cached blocks (or the user's ~/.cache). `models` replaces the one default model (each is
// passed as -m; several make a multi-model server).
export async function startServer(args = [], env = {}, { models = [MODEL] } = {}) {
  const disk = args.includes('--kv-disk') ? [] : ['--kv-disk', 'off'];
  const pool = args.includes('--kv-memory') ? [] : ['--kv-memory', '32MiB'];
  const threads = args.includes('-t') ? [] : ['-t', '1'];
  const proc = spawn(BIN, ['serve', ...models.flatMap((m) => ['-m', m]), '--port', '0', ...threads, ...pool, ...disk, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  proc.stderr.on('data', (d) => (stderr += d));
  proc.stdout.on('data', (d) => (stdout += d));
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await new Promise((resolve, reject) => {
    let out = '';
    // Starting takes well under a second; the bound leaves room for a test file whose own synchronous work holds
    // the event loop (a timer due then fires before the line that arrived meanwhile is read).
    // A server that did not start is killed, so no test process waits on it forever.
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`hearth serve did not start in 90 s:\n${stderr}`));
    }, 90000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/on http:\/\/[^:]+:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`hearth serve exited with ${code}:\n${stderr}`));
    });
  });
  const baseURL = `http://127.0.0.1:${port}`;
  return {
    port,
    baseURL,
    proc,
    exited,
    stderr: () => stderr,
    stdout: () => stdout, // the server's log (spdlog writes to stdout)
    client: (apiKey = 'unused', opts = {}) =>
      new OpenAI({ apiKey, baseURL: `${baseURL}/v1`, maxRetries: 0, timeout: 30000, ...opts }),
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      return exited;
    },
  };
}

// Token ids of `text` as the server's tokenizer makes them (POST /tokenize).
export async function tokenize(server, content, addSpecial = true, headers = {}) {
  const res = await fetch(`${server.baseURL}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ content, add_special: addSpecial }),
  });
  return (await res.json()).tokens;
}

// POST /v1/cache/explain with `body`: { status, body }.
export async function explain(server, body) {
  const res = await fetch(`${server.baseURL}/v1/cache/explain`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

// Parses the Prometheus text of /metrics into { 'name{labels}': value }.
export async function metrics(server, headers = {}) {
  const res = await fetch(`${server.baseURL}/metrics`, { headers });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  const out = {};
  for (const line of (await res.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

// Bounded polling: resolves when check() returns truthy, fails after `ms`.
export async function waitFor(check, ms = 10000, what = 'condition') {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await check();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export async function idleAndNoBlocksUsed(server, headers = {}) {
  return waitFor(
    async () => {
      const m = await metrics(server, headers);
      return m['hearth_requests_running'] === 0 &&
        m['hearth_requests_waiting'] === 0 &&
        m['hearth_kv_blocks{state="used"}'] === 0
        ? m
        : null;
    },
    10000,
    'no running request and no used KV blocks',
  );
}

export async function collectStream(stream) {
  let text = '';
  let usage = null;
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta ? (c.delta.content ?? '') : (c.text ?? '');
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, usage, finish, chunks };
}
