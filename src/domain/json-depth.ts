// How deeply a JSON body may nest. Request bodies nested thousands of levels deep parse fine but overflow the
// stack of every recursive walk after the parse (JSON.stringify when storing, the table digest writer), so the
// body parser refuses them up front (the scan is json-budget.ts's, which counts values too).

/**
 * Python's json.loads gives up near 1000 levels (its recursion limit), where FastAPI answers 400
 * "There was an error parsing the body"; Hearth draws the line at the same depth.
 */
export const MAX_JSON_DEPTH = 1000;
