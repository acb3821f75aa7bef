import { defineScript } from '../script-definition.js';
import { optionalArg } from './includes/optional-arg.js';

/**
 * Every model of one advertisement in one script, so it is one round trip and a concurrent
 * declaration lands wholly before or after it: an advertisement never writes over a declared
 * record's description or schema. `updated_at` moves only when what the record says changes,
 * not on every sighting (`last_seen` is for that). The schema stays JSON text no script decodes
 * (redis-model-store.ts says why).
 *
 * A model's rank count (0: whole) is the catalogue's once it has an entry: every model is checked
 * before anything is written, and one known with another count refuses the whole advertisement,
 * so a refused worker leaves no trace. A new model takes the count advertised.
 * KEYS: the set of kinds, then model i's kind hash. ARGV: at, then per model: kind, id,
 * description, schema, rank count. Returns the number of models, or
 * {'conflict', kind, id, catalogue count, advertised count} for the first model whose count differs.
 */
export const advertiseModels = defineScript<number | [string, string, string, number, number]>({
  name: 'advertiseModels',
  keys: 'any',
  lua: `
${optionalArg}
local at = ARGV[1]
local known = {}
for i = 2, #KEYS do
  local a = 2 + (i - 2) * 5
  local raw = redis.call('HGET', KEYS[i], ARGV[a + 1])
  if raw then
    local r = cjson.decode(raw)
    local ranks = tonumber(r.ranks) or 0
    local advertised = tonumber(ARGV[a + 4])
    if ranks ~= advertised then return { 'conflict', ARGV[a], ARGV[a + 1], ranks, advertised } end
    known[i] = r
  end
end
for i = 2, #KEYS do
  local a = 2 + (i - 2) * 5
  local kind, id, description, schema, ranks = ARGV[a], ARGV[a + 1], opt(ARGV[a + 2]), opt(ARGV[a + 3]), tonumber(ARGV[a + 4])
  local r = known[i]
  if r then
    r.last_seen = at
    if r.first_seen == cjson.null then r.first_seen = at end
    if not r.declared and (r.description ~= description or r.input_schema ~= schema) then
      r.description = description
      r.input_schema = schema
      r.updated_at = at
    end
  else
    r = { kind = kind, id = id, description = description, input_schema = schema, declared = false, first_seen = at, last_seen = at, created_at = at, updated_at = at }
    if ranks > 0 then r.ranks = ranks end
  end
  redis.call('HSET', KEYS[i], id, cjson.encode(r))
  redis.call('SADD', KEYS[1], kind)
end
return #KEYS - 1
`,
});
