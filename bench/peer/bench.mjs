// The peer's speed on one GGUF, measured as `hearth bench model` measures Hearth's (and as llama-bench measured
// llama.cpp's): llama.cpp v0.5.0 through node-llama-cpp 3.22.1, CPU build, one context, one sequence.
//   prefill:       one pass of p tokens into an empty sequence (batch and micro-batch >= p), median of `reps`;
//   decode:        n single-token steps from an empty sequence, each its own decode call (llama-bench's tg);
//   decode@depth:  after a `depth`-token prompt (not timed), n single-token steps (llama-bench's -d / tg @ d).
// The token ids are a fixed pseudo-random walk over the vocabulary (speed does not depend on them). One warm-up
// pass of each kind runs first. Each step goes through node-llama-cpp's evaluation queue, so decode times include
// its per-call dispatch in JavaScript (a few tens of microseconds; `--p 0 --n 256` on stories260K shows the
// ceiling).
//
// Decode runs once per thread count of --decode-threads (default: 1 up to -t) and the fastest is reported: with
// as many threads as cores, node-llama-cpp's decode waits in ggml's spinning barrier whenever its JavaScript event
// loop (which wakes every millisecond while a decode is pending) takes a core from one of ggml's threads; on a
// 2-core machine 2 threads decode slower than 1 (perf: ggml_barrier). llama-bench, whose calling thread is ggml's
// first, has no such third thread. Taking the faster count measures the peer at its best.
// Prints one JSON object:
//   {"prefill_tok_s", "decode_tok_s", "decode_depth_tok_s" (null without --depth), "decode_threads" (the count
//    that gave decode_tok_s), "decode_by_threads": {count: [decode, decode at depth]}, "variant", ...}
//
//   node bench/peer/bench.mjs --model F.gguf [-t 2] [-p 512] [-n 64] [--depth 0] [--reps 1] [--fa auto]
//                            [--decode-threads 1,2] [--isa avx2]

import {fail, flashAttention, loadLlama, parseFlags} from "./peer.mjs";

const USAGE = "usage: bench.mjs --model F.gguf [-t 2] [-p 512] [-n 64] [--depth 0] [--reps 1] [--fa auto|on|off] " +
              "[--decode-threads 1,2] [--isa avx2]";
const a = parseFlags(process.argv.slice(2),
                     {model: "", t: 2, p: 512, n: 64, depth: 0, reps: 1, fa: "auto", isa: "", "decode-threads": ""},
                     USAGE);
const decodeThreads = a["decode-threads"] ? a["decode-threads"].split(",").map(Number)
                                          : Array.from({length: a.t}, (_, i) => i + 1);
if (decodeThreads.some((d) => !Number.isInteger(d) || d < 1)) fail("--decode-threads takes positive integers");
if (!a.model) fail(USAGE);
if (a.p < 0 || a.n < 1 || a.depth < 0 || a.reps < 1) fail("need -p >= 0, -n >= 1, --depth >= 0, --reps >= 1");

const peer = await loadLlama({threads: Math.max(a.t, ...decodeThreads), isa: a.isa});
const model = await peer.llama.loadModel({modelPath: a.model}).catch((e) => fail(`cannot load ${a.model}: ${e.message}`));
const contextSize = Math.max(a.p, a.depth + a.n, a.n + 1) + 16;
const batch = Math.max(a.p, 512);
async function makeContext(threads) {
  return model.createContext({
    contextSize, batchSize: batch, threads: {ideal: threads, min: threads}, flashAttention: flashAttention(a.fa),
    sequences: 1,
  });
}
let context = await makeContext(a.t);
let sequence = context.getSequence();

let nVocab = 0;
for (const _ of model.iterateAllTokens()) ++nVocab;
let state = 12345;
function tokens(count) {
  const out = [];
  for (let i = 0; i < count; ++i) {
    state = (state * 1103515245 + 12345) % 2147483648;
    out.push(state % nVocab);
  }
  return out;
}

async function timedPrefill(count) {
  await sequence.clearHistory();
  const input = tokens(count);
  const t0 = process.hrtime.bigint();
  await sequence.evaluateWithoutGeneratingNewTokens(input);
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

// `steps` single-token decodes after `context_tokens` (evaluated untimed); returns seconds for the steps.
async function timedDecode(contextTokens, steps) {
  await sequence.clearHistory();
  if (contextTokens > 0) await sequence.evaluateWithoutGeneratingNewTokens(tokens(contextTokens));
  const input = tokens(steps);
  const t0 = process.hrtime.bigint();
  for (const token of input) await sequence.evaluateWithoutGeneratingNewTokens([token]);
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

function median(xs) {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const out = {model: a.model, threads: a.t, prompt_tokens: a.p, decode_tokens: a.n, depth: a.depth,
             prefill_tok_s: null, decode_tok_s: null, decode_depth_tok_s: null};
if (a.p > 0) {
  await timedPrefill(Math.min(a.p, 32));  // warm-up
  const times = [];
  for (let r = 0; r < a.reps; ++r) times.push(await timedPrefill(a.p));
  out.prefill_tok_s = a.p / median(times);
}
out.decode_by_threads = {};
for (const threads of decodeThreads) {
  await context.dispose();
  context = await makeContext(threads);
  sequence = context.getSequence();
  await timedDecode(0, 4);  // warm-up
  const decode = [];
  for (let r = 0; r < a.reps; ++r) decode.push(await timedDecode(0, a.n));
  const deep = [];
  for (let r = 0; r < (a.depth > 0 ? a.reps : 0); ++r) deep.push(await timedDecode(a.depth, a.n));
  const speeds = [a.n / median(decode), deep.length ? a.n / median(deep) : null];
  out.decode_by_threads[threads] = speeds;
  if (out.decode_tok_s === null || speeds[0] > out.decode_tok_s) {
    out.decode_tok_s = speeds[0];
    out.decode_threads = threads;
  }
  if (speeds[1] !== null && (out.decode_depth_tok_s === null || speeds[1] > out.decode_depth_tok_s)) {
    out.decode_depth_tok_s = speeds[1];
  }
}
out.variant = peer.variant();
out.flash_attention = a.fa;
out.engine = "llama.cpp v0.5.0 (node-llama-cpp 3.22.1)";
process.stdout.write(JSON.stringify(out) + "\n");
await context.dispose();
await model.dispose();
