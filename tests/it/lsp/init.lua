-- Neovim as the editor of tests/it/lsp.rs (neovim_shows_diagnostics_hover_and_completion):
-- starts `vapcheck lsp` for the file opened, waits for its diagnostics, writes them, asks for
-- the code actions at the typo's diagnostic and applies "Did you mean" (an unsaved change),
-- waits until the diagnostics are cleared, writes that and saves the file, hovers `replicas`
-- and asks for completion after `object.spec.`, writes both, quits.
-- Works with Neovim 0.7 (Debian 12's) and later: vim.lsp.start_client + buf_attach_client.
local bin = os.getenv("VAPCHECK_BIN")
local root = os.getenv("VAPCHECK_LSP_ROOT")
local out = os.getenv("VAPCHECK_LSP_OUT")
local lines = {}

local function dump(label)
  local ds = vim.diagnostic.get(0)
  table.sort(ds, function(a, b)
    return a.lnum < b.lnum or (a.lnum == b.lnum and a.col < b.col)
  end)
  table.insert(lines, string.format("%s %d", label, #ds))
  for _, d in ipairs(ds) do
    local message = string.gsub(d.message, "\n", "\\n")
    table.insert(lines, string.format("%d:%d-%d:%d %d %s %s",
      d.lnum, d.col, d.end_lnum, d.end_col, d.severity, tostring(d.code), message))
  end
end

local function finish(code)
  vim.fn.writefile(lines, out)
  vim.cmd(code == 0 and "qa!" or "cq!")
end

vim.api.nvim_create_autocmd("VimEnter", {
  callback = function()
    local id = vim.lsp.start_client({ name = "vapcheck", cmd = { bin, "lsp" }, root_dir = root })
    if not id then
      table.insert(lines, "start_client failed")
      return finish(1)
    end
    vim.lsp.buf_attach_client(0, id)
    if not vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 20) then
      table.insert(lines, "no diagnostics")
      return finish(1)
    end
    dump("published")
    -- The code actions at the diagnostic's range (an ASCII line: its byte columns are UTF-16
    -- units); "Did you mean" applied to the buffer, not saved: didChange.
    local d = vim.diagnostic.get(0)[1]
    local params = {
      textDocument = vim.lsp.util.make_text_document_params(0),
      range = { start = { line = d.lnum, character = d.col },
                ["end"] = { line = d.end_lnum, character = d.end_col } },
      context = { diagnostics = {} },
    }
    local answers = vim.lsp.buf_request_sync(0, "textDocument/codeAction", params, 60000) or {}
    local applied = nil
    for _, r in pairs(answers) do
      for _, action in ipairs(r.result or {}) do
        if not applied and string.find(action.title, "Did you mean", 1, true) == 1 then
          vim.lsp.util.apply_workspace_edit(action.edit, "utf-16")
          applied = action.title
        end
      end
    end
    if not applied then
      table.insert(lines, "no code action")
      return finish(1)
    end
    table.insert(lines, "action " .. applied)
    if not vim.wait(60000, function() return #vim.diagnostic.get(0) == 0 end, 20) then
      dump("not cleared")
      return finish(1)
    end
    dump("fixed")
    vim.cmd("silent write")
    -- Hover on `replicas` (line 13, 0-based 12; `replicas` at columns 29..37).
    local pos = { textDocument = vim.lsp.util.make_text_document_params(0),
                  position = { line = 12, character = 33 } }
    local hovers = vim.lsp.buf_request_sync(0, "textDocument/hover", pos, 60000) or {}
    for _, r in pairs(hovers) do
      if r.result then
        table.insert(lines, "hover " .. string.gsub(r.result.contents.value, "\n", "\\n"))
      end
    end
    -- Completion after `object.spec.` (an unsaved edit of the buffer).
    vim.api.nvim_buf_set_lines(0, 12, 13, false, { '  - expression: "object.spec."' })
    pos.position = { line = 12, character = 29 }
    local completions = vim.lsp.buf_request_sync(0, "textDocument/completion", pos, 60000) or {}
    for _, r in pairs(completions) do
      local items = r.result and (r.result.items or r.result) or {}
      local labels = {}
      for _, item in ipairs(items) do
        table.insert(labels, item.label)
      end
      table.insert(lines, "completion " .. table.concat(labels, ","))
    end
    vim.lsp.stop_client(id)
    vim.wait(5000, function() return vim.lsp.client_is_stopped(id) end, 20)
    finish(0)
  end,
})
