-- hearth_prefix.lua: HAProxy's routing key for Hearth servers, so requests that share their leading prompt reach
-- the same server (its prefix cache then holds that prompt's KV) and a server set change moves only its share.
--
-- Registers the sample fetch `lua.hearth_prefix_key`, used by `balance hash lua.hearth_prefix_key` with
-- `hash-type consistent` (deploy/haproxy/hearth.cfg). The key is built from the request's content, never from its
-- raw bytes, because JSON field order, whitespace and escapes differ between clients:
--
--   tenant  the Authorization or x-api-key header (tenants by key keep separate caches, so they may land apart)
--   model   the "model" field
--   salt    the "cache_salt" field (a separate cache namespace on the server)
--   text    the leading prompt text, decoded from JSON and cut at HEARTH_PREFIX_CHARS characters (default 2048):
--           "system" or "instructions", then each message's role and text ("messages", Responses "input"), or
--           "prompt" (completions, Ollama generate). Content given as an array of parts counts its text parts.
--
-- HEARTH_PREFIX_CHARS trades spread for locality: it should be at most the length of the prefix users share (house
-- rules, a tool catalogue). Requests whose leading text differs within it go to different servers.
-- HEARTH_SPREAD (default 1) spreads one hot prefix over up to that many servers: the conversation's first user
-- message picks one of HEARTH_SPREAD slots, so a conversation stays on one server while a household's conversations
-- divide among several (each then computes or loads the shared prefix once).
--
-- Requests without a body (GET /health, /v1/models, /metrics) return no key, and HAProxy balances them round-robin.
-- The body is what HAProxy buffered (option http-buffer-request, up to tune.bufsize): a longer body is parsed as
-- far as it goes, which is enough, since only its leading text counts. Nesting deeper than MAX_DEPTH, or anything
-- that is not JSON, gives no key (round-robin) rather than an error.

local MAX_DEPTH = 32
-- Read at each request, not when the file loads: HAProxy's `setenv` lines may follow `lua-load`.
local PREFIX_CHARS, SPREAD = 2048, 1
-- hearth_settings (a global table, for tests) overrides the environment.
local function setting(name, default)
  local v = (hearth_settings and hearth_settings[name]) or os.getenv(name)
  return tonumber(v or "") or default
end
local function read_settings()
  PREFIX_CHARS = math.max(1, math.floor(setting("HEARTH_PREFIX_CHARS", 2048)))
  SPREAD = math.max(1, math.floor(setting("HEARTH_SPREAD", 1)))
end

-- A JSON parser that tolerates a truncated document: at the end of the input every open value is returned as far
-- as it was read (p.eof set), so a cut body still yields its leading fields.
local escapes = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' }

local function skip_ws(p)
  local i = string.find(p.s, "[^ \t\r\n]", p.i)
  if not i then
    p.eof = true
    p.i = #p.s + 1
  else
    p.i = i
  end
end

local function parse_string(p)
  local s, out, i = p.s, {}, p.i + 1
  while true do
    local j = string.find(s, '["\\]', i)
    if not j then
      out[#out + 1] = s:sub(i)
      p.eof, p.i = true, #s + 1
      return table.concat(out)
    end
    out[#out + 1] = s:sub(i, j - 1)
    if s:sub(j, j) == '"' then
      p.i = j + 1
      return table.concat(out)
    end
    local c = s:sub(j + 1, j + 1)
    if c == 'u' then
      local cp = tonumber(s:sub(j + 2, j + 5), 16)
      if not cp or #s < j + 5 then
        p.eof, p.i = true, #s + 1
        return table.concat(out)
      end
      local next_i = j + 6
      if cp >= 0xD800 and cp <= 0xDBFF and s:sub(next_i, next_i + 1) == '\\u' then
        local lo = tonumber(s:sub(next_i + 2, next_i + 5), 16)
        if lo and lo >= 0xDC00 and lo <= 0xDFFF then
          cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
          next_i = next_i + 6
        end
      end
      if cp >= 0xD800 and cp <= 0xDFFF then cp = 0xFFFD end
      out[#out + 1] = utf8.char(cp)
      i = next_i
    elseif c == '' then
      p.eof, p.i = true, #s + 1
      return table.concat(out)
    else
      out[#out + 1] = escapes[c] or c
      i = j + 2
    end
  end
end

local parse_value

local function parse_container(p, depth, close)
  if depth > MAX_DEPTH then error("too deep") end
  local result, n = {}, 0
  p.i = p.i + 1
  while true do
    skip_ws(p)
    if p.eof then return result end
    local c = p.s:sub(p.i, p.i)
    if c == close then
      p.i = p.i + 1
      return result
    elseif c == ',' then
      p.i = p.i + 1
    elseif close == '}' then
      if c ~= '"' then error("bad object") end
      local key = parse_string(p)
      skip_ws(p)
      if p.eof then return result end
      if p.s:sub(p.i, p.i) ~= ':' then error("bad object") end
      p.i = p.i + 1
      result[key] = parse_value(p, depth + 1)
      if p.eof then return result end
    else
      n = n + 1
      result[n] = parse_value(p, depth + 1)
      if p.eof then return result end
    end
  end
end

parse_value = function(p, depth)
  skip_ws(p)
  if p.eof then return nil end
  local c = p.s:sub(p.i, p.i)
  if c == '{' then return parse_container(p, depth, '}') end
  if c == '[' then return parse_container(p, depth, ']') end
  if c == '"' then return parse_string(p) end
  local word = string.match(p.s, "^[%w%.%+%-]+", p.i)
  if not word then error("bad value") end
  p.i = p.i + #word
  if p.i > #p.s then p.eof = true end
  if word == "true" then return true end
  if word == "false" then return false end
  if word == "null" then return nil end
  return tonumber(word)
end

local function parse_json(s)
  local ok, value = pcall(parse_value, { s = s, i = 1, eof = false }, 0)
  if ok and type(value) == "table" then return value end
  return nil
end

-- Appends the text of a content value (a string, an array of parts, a part) to `out` until `out.n` reaches the cap.
local function add_text(out, v)
  if out.n >= PREFIX_CHARS then return end
  if type(v) == "string" then
    local piece = v:sub(1, PREFIX_CHARS - out.n)
    out[#out + 1] = piece
    out.n = out.n + #piece
  elseif type(v) == "table" then
    if v.text ~= nil then
      add_text(out, v.text)
    elseif v.content ~= nil then
      add_text(out, v.content)
    else
      for _, part in ipairs(v) do add_text(out, part) end
    end
  end
end

local function add_messages(out, messages)
  if type(messages) ~= "table" then return nil end
  local first_user
  for _, m in ipairs(messages) do
    if type(m) == "table" then
      if first_user == nil and m.role == "user" then
        local t = { n = 0 }
        add_text(t, m.content)
        first_user = table.concat(t)
      end
      if out.n < PREFIX_CHARS then
        add_text(out, "\2" .. tostring(m.role or m.type or "") .. "\2")
        add_text(out, m.content ~= nil and m.content or m.output)
      end
    elseif type(m) == "string" then
      add_text(out, m)
    end
  end
  return first_user
end

-- The routing key of a request body (a string), or nil when the body is empty or not JSON.
function hearth_key_of(body, tenant)
  if body == nil or #body == 0 then return nil end
  read_settings()
  local req = parse_json(body)
  if req == nil then return nil end
  local out = { n = 0 }
  add_text(out, req.system)
  add_text(out, req.instructions)
  local first_user = add_messages(out, req.messages)
  if type(req.input) == "string" then
    add_text(out, req.input)
    first_user = first_user or req.input
  else
    first_user = add_messages(out, req.input) or first_user
  end
  add_text(out, req.prompt)
  local key = table.concat({ tenant or "", tostring(req.model or ""), tostring(req.cache_salt or ""),
                             table.concat(out) }, "\1")
  if SPREAD > 1 then
    local h = 0
    for i = 1, #(first_user or "") do h = (h * 31 + string.byte(first_user, i)) % 2147483647 end
    key = key .. "\1" .. tostring(h % SPREAD)
  end
  return key
end

if core ~= nil then
  core.register_fetches("hearth_prefix_key", function(txn)
    local tenant = txn.f:req_hdr("authorization") or txn.f:req_hdr("x-api-key")
    return hearth_key_of(txn.f:req_body(), tenant)
  end)
end
