#!/usr/bin/env python3
"""List Rust functions longer than N lines (default 150): `scripts/long_fns.py [N] [PATH...]`.

Counts from the `fn` line to its closing brace by brace depth (strings, chars and comments
skipped). Used for issue 21: no function over ~150 lines without a comment saying why."""
import os, re, sys

def strip(line, state):
    """Remove string/char/comment content from one line; state carries block comments/strings."""
    out, i = [], 0
    while i < len(line):
        c = line[i]
        if state['block']:
            if line.startswith('*/', i):
                state['block'] -= 1; i += 2
            elif line.startswith('/*', i):
                state['block'] += 1; i += 2
            else:
                i += 1
            continue
        if state['str']:
            if state['raw'] is not None:
                end = '"' + '#' * state['raw']
                if line.startswith(end, i):
                    state['str'] = False; state['raw'] = None; i += len(end)
                else:
                    i += 1
            elif c == '\\':
                i += 2
            elif c == '"':
                state['str'] = False; i += 1
            else:
                i += 1
            continue
        if line.startswith('//', i):
            break
        if line.startswith('/*', i):
            state['block'] += 1; i += 2; continue
        m = re.match(r'b?r(#*)"', line[i:])
        if m and (i == 0 or not (line[i-1].isalnum() or line[i-1] == '_')):
            state['str'] = True; state['raw'] = len(m.group(1)); i += len(m.group(0)); continue
        if c == '"':
            state['str'] = True; state['raw'] = None; i += 1; continue
        if c == "'":
            m = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|[^\\'])'", line[i:])
            if m:
                i += len(m.group(0)); continue
        out.append(c); i += 1
    return ''.join(out)

def scan(path, limit):
    state = {'block': 0, 'str': False, 'raw': None}
    stack = []  # (name, start_line, depth_at_open)
    depth = 0
    pending = None
    found = []
    with open(path, encoding='utf-8', errors='replace') as f:
        for n, raw in enumerate(f, 1):
            line = strip(raw, state)
            m = re.search(r'\bfn\s+([A-Za-z_][A-Za-z0-9_]*)', line)
            if m:
                pending = (m.group(1), n)
            for c in line:
                if c == '{':
                    depth += 1
                    if pending:
                        stack.append((pending[0], pending[1], depth)); pending = None
                elif c == '}':
                    if stack and stack[-1][2] == depth:
                        name, start, _ = stack.pop()
                        if n - start + 1 > limit:
                            found.append((n - start + 1, path, start, name))
                    depth -= 1
                elif c == ';' and pending and not stack or (c == ';' and pending and stack and stack[-1][2] == depth):
                    pending = None  # a declaration without a body
    return found

def main():
    args = sys.argv[1:]
    limit = int(args.pop(0)) if args and args[0].isdigit() else 150
    roots = args or ['crates']
    found = []
    for root in roots:
        if os.path.isfile(root):
            found += scan(root, limit)
            continue
        for d, _, files in os.walk(root):
            if '/target' in d:
                continue
            for fn in files:
                if fn.endswith('.rs'):
                    found += scan(os.path.join(d, fn), limit)
    for lines, path, start, name in sorted(found, reverse=True):
        print(f'{lines:5} {path}:{start} {name}')

main()
