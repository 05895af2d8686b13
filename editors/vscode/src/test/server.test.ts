// Tests of how the extension starts the server (src/server.ts), the second one against the
// real `vapcheck lsp` ($VAPCHECK_BIN, set by scripts/test-vscode-extension): started with
// the command line the extension builds, in a workspace folder, it publishes the diagnostic
// of a policy with a field typo at the selection's range.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as cp from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import * as rpc from "vscode-jsonrpc/node";
import { documentSelector, serverCommand, watchedFiles } from "../server";

test("the command line from the settings", () => {
  assert.deepEqual(serverCommand({}, "/w", "/home/u"), {
    command: "vapcheck",
    args: ["lsp"],
    cwd: "/w",
  });
  assert.deepEqual(serverCommand({ path: "  " }, undefined, "/home/u"), {
    command: "vapcheck",
    args: ["lsp"],
    cwd: undefined,
  });
  assert.deepEqual(serverCommand({ path: "~/bin/vapcheck", extraArgs: ["-v"] }, "/w", "/home/u/"), {
    command: "/home/u/bin/vapcheck",
    args: ["lsp", "-v"],
    cwd: "/w",
  });
  assert.deepEqual(serverCommand({ path: "/opt/vapcheck" }, "/w", undefined).command, "/opt/vapcheck");
  assert.deepEqual(
    documentSelector.map((s) => s.language),
    ["yaml", "json"],
  );
  assert.equal(watchedFiles, "**/*.{yaml,yml,json}");
});

const POLICY = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replicas-limit
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: "object.spec.replicsa <= 5"
`;

test("the real server, started as the extension starts it, reports a field typo", async () => {
  const bin = process.env.VAPCHECK_BIN;
  assert.ok(bin, "VAPCHECK_BIN names the vapcheck binary to test");
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "vapcheck-vscode-"));
  const file = path.join(folder, "policy.yaml");
  fs.writeFileSync(file, POLICY);
  const uri = pathToFileURL(file).href;
  const cmd = serverCommand({ path: bin }, folder, os.homedir());
  const child = cp.spawn(cmd.command, cmd.args, { cwd: cmd.cwd, stdio: ["pipe", "pipe", "inherit"] });
  const connection = rpc.createMessageConnection(
    new rpc.StreamMessageReader(child.stdout!),
    new rpc.StreamMessageWriter(child.stdin!),
  );
  const published = new Promise<any>((resolve) => {
    connection.onNotification("textDocument/publishDiagnostics", (p: any) => {
      if (p.uri === uri && p.diagnostics.length > 0) {
        resolve(p);
      }
    });
  });
  connection.listen();
  try {
    const init: any = await connection.sendRequest("initialize", {
      processId: process.pid,
      rootUri: pathToFileURL(folder).href,
      workspaceFolders: [{ uri: pathToFileURL(folder).href, name: "w" }],
      capabilities: {},
    });
    assert.equal(init.serverInfo.name, "vapcheck");
    await connection.sendNotification("initialized", {});
    await connection.sendNotification("textDocument/didOpen", {
      textDocument: { uri, languageId: "yaml", version: 1, text: POLICY },
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("no diagnostics for policy.yaml within 30 s")), 30000);
    });
    const p = await Promise.race([published, timeout]).finally(() => clearTimeout(timer));
    // The selection `.replicsa` on line 14 (0-based 13), as kube-controller-manager's
    // status.typeChecking words it, under the rule VAP100 (a type-checking warning).
    const line = POLICY.split("\n").findIndex((l) => l.includes("replicsa"));
    const column = POLICY.split("\n")[line].indexOf(".replicsa");
    assert.deepEqual(p.diagnostics, [
      {
        code: "VAP100",
        message:
          "ValidatingAdmissionPolicy replicas-limit: type-checking warning (apps/v1, Kind=Deployment): " +
          "spec.validations[0].expression: ERROR: <input>:1:12: undefined field 'replicsa'\n" +
          " | object.spec.replicsa <= 5\n | ...........^",
        range: {
          start: { line, character: column },
          end: { line, character: column + ".replicsa".length },
        },
        severity: 2,
        source: "vapcheck",
      },
    ]);
    await connection.sendRequest("shutdown");
    await connection.sendNotification("exit");
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    assert.equal(code, 0);
  } finally {
    connection.dispose();
    child.kill();
    fs.rmSync(folder, { recursive: true, force: true });
  }
});
