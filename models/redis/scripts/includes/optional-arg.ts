/**
 * `opt(v)`: an optional value as the model scripts receive it, `n` (null) or `s<value>`, raw:
 * decoding JSON in a script would fail on text cjson refuses (a lone surrogate escape), while
 * raw bytes it only copies. redis-model-store.ts encodes it.
 */
export const optionalArg = `local function opt(v) if v == 'n' then return cjson.null end return string.sub(v, 2) end`;
