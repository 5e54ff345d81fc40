/**
 * A lone UTF-16 surrogate as JSON.stringify writes it, `\ud800` to `\udfff` (a pair it writes as
 * itself), where the backslash is not itself escaped (an even run of backslashes before it).
 */
const LONE_SURROGATE_ESCAPE = /(?:^|[^\\])(?:\\\\)*\\ud[89a-f]/;

/**
 * Why qless's put would refuse this data text, or null. `text` is JSON.stringify of data core's
 * JsonSchema accepted (so nested at most as deep as cjson decodes). put decodes data with Redis's
 * lua-cjson only to refuse what is not JSON; of such text cjson refuses two things, found here
 * without decoding it in Redis: `false` (put asserts the decoded value) and a lone surrogate's
 * escape, which cjson will not decode.
 */
export function qlessDataProblem(text: string): string | null {
  if (text === "false") return 'Put(): Arg "data" missing or not JSON: false';
  if (text.includes("\\ud") && LONE_SURROGATE_ESCAPE.test(text)) {
    return "data holds a lone UTF-16 surrogate, which qless's JSON decoder (lua-cjson) refuses";
  }
  return null;
}
