#!/usr/bin/env python3
"""Reads the CEL conformance suite (cel-spec `tests/simple/testdata/*.textproto`, messages
`cel.expr.conformance.test.SimpleTestFile`) without protobuf descriptors: a small reader of the
protobuf text format that keeps fields in order, enough for the fields the golden scripts use
(section/test names, `expr`, `container`, `type_env`, `disable_check`, `disable_macros`).

`tests(dir)` yields one dict per test, in file (sorted), section and test order:
  {"file", "section", "name", "expr", "container", "decls", "disable_check", "disable_macros"}
where `decls` lists the names the test declares in its own `type_env`.

usage (prints the tests as JSON lines, to inspect): conformance.py <testdata dir>
"""
import json
import os
import sys

_SIMPLE_ESCAPES = {"n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11}
_SEPARATORS = " \t\r\n,;"
_IDENT_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-+")


class TextprotoError(Exception):
    pass


class _Reader:
    def __init__(self, text):
        self.b = text.encode("utf-8")
        self.i = 0

    def _peek(self):
        return chr(self.b[self.i]) if self.i < len(self.b) else ""

    def _skip(self):
        while self.i < len(self.b):
            c = chr(self.b[self.i])
            if c in _SEPARATORS:
                self.i += 1
            elif c == "#":
                while self.i < len(self.b) and self.b[self.i] != 0x0A:
                    self.i += 1
            else:
                return

    def _ident(self):
        start = self.i
        while self.i < len(self.b) and chr(self.b[self.i]) in _IDENT_CHARS:
            self.i += 1
        return self.b[start:self.i].decode("ascii")

    def _digits(self, allowed, most):
        start = self.i
        while self.i < len(self.b) and self.i - start < most and chr(self.b[self.i]) in allowed:
            self.i += 1
        return self.b[start:self.i].decode("ascii")

    def _string(self):
        """One quoted string (C escapes as the text format defines them) as bytes."""
        quote = self.b[self.i]
        self.i += 1
        out = bytearray()
        while True:
            if self.i >= len(self.b):
                raise TextprotoError("unterminated string")
            c = self.b[self.i]
            self.i += 1
            if c == quote:
                return bytes(out)
            if c != 0x5C:  # backslash
                out.append(c)
                continue
            e = self._peek()
            self.i += 1
            if e in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[e])
            elif e in "xX":
                digits = self._digits("0123456789abcdefABCDEF", 2)
                if not digits:
                    raise TextprotoError("\\x without hex digits")
                out.append(int(digits, 16))
            elif e in "uU":
                n = 4 if e == "u" else 8
                digits = self._digits("0123456789abcdefABCDEF", n)
                if len(digits) != n:
                    raise TextprotoError(f"\\{e} needs {n} hex digits")
                out.extend(chr(int(digits, 16)).encode("utf-8", "surrogatepass"))
            elif e in "01234567":
                self.i -= 1
                out.append(int(self._digits("01234567", 3), 8) & 0xFF)
            else:  # \\ \' \" \? and any other character stand for themselves
                out.extend(e.encode("utf-8"))

    def _value(self):
        self._skip()
        c = self._peek()
        if c in ("{", "<"):
            self.i += 1
            return self._fields("}" if c == "{" else ">")
        if c in ("'", '"'):
            parts = [self._string()]
            while True:  # adjacent string literals are concatenated
                self._skip()
                if self._peek() not in ("'", '"') or self._peek() == "":
                    break
                parts.append(self._string())
            return b"".join(parts)
        word = self._ident()
        if not word:
            raise TextprotoError(f"unexpected {c!r} at byte {self.i}")
        return word

    def _fields(self, close):
        fields = []
        while True:
            self._skip()
            c = self._peek()
            if c == "":
                if close is not None:
                    raise TextprotoError("unterminated message")
                return fields
            if c == close:
                self.i += 1
                return fields
            if c == "[":  # extension or Any type URL field name
                end = self.b.index(b"]", self.i)
                name = self.b[self.i:end + 1].decode("utf-8")
                self.i = end + 1
            else:
                name = self._ident()
                if not name:
                    raise TextprotoError(f"unexpected {c!r} at byte {self.i}")
            self._skip()
            if self._peek() == ":":
                self.i += 1
                self._skip()
            if self._peek() == "[":  # list of values
                self.i += 1
                while True:
                    self._skip()
                    if self._peek() == "]":
                        self.i += 1
                        break
                    fields.append((name, self._value()))
            else:
                fields.append((name, self._value()))


def parse(text):
    """The fields of the top-level message: a list of (name, value), value being bytes (a
    string), str (any other scalar) or a list of fields (a message)."""
    return _Reader(text)._fields(None)


def _all(fields, name):
    return [v for n, v in fields if n == name]


def _first(fields, name, default=None):
    for n, v in fields:
        if n == name:
            return v
    return default


def _text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else (v or "")


def tests(directory):
    for f in sorted(os.listdir(directory)):
        if not f.endswith(".textproto"):
            continue
        with open(os.path.join(directory, f), encoding="utf-8") as fh:
            root = parse(fh.read())
        stem = f[: -len(".textproto")]
        for section in _all(root, "section"):
            for test in _all(section, "test"):
                yield {
                    "file": stem,
                    "section": _text(_first(section, "name")),
                    "name": _text(_first(test, "name")),
                    "expr": _text(_first(test, "expr")),
                    "container": _text(_first(test, "container")),
                    "decls": [_text(_first(d, "name")) for d in _all(test, "type_env")],
                    "disable_check": _first(test, "disable_check") == "true",
                    "disable_macros": _first(test, "disable_macros") == "true",
                }


if __name__ == "__main__":
    for t in tests(sys.argv[1]):
        print(json.dumps(t, ensure_ascii=False))
