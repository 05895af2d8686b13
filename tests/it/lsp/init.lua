-- Neovim as the editor of tests/it/lsp.rs (neovim_shows_diagnostics_hover_and_completion):
-- starts `vapcheck lsp` for the file opened, waits for its diagnostics, writes them, fixes the
-- typo in the buffer (an unsaved change), waits until they are cleared, writes that, hovers
-- `replicas` and asks for completion after `object.spec.`, writes both, quits.
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
    -- The typo fixed in the buffer, not saved: didChange.
    local buf = vim.api.nvim_buf_get_lines(0, 0, -1, false)
    for i, l in ipairs(buf) do
      buf[i] = string.gsub(l, "replicsa", "replicas")
    end
    vim.api.nvim_buf_set_lines(0, 0, -1, false, buf)
    if not vim.wait(60000, function() return #vim.diagnostic.get(0) == 0 end, 20) then
      dump("not cleared")
      return finish(1)
    end
    dump("fixed")
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
