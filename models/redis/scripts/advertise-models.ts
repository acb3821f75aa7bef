import { defineScript } from '../script-definition.js';
import { optionalArg } from './includes/optional-arg.js';

/**
 * Every model of one advertisement in one script, so it is one round trip and a concurrent
 * declaration lands wholly before or after it: an advertisement never writes over a declared
 * record's description or schema. `updated_at` moves only when what the record says changes,
 * not on every sighting (`last_seen` is for that). The schema stays JSON text no script decodes
 * (redis-model-store.ts says why).
 * KEYS: the set of kinds, then model i's kind hash. ARGV: at, then per model: kind, id, description, schema.
 * Returns the number of models.
 */
export const advertiseModels = defineScript<number>({
  name: 'advertiseModels',
  keys: 'any',
  lua: `
${optionalArg}
local at = ARGV[1]
for i = 2, #KEYS do
  local a = 2 + (i - 2) * 4
  local kind, id, description, schema = ARGV[a], ARGV[a + 1], opt(ARGV[a + 2]), opt(ARGV[a + 3])
  local raw = redis.call('HGET', KEYS[i], id)
  local r
  if raw then
    r = cjson.decode(raw)
    r.last_seen = at
    if r.first_seen == cjson.null then r.first_seen = at end
    if not r.declared and (r.description ~= description or r.input_schema ~= schema) then
      r.description = description
      r.input_schema = schema
      r.updated_at = at
    end
  else
    r = { kind = kind, id = id, description = description, input_schema = schema, declared = false, first_seen = at, last_seen = at, created_at = at, updated_at = at }
  end
  redis.call('HSET', KEYS[i], id, cjson.encode(r))
  redis.call('SADD', KEYS[1], kind)
end
return #KEYS - 1
`,
});
