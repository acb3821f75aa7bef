import { defineScript } from '../script-definition.js';
import { optionalArg } from './includes/optional-arg.js';

/**
 * An operator's declaration of a model: its description, schema, rank count and middle-rank
 * placement win over any advertisement (a whole model keeps neither of the last two).
 * KEYS: the set of kinds, the kind's hash. ARGV: at, kind, id, description, schema, rank count
 * (0: whole), middle_ranks (optional). Returns {1 if created, the record}.
 */
export const declareModel = defineScript<[number, string]>({
  name: 'declareModel',
  keys: 2,
  lua: `
${optionalArg}
local at, kind, id = ARGV[1], ARGV[2], ARGV[3]
local raw = redis.call('HGET', KEYS[2], id)
local r
if raw then
  r = cjson.decode(raw)
else
  r = { kind = kind, id = id, first_seen = cjson.null, last_seen = cjson.null, created_at = at }
end
r.description = opt(ARGV[4])
r.input_schema = opt(ARGV[5])
local ranks = tonumber(ARGV[6])
r.ranks = nil
r.middle_ranks = nil
if ranks > 0 then
  r.ranks = ranks
  r.middle_ranks = opt(ARGV[7])
end
r.declared = true
r.updated_at = at
local json = cjson.encode(r)
redis.call('HSET', KEYS[2], id, json)
redis.call('SADD', KEYS[1], kind)
return { raw and 0 or 1, json }
`,
});
