"""docs/usage.md runs as written.

Every ```sh block marked `<!-- walkthrough -->` is run, in the order of the file, each
command (one line, or lines joined by a trailing backslash; comments are bash's) with `bash -c`
from the checkout's root, in one environment that the walkthrough's `export` lines change.
A command ending in `&` runs in the background, in a session of its own, and is stopped by its
pid (and group) when the walkthrough ends; after a backgrounded `tgs-controller` the next
command waits until its socket is there.  A ```text block marked `<!-- walkthrough output -->`
is what the preceding block's last command prints: each of its lines must appear in that
output, `...` standing for what varies (the parts between them appear in that order, the first
one starts the line and the last one ends it; runs of blanks count as one).  That command is
run again until they appear (jobs started in the background take a moment to attach) or a
minute has passed.  Blocks marked `<!-- walkthrough: podman -->` run only where podman and
runc are installed and a container can start (as root: the CDI spec goes to /var/run/cdi),
with `$IMAGE` an image made here from a minimal root file system holding tgs-workload.

What must be private is set through the variables the tools read, never by changing a
command: TGS_RUNTIME_DIR, TGS_STATE_DIR, TGS_SIM_STATE and TGS_SIM=1 (the simulated GPU even
where NVML finds one); podman's CONTAINERS_CONF (runc, no network, the ulimits this sandbox
allows) and CONTAINERS_STORAGE_CONF (its images in a temporary directory)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from proc_helpers import stop, wait_for

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "usage.md"
MARK = re.compile(r"<!--\s*(walkthrough(?::\s*podman)?|walkthrough output|not run:.*?)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")
COMMAND_TIMEOUT = 120.0
OUTPUT_PATIENCE = 60.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@dataclass
class Command:
    line: int
    code: str               # without its comment and its trailing `&`
    background: bool


@dataclass
class Block:
    line: int               # the line of its opening fence
    podman: bool
    commands: list[Command]
    output: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ reading the document
def _fences(lines: list[str]) -> Iterator[tuple[int, str, str, list[str]]]:
    """(line of the fence, its language, the marker above it or '', the block's lines)."""
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        above = i - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        mark = MARK.fullmatch(lines[above].strip()) if above >= 0 else None
        yield i + 1, m.group(1), mark.group(1) if mark else "", lines[i + 1:end]
        i = end + 1


def _strip_comment(text: str) -> str:
    """The text before an unquoted `#` that starts a word (bash's comment)."""
    quote = ""
    escaped = False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i]
    return text


def _commands(first: int, body: list[str]) -> list[Command]:
    out: list[Command] = []
    i = 0
    while i < len(body):
        start = i
        parts = []
        while True:
            code = _strip_comment(body[i]).rstrip()
            i += 1
            if code.endswith("\\") and i < len(body):
                parts.append(code[:-1])
                continue
            parts.append(code)
            break
        code = "\\\n".join(parts).strip()
        if not code:
            continue
        bg = code.endswith("&") and not code.endswith("&&")
        out.append(Command(first + start, code[:-1].rstrip() if bg else code, bg))
    return out


def read_walkthrough(path: Path = DOC) -> list[Block]:
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    for line, lang, mark, body in _fences(lines):
        if mark.startswith("walkthrough output"):
            assert blocks and lang == "text", f"{path.name}:{line}: output of no walkthrough block"
            blocks[-1].output = [x for x in body if x.strip()]
        elif mark.startswith("walkthrough"):
            assert lang == "sh", f"{path.name}:{line}: a walkthrough block is ```sh"
            blocks.append(Block(line, "podman" in mark, _commands(line + 1, body)))
    return blocks


BLOCKS = read_walkthrough()


def _norm(text: str) -> str:
    return " ".join(text.split())


def _pattern(shown: str) -> re.Pattern[str]:
    """`...` stands for any text; with a blank beside it, for whole words (or none)."""
    parts = re.split(r"(\s*\.\.\.\s*)", _norm(shown))
    rx = ""
    for i, p in enumerate(parts):
        if i % 2 == 0:
            rx += re.escape(p)
            continue
        left, right = p.startswith(" "), p.endswith(" ")
        if i == 1 and parts[0] == "":
            rx += r"(?:.*\s)?" if right else ".*"
        elif i == len(parts) - 2 and parts[-1] == "":
            rx += r"(?:\s.*)?" if left else ".*"
        elif left and right:
            rx += r"\s(?:.*\s)?"
        else:
            rx += (r"\s" if left else "") + ".*" + (r"\s" if right else "")
    return re.compile(rx)


def line_matches(shown: str, actual: str) -> bool:
    """`shown` (a line of the document, `...` for what varies) describes `actual`."""
    return _pattern(shown).fullmatch(_norm(actual)) is not None


def missing_lines(shown: list[str], output: str) -> list[str]:
    actual = output.splitlines()
    return [s for s in shown if not any(line_matches(s, a) for a in actual)]


# ------------------------------------------------------------------ running it
@dataclass
class Result:
    ok: bool | None = None          # None: skipped
    why: str = ""


class Walkthrough:
    """Runs the blocks in order, up to the one a test asks about; stops at the first failure."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.runtime = Path(tempfile.mkdtemp(prefix="tgs-wk-"))   # ipc paths: 107 bytes
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TGS_", "LD_PRELOAD", "CONTAINERS_"))}
        (tmp / "tmp").mkdir()
        env.update(TGS_RUNTIME_DIR=str(self.runtime), TGS_STATE_DIR=str(tmp / "state"),
                   TGS_SIM_STATE=str(tmp / "sim-state"), TGS_SIM="1",
                   TMPDIR=str(tmp / "tmp"))
        self.env = env
        self.results: list[Result] = []
        self.background: list[subprocess.Popen] = []
        self.cdi_specs: list[Path] = []
        self.podman: str | None = None     # why podman blocks cannot run, once known
        self.podman_ready = False
        self.failed: int | None = None

    # -- the steps
    def result(self, index: int) -> Result:
        while len(self.results) <= index:
            i = len(self.results)
            if self.failed is not None:
                self.results.append(Result(None, f"not reached: the block at line "
                                                 f"{BLOCKS[self.failed].line} failed"))
                continue
            try:
                res = self._block(BLOCKS[i])
            except pytest.skip.Exception as exc:
                res = Result(None, str(exc))
            if res.ok is False:
                self.failed = i
                res.why += self._background_logs()
            self.results.append(res)
        return self.results[index]

    def _block(self, block: Block) -> Result:
        if block.podman:
            why = self._prepare_podman()
            if why:
                return Result(None, why)
        for n, cmd in enumerate(block.commands):
            last = n == len(block.commands) - 1
            if cmd.background:
                self._start(cmd)
                continue
            if cmd.code.startswith("export "):
                res = self._export(cmd)
            else:
                res = self._run(cmd, block.output if last else [])
            if not res.ok:
                return res
        return Result(True)

    def _background_logs(self) -> str:
        out = ""
        for log in sorted(self.tmp.glob("bg-*.log")):
            out += f"\n--- {log.name} (the command at that line of usage.md), its end:\n"
            out += log.read_text(errors="replace")[-1500:]
        return out

    def _start(self, cmd: Command) -> None:
        log = open(self.tmp / f"bg-{cmd.line}.log", "wb")
        with log:
            proc = subprocess.Popen(["bash", "-c", cmd.code], cwd=ROOT, env=self.env,
                                    stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append(proc)
        if cmd.code.split()[0] == "tgs-controller":
            sock = self.runtime / "control.sock"
            up = wait_for(lambda: proc.poll() is not None or sock.exists(), timeout=30)
            if proc.poll() is not None or not up:
                pytest.fail(f"usage.md:{cmd.line}: the controller did not come up:\n"
                            + (self.tmp / f"bg-{cmd.line}.log").read_text()[-3000:])

    def _bash(self, code: str) -> tuple[int, str]:
        proc = subprocess.Popen(["bash", "-c", "set -o pipefail\n" + code], cwd=ROOT,
                                env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            stop(proc)
            return -1, f"(still running after {COMMAND_TIMEOUT:g} s: stopped)"
        finally:
            stop(proc)
        return proc.returncode, out

    def _export(self, cmd: Command) -> Result:
        names = re.findall(r"\b([A-Za-z_]\w*)=", cmd.code)
        rc, out = self._bash(cmd.code + "\n" + "".join(f'printf "%s\\0" "${n}"\n'
                                                       for n in names))
        if rc != 0:
            return Result(False, f"usage.md:{cmd.line}: `{cmd.code}` exited {rc}:\n{out}")
        self.env.update(zip(names, out.split("\0")))
        return Result(True)

    def _run(self, cmd: Command, shown: list[str]) -> Result:
        deadline = time.monotonic() + OUTPUT_PATIENCE
        while True:
            rc, out = self._bash(cmd.code)
            if rc != 0:
                return Result(False, f"usage.md:{cmd.line}: `{cmd.code}` exited {rc}:\n"
                                     f"{out[-4000:]}")
            if "tgs-inject cdi" in cmd.code:
                self.cdi_specs.append(Path(out.split(":", 1)[0].strip()))
            missing = missing_lines(shown, out)
            if not missing:
                return Result(True)
            if time.monotonic() > deadline:
                return Result(False, f"usage.md:{cmd.line}: `{cmd.code}` does not print "
                                     f"what the document shows: {missing}\nit printed:\n"
                                     f"{out[-4000:]}")
            time.sleep(1)

    # -- podman
    def _prepare_podman(self) -> str:
        if self.podman_ready:
            return ""
        if self.podman is not None:
            return self.podman
        from container_helpers import fill_rootfs, require_podman
        try:
            require_podman()
            if os.geteuid() != 0:
                pytest.skip("the CDI block writes /var/run/cdi: root only")
            root = fill_rootfs(self.tmp / "rootfs")
        except pytest.skip.Exception as exc:
            self.podman = str(exc)
            return self.podman
        store = self.tmp / "podman"
        store.mkdir()
        conf, storage = store / "containers.conf", store / "storage.conf"
        conf.write_text('[containers]\nnetns = "none"\n'
                        'default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
                        f'[engine]\nruntime = "runc"\ntmp_dir = "{store / "libpod"}"\n')
        storage.write_text(f'[storage]\ndriver = "vfs"\ngraphroot = "{store / "graph"}"\n'
                           f'runroot = "{store / "run"}"\n')
        self.env.update(CONTAINERS_CONF=str(conf), CONTAINERS_STORAGE_CONF=str(storage),
                        IMAGE="localhost/tgs-walkthrough:latest")
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        r = subprocess.run(["podman", "import", "-", self.env["IMAGE"]], stdin=tar.stdout,
                           env=self.env, capture_output=True, text=True, timeout=120)
        tar.wait(timeout=60)
        assert r.returncode == 0, f"podman import: {r.stderr}"
        self.podman_ready = True
        return ""

    # -- the end
    def close(self) -> None:
        for proc in reversed(self.background):
            stop(proc, signal.SIGTERM)
        for spec in self.cdi_specs:
            if spec.name.startswith("tgs.io-gpu-") and spec.suffix == ".json":
                spec.unlink(missing_ok=True)
        shutil.rmtree(self.runtime, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walkthrough]:
    w = Walkthrough(tmp_path_factory.mktemp("walkthrough"))
    try:
        yield w
    finally:
        w.close()


@pytest.mark.parametrize("index", range(len(BLOCKS)),
                         ids=[f"usage.md:{b.line}" for b in BLOCKS])
def test_walkthrough_block(walk: Walkthrough, index: int) -> None:
    res = walk.result(index)
    if res.ok is None:
        pytest.skip(res.why)
    assert res.ok, res.why


# ------------------------------------------------------------------ the document's shape
@pytest.mark.timeout(30)
def test_every_shell_block_says_whether_it_runs() -> None:
    lines = DOC.read_text().splitlines()
    unmarked = [line for line, lang, mark, _ in _fences(lines) if lang == "sh" and not mark]
    assert unmarked == [], "docs/usage.md: a ```sh block without <!-- walkthrough --> or " \
                           "<!-- not run: why --> above it, at lines " + str(unmarked)
    assert BLOCKS and any(b.output for b in BLOCKS)


@pytest.mark.timeout(30)
def test_reading_and_matching(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- walkthrough -->\n```sh\na --x 1   # say # more\n"
                   "b 'c # d' \\\n  e &\n# only a comment\n```\n\n"
                   "<!-- walkthrough output -->\n```text\nNAME  A ... end\n```\n")
    (block,) = read_walkthrough(doc)
    assert [(c.code, c.background) for c in block.commands] == [
        ("a --x 1", False), ("b 'c # d' \\\n  e", True)]
    assert block.output == ["NAME  A ... end"]
    assert line_matches("NAME  A ... end", "NAME A 1.2G/s  - end")
    assert not line_matches("NAME  A ... end", "NAME AB 1 end")
    assert line_matches("x ... y ... z", "x 1 y 2 z")
    assert line_matches("x ... y", "x y") and line_matches("GPU 0B ...", "GPU 0B")
    assert not line_matches("GPU 0B ...", "GPU 0B/16GiB")
    assert line_matches('{"a":1,...,"z":false}', '{"a":1,"b":[1, 2],"z":false}')
    assert not line_matches("x ... y ... z", "x 1 z 2 y")
    assert not line_matches("abc", "abcd")
