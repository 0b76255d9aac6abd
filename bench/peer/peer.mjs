// Shared by the peer programs (greedy.mjs, bench.mjs, server.mjs): loads llama.cpp v0.5.0 as node-llama-cpp
// 3.22.1 ships it prebuilt (CPU build, never compiled here), parses the programs' flags, and names the CPU variant
// ggml loaded (`libggml-cpu-<level>.so`, picked at load for this CPU; `--isa avx2` pins the haswell one).

import {cpSync, existsSync, mkdtempSync, readdirSync, rmSync} from "node:fs";
import {tmpdir} from "node:os";
import {dirname, join} from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";

export const PEER_DIR = dirname(fileURLToPath(import.meta.url));
const BINS = join(PEER_DIR, "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64");

// --name value / --flag pairs into an object; `spec` maps each known flag to its default (a number default makes
// the flag numeric, a boolean default makes it a switch). Unknown flags and bad numbers exit 2, naming them.
export function parseFlags(argv, spec, usage) {
  const out = {...spec};
  for (let i = 0; i < argv.length; ++i) {
    const name = argv[i].replace(/^--?/, "");
    if (!(name in spec) || !argv[i].startsWith("-")) fail(`unknown argument '${argv[i]}'\n${usage}`);
    if (typeof spec[name] === "boolean") {
      out[name] = true;
      continue;
    }
    if (i + 1 >= argv.length) fail(`--${name} needs a value\n${usage}`);
    const value = argv[++i];
    if (typeof spec[name] === "number") {
      out[name] = Number(value);
      if (!Number.isFinite(out[name])) fail(`--${name} must be a number, got '${value}'`);
    } else {
      out[name] = value;
    }
  }
  return out;
}

export function fail(message) {
  process.stderr.write(`peer: ${message}\n`);
  process.exit(2);
}

// With isa "avx2", node-llama-cpp is loaded from a temporary copy of this folder's node_modules whose bins hold no
// CPU variant but haswell (AVX2, FMA, F16C), so ggml cannot pick a wider one: what a CPU without AVX-512 gets.
// The copy is removed when the process exits.
async function importNodeLlamaCpp(isa) {
  if (!existsSync(BINS)) fail(`node-llama-cpp is not installed in ${PEER_DIR}: run scripts/peer-install.sh`);
  if (!isa) return import("node-llama-cpp");
  if (isa !== "avx2") fail(`--isa must be avx2 or empty, got '${isa}'`);
  const root = mkdtempSync(join(tmpdir(), "hearth-peer-avx2-"));
  process.on("exit", () => rmSync(root, {recursive: true, force: true}));
  cpSync(join(PEER_DIR, "node_modules"), join(root, "node_modules"), {recursive: true});
  const bins = join(root, "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64");
  for (const f of readdirSync(bins)) {
    if (f.startsWith("libggml-cpu-") && f !== "libggml-cpu-haswell.so") rmSync(join(bins, f));
  }
  return import(pathToFileURL(join(root, "node_modules", "node-llama-cpp", "dist", "index.js")).href);
}

// Returns {llama, variant(), log}: variant() names the CPU library ggml loaded (llama.cpp's log reaches JavaScript
// asynchronously, so ask after a model is loaded); `log` keeps llama.cpp's warnings and errors (everything, and
// printed to stderr, when `verbose`).
export async function loadLlama({threads, isa = "", verbose = false}) {
  const {getLlama} = await importNodeLlamaCpp(isa);
  const state = {variant: "unknown", log: []};
  const llama = await getLlama({
    gpu: false,
    build: "never",
    maxThreads: threads,
    logLevel: "log",
    logger: (level, message) => {
      const m = /loaded CPU backend from (\S+)/.exec(message);
      if (m) state.variant = m[1].split("/").pop();
      if (level === "error" || level === "warn" || verbose) {
        state.log.push(`${level}: ${message.trimEnd()}`);
        if (verbose) process.stderr.write(`${level}: ${message}`);
      }
    },
  });
  return {llama, variant: () => state.variant, log: state.log};
}

// The flash-attention flag as node-llama-cpp takes it: "on" / "off" / "auto" (llama.cpp's default).
export function flashAttention(value) {
  if (value === "on") return true;
  if (value === "off") return false;
  if (value === "auto") return "auto";
  fail(`--fa must be on, off or auto, got '${value}'`);
}

// The prompt's token ids as llama.cpp's own programs build them: BOS first when the model asks for it, then the
// text tokenized without parsing special-token markup.
export function promptTokens(model, text) {
  const tokens = model.tokenize(text, false);
  return model.tokens.shouldPrependBosToken && model.tokens.bos != null ? [model.tokens.bos, ...tokens] : tokens;
}
