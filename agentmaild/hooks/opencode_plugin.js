// agentmaild: OpenCode plugin (installed by `agentmaild hooks install --vendor opencode`).
//
// chat.message: runs `agentmaild hook user-prompt-submit --vendor opencode` (records the turn as
// busy, takes the agent's unread mail within the hook's cap and acks what it printed) and appends
// what it prints to the user's message (not in a subagent's session). tool.execute.after:
// `agentmaild hook post-tool-use` (mid-turn mail by policy) appended to the tool's output.
// event session.idle: `agentmaild hook stop` (idle).
// A failing or missing agentmaild never breaks the session: the message goes on unchanged.
import { spawn } from "node:child_process";

const SETTINGS = /*agentmaild-settings*/ {};

function hook(event, payload, directory) {
  const argv = ["hook", event, "--vendor", "opencode", "--agent", SETTINGS.agent];
  if (SETTINGS.db) argv.push("--db", SETTINGS.db);
  const env = { ...process.env };
  if (directory) env.CLAUDE_PROJECT_DIR = directory; // where the hook looks for the store
  return new Promise((resolve) => {
    let out = "";
    let child;
    try {
      child = spawn(SETTINGS.exe, argv, { stdio: ["pipe", "pipe", "ignore"], env });
    } catch {
      resolve("");
      return;
    }
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk) => {
      out += chunk;
    });
    child.on("error", () => resolve(""));
    child.on("close", () => resolve(out));
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

// A subagent's session (the task tool) has a parent: mail put there would never reach the agent.
async function isSubagent(client, sessionID) {
  try {
    const got = await client.session.get({ path: { id: sessionID } });
    return Boolean(got && got.data && got.data.parentID);
  } catch {
    return false;
  }
}

export const AgentmailPlugin = async ({ client, directory }) => ({
  "chat.message": async (input, output) => {
    if (!SETTINGS.agent || !SETTINGS.exe) return;
    if (client && (await isSubagent(client, input.sessionID))) return;
    const parts = output.parts || [];
    const texts = parts.filter((p) => p && p.type === "text" && typeof p.text === "string");
    const prompt = texts.map((p) => p.text).join("\n");
    const payload = { session_id: input.sessionID, prompt, cwd: directory };
    const mail = await hook("user-prompt-submit", payload, directory);
    if (!mail) return;
    const last = texts[texts.length - 1];
    if (last) {
      last.text = `${last.text}\n\n${mail}`;
    } else {
      parts.push({
        id: `prt_agentmail${Date.now().toString(36)}`,
        type: "text",
        text: mail,
        sessionID: input.sessionID,
        messageID: output.message && output.message.id,
      });
    }
  },
  // Mid-turn mail (agentmaild's mid_turn_priority): appended to the tool's output, which the
  // model reads next in the same turn.
  "tool.execute.after": async (input, output) => {
    if (!SETTINGS.agent || !SETTINGS.exe || !output) return;
    if (client && (await isSubagent(client, input.sessionID))) return;
    const payload = { session_id: input.sessionID, tool_name: input.tool, cwd: directory };
    const mail = await hook("post-tool-use", payload, directory);
    if (!mail) return;
    output.output = `${typeof output.output === "string" ? output.output : ""}\n\n${mail}`;
  },
  event: async ({ event }) => {
    if (!SETTINGS.agent || !SETTINGS.exe || !event) return;
    if (event.type === "session.idle") {
      const sessionID = event.properties && event.properties.sessionID;
      await hook("stop", { session_id: sessionID }, directory);
    }
  },
});
