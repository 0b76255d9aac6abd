-- Tests of hearth_prefix.lua's routing key outside HAProxy (lua5.3 hearth_prefix_test.lua DIR; ctest runs it).
local dir = arg[1] or "."
dofile(dir .. "/hearth_prefix.lua")
hearth_settings = { HEARTH_PREFIX_CHARS = 2048, HEARTH_SPREAD = 1 }

local failures = 0
local function check(cond, what)
  if not cond then
    failures = failures + 1
    io.stderr:write("FAIL: " .. what .. "\n")
  end
end

local rules = string.rep("Be kind. Lights off at ten. ", 80)

-- Field order, whitespace and escapes do not change the key.
local a = '{"model":"m","messages":[{"role":"system","content":"' .. rules .. '"},{"role":"user","content":"hi"}]}'
local b = '{ "messages" : [ { "content" : "' .. rules:gsub("B", "\\u0042") ..
          '", "role":"system"}, {"role":"user","content":"hi"} ],\n "model" : "m" }'
check(hearth_key_of(a) ~= nil, "a key for a chat body")
check(hearth_key_of(a) == hearth_key_of(b), "field order, whitespace and escapes leave the key alone")

-- Only the leading HEARTH_PREFIX_CHARS (2048) characters count: two questions after a long shared prefix share it.
local q1 = a:gsub('"hi"', '"what is the weather"')
check(hearth_key_of(a) == hearth_key_of(q1), "a different question after a 2 kB prefix keeps the key")
local short = '{"model":"m","messages":[{"role":"system","content":"short"},{"role":"user","content":"x"}]}'
local short2 = short:gsub('"x"', '"y"')
check(hearth_key_of(short) ~= hearth_key_of(short2), "questions within the first 2048 characters change it")

-- Model, salt and tenant separate keys.
check(hearth_key_of(a) ~= hearth_key_of(a:gsub('"model":"m"', '"model":"n"')), "the model is in the key")
check(hearth_key_of(a) ~= hearth_key_of(a:gsub('"model":"m"', '"model":"m","cache_salt":"s"')), "the salt is in the key")
check(hearth_key_of(a, "Bearer k1") ~= hearth_key_of(a, "Bearer k2"), "the tenant's key is in the key")

-- Content as parts, Anthropic's system, Responses' instructions/input and completions' prompt.
local parts = '{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"' .. rules .. '"}]}]}'
check(hearth_key_of(parts) == hearth_key_of(a), "text parts read like a string")
local anth = '{"model":"m","system":"' .. rules .. '","messages":[{"role":"user","content":"hi"}]}'
check(hearth_key_of(anth) ~= nil, "an Anthropic body has a key")
local resp1 = '{"model":"m","instructions":"' .. rules .. '","input":"one"}'
local resp2 = '{"model":"m","instructions":"' .. rules .. '","input":"two"}'
check(hearth_key_of(resp1) == hearth_key_of(resp2), "Responses instructions are the shared prefix")
check(hearth_key_of('{"prompt":"' .. rules .. '1"}') == hearth_key_of('{"prompt":"' .. rules .. '2"}'),
      "a completion's prompt counts")

-- A body cut anywhere (HAProxy buffers at most tune.bufsize) still gives the key of its leading text.
for cut = #a - 60, #a - 1 do
  check(hearth_key_of(a:sub(1, cut)) == hearth_key_of(a), "a body cut at " .. cut .. " keeps the key")
end

-- No body, not JSON, or nested too deep: no key (HAProxy balances round-robin), never an error.
check(hearth_key_of("") == nil, "an empty body has no key")
check(hearth_key_of(nil) == nil, "no body has no key")
check(hearth_key_of("not json") == nil, "a body that is not JSON has no key")
check(hearth_key_of(string.rep("[", 100000)) == nil, "deep nesting has no key")
check(hearth_key_of('{"a":' .. string.rep('"\\', 3)) ~= nil or true, "a cut escape does not raise")

-- HEARTH_SPREAD: a conversation keeps its slot, conversations of one prefix take several.
hearth_settings.HEARTH_SPREAD = 4
local function conv(first, later)
  return '{"model":"m","messages":[{"role":"system","content":"' .. rules .. '"},{"role":"user","content":"' ..
         first .. '"},{"role":"assistant","content":"ok"},{"role":"user","content":"' .. later .. '"}]}'
end
check(hearth_key_of(conv("plan my day", "and tomorrow?")) == hearth_key_of(conv("plan my day", "and friday?")),
      "a conversation keeps its slot")
local slots = {}
for i = 1, 40 do slots[hearth_key_of(conv("question " .. i, "more"))] = true end
local n = 0
for _ in pairs(slots) do n = n + 1 end
check(n == 4, "40 conversations of one prefix take the 4 slots, took " .. n)
hearth_settings.HEARTH_SPREAD = 1
hearth_settings.HEARTH_PREFIX_CHARS = 16
check(hearth_key_of(short) == hearth_key_of(short2), "HEARTH_PREFIX_CHARS=16 cuts the key before the question")

if failures > 0 then
  os.exit(1)
end
print("hearth_prefix_test: all passed")
