import { gateLua } from './gate-lua.js';
import { LuaScript } from './lua-script.js';
import { CREATE_RUN_LUA } from './run-scripts.js';

/**
 * The request gate and CREATE_RUN in one script: a submission's revocation check, rate limit,
 * credit reservation and run record in one round trip instead of two. The create's own text
 * runs unchanged, as the body of a function, so the two can never drift apart.
 * KEYS: CREATE_RUN's four, then the revoked marker and the limiter.
 * ARGV: CREATE_RUN's nine, then the gate's three (gate-lua.ts).
 * Returns the gate's refusal ({-1, 0, 0} or {0, retry after ms, 0}: a number first), or
 * CREATE_RUN's reply with the limiter's wait for one more request (ms) and its remaining
 * requests appended.
 */
export const GATED_CREATE_RUN = new LuaScript(`${gateLua(5, 6, 10)}
local function create()
${CREATE_RUN_LUA}
end
local reply = create()
reply[#reply + 1] = gate_next_ms
reply[#reply + 1] = gate_remaining
return reply
`);
