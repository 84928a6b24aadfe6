// skillhost JavaScript guest SDK 0.1.0 (one ES module, no dependencies).
//
// Write a skillhost skill in JavaScript for componentize-js: describe each tool with
// `tool({...})`, its input and output with the schema builder `s` (JSON Schema draft
// 2020-12, and the validator that checks every input before `run` sees it), and export
// `skill(...tools)` as `guest`:
//
//     import { tool, skill, s, ToolError, log } from "./skillhost.js";
//     const hello = tool({
//       name: "hello", description: "Greet someone by name.",
//       input: s.object({ name: s.string("Who to greet.") }),
//       output: s.object({ greeting: s.string() }),
//       readOnly: true, idempotent: true, examples: [{ name: "Ada" }],
//       run({ name }) { return { greeting: `Hello, ${name}!` }; },
//     });
//     export const guest = skill(hello);
//
// `skillhost build` writes this file beside `skill.js`; componentize-js resolves the
// relative import itself. Errors: throw `ToolError.invalidInput/failed/denied(message)`;
// anything else thrown becomes `failed` with its message; nothing escapes as a trap.
// `log.*` and `progress()` go to the host. There is no file API: StarlingMonkey exposes
// no filesystem to JavaScript. `http.get/post` wrap `fetch()`, linked only when
// skill.toml asks for hosts.
//
// Under Node (unit tests) import `./skillhost-native.js` first: it maps the host import
// below to a recorder, since `skillhost:skill/host@0.1.0` exists only in the component.

import * as host from "skillhost:skill/host@0.1.0";

const SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema";
const TOOL_NAME = /^[a-z][a-z0-9_-]*$/;

// ---------------------------------------------------------------------------------------
// Errors

/** The kinds of failure a tool may report (the world's `call-error` cases). */
const KINDS = ["invalid-input", "failed", "denied"];

/** A failure a tool reports on purpose: its kind and a message for the caller. */
export class ToolError extends Error {
  /** `kind` is "invalid-input", "failed" or "denied". */
  constructor(kind, message) {
    if (!KINDS.includes(kind)) throw new TypeError(`ToolError kind must be one of ${KINDS.join(", ")}, not ${JSON.stringify(kind)}`);
    super(String(message));
    this.name = "ToolError";
    this.kind = kind;
  }
  /** The input was not valid: say which field and why. */
  static invalidInput(message) {
    return new ToolError("invalid-input", message);
  }
  /** The tool ran and failed: say what failed. */
  static failed(message) {
    return new ToolError("failed", message);
  }
  /** The tool was refused something it needs: name what, so a human can grant it. */
  static denied(message) {
    return new ToolError("denied", message);
  }
}

/** The world's `call-error` variant as componentize-js lowers it: a thrown `{tag, val}`. */
class CallError {
  constructor(tag, val) {
    this.tag = tag;
    this.val = val;
  }
}

/** The message of anything thrown: `TypeError: x is undefined`, a plain Error's message. */
function messageOf(error) {
  if (error instanceof Error) return error.name === "Error" || !error.name ? error.message : `${error.name}: ${error.message}`;
  if (typeof error === "string") return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

/** Anything thrown by a tool as the `call-error` the host receives. */
export function toCallError(error) {
  if (error instanceof CallError) return error;
  if (error instanceof ToolError) return new CallError(error.kind, error.message);
  return new CallError("failed", messageOf(error) || "the tool failed without a message");
}

// ---------------------------------------------------------------------------------------
// Schemas

const isPlainObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const KEY = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const describeValue = (v) => (v === null ? "null" : Array.isArray(v) ? "an array" : typeof v === "object" ? "an object" : `${typeof v} ${JSON.stringify(v)}`);
const join = (path, key) => (KEY.test(key) ? (path ? `${path}.${key}` : key) : `${path}[${JSON.stringify(key)}]`);

/**
 * One schema: its JSON Schema (`toJSON()`) and a validator (`parse(value)`). Made by `s.*`;
 * `.describe(text)` and `.default(value)` return a copy with a description or a default
 * (a field with a default may be left out; the default fills it in).
 */
export class Schema {
  /** `json` is the JSON Schema; `check(value, path, errors)` returns the value to use. */
  constructor(json, check, flags = {}) {
    this.json = json;
    this.check = check;
    this.isOptional = flags.isOptional ?? false;
    this.hasDefault = flags.hasDefault ?? false;
    this.defaultValue = flags.defaultValue;
  }
  /** The JSON Schema of this schema (JSON.stringify calls it). */
  toJSON() {
    return this.json;
  }
  /** A copy with a description. */
  describe(description) {
    return new Schema({ ...this.json, description: String(description) }, this.check, this);
  }
  /** A copy whose field may be left out and then takes `value`. */
  default(value) {
    const errors = [];
    this.check(value, "default", errors);
    if (errors.length) throw new TypeError(`schema default is not valid for its own schema: ${errors[0]}`);
    return new Schema({ ...this.json, default: value }, this.check, { isOptional: this.isOptional, hasDefault: true, defaultValue: value });
  }
  /**
   * Validate `value`; returns the value with defaults filled in, or throws
   * `ToolError.invalidInput` naming each wrong field (`places[0].city: expected a string`).
   */
  parse(value, path = "") {
    const errors = [];
    const out = this.check(value, path, errors);
    if (errors.length) throw ToolError.invalidInput(errors.slice(0, 5).join("; ") + (errors.length > 5 ? `; and ${errors.length - 5} more` : ""));
    return out;
  }
}

/** `s.string("desc")` or `s.string({ description, minLength, ... })`: split the argument. */
function options(arg) {
  if (arg === undefined) return {};
  if (typeof arg === "string") return { description: arg };
  if (isPlainObject(arg)) return { ...arg };
  throw new TypeError(`schema options must be a description string or an object, not ${describeValue(arg)}`);
}

/** Builds the JSON of a schema from its fixed part and the author's options. */
function build(base, opts, allowed) {
  const json = { ...base };
  for (const [key, value] of Object.entries(opts)) {
    if (key === "description" || key === "title" || key === "format" || key === "examples" || allowed.includes(key)) {
      if (value !== undefined) json[key] = value instanceof RegExp ? value.source : value;
    } else if (key !== "default") {
      throw new TypeError(`unknown schema option \`${key}\` (known: description, title, format, examples, default${allowed.map((a) => `, ${a}`).join("")})`);
    }
  }
  return json;
}

function withDefault(schema, opts) {
  return "default" in opts ? schema.default(opts.default) : schema;
}

const where = (path) => path || "input";

function stringSchema(arg) {
  const opts = options(arg);
  const json = build({ type: "string" }, opts, ["minLength", "maxLength", "pattern"]);
  const pattern = json.pattern === undefined ? null : new RegExp(json.pattern, "u");
  const chars = (v) => [...v].length;
  return withDefault(
    new Schema(json, (v, path, errors) => {
      if (typeof v !== "string") errors.push(`${where(path)}: expected a string, got ${describeValue(v)}`);
      else if (json.minLength !== undefined && chars(v) < json.minLength) errors.push(`${where(path)}: expected at least ${json.minLength} characters, got ${chars(v)}`);
      else if (json.maxLength !== undefined && chars(v) > json.maxLength) errors.push(`${where(path)}: expected at most ${json.maxLength} characters, got ${chars(v)}`);
      else if (pattern && !pattern.test(v)) errors.push(`${where(path)}: does not match the pattern ${json.pattern}`);
      return v;
    }),
    opts,
  );
}

function numberSchema(type, arg) {
  const opts = options(arg);
  const json = build({ type }, opts, ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]);
  const what = type === "integer" ? "an integer" : "a number";
  return withDefault(
    new Schema(json, (v, path, errors) => {
      const p = where(path);
      if (typeof v !== "number" || !Number.isFinite(v) || (type === "integer" && !Number.isInteger(v))) errors.push(`${p}: expected ${what}, got ${describeValue(v)}`);
      else if (json.minimum !== undefined && v < json.minimum) errors.push(`${p}: must be at least ${json.minimum}, got ${v}`);
      else if (json.maximum !== undefined && v > json.maximum) errors.push(`${p}: must be at most ${json.maximum}, got ${v}`);
      else if (json.exclusiveMinimum !== undefined && v <= json.exclusiveMinimum) errors.push(`${p}: must be more than ${json.exclusiveMinimum}, got ${v}`);
      else if (json.exclusiveMaximum !== undefined && v >= json.exclusiveMaximum) errors.push(`${p}: must be less than ${json.exclusiveMaximum}, got ${v}`);
      else if (json.multipleOf !== undefined && !Number.isInteger(v / json.multipleOf)) errors.push(`${p}: must be a multiple of ${json.multipleOf}, got ${v}`);
      return v;
    }),
    opts,
  );
}

function booleanSchema(arg) {
  const opts = options(arg);
  return withDefault(
    new Schema(build({ type: "boolean" }, opts, []), (v, path, errors) => {
      if (typeof v !== "boolean") errors.push(`${where(path)}: expected true or false, got ${describeValue(v)}`);
      return v;
    }),
    opts,
  );
}

function enumSchema(values, arg) {
  if (!Array.isArray(values) || values.length === 0 || !values.every((v) => ["string", "number", "boolean"].includes(typeof v)))
    throw new TypeError("s.enum takes a non-empty array of strings, numbers or booleans");
  const opts = options(arg);
  const list = values.map((v) => JSON.stringify(v)).join(", ");
  return withDefault(
    new Schema(build({ enum: [...values] }, opts, []), (v, path, errors) => {
      if (!values.includes(v)) errors.push(`${where(path)}: expected one of ${list}, got ${describeValue(v)}`);
      return v;
    }),
    opts,
  );
}

function arraySchema(items, arg) {
  if (!(items instanceof Schema)) throw new TypeError("s.array takes the schema of its items, made with s.*");
  const opts = options(arg);
  const json = build({ type: "array", items: items.json }, opts, ["minItems", "maxItems", "uniqueItems"]);
  return withDefault(
    new Schema(json, (v, path, errors) => {
      const p = where(path);
      if (!Array.isArray(v)) {
        errors.push(`${p}: expected an array, got ${describeValue(v)}`);
        return v;
      }
      if (json.minItems !== undefined && v.length < json.minItems) errors.push(`${p}: expected at least ${json.minItems} items, got ${v.length}`);
      if (json.maxItems !== undefined && v.length > json.maxItems) errors.push(`${p}: expected at most ${json.maxItems} items, got ${v.length}`);
      const out = v.map((item, i) => items.check(item, `${path || "input"}[${i}]`, errors));
      if (json.uniqueItems) {
        const seen = new Set(v.map((item) => JSON.stringify(item)));
        if (seen.size !== v.length) errors.push(`${p}: items must be unique`);
      }
      return out;
    }),
    opts,
  );
}

function objectSchema(properties, arg) {
  if (!isPlainObject(properties) || !Object.values(properties).every((p) => p instanceof Schema))
    throw new TypeError("s.object takes an object of field schemas made with s.*, like s.object({ name: s.string() })");
  const opts = options(arg);
  // Unknown fields are refused unless the author opts in with { additionalProperties: true }.
  const open = opts.additionalProperties === true;
  const json = build({ type: "object", properties: {}, required: [] }, { ...opts, additionalProperties: open }, ["additionalProperties"]);
  for (const [key, field] of Object.entries(properties)) {
    json.properties[key] = field.json;
    if (!field.isOptional && !field.hasDefault) json.required.push(key);
  }
  if (json.required.length === 0) delete json.required;
  return withDefault(
    new Schema(json, (v, path, errors) => {
      if (!isPlainObject(v)) {
        errors.push(`${where(path)}: expected an object, got ${describeValue(v)}`);
        return v;
      }
      const out = {};
      for (const [key, field] of Object.entries(properties)) {
        const p = join(path, key);
        if (Object.hasOwn(v, key) && v[key] !== undefined) out[key] = field.check(v[key], p, errors);
        else if (field.hasDefault) out[key] = structuredClone(field.defaultValue);
        else if (!field.isOptional) errors.push(`${p}: required`);
      }
      for (const key of Object.keys(v)) {
        if (Object.hasOwn(properties, key)) continue;
        if (open) out[key] = v[key];
        else errors.push(`${join(path, key)}: unknown field (known: ${Object.keys(properties).join(", ") || "none"})`);
      }
      return out;
    }),
    opts,
  );
}

function optionalSchema(schema) {
  if (!(schema instanceof Schema)) throw new TypeError("s.optional takes a schema made with s.*");
  return new Schema(schema.json, schema.check, { ...schema, isOptional: true });
}

function nullableSchema(schema) {
  if (!(schema instanceof Schema)) throw new TypeError("s.nullable takes a schema made with s.*");
  const { description, default: dflt, ...inner } = schema.json;
  const json = { anyOf: [inner, { type: "null" }] };
  if (description !== undefined) json.description = description;
  if (dflt !== undefined) json.default = dflt;
  return new Schema(json, (v, path, errors) => (v === null ? null : schema.check(v, path, errors)), schema);
}

/**
 * The schema builder. Each takes an optional description string or an options object
 * (`description`, `default`, and the kind's JSON Schema keywords):
 * `s.string`, `s.number`, `s.integer`, `s.boolean`, `s.enum(values)`, `s.array(items)`,
 * `s.object(fields)`, `s.optional(schema)` (the field may be left out), `s.nullable(schema)`.
 */
export const s = Object.freeze({
  string: stringSchema,
  number: (arg) => numberSchema("number", arg),
  integer: (arg) => numberSchema("integer", arg),
  boolean: booleanSchema,
  enum: enumSchema,
  array: arraySchema,
  object: objectSchema,
  optional: optionalSchema,
  nullable: nullableSchema,
});

/** The root JSON Schema text of a tool's input or output. */
function rootSchemaText(schema) {
  return JSON.stringify({ $schema: SCHEMA_DIALECT, ...schema.json });
}

// ---------------------------------------------------------------------------------------
// Tools and the skill

const TOOL_KEYS = ["name", "description", "input", "output", "readOnly", "destructive", "idempotent", "openWorld", "examples", "run"];

/**
 * Describe one tool. `input` is an `s.object(...)`; `output` an `s.object(...)` or left
 * out (then any JSON value); `run(input)` returns the output or a promise of it. Checked
 * now: a mistake fails `skillhost build` with a message, not the first call.
 */
export function tool(def) {
  if (!isPlainObject(def)) throw new TypeError("tool() takes an object: { name, description, input, run, ... }");
  const unknown = Object.keys(def).filter((k) => !TOOL_KEYS.includes(k));
  const label = `tool ${JSON.stringify(def.name)}`;
  if (unknown.length) throw new TypeError(`${label}: unknown field ${unknown.join(", ")} (known: ${TOOL_KEYS.join(", ")})`);
  if (typeof def.name !== "string" || !TOOL_NAME.test(def.name) || def.name.length > 64)
    throw new TypeError(`${label}: a tool name is lowercase letters, digits, '_' and '-', starting with a letter, at most 64 characters`);
  if (typeof def.description !== "string" || !def.description.trim()) throw new TypeError(`${label}: needs a description, written for an agent choosing a tool`);
  const input = def.input ?? s.object({});
  if (!(input instanceof Schema) || input.json.type !== "object") throw new TypeError(`${label}: input must be an s.object(...) schema`);
  if (def.output !== undefined && (!(def.output instanceof Schema) || def.output.json.type !== "object"))
    throw new TypeError(`${label}: output must be an s.object(...) schema, or left out`);
  if (typeof def.run !== "function") throw new TypeError(`${label}: needs run(input), the function that does the work`);
  for (const flag of ["readOnly", "destructive", "idempotent", "openWorld"]) {
    if (def[flag] !== undefined && typeof def[flag] !== "boolean") throw new TypeError(`${label}: ${flag} must be true or false`);
  }
  const examples = def.examples ?? [];
  if (!Array.isArray(examples)) throw new TypeError(`${label}: examples must be an array of example inputs`);
  examples.forEach((example, i) => {
    try {
      input.parse(example);
    } catch (e) {
      throw new TypeError(`${label}: examples[${i}] is not a valid input: ${e.message}`);
    }
  });
  return Object.freeze({
    name: def.name,
    input,
    output: def.output,
    run: def.run,
    descriptor: {
      name: def.name,
      description: def.description,
      inputSchema: rootSchemaText(input),
      outputSchema: def.output === undefined ? undefined : rootSchemaText(def.output),
      annotations: {
        readOnly: def.readOnly ?? false,
        destructive: def.destructive ?? false,
        idempotent: def.idempotent ?? false,
        openWorld: def.openWorld ?? false,
      },
      examples: examples.map((e) => JSON.stringify(e)),
    },
  });
}

/** Run one tool on the input text: the output text, or a thrown `CallError`. */
function runTool(t, inputText) {
  let input;
  try {
    input = JSON.parse(inputText);
  } catch (e) {
    throw new CallError("invalid-input", `the input is not valid JSON: ${e.message}`);
  }
  try {
    input = t.input.parse(input);
  } catch (e) {
    throw toCallError(e);
  }
  const finish = (output) => {
    if (t.output !== undefined) {
      const errors = [];
      t.output.check(output, "output", errors);
      if (errors.length) throw new CallError("failed", `tool \`${t.name}\` returned an output that does not match its output schema: ${errors.slice(0, 5).join("; ")}`);
    }
    const text = JSON.stringify(output === undefined ? null : output);
    if (text === undefined) throw new CallError("failed", `tool \`${t.name}\` returned something that is not JSON (${typeof output})`);
    return text;
  };
  let result;
  try {
    result = t.run(input);
  } catch (e) {
    throw toCallError(e);
  }
  if (result && typeof result.then === "function") {
    return Promise.resolve(result).then(
      (output) => {
        try {
          return finish(output);
        } catch (e) {
          throw toCallError(e);
        }
      },
      (e) => {
        throw toCallError(e);
      },
    );
  }
  try {
    return finish(result);
  } catch (e) {
    throw toCallError(e);
  }
}

/**
 * The skill made of `tools`: export it as `guest`. `tools()` describes them; `call(name,
 * input)` validates the input, runs the tool and returns its JSON output, or throws the
 * world's `call-error` (`{tag, val}`) — never anything else.
 */
export function skill(...tools) {
  const byName = new Map();
  for (const t of tools.flat()) {
    if (!t || !t.descriptor) throw new TypeError("skill() takes tools made with tool({...})");
    if (byName.has(t.name)) throw new TypeError(`two tools are named \`${t.name}\`; tool names are unique within a skill`);
    byName.set(t.name, t);
  }
  if (byName.size === 0) throw new TypeError("skill() needs at least one tool");
  const descriptors = [...byName.values()].map((t) => t.descriptor);
  return {
    tools() {
      return descriptors.map((d) => ({ ...d, annotations: { ...d.annotations }, examples: [...d.examples] }));
    },
    call(name, input) {
      const t = byName.get(name);
      if (!t) throw new CallError("unknown-tool", `no tool \`${name}\` in this skill (tools: ${[...byName.keys()].join(", ")})`);
      return runTool(t, input);
    },
  };
}

// ---------------------------------------------------------------------------------------
// Host services

function text(parts) {
  return parts.map((p) => (typeof p === "string" ? p : p instanceof Error ? messageOf(p) : safeJson(p))).join(" ");
}

function safeJson(value) {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** One line to the host log per call: `log.info("fetched", count, "rows")`. Never throws. */
export const log = Object.freeze(
  Object.fromEntries(
    ["trace", "debug", "info", "warn", "error"].map((level) => [
      level,
      (...parts) => {
        try {
          host.log(level, text(parts));
        } catch {
          // Logging never fails a call.
        }
      },
    ]),
  ),
);

const toU64 = (n) => BigInt(Math.max(0, Math.floor(Number(n) || 0)));

/** Report progress: `done` of `total` units (leave `total` out when unknown), a message. */
export function progress(done, total, message) {
  try {
    host.progress(toU64(done), total == null ? undefined : toU64(total), message == null ? undefined : String(message));
  } catch {
    // Progress never fails a call.
  }
}

// ---------------------------------------------------------------------------------------
// HTTP

const REFUSAL_BODY = "skillhost refused a request";

// Whether this component links `wasi:http`. `skillhost build` writes this line with
// `false` for a skill whose skill.toml asks for no hosts: StarlingMonkey then still has a
// `fetch`, but calling it traps, so the helpers below refuse before calling it.
const NETWORK_LINKED = true;

/**
 * `fetch()` with the host's refusals as `ToolError`s. In the component a request with no
 * response (refused by the skill's network grant, or the host unreachable: StarlingMonkey
 * reports both as the same TypeError) becomes `ToolError.failed` naming the host, and the
 * host appends its refusal, if it was one, to the call's error; a skill built without
 * network gets `ToolError.denied` (its `fetch` would trap: call these, not `fetch`).
 */
async function request(url, init = {}) {
  const target = new URL(url);
  const origin = `${target.protocol}//${target.host}`;
  if (!NETWORK_LINKED || typeof globalThis.fetch !== "function")
    throw ToolError.denied(`no network: this skill may not reach ${origin}; add "${origin}" to \`[network] allow\` in skill.toml, build again and approve the skill`);
  let response;
  try {
    response = await globalThis.fetch(target.href, init);
  } catch (e) {
    throw ToolError.failed(
      `${init.method ?? "GET"} ${target.href}: no response from ${target.host} (${messageOf(e)}): the skill's network grant refused it, or the host is unreachable; to allow a refused host add "${origin}" to \`[network] allow\` in skill.toml and approve the skill again`,
    );
  }
  if (response.status === 403 && response.headers.get("content-type")?.startsWith("text/plain")) {
    const body = await response.clone().text();
    if (body.startsWith(REFUSAL_BODY)) throw ToolError.denied(`${target.host}: ${body.trim()}`);
  }
  return response;
}

/** `http.get(url, init)`, `http.post(url, body, init)` (an object body is sent as JSON). */
export const http = Object.freeze({
  fetch: request,
  get: (url, init = {}) => request(url, { ...init, method: "GET" }),
  post: (url, body, init = {}) => {
    const json = body !== undefined && !(typeof body === "string" || body instanceof Uint8Array || body instanceof ArrayBuffer || body instanceof URLSearchParams);
    const headers = new Headers(init.headers ?? {});
    if (json && !headers.has("content-type")) headers.set("content-type", "application/json");
    return request(url, { ...init, method: "POST", headers, body: json ? JSON.stringify(body) : body });
  },
});
