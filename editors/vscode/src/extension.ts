// The VS Code side of `vapcheck lsp` (docs/editor.md "VS Code"): starts the server for the
// first workspace folder, restarts it on `vapcheck.restart` or when its settings change.
import * as os from "os";
import * as vscode from "vscode";
import {
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";
import { documentSelector, serverCommand, watchedFiles } from "./server";

let client: LanguageClient | undefined;

function settings(): { path?: string; extraArgs?: string[] } {
  const config = vscode.workspace.getConfiguration("vapcheck");
  return {
    path: config.get<string>("path"),
    extraArgs: config.get<string[]>("extraArgs"),
  };
}

async function start(context: vscode.ExtensionContext): Promise<void> {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const cmd = serverCommand(settings(), folder, os.homedir());
  const run = {
    command: cmd.command,
    args: cmd.args,
    transport: TransportKind.stdio,
    options: { cwd: cmd.cwd },
  };
  const serverOptions: ServerOptions = { run, debug: run };
  const watcher = vscode.workspace.createFileSystemWatcher(watchedFiles);
  context.subscriptions.push(watcher);
  const clientOptions: LanguageClientOptions = {
    documentSelector,
    synchronize: { fileEvents: watcher },
    outputChannelName: "vapcheck",
  };
  client = new LanguageClient("vapcheck", "vapcheck", serverOptions, clientOptions);
  try {
    await client.start();
  } catch (e) {
    client = undefined;
    void vscode.window.showErrorMessage(
      `vapcheck: could not start \`${cmd.command} ${cmd.args.join(" ")}\` (set vapcheck.path): ${e}`,
    );
  }
}

async function stop(): Promise<void> {
  const running = client;
  client = undefined;
  if (running) {
    await running.stop();
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  context.subscriptions.push(
    vscode.commands.registerCommand("vapcheck.restart", async () => {
      await stop();
      await start(context);
    }),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (e.affectsConfiguration("vapcheck.path") || e.affectsConfiguration("vapcheck.extraArgs")) {
        await stop();
        await start(context);
      }
    }),
  );
  await start(context);
}

export function deactivate(): Promise<void> {
  return stop();
}
