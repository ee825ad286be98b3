#!/usr/bin/env python3
"""Every external command (and Python module) that the test and CI scripts call is provided
by a package of tests/packages.txt, so a fresh machine gets it from tests/run.sh.

Reads the shell scripts that tests/run.sh, .ci/run and deploy/demo.sh start (tests/, their
lib/, integration/ and fuzz/ folders; not tests/bench/, which runs by hand), finds the words
in command position (a small shell tokenizer: quotes, $(...), heredocs, case patterns,
wrappers such as timeout or sudo, `command -v X`), and the imports of the Python they run
(files under tests/ and the Python heredocs), and fails naming each one that no row of
the list provides.
    tests/check_packages.py [ROOT]
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[1])
SCRIPT_GLOBS = ["tests/*.sh", "tests/lib/*.sh", "tests/integration/*.sh", "tests/fuzz/*.sh",
                "deploy/demo.sh", ".ci/run"]
# Python files: those under tests/ that a script or a CMake test names, and the local modules
# they import (tests/bench/ and the fixture generators run by hand).
PYTHON_DIRS = ["tests", "tests/fixtures"]

KEYWORDS = set("""if then else elif fi for in do done while until case esac function select
    time ! { } [[ ]] coproc""".split())
BUILTINS = set(""". : [ alias bg bind break builtin caller cd command compgen complete continue
    declare dirs disown echo enable eval exec exit export false fc fg getopts hash help history
    jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly return set
    shift shopt source suspend test times trap true type typeset ulimit umask unalias unset
    wait""".split())
# Words after which the next word is a command too.
WRAPPERS = {"exec", "sudo", "nohup", "setsid", "nice", "time", "command", "builtin", "!",
            "then", "else", "do", "if", "elif", "while", "until", "{", "stdbuf", "xargs", "env",
            "timeout", "type", "which", "hash", "unbuffer"}
# Options of wrappers that take a value, and the wrappers' words before the command
# (timeout -s INT 5 cmd, env -u VAR cmd).
WRAPPER_OPTS = {"timeout": {"-s", "-k", "--signal", "--kill-after"}, "env": {"-u", "--unset"},
                "xargs": {"-n", "-I", "-P", "-d", "-L", "-s"}}
WRAPPER_ARGS = {"timeout": 1}
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.+-]*$")
# What deploy/demo.sh installs or finds.
DEMO_KINDS = {"base", "demo", "optional"}
# Built by this project (CMake targets, test scripts).
OWN = {"reclass"}


def read_list():
    provides, pkgs = {}, []
    for line in (ROOT / "tests/packages.txt").read_text().splitlines():
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        pkg, kind, *what = line
        pkgs.append((pkg, kind))
        for w in what:  # py:a.b.c (the import that proves the install) provides py:a
            provides.setdefault(w.split(".")[0] if w.startswith("py:") else w, set()).add(kind)
    return provides, pkgs


class Scanner:
    """Yields (word, in_command_position) of one shell script, outside quotes and heredocs."""

    def __init__(self, text):
        self.s, self.i, self.words, self.heredocs = text, 0, [], []
        self.heredoc_bodies = []

    def run(self):
        self.commands(end=None)
        return self.words

    def peek(self, k=0):
        return self.s[self.i + k] if self.i + k < len(self.s) else ""

    def skip_quoted(self, q):
        # at the opening quote; '...' literal; "..." may hold $(...)
        self.i += 1
        while self.i < len(self.s) and self.peek() != q:
            if q == '"' and self.peek() == "\\":
                self.i += 2
                continue
            if q == '"' and self.peek() == "$" and self.peek(1) == "(":
                self.dollar()
                continue
            if q == '"' and self.peek() == "`":
                self.i += 1
                self.commands(end="`")
                continue
            self.i += 1
        self.i += 1

    def dollar(self):
        # at '$'
        if self.peek(1) == "(" and self.peek(2) == "(":
            self.skip_balanced("(", ")", 2)
        elif self.peek(1) == "(":
            self.i += 2
            self.commands(end=")")
        elif self.peek(1) == "{":
            self.skip_balanced("{", "}", 1)
        else:
            self.i += 1

    def skip_balanced(self, o, c, n):
        self.i += 1
        depth = 0
        while self.i < len(self.s):
            ch = self.peek()
            if ch == o:
                depth += 1
            elif ch == c:
                depth -= 1
                if depth == 0 and (n == 1 or self.s[self.i - 1] == c or self.peek(1) != c):
                    if n == 2 and self.peek(1) == c:
                        self.i += 1
                    self.i += 1
                    return
            elif ch in "'\"":
                self.skip_quoted(ch)
                continue
            self.i += 1

    def read_heredocs(self):
        # at a newline with pending heredocs: their bodies follow
        for delim, strip in self.heredocs:
            body = []
            while self.i < len(self.s):
                j = self.s.find("\n", self.i)
                j = len(self.s) if j < 0 else j
                line = self.s[self.i:j]
                self.i = j + 1
                if (line.lstrip("\t") if strip else line) == delim:
                    break
                body.append(line)
            self.heredoc_bodies.append("\n".join(body))
        self.heredocs = []

    def word(self):
        """One word; returns (text, plain): plain when it has no quotes or expansions."""
        start, plain = self.i, True
        while self.i < len(self.s):
            ch = self.peek()
            if ch in " \t\n;&|()<>" or (ch == "}" and self.i == start):
                break
            if ch in "'\"":
                plain = False
                self.skip_quoted(ch)
            elif ch == "$":
                plain = False
                self.dollar()
            elif ch == "`":
                plain = False
                self.i += 1
                self.commands(end="`")
            elif ch == "\\":
                self.i += 2
            elif ch == "=" and self.peek(1) == "(":  # name=( array )
                plain = False
                self.skip_balanced("(", ")", 1)  # from the '=', like dollar() from the '$'

            else:
                self.i += 1
        return self.s[start:self.i], plain

    def commands(self, end):
        cmd_pos, case_pat, wrapper_skip = True, False, 0
        prev = None
        while self.i < len(self.s):
            ch = self.peek()
            if end and self.s.startswith(end, self.i):
                self.i += len(end)
                return
            if ch in " \t":
                self.i += 1
            elif ch == "\\" and self.peek(1) == "\n":
                self.i += 2
            elif ch == "#" and (self.i == 0 or self.s[self.i - 1] in " \t\n;"):
                while self.i < len(self.s) and self.peek() != "\n":
                    self.i += 1
            elif ch == "\n":
                self.i += 1
                if self.heredocs:
                    self.read_heredocs()
                if not case_pat:
                    cmd_pos = True
            elif ch in ";&|":
                op = ch
                self.i += 1
                if self.peek() in ";&|":
                    op += self.peek()
                    self.i += 1
                if op == ";;" or op == ";&":
                    case_pat = True
                cmd_pos = True
            elif ch == "(":
                self.i += 1
                if self.peek() == "(":  # (( arithmetic ))
                    self.i -= 1
                    self.skip_balanced("(", ")", 2)
                else:
                    cmd_pos = True
            elif ch == ")":
                if end == ")":
                    self.i += 1
                    return
                self.i += 1
                case_pat, cmd_pos = False, True
            elif ch in "<>":
                # a redirection: operator, then its target word
                if self.s.startswith("<<<", self.i):
                    self.i += 3
                elif self.s.startswith("<<", self.i):
                    self.i += 2
                    strip = self.peek() == "-"
                    if strip:
                        self.i += 1
                    while self.peek() in " \t":
                        self.i += 1
                    w, _ = self.word()
                    self.heredocs.append((w.strip("'\""), strip))
                    continue
                else:
                    self.i += 1
                    while self.peek() in ">&|":
                        self.i += 1
                while self.peek() in " \t":
                    self.i += 1
                self.word()
            else:
                w, plain = self.word()
                if not w:
                    self.i += 1
                    continue
                if case_pat:
                    if w == "esac":
                        case_pat, cmd_pos = False, False
                    continue
                if prev == "case":
                    prev = None
                    continue
                if w == "in" and self.last_cmd == "case":
                    case_pat, self.last_cmd = True, None
                    continue
                if cmd_pos:
                    if re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", w):
                        continue  # an assignment before the command
                    if w.startswith("-") and prev in WRAPPERS:
                        if w in WRAPPER_OPTS.get(prev, ()):
                            wrapper_skip += 1
                        continue
                    if wrapper_skip:
                        wrapper_skip -= 1
                        continue
                    self.words.append((w, plain))
                    self.last_cmd = w
                    prev = w
                    if w == "case":
                        prev = "case"
                        cmd_pos = False
                    elif w in WRAPPERS or w == "$sudo":
                        wrapper_skip = WRAPPER_ARGS.get(w, 0)
                    elif w == "for" or w == "select":
                        cmd_pos = False
                        case_pat = False
                    else:
                        cmd_pos = False
                else:
                    prev = None

    last_cmd = None


def commands_of(path, functions):
    sc = Scanner(path.read_text())
    found = set()
    for w, plain in sc.run():
        if w.startswith("/") or "/" in w:
            last = w.rsplit("/", 1)[1].strip('"')
            if "$" in last or not NAME.match(last) or last.endswith((".sh", ".py")):
                continue
            w, plain = last, True
        if not plain or not NAME.match(w):
            continue
        if w in KEYWORDS or w in BUILTINS or w in functions or w in OWN or w == "$sudo":
            continue
        found.add(w)
    return found, sc.heredoc_bodies


def imports_of(text, indented=True):
    mods = set()
    for m in re.finditer((r"^\s*" if indented else r"^") + r"(?:import\s+([\w.]+)|from\s+([\w.]+)\s+import)", text, re.M):
        mods.add((m.group(1) or m.group(2)).split(".")[0])
    return mods


def main():
    provides, pkgs = read_list()
    scripts = sorted({p for g in SCRIPT_GLOBS for p in ROOT.glob(g) if p.is_file()})
    functions = set()
    for p in scripts:
        functions |= set(re.findall(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\)", p.read_text(), re.M))
    missing = {}
    for p in scripts:
        cmds, bodies = commands_of(p, functions)
        rel = str(p.relative_to(ROOT))
        for c in cmds:
            if c not in provides:
                missing.setdefault(c, set()).add(rel)
            elif rel.startswith("deploy/") and not provides[c] & DEMO_KINDS:
                missing.setdefault(c, set()).add(rel + " (needs a demo row)")
        for b in bodies:
            for m in imports_of(b):
                if "py:" + m not in provides:
                    missing.setdefault("py:" + m, set()).add(str(p.relative_to(ROOT)))
    # CTest's own commands (add_test(... COMMAND python3 ...))
    for p in sorted((ROOT / "tests").glob("*.cmake")) + [ROOT / "tests/CMakeLists.txt"]:
        for c in re.findall(r"\bCOMMAND\s+([A-Za-z][\w.+-]*)(?=[\s)])", p.read_text()):
            if c not in provides and c not in OWN:
                missing.setdefault(c, set()).add(str(p.relative_to(ROOT)))
    local = {p.stem: p for d in PYTHON_DIRS for p in (ROOT / d).glob("*.py")}
    named = "\n".join(p.read_text() for p in scripts + sorted((ROOT / "tests").glob("*.cmake")))
    todo = [p for name, p in local.items() if name + ".py" in named]
    seen = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        # top-level imports: those inside functions belong to modes the tests don't run
        for m in imports_of(p.read_text(), indented=False):
            if m in local:
                todo.append(local[m])
            elif "py:" + m not in provides:
                missing.setdefault("py:" + m, set()).add(str(p.relative_to(ROOT)))
    print(f"check_packages: {len(scripts)} scripts, {len(seen)} Python files, "
          f"{len(pkgs)} rows of tests/packages.txt")
    for c in sorted(missing):
        print(f"FAIL: {c} (called by {', '.join(sorted(missing[c]))}) is on no row of "
              "tests/packages.txt: add its package (or, when the base image has it, its base row)")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
