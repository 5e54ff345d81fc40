type JsonObject = Record<string, unknown>;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** `#/components/schemas/Job` becomes a link to that schema's section of the page. */
function schemaLink(schema: unknown): string {
  const ref = (schema as JsonObject | undefined)?.$ref;
  if (typeof ref === "string") {
    const name = ref.split("/").pop() ?? ref;
    return `<a href="#schema-${escapeHtml(name)}">${escapeHtml(name)}</a>`;
  }
  return schema === undefined ? "" : `<code>${escapeHtml(JSON.stringify(schema))}</code>`;
}

function renderOperation(path: string, method: string, op: JsonObject): string {
  const params = (op.parameters as JsonObject[] | undefined) ?? [];
  const body = (op.requestBody as JsonObject | undefined)?.content as JsonObject | undefined;
  const bodySchema = (body?.["application/json"] as JsonObject | undefined)?.schema;
  const responses = Object.entries((op.responses as JsonObject | undefined) ?? {}).map(([status, response]) => {
    const r = response as JsonObject;
    const schema = ((r.content as JsonObject | undefined)?.["application/json"] as JsonObject | undefined)?.schema;
    return `<li><b>${escapeHtml(status)}</b> ${escapeHtml(String(r.description ?? ""))} ${schemaLink(schema)}</li>`;
  });
  const paramRows = params.map(
    (p) =>
      `<tr><td><code>${escapeHtml(String(p.name))}</code></td><td>${escapeHtml(String(p.in))}${p.required ? ", required" : ""}</td><td>${escapeHtml(String(p.description ?? ""))}</td></tr>`,
  );
  return `<section class="op">
<h3><span class="m ${escapeHtml(method)}">${escapeHtml(method.toUpperCase())}</span> <code>${escapeHtml(path)}</code></h3>
<p>${escapeHtml(String(op.summary ?? ""))}</p>
${paramRows.length > 0 ? `<table><tr><th>parameter</th><th>in</th><th>meaning</th></tr>${paramRows.join("")}</table>` : ""}
${bodySchema ? `<p>Body: ${schemaLink(bodySchema)}</p>` : ""}
<ul>${responses.join("")}</ul>
</section>`;
}

/** A self-contained reference page (no scripts, no CDN) rendered from the OpenAPI document. */
export function renderDocsPage(doc: JsonObject): string {
  const info = (doc.info as JsonObject | undefined) ?? {};
  const operations: string[] = [];
  for (const [path, item] of Object.entries((doc.paths as JsonObject | undefined) ?? {})) {
    for (const [method, op] of Object.entries(item as JsonObject)) operations.push(renderOperation(path, method, op as JsonObject));
  }
  const schemas = Object.entries(((doc.components as JsonObject | undefined)?.schemas as JsonObject | undefined) ?? {}).map(
    ([name, schema]) =>
      `<details id="schema-${escapeHtml(name)}"><summary>${escapeHtml(name)}</summary><pre>${escapeHtml(JSON.stringify(schema, null, 2))}</pre></details>`,
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(String(info.title ?? "API"))}</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}
code,pre{font-family:ui-monospace,monospace}pre{background:#f6f6f6;padding:.8em;overflow:auto}
.op{border-top:1px solid #ddd;padding:.3em 0}.m{display:inline-block;min-width:4.5em;text-align:center;color:#fff;border-radius:3px;font-size:.8em;padding:.1em .3em}
.get{background:#2b7bb9}.post{background:#3a9d4b}.delete{background:#c0392b}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left}
</style></head><body>
<h1>${escapeHtml(String(info.title ?? "API"))} <small>${escapeHtml(String(info.version ?? ""))}</small></h1>
<p>${escapeHtml(String(info.description ?? ""))} The machine-readable document is at <a href="/openapi.json">/openapi.json</a>.</p>
<h2>Routes</h2>
${operations.join("\n")}
<h2>Schemas</h2>
${schemas.join("\n")}
</body></html>`;
}
