// kijito-pull for GitHub Copilot CLI: the way in for new Kijito mail while a session is open.
//
// `kijito-pull install copilot --user` copies this file to ~/.copilot/extensions/kijito-pull/extension.mjs.
// Copilot CLI loads extensions only with `--experimental` (it then keeps "experimental": true in
// ~/.copilot/settings.json); without it this file does nothing and the hooks still deliver at session start
// and before a stop.
//
// It joins the session and listens on a Unix socket of its own, 0600 in a private 0700 folder:
// $XDG_RUNTIME_DIR/kijito-pull/ (else /tmp/kijito-pull-<uid>/), named copilot-<session id>.sock. The
// session's kijito-pull watcher (`kijito-pull hook copilot-watch`, started by the session-start hook) connects,
// writes one JSON line and reads one back:
//
//   {"hello": true}                                   -> {"session": "<session id>"}
//   {"prompt": TEXT, "mode": "immediate"|"enqueue"}   -> {"ok": "<message id>"} or {"error": "..."}
//
// and a prompt goes to `session.send({prompt, mode})`: "immediate" reaches the next model call of a busy turn,
// "enqueue" waits for the turn's end (which one is the project's `inbox interrupt:` policy, decided by the
// watcher). The text is Kijito mail already framed as data by kijito-pull. This file reads no Kijito setting,
// talks to no server, starts no process and logs nothing; every connection is bounded in time and size.
import { joinSession } from "@github/copilot-sdk/extension";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";

const MAX_LINE = 1 << 20; // one request line; the watcher's hand-overs are far smaller
const SEND_WAIT_MS = 10000; // session.send must answer within this
const CONNECTION_MS = 15000; // a connection that says nothing for this long is closed
const SESSION_ID = /^[A-Za-z0-9._-]{1,128}$/;

function runtimeDir() {
  const xdg = process.env.XDG_RUNTIME_DIR;
  return xdg && path.isAbsolute(xdg) ? path.join(xdg, "kijito-pull") : path.join("/tmp", `kijito-pull-${process.getuid()}`);
}

function privateDir(dir) {
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if (err.code !== "EEXIST") throw err;
  }
  const st = fs.lstatSync(dir);
  if (!st.isDirectory() || st.uid !== process.getuid()) throw new Error(`${dir} is not a folder of this user`);
  if (st.mode & 0o077) fs.chmodSync(dir, 0o700);
}

function withTimeout(promise, ms) {
  let timer;
  return Promise.race([promise, new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
  })]).finally(() => clearTimeout(timer));
}

async function answer(session, sid, line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    return { error: "not JSON" };
  }
  if (request && request.hello === true) return { session: sid };
  if (!request || typeof request.prompt !== "string" || !request.prompt) return { error: "no prompt" };
  if (request.mode !== "immediate" && request.mode !== "enqueue") return { error: "mode must be immediate or enqueue" };
  try {
    const id = await withTimeout(session.send({ prompt: request.prompt, mode: request.mode }), SEND_WAIT_MS);
    return { ok: String(id) };
  } catch (err) {
    return { error: String(err && err.message ? err.message : err).slice(0, 200) };
  }
}

function serve(session, sid, file) {
  const server = net.createServer((conn) => {
    let buffer = "";
    let busy = false;
    conn.setEncoding("utf8");
    conn.setTimeout(CONNECTION_MS, () => conn.destroy());
    conn.on("error", () => {});
    conn.on("data", async (chunk) => {
      if (busy) return;
      buffer += chunk;
      const end = buffer.indexOf("\n");
      if (end < 0) {
        if (buffer.length > MAX_LINE) conn.destroy();
        return;
      }
      busy = true;
      const reply = await answer(session, sid, buffer.slice(0, end));
      conn.end(JSON.stringify(reply) + "\n");
    });
  });
  server.on("error", () => {});
  const old = process.umask(0o177);
  try {
    server.listen(file, () => {
      try { fs.chmodSync(file, 0o600); } catch {}
    });
  } finally {
    process.umask(old);
  }
  process.on("exit", () => { try { fs.unlinkSync(file); } catch {} });
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(sig, () => process.exit(0));
}

const session = await joinSession({});
const sid = String(session.sessionId || process.env.SESSION_ID || "");
if (SESSION_ID.test(sid)) {
  try {
    const dir = runtimeDir();
    privateDir(dir);
    const file = path.join(dir, `copilot-${sid}.sock`);
    try {
      const st = fs.lstatSync(file);
      if (st.isSocket() && st.uid === process.getuid()) fs.unlinkSync(file); // left by an earlier load
    } catch {}
    serve(session, sid, file);
  } catch {
    // no private folder: no push for this session; the hooks still deliver
  }
}
