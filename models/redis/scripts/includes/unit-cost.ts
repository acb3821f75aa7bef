/**
 * `unit_cost(rate, usage)`: models/pricing.ts's `unitCost` in Lua, for transitionRun's charge:
 * the same whole-number arithmetic (both decoded from JSON; cjson's null is no number, so 0).
 * `settle_charge(price, rate_json, usage_json)`: what a succeeded run is charged: its price when
 * it has no rate (a fixed price) or its worker reported no usage (docs/jobs.md, "Cost"), else
 * the cost of the usage, never more than the price reserved.
 */
export const unitCostFunction = `
local function unit_n(v)
  if type(v) ~= 'number' or v ~= v or v <= 0 or v == math.huge then return 0 end
  return v
end
local function unit_cost(r, u)
  local function rate(k) return type(r[k]) == 'number' and r[k] or 0 end
  local tokens = math.floor(unit_n(u.input_tokens)) * rate('per_1k_input_tokens') + math.floor(unit_n(u.output_tokens)) * rate('per_1k_output_tokens')
  local cost = rate('base') + math.ceil(tokens / 1000) + math.ceil(unit_n(u.seconds)) * rate('per_second') + math.floor(unit_n(u.images)) * rate('per_image')
  if type(r.max) == 'number' and cost > r.max then cost = r.max end
  return cost
end
local function settle_charge(price, rate_json, usage_json)
  if not rate_json or rate_json == '' or not usage_json or usage_json == '' or usage_json == 'null' then return price end
  local cost = unit_cost(cjson.decode(rate_json), cjson.decode(usage_json))
  if cost > price then return price end
  return cost
end
`;
