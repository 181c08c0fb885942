#!/usr/bin/env node
// The error-code reference, docs/errors.md, generated from the code: every code src/ can answer
// with, found through the TypeScript compiler API, with its HTTP status, merged with the
// hand-written meaning and advice of docs/errors.yaml.
//
//   npm run docs:errors            rewrite docs/errors.md
//   npm run docs:errors -- --check exit 1 when docs/errors.md is stale or a code has no entry
//   npm run docs:errors -- --where print each code with the places that produce it
//
// Codes are found in two shapes:
//   - `new XxxError(code, …)` of a WardenError subclass. The code and status arguments are
//     evaluated: literals, consts, literal-union types, parameter defaults, object members, `??`
//     and `?:`, through the subclass constructors' `super(…)` calls down to WardenError, and
//     through the call sites of a helper whose parameter the code is (`fail(code, …)`).
//   - an object literal with a kebab-case `code` (and maybe a numeric `status`): the problems the
//     HTTP layer answers itself, and the findings of journal verification and lifecycle checks.
// A thrown code the evaluator cannot resolve fails the run, unless the site passes on the code of
// an error thrown elsewhere (PASS_THROUGH below).
import ts from "typescript";
import { readFileSync, writeFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..");
const CATALOG = join(REPO, "docs", "errors.yaml");
const REFERENCE = join(REPO, "docs", "errors.md");
const CODE_RE = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;
/** In an object literal, a bare word is a code only beside a status (`{ status: 409, code: "…" }`). */
const OBJECT_CODE_RE = /^[a-z][a-z0-9]*(-[a-z0-9]+)+$/;

/**
 * Sites whose code is that of another error, caught and passed on (re-thrown with more context,
 * or rebuilt from a worker's reply): they add no code of their own. Keyed by file and the code
 * argument's text.
 */
const PASS_THROUGH = [
  { file: "src/cli/commands/push.ts", arg: "error.code", why: "re-throws the node's error with how to resume" },
  { file: "src/cli/commands/journal.ts", arg: "error.code", why: "re-throws a file's error naming the file" },
  { file: "src/backends/embedded/claims/claim-write-protocol.ts", arg: "e.code", why: "rebuilds the claim writer thread's error" },
  { file: "src/delivery/manifest.ts", arg: "error.code", why: "re-throws a path's error naming the component" },
  { file: "src/client/transport.ts", arg: "reply.status", why: "the client's error for the node's problem answer (or its unreadable reply)" },
  { file: "src/console/api.ts", arg: "response.status", why: "the console's error for the node's problem answer to its session calls" },
];

/** `*_CODES` tables whose strings are not codes. */
const NOT_CODE_TABLES = {};

/**
 * Codes made of a family's name and a number, listed in the reference's introduction rather than
 * one row each. Keyed by file and the code's text.
 */
const FAMILIES = [
  { file: "src/client/transport.ts", text: "`http-${response.status}`", why: "the client's code for an error reply without a problem document" },
];

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else if (name.endsWith(".ts") && !name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

const UNKNOWN = (why) => ({ unknown: why });
const isObj = (v) => typeof v === "object" && v !== null && "props" in v;
const isParam = (v) => typeof v === "object" && v !== null && "param" in v;
const isUnknown = (v) => typeof v === "object" && v !== null && "unknown" in v;
const MAX_FORKS = 256;

/** Every combination of the alternatives of each binding (one env per combination). */
function fork(bindings) {
  let envs = [new Map()];
  for (const [symbol, alts] of bindings) {
    const next = [];
    for (const env of envs) for (const alt of alts) next.push(new Map(env).set(symbol, [alt]));
    if (next.length > MAX_FORKS) return [new Map(bindings)];
    envs = next;
  }
  return envs;
}

export function collectCodes() {
  const config = ts.getParsedCommandLineOfConfigFile(join(REPO, "tsconfig.json"), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  const files = walk(join(REPO, "src"));
  const program = ts.createProgram(files, config.options);
  const checker = program.getTypeChecker();
  const sources = program.getSourceFiles().filter((f) => f.fileName.startsWith(join(REPO, "src") + "/"));
  const where = (node) => {
    const f = node.getSourceFile();
    return `${relative(REPO, f.fileName)}:${f.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
  };
  const resolve = (symbol) => (symbol !== undefined && symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol);
  const declOf = (expr) => resolve(checker.getSymbolAtLocation(expr))?.valueDeclaration;

  /**
   * The class a `new` constructs: through its binding, or, for a class bound by destructuring
   * (`const { ValidationError } = await import(…)`), through the type of the expression.
   */
  const classOf = (expr) => {
    const decl = declOf(expr);
    if (decl !== undefined && ts.isClassDeclaration(decl)) return decl;
    const fromType = checker.getTypeAtLocation(expr).getSymbol()?.valueDeclaration;
    return fromType !== undefined && ts.isClassDeclaration(fromType) ? fromType : decl;
  };

  // The WardenError classes.
  const base = sources.find((f) => f.fileName.endsWith("src/core/errors.ts")).statements.find((s) => ts.isClassDeclaration(s) && s.name?.text === "WardenError");
  const errorClasses = new Set([base]);
  const parentOf = (cls) => {
    const ext = cls.heritageClauses?.find((h) => h.token === ts.SyntaxKind.ExtendsKeyword)?.types[0];
    const decl = ext === undefined ? undefined : declOf(ext.expression);
    return decl !== undefined && ts.isClassDeclaration(decl) ? decl : undefined;
  };
  const isErrorClass = (cls) => {
    for (let c = cls; c !== undefined; c = parentOf(c)) if (c === base) return true;
    return false;
  };

  // Call sites of every function in src/, to bind a helper's parameters.
  const callsOf = new Map();
  const functionOf = (decl) => {
    if (decl === undefined) return undefined;
    if (ts.isVariableDeclaration(decl) && decl.initializer !== undefined && ts.isFunctionLike(decl.initializer)) return decl.initializer;
    return ts.isFunctionLike(decl) ? decl : undefined;
  };
  const news = [];
  const objects = [];
  const tables = [];
  const aliasTables = [];
  const visit = (node) => {
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && /_CODES$/.test(node.name.text) && !(node.name.text in NOT_CODE_TABLES)) tables.push(node);
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.name.text === "CODE_ALIASES") aliasTables.push(node);
    if (ts.isCallExpression(node) || ts.isNewExpression(node)) {
      const decl = ts.isNewExpression(node) ? classOf(node.expression) : declOf(node.expression);
      const fn = ts.isNewExpression(node) ? undefined : functionOf(decl);
      if (fn !== undefined) callsOf.set(fn, [...(callsOf.get(fn) ?? []), node]);
      if (ts.isNewExpression(node) && decl !== undefined && ts.isClassDeclaration(decl) && isErrorClass(decl)) news.push({ node, cls: decl });
    }
    if (ts.isObjectLiteralExpression(node)) objects.push(node);
    ts.forEachChild(node, visit);
  };
  for (const f of sources) visit(f);

  const enclosingFunction = (node) => {
    for (let n = node.parent; n !== undefined; n = n.parent) if (ts.isFunctionLike(n)) return n;
    return undefined;
  };

  /** The alternatives an expression can have: strings, numbers, undefined, objects, params, unknowns. */
  const evaluate = (expr, env, depth = 0) => {
    if (depth > 40) return [UNKNOWN("too deep")];
    const ev = (e) => evaluate(e, env, depth + 1);
    if (ts.isParenthesizedExpression(expr) || ts.isAsExpression(expr) || ts.isNonNullExpression(expr) || ts.isSatisfiesExpression(expr)) return ev(expr.expression);
    if (ts.isStringLiteral(expr) || ts.isNoSubstitutionTemplateLiteral(expr)) return [expr.text];
    if (ts.isNumericLiteral(expr)) return [Number(expr.text)];
    if (ts.isIdentifier(expr) && expr.text === "undefined") return [undefined];
    if (ts.isIdentifier(expr)) return valueOfSymbol(checker.getSymbolAtLocation(expr), expr, env, depth);
    if (ts.isPropertyAccessExpression(expr)) {
      const out = [];
      for (const o of ev(expr.expression)) out.push(...member(o, [expr.name.text], expr));
      return dedupe(out);
    }
    if (ts.isElementAccessExpression(expr)) {
      const keys = ev(expr.argumentExpression);
      const out = [];
      for (const o of ev(expr.expression)) {
        if (isObj(o) && !keys.every((k) => typeof k === "string")) out.push(...[...o.props.values()].flat(), undefined);
        else out.push(...member(o, keys, expr));
      }
      return dedupe(out);
    }
    if (ts.isObjectLiteralExpression(expr)) {
      let objs = [{ props: new Map(), open: false }];
      for (const p of expr.properties) {
        if (ts.isPropertyAssignment(p) && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))) {
          const v = ev(p.initializer);
          objs = objs.map((o) => ({ props: new Map(o.props).set(p.name.text, v), open: o.open }));
        } else if (ts.isShorthandPropertyAssignment(p)) {
          const v = valueOfSymbol(checker.getShorthandAssignmentValueSymbol(p), p.name, env, depth);
          objs = objs.map((o) => ({ props: new Map(o.props).set(p.name.text, v), open: o.open }));
        } else if (ts.isSpreadAssignment(p)) {
          const next = [];
          for (const o of objs) {
            for (const s of ev(p.expression)) {
              if (isObj(s)) next.push({ props: new Map([...o.props, ...s.props]), open: o.open || s.open });
              else if (s === undefined) next.push(o);
              else next.push({ props: o.props, open: true });
            }
          }
          objs = next.slice(0, MAX_FORKS);
        } else objs = objs.map((o) => ({ props: o.props, open: true }));
      }
      return objs;
    }
    if (ts.isBinaryExpression(expr) && (expr.operatorToken.kind === ts.SyntaxKind.QuestionQuestionToken || expr.operatorToken.kind === ts.SyntaxKind.BarBarToken)) {
      const out = [];
      for (const l of ev(expr.left)) {
        if (l === undefined) out.push(...ev(expr.right));
        else if (isUnknown(l) || isParam(l)) out.push(l, ...ev(expr.right));
        else out.push(l);
      }
      return dedupe(out);
    }
    if (ts.isConditionalExpression(expr)) {
      const test = decide(expr.condition, env, depth);
      if (test === true) return ev(expr.whenTrue);
      if (test === false) return ev(expr.whenFalse);
      return dedupe([...ev(expr.whenTrue), ...ev(expr.whenFalse)]);
    }
    if (ts.isCallExpression(expr)) {
      // A helper that builds an object or a code: the union of what it returns.
      const fn = functionOf(declOf(expr.expression));
      if (fn !== undefined && fn.body !== undefined && fn.getSourceFile().fileName.startsWith(join(REPO, "src"))) {
        const inner = bind(fn, expr, env, depth);
        const out = [];
        for (const innerEnv of inner) for (const r of returnsOf(fn)) out.push(...evaluate(r, innerEnv, depth + 1));
        if (out.length > 0) return dedupe(out);
      }
    }
    return fromType(expr);
  };

  const valueOfSymbol = (raw, expr, env, depth) => {
    const symbol = resolve(raw);
    if (symbol !== undefined && env.has(symbol)) return env.get(symbol);
    const decl = symbol?.valueDeclaration;
    if (decl !== undefined && ts.isParameter(decl)) return [{ param: symbol, decl }];
    if (decl !== undefined && ts.isVariableDeclaration(decl) && decl.initializer !== undefined && ts.getCombinedNodeFlags(decl) & ts.NodeFlags.Const) {
      return evaluate(decl.initializer, env, depth + 1);
    }
    return fromType(expr);
  };

  /** Member `keys` of one alternative; an optional chain on an absent object is undefined. */
  const member = (o, keys, expr) => {
    if (o === undefined) return ts.isOptionalChain(expr) ? [undefined] : [];
    if (!isObj(o)) return fromType(expr);
    return keys.flatMap((k) => (o.props.has(k) ? o.props.get(k) : o.open ? fromType(expr) : [undefined]));
  };

  /** true or false when the condition is decided by what is known; undefined otherwise. */
  const decide = (cond, env, depth) => {
    const c = ts.isParenthesizedExpression(cond) ? cond.expression : cond;
    if (ts.isBinaryExpression(c)) {
      const op = c.operatorToken.kind;
      const eq = op === ts.SyntaxKind.EqualsEqualsEqualsToken;
      if (eq || op === ts.SyntaxKind.ExclamationEqualsEqualsToken) {
        const l = evaluate(c.left, env, depth + 1);
        const r = evaluate(c.right, env, depth + 1);
        const known = (vs) => vs.length === 1 && (typeof vs[0] === "string" || typeof vs[0] === "number" || vs[0] === undefined);
        if (known(l) && known(r)) return (l[0] === r[0]) === eq;
      }
    }
    return undefined;
  };

  const returnsOf = (fn) => {
    if (!ts.isBlock(fn.body)) return [fn.body];
    const out = [];
    const visitReturns = (n) => {
      if (ts.isFunctionLike(n)) return;
      if (ts.isReturnStatement(n) && n.expression !== undefined) out.push(n.expression);
      ts.forEachChild(n, visitReturns);
    };
    ts.forEachChild(fn.body, visitReturns);
    return out;
  };

  /** Envs binding `fn`'s parameters to the arguments of one call (evaluated in `env`). */
  const bind = (fn, call, env, depth) => {
    const bindings = new Map();
    fn.parameters.forEach((p, i) => {
      if (!ts.isIdentifier(p.name)) return;
      const symbol = checker.getSymbolAtLocation(p.name);
      const arg = call.arguments?.[i];
      if (p.dotDotDotToken !== undefined || (arg !== undefined && ts.isSpreadElement(arg))) bindings.set(symbol, [UNKNOWN("rest")]);
      else if (arg !== undefined) {
        const v = evaluate(arg, env, depth + 1);
        bindings.set(symbol, p.initializer === undefined ? v : dedupe(v.flatMap((x) => (x === undefined ? evaluate(p.initializer, env, depth + 1) : [x]))));
      } else bindings.set(symbol, p.initializer === undefined ? [undefined] : evaluate(p.initializer, env, depth + 1));
    });
    return fork(bindings);
  };

  const fromType = (expr) => {
    const type = checker.getTypeAtLocation(expr);
    const parts = type.isUnion() ? type.types : [type];
    const out = [];
    for (const t of parts) {
      if (t.isStringLiteral() || t.isNumberLiteral()) out.push(t.value);
      else if (t.flags & ts.TypeFlags.Undefined) out.push(undefined);
      else return [UNKNOWN(`${expr.getText()}: ${checker.typeToString(type)}`)];
    }
    return out;
  };

  const dedupe = (alts) => {
    const seen = new Set();
    return alts.filter((a) => {
      const k = typeof a === "object" && a !== null ? a : `${typeof a}:${a}`;
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    });
  };

  /** (code, status) pairs a `new Cls(args)` makes, args evaluated in env. */
  const construct = (cls, args, env, depth) => {
    if (cls === base) {
      const codes = args[0] === undefined ? [UNKNOWN("no code")] : evaluate(args[0], env, depth + 1);
      const out = [];
      for (const code of codes) {
        const statuses = args[2] === undefined ? [500] : evaluate(args[2], env, depth + 1).map((s) => (s === undefined ? 500 : s));
        for (const status of statuses) out.push({ code, status });
      }
      return out;
    }
    const ctor = cls.members.find(ts.isConstructorDeclaration);
    if (ctor === undefined) return construct(parentOf(cls), args, env, depth);
    const superCall = findSuper(ctor);
    const out = [];
    for (const inner of bind(ctor, { arguments: args }, env, depth)) out.push(...construct(parentOf(cls), superCall.arguments, inner, depth + 1));
    return out;
  };
  const findSuper = (ctor) => {
    let found;
    const look = (n) => {
      if (found === undefined && ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.SuperKeyword) found = n;
      else ts.forEachChild(n, look);
    };
    look(ctor.body);
    return found;
  };

  /** Envs of the function a site is in, from its call sites, when the site needs them. */
  const contexts = new Map();
  const contextsOf = (fn, depth) => {
    if (contexts.has(fn)) return contexts.get(fn);
    contexts.set(fn, []); // a recursion finds no context
    const out = [];
    for (const call of callsOf.get(fn) ?? []) {
      const outer = enclosingFunction(call);
      const known = needsParams(call.arguments, new Map()) && outer !== undefined && depth < 6 ? contextsOf(outer, depth + 1) : [];
      // A callback (passed on, never called by name here) has no known context: its parameters stay open.
      for (const env of known.length === 0 ? [new Map()] : known) out.push(...bind(fn, call, env, 0));
    }
    contexts.set(fn, out);
    return out;
  };
  const needsParams = (exprs, env) => exprs.some((e) => evaluate(e, env).some(isParam));

  /** Resolves pairs whose code or status is a parameter through the function's call sites. */
  const resolveSite = (site, make) => {
    const first = make(new Map());
    if (!first.some((p) => isParam(p.code) || isParam(p.status))) return first;
    const fn = enclosingFunction(site);
    const envs = fn === undefined ? [] : contextsOf(fn, 0);
    if (envs.length === 0) return first;
    return envs.flatMap((env) => make(env));
  };

  const found = new Map(); // code → { statuses: Set, places: Set }
  const unresolved = [];
  const note = (code, status, place) => {
    const entry = found.get(code) ?? { statuses: new Set(), places: new Set() };
    if (status !== undefined) entry.statuses.add(status);
    entry.places.add(place);
    found.set(code, entry);
  };

  /** The codes an expression's type allows, when it is a union of kebab-case string literals. */
  const typedCodes = (expr) => {
    const type = checker.getTypeAtLocation(expr);
    const parts = type.isUnion() ? type.types : [type];
    if (!parts.every((t) => t.isStringLiteral() && CODE_RE.test(t.value))) return undefined;
    return parts.map((t) => t.value);
  };

  const passed = new Set();
  for (const { node, cls } of news) {
    const place = where(node);
    const file = place.split(":")[0];
    const argText = node.arguments?.[0]?.getText();
    const passing = PASS_THROUGH.find((p) => p.file === file && p.arg === argText);
    if (passing !== undefined) {
      passed.add(passing);
      continue;
    }
    for (const { code, status } of resolveSite(node, (env) => construct(cls, node.arguments ?? [], env, 0))) {
      if (typeof code !== "string" || !CODE_RE.test(code)) unresolved.push(`${place}: code ${describe(code)} of new ${cls.name.text}(${argText}, …)`);
      else if (typeof status !== "number") unresolved.push(`${place}: status ${describe(status)} of ${code}`);
      else note(code, status, place);
    }
  }
  for (const obj of objects) {
    const prop = (name) => obj.properties.find((p) => ts.isPropertyAssignment(p) && ts.isIdentifier(p.name) && p.name.text === name);
    const code = prop("code");
    const status = prop("status");
    const codeRe = status === undefined ? OBJECT_CODE_RE : CODE_RE;
    if (code === undefined) continue;
    const statusOf = status !== undefined && ts.isNumericLiteral(status.initializer) ? Number(status.initializer.text) : undefined;
    if (ts.isStringLiteral(code.initializer)) {
      if (codeRe.test(code.initializer.text)) note(code.initializer.text, statusOf, where(obj));
      continue;
    }
    // A code computed from parts (`<prefix>-<rule>`) is listed through its type: a union of the
    // literal codes it can be. A computed code typed only as `string` beside a status is unresolved.
    if (FAMILIES.some((f) => f.file === where(obj).split(":")[0] && f.text === code.initializer.getText())) continue;
    const literals = typedCodes(code.initializer);
    if (literals !== undefined) for (const c of literals) note(c, statusOf, where(obj));
    else if (status !== undefined && ts.isTemplateExpression(code.initializer)) unresolved.push(`${where(obj)}: code ${code.initializer.getText()} is not typed as a union of codes`);
  }
  for (const p of PASS_THROUGH) if (!passed.has(p)) unresolved.push(`PASS_THROUGH names no site: ${p.file} ${p.arg}`);
  // Tables of codes: `[code, …]`, `{ code: status }` or `{ key: code }`.
  for (const table of tables) {
    let init = table.initializer;
    while (init !== undefined && (ts.isAsExpression(init) || ts.isSatisfiesExpression(init) || ts.isParenthesizedExpression(init))) init = init.expression;
    if (init === undefined) continue;
    if (ts.isArrayLiteralExpression(init)) {
      for (const e of init.elements) if (ts.isStringLiteral(e) && CODE_RE.test(e.text)) note(e.text, undefined, where(e));
    } else if (ts.isObjectLiteralExpression(init)) {
      for (const p of init.properties) {
        if (!ts.isPropertyAssignment(p)) continue;
        const key = ts.isIdentifier(p.name) || ts.isStringLiteral(p.name) ? p.name.text : undefined;
        if (key !== undefined && ts.isNumericLiteral(p.initializer) && CODE_RE.test(key)) note(key, Number(p.initializer.text), where(p));
        else if (ts.isStringLiteral(p.initializer) && OBJECT_CODE_RE.test(p.initializer.text)) note(p.initializer.text, undefined, where(p));
      }
    }
  }
  // Earlier names of codes (`{ earlier: code }`): answered as the code they name, so listed with
  // its statuses; an alias of a code nothing produces is unresolved.
  for (const table of aliasTables) {
    let init = table.initializer;
    while (init !== undefined && (ts.isAsExpression(init) || ts.isSatisfiesExpression(init) || ts.isParenthesizedExpression(init))) init = init.expression;
    for (const p of init !== undefined && ts.isObjectLiteralExpression(init) ? init.properties : []) {
      if (!ts.isPropertyAssignment(p) || !ts.isStringLiteral(p.initializer)) continue;
      const alias = ts.isIdentifier(p.name) || ts.isStringLiteral(p.name) ? p.name.text : undefined;
      const target = found.get(p.initializer.text);
      if (alias === undefined || target === undefined) unresolved.push(`${where(p)}: alias of a code nothing produces`);
      else for (const status of target.statuses.size === 0 ? [undefined] : target.statuses) note(alias, status, where(p));
    }
  }
  return { codes: found, unresolved };
}

function describe(v) {
  if (isParam(v)) return `(parameter ${v.decl.getText()})`;
  if (isUnknown(v)) return `(unknown: ${v.unknown})`;
  if (isObj(v)) return "(an object)";
  return JSON.stringify(v) ?? "undefined";
}

export function readCatalog() {
  return parse(readFileSync(CATALOG, "utf8")) ?? {};
}

/** The reference's Markdown; `problems` lists what keeps it from being complete. */
export function renderReference(codes, catalog) {
  const problems = [];
  const rows = [];
  for (const code of [...codes.keys()].sort()) {
    const entry = catalog[code];
    if (entry === undefined || typeof entry.means !== "string" || typeof entry.do !== "string") {
      problems.push(`${code}: no entry (means, do) in docs/errors.yaml`);
      continue;
    }
    const statuses = [...codes.get(code).statuses].sort((a, b) => a - b);
    const status = statuses.length === 0 ? "—" : statuses.join(", ");
    rows.push(`| \`${code}\` | ${status} | ${cell(entry.means)} | ${cell(entry.do)} |`);
  }
  for (const code of Object.keys(catalog).sort()) if (!codes.has(code)) problems.push(`${code}: in docs/errors.yaml, but nothing in src/ produces it`);
  const text = `# Error codes

<!-- Generated by \`npm run docs:errors\` (scripts/error-codes.mjs) from src/ and docs/errors.yaml. Do not edit. -->

Every failure warden reports carries a stable, kebab-case \`code\`: in the \`code\` member of an
HTTP \`application/problem+json\` answer, at the end of the CLI's one line (\`warden: <message>
(<code>)\`), and as \`code\` of a \`WardenError\` from the library. Codes are never renamed. The
status is the HTTP status the node answers with; \`—\` marks a code that is not an HTTP answer (a
finding of \`warden journal verify\` or of a journal check, or an error of the CLI or client
itself). A code answered with more than one status lists each. Besides these, a usage error of
the CLI carries commander's code in kebab case (\`unknown-option\`, \`missing-argument\`, …),
another file-system error its errno in lower case (\`enospc\`), an error reply of the node
without a problem document (from a proxy) \`http-<status>\` in the client, and anything else
\`cli-error\`.

To add a code: throw it in \`src/\`, add its entry (\`means\`, \`do\`) to \`docs/errors.yaml\`, and
run \`npm run docs:errors\`. \`test/docs/error-codes.test.ts\` fails while a code is missing here.

| code | status | what it means | what to do |
|---|---|---|---|
${rows.join("\n")}
`;
  return { text, problems };
}

function cell(s) {
  return s.trim().replace(/\s+/g, " ").replace(/\|/g, "\\|");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const { codes, unresolved } = collectCodes();
  if (args.includes("--where")) {
    for (const [code, { statuses, places }] of [...codes].sort()) console.log(`${code}\t${[...statuses].join(",") || "-"}\t${[...places].join(" ")}`);
    process.exit(0);
  }
  const { text, problems } = renderReference(codes, readCatalog());
  const all = [...new Set(unresolved)].map((u) => `unresolved: ${u}`).concat(problems);
  for (const p of all) console.error(p);
  if (args.includes("--check")) {
    const stale = readFileSync(REFERENCE, "utf8") !== text;
    if (stale) console.error("docs/errors.md is stale: run npm run docs:errors");
    process.exit(all.length > 0 || stale ? 1 : 0);
  }
  if (all.length > 0) process.exit(1);
  writeFileSync(REFERENCE, text);
  console.log(`docs/errors.md: ${codes.size} codes`);
}
