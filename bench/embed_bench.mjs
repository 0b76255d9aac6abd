// Embeddings, Hearth against the peer, on one GGUF embedding model and the same 64 texts: Hearth's POST
// /v1/embeddings with all 64 in one request (packed into forwards of --max-batch-tokens rows) and with one request
// per text, against llama.cpp v0.5.0 through node-llama-cpp 3.22.1 (bench/peer/embed.mjs: one getEmbeddingFor per
// text, the only way its embedding context takes inputs). Same thread count for both; each side runs once to warm
// up, then `reps` times (the median is reported). Also the lowest cosine similarity between the two sides' vectors.
// Prints one JSON object:
//   {"texts", "tokens", "hearth_batch_s", "hearth_each_s", "peer_s", "hearth_batch_tok_s", "peer_tok_s",
//    "lowest_cosine", "threads"}
//
//   node bench/embed_bench.mjs --model F.gguf [-t 2] [--reps 3] [--words 24] [--peer-ctx 256] [--hearth PATH]
// --peer-ctx is the peer's context size: its time per text grows with it (each getEmbeddingFor clears and runs a
// whole context: 0.5 s per text at 256, 1 s at 2048 on the model below), so keep it just above the longest text.
// A model to try: build/src/app/hearth synth --arch qwen3 --preset tiny --dim 1024 --layers 8 --heads 16
//   --kv-heads 8 --head-dim 128 --ffn 3072 --type q8_0 --pooling last --add-eos
//   --vocab-from ../shared/vocab/ggml-vocab-qwen2.gguf -o models/qwen3-embedding-like.gguf
// (Qwen3-Embedding-0.6B's width, heads and FFN on 8 of its 28 layers).

import {execFileSync, spawn} from "node:child_process";
import {mkdtempSync, rmSync, writeFileSync} from "node:fs";
import {tmpdir} from "node:os";
import {dirname, join} from "node:path";
import {fileURLToPath} from "node:url";

import {fail, parseFlags} from "./peer/peer.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const USAGE = "usage: embed_bench.mjs --model F.gguf [-t 2] [--reps 3] [--words 24] [--peer-ctx 256] [--hearth PATH]";
const a = parseFlags(process.argv.slice(2),
                     {model: "", t: 2, reps: 3, words: 24, "peer-ctx": 256, hearth: join(ROOT, "build/src/app/hearth")},
                     USAGE);
if (!a.model) fail(USAGE);

// 64 household-ish texts of about `words` words each, all different.
const WORDS = ("the kitchen light garden door alarm dinner recipe school homework weather tomorrow rain sunny " +
               "laundry basket grocery list milk bread eggs coffee meeting calendar doctor appointment car service " +
               "insurance bill electricity water heating thermostat window blinds movie night story bedtime").split(" ");
const texts = Array.from({length: 64}, (_, i) =>
  Array.from({length: a.words}, (_, j) => WORDS[(i * 7 + j * (i % 5 + 1)) % WORDS.length]).join(" ") + ` (${i})`);

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

async function startHearth() {
  const proc = spawn(a.hearth, ["serve", "-m", a.model, "--port", "0", "-t", String(a.t), "--kv-memory", "256MiB",
                                "--kv-disk", "off"], {stdio: ["ignore", "pipe", "pipe"]});
  const port = await new Promise((resolve, reject) => {
    let out = "";
    proc.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/on http:\/\/[^:]+:(\d+)/);
      if (m) resolve(Number(m[1]));
    });
    proc.on("exit", (code) => reject(new Error(`hearth serve exited with ${code}`)));
  });
  return {proc, url: `http://127.0.0.1:${port}/v1/embeddings`};
}

async function embed(url, input) {
  const res = await fetch(url, {method: "POST", headers: {"content-type": "application/json"},
                                body: JSON.stringify({input, encoding_format: "float"})});
  if (res.status !== 200) fail(`hearth answered ${res.status}: ${await res.text()}`);
  return res.json();
}

async function timed(fn) {
  const start = process.hrtime.bigint();
  const out = await fn();
  return {out, s: Number(process.hrtime.bigint() - start) / 1e9};
}

const hearth = await startHearth();
let batch, tokens;
const batchTimes = [], eachTimes = [];
try {
  for (let r = 0; r <= a.reps; ++r) {
    const b = await timed(() => embed(hearth.url, texts));
    const e = await timed(async () => { for (const t of texts) await embed(hearth.url, t); });
    if (r === 0) continue;  // warm-up
    batch = b.out;
    tokens = b.out.usage.prompt_tokens;
    batchTimes.push(b.s);
    eachTimes.push(e.s);
  }
} finally {
  hearth.proc.kill("SIGTERM");
}

const dir = mkdtempSync(join(tmpdir(), "hearth-embed-bench-"));
const peerTimes = [];
let peer;
try {
  writeFileSync(join(dir, "texts.json"), JSON.stringify(texts));
  for (let r = 0; r <= a.reps; ++r) {
    const out = execFileSync("node", [join(ROOT, "bench/peer/embed.mjs"), "--model", a.model, "--texts",
                                      join(dir, "texts.json"), "-t", String(a.t), "--ctx", String(a["peer-ctx"])],
                             {encoding: "utf8", maxBuffer: 1 << 28, stdio: ["ignore", "pipe", "ignore"]});
    peer = JSON.parse(out);
    if (r > 0) peerTimes.push(peer.seconds);
  }
} finally {
  rmSync(dir, {recursive: true, force: true});
}

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
let lowest = 1;
for (let i = 0; i < texts.length; ++i) {
  const x = batch.data[i].embedding, y = peer.inputs[i].embedding;
  lowest = Math.min(lowest, x.reduce((s, v, k) => s + v * y[k], 0) / (norm(x) * norm(y)));
}
const hb = median(batchTimes), he = median(eachTimes), ps = median(peerTimes);
process.stdout.write(JSON.stringify({
  texts: texts.length, tokens, threads: a.t, hearth_batch_s: hb, hearth_each_s: he, peer_s: ps,
  hearth_batch_tok_s: tokens / hb, hearth_each_tok_s: tokens / he, peer_tok_s: tokens / ps, lowest_cosine: lowest,
  peer_variant: peer.variant,
}) + "\n");
