// node validate_openapi.js OPENAPI.json (through node.sh run): the document
// kls-openapi generates (server/http/openapi.cc), validated by
// @apidevtools/swagger-parser — JSON Schema of OpenAPI 3.0, every $ref
// resolving, unique operationIds, path parameters — then the promises the
// gateway relies on: every route under /v1/ with a POST operation answering
// 200 with JSON, a tag, a bearer security requirement with its scope
// (x-kls-scope; GET only for read-scope methods) and the shared Error
// responses, and no component schema that nothing references.
"use strict";

const fs = require("fs");
const SwaggerParser = require("@apidevtools/swagger-parser");

function fail(message) {
  console.error(`validate_openapi: ${message}`);
  process.exit(1);
}

async function main() {
  const file = process.argv[2];
  if (!file) fail("usage: validate_openapi.js OPENAPI.json");
  const text = fs.readFileSync(file, "utf8");
  const doc = JSON.parse(text);

  // Validates a copy: validate() dereferences the object it is given.
  const api = await SwaggerParser.validate(JSON.parse(text));
  if (api.openapi !== "3.0.3") fail(`openapi is ${api.openapi}, expected 3.0.3`);

  const problems = [];
  let operations = 0;
  const operationIds = new Set();
  for (const [path, item] of Object.entries(doc.paths)) {
    if (!/^\/v1\/[a-z][a-z-]*\/[a-z][a-z-]*$/.test(path)) problems.push(`${path}: not /v1/<service>/<method>`);
    if (!item.post) problems.push(`${path}: no post operation`);
    for (const [verb, op] of Object.entries(item)) {
      operations++;
      const where = `${verb.toUpperCase()} ${path}`;
      if (operationIds.has(op.operationId)) problems.push(`${where}: duplicate operationId ${op.operationId}`);
      operationIds.add(op.operationId);
      if (!op.tags || op.tags.length !== 1) problems.push(`${where}: needs exactly one tag`);
      if (!op.description) problems.push(`${where}: no description`);
      if (!op.security || !op.security.some((s) => "bearer" in s)) problems.push(`${where}: no bearer security`);
      if (!["read", "write", "admin"].includes(op["x-kls-scope"])) problems.push(`${where}: no x-kls-scope`);
      if (verb === "get" && op["x-kls-scope"] !== "read") {
        problems.push(`${where}: GET on a ${op["x-kls-scope"]} method`);
      }
      const ok = op.responses && op.responses["200"];
      if (!ok || !ok.content || !ok.content["application/json"]) problems.push(`${where}: no JSON 200 response`);
      for (const status of ["400", "401", "403", "404", "429", "500", "503"]) {
        const r = op.responses && op.responses[status];
        if (!r || r.$ref !== `#/components/responses/Error${status}`) {
          problems.push(`${where}: no ${status} Error response`);
        }
      }
      if (verb === "post" && !(op.requestBody && op.requestBody.content["application/json"])) {
        problems.push(`${where}: no JSON request body`);
      }
    }
  }
  const referenced = new Set();
  for (const m of text.matchAll(/"#\/components\/schemas\/([^"]+)"/g)) referenced.add(m[1]);
  for (const name of Object.keys(doc.components.schemas)) {
    if (!referenced.has(name)) problems.push(`components/schemas/${name}: referenced nowhere`);
  }
  const tags = new Set(doc.tags.map((t) => t.name));
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item)) {
      for (const t of op.tags || []) if (!tags.has(t)) problems.push(`${op.operationId}: tag ${t} is not in tags`);
    }
  }
  if (problems.length > 0) fail(`${file}:\n  ${problems.join("\n  ")}`);
  console.log(`${file}: valid OpenAPI ${api.openapi} (${api.info.title} ${api.info.version}): ` +
              `${Object.keys(doc.paths).length} paths, ${operations} operations, ` +
              `${Object.keys(doc.components.schemas).length} schemas`);
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
