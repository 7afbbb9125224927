// kijito-pull for OpenCode: hands a session its Kijito inbox mail. A thin shell over the kijito-pull CLI.
//
// `kijito-pull install opencode` copies this file into OpenCode's plugin folder (~/.config/opencode/plugin/
// or <project>/.opencode/plugin/), writing the command that runs kijito-pull into COMMAND below. The CLI
// does all the delivery logic (the opt-in, the pull, what was already handed over, the confirmation from
// OpenCode's own record); this file only passes OpenCode's facts in and the CLI's answer back:
//
//   chat.message   `kijito-pull hook opencode-chat-message`: waiting mail comes back as {"text": ...} and is
//                  added to the user message as one more text part (OpenCode has no session-start output;
//                  a headless `opencode run` takes no turn after its first, so the mail goes in with it).
//                  In a session whose server listens (`opencode --port N`, `opencode serve`) the CLI also
//                  starts the session's watcher, which pushes new mail through POST /session/{id}/prompt_async.
//   session.idle   `kijito-pull hook opencode-session-idle`, detached: confirms from `opencode export` what
//                  the session was handed (it outlives `opencode run`, which exits at its first idle).
//
// The hooks get OpenCode's environment (the Kijito settings come from there, never from argv) and JSON on
// stdin: the session id, the project folder, this OpenCode binary and its server URL. Nothing is logged.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const COMMAND = ["kijito-pull"]; // kijito-pull: the installer writes this line
const WAIT_MS = 15000; // the CLI's own budget is 8 s; past this the message goes on without mail
// The same file serves Kilo Code CLI (an OpenCode fork, the same plugin API): its hooks are `kilo-*`, known at
// run time from the binary this runs in (`.../@kilocode/cli/bin/.kilo`).
const HOST = path.basename(process.execPath).replace(/^\./, "").startsWith("kilo") ? "kilo" : "opencode";

function facts(ctx, sessionID) {
  return JSON.stringify({
    session_id: sessionID,
    cwd: ctx.directory,
    opencode: process.execPath,
    server_url: ctx.serverUrl ? String(ctx.serverUrl) : "",
  });
}

function call(hook, input) {
  return new Promise((resolve) => {
    let out = "";
    let done = false;
    const finish = (value) => { if (!done) { done = true; resolve(value); } };
    let child;
    try {
      child = spawn(COMMAND[0], [...COMMAND.slice(1), "hook", hook], { stdio: ["pipe", "pipe", "ignore"] });
    } catch {
      return finish(null);
    }
    const timer = setTimeout(() => { try { child.kill("SIGKILL"); } catch {} finish(null); }, WAIT_MS);
    child.on("error", () => { clearTimeout(timer); finish(null); });
    child.stdout.on("data", (chunk) => { out += chunk; });
    child.on("close", () => {
      clearTimeout(timer);
      try { finish(JSON.parse(out)); } catch { finish(null); }
    });
    child.stdin.on("error", () => {});
    child.stdin.end(input);
  });
}

// A detached hook reads its input from a file, not a pipe: `opencode run` exits right after its idle event,
// before a pipe's data would be written; an open file outlives it (it is unlinked at once, the fd stays).
function detach(hook, input) {
  let fd = null;
  const file = path.join(os.tmpdir(), `kijito-pull-opencode-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}.json`);
  try {
    fs.writeFileSync(file, input, { mode: 0o600, flag: "wx" });
    fd = fs.openSync(file, "r");
    fs.unlinkSync(file);
    const child = spawn(COMMAND[0], [...COMMAND.slice(1), "hook", hook], { stdio: [fd, "ignore", "ignore"], detached: true });
    child.on("error", () => {});
    child.unref();
  } catch {
    try { fs.unlinkSync(file); } catch {}
  } finally {
    if (fd !== null) { try { fs.closeSync(fd); } catch {} }
  }
}

export const KijitoPull = async (ctx) => ({
  "chat.message": async (input, output) => {
    const answer = await call(`${HOST}-chat-message`, facts(ctx, input.sessionID));
    const first = output.parts[0];
    if (!answer || typeof answer.text !== "string" || !answer.text || !first) return;
    // OpenCode rejects a part without a string id; this one sorts right after the message's first part.
    output.parts.push({ id: `${first.id}kijito`, sessionID: first.sessionID, messageID: first.messageID,
                        type: "text", text: answer.text, synthetic: true });
  },
  event: async ({ event }) => {
    if (event.type === "session.idle" && event.properties && event.properties.sessionID) {
      detach(`${HOST}-session-idle`, facts(ctx, event.properties.sessionID));
    }
  },
});
