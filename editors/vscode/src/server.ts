// How the extension starts the server: `vapcheck lsp` over stdio, from the settings
// `vapcheck.path` and `vapcheck.extraArgs`, in the workspace folder. Free of the `vscode`
// module, so that the tests run it (and the server it names) under plain Node.js.

/** The settings the extension reads (package.json `contributes.configuration`). */
export interface Settings {
  /** `vapcheck.path`: a path, or a name looked up on PATH. */
  path?: string;
  /** `vapcheck.extraArgs`: arguments after `lsp`. */
  extraArgs?: readonly string[];
}

/** A process to start: the binary, its arguments and its working directory. */
export interface ServerCommand {
  command: string;
  args: string[];
  cwd: string | undefined;
}

/**
 * The server's command line for these settings and workspace folder. An empty or missing
 * path means `vapcheck` on PATH; a leading `~/` is the user's home, as in a shell.
 */
export function serverCommand(
  settings: Settings,
  workspaceFolder: string | undefined,
  home: string | undefined,
): ServerCommand {
  let command = (settings.path ?? "").trim();
  if (command === "") {
    command = "vapcheck";
  } else if (command.startsWith("~/") && home) {
    command = home.replace(/\/+$/, "") + command.slice(1);
  }
  const extra = (settings.extraArgs ?? []).filter((a) => typeof a === "string");
  return { command, args: ["lsp", ...extra], cwd: workspaceFolder };
}

/**
 * The documents the server is asked about: YAML and JSON files on disk (the server reads
 * the workspace folder itself; untitled buffers have no folder to check them in).
 */
export const documentSelector = [
  { scheme: "file", language: "yaml" },
  { scheme: "file", language: "json" },
];

/** The files whose changes the server is told about (policies, CRDs, params, settings). */
export const watchedFiles = "**/*.{yaml,yml,json}";
