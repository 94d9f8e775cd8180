"""A command run in a process of its own (`cli.launch`): the bundled model starts loading before
the command's imports, and the process ends without tearing its modules down (`exit_now`), yet
what it queued for its exit is still done, and what it printed still arrives whole."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest


def octobrain(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`octobrain <args>` as its own process, in-process (the service off)."""
    return subprocess.run(
        [sys.executable, "-m", "octobrain", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
        "OCTOBRAIN_SERVICE_ENABLED": "0",
    }


def test_an_access_queued_for_the_exit_is_committed(env: dict[str, str]) -> None:
    # `remember` queues the access and commits it as its process exits (an `atexit` handler).
    scope = ["memory", "--scope", "github.com/acme/api"]
    content = "Postgres 16 is the primary database."
    made = octobrain(*scope, "memorize", "-t", "Primary database", "-c", content,
                     "--format", "json", env=env)  # fmt: skip
    assert made.returncode == 0, made.stderr
    mid = json.loads(made.stdout)["id"]
    found = octobrain(*scope, "remember", "postgres database", "--format", "json", env=env)
    assert found.returncode == 0, found.stderr
    assert [r["id"] for r in json.loads(found.stdout)["results"]] == [mid]
    got = octobrain(*scope, "get", mid, "--format", "json", env=env)
    assert json.loads(got.stdout)["access_count"] == 1


def test_long_output_reaches_a_pipe_whole(env: dict[str, str]) -> None:
    # Well past a pipe's 64 KiB: the end of it is still in the process's buffer at its exit.
    scope = ["memory", "--scope", "github.com/acme/api"]
    body = "The deploy pipeline promotes a build from staging to production. " * 60
    ids = []
    for i in range(24):
        made = octobrain(*scope, "memorize", "-t", f"Deploy step {i}", "-c", f"{body} Step {i}.",
                         "--format", "json", env=env)  # fmt: skip
        assert made.returncode == 0, made.stderr
        ids.append(json.loads(made.stdout)["id"])
    listed = octobrain(*scope, "recent", "--limit", "50", "--format", "json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.encode()) > 96 * 1024
    assert sorted(m["id"] for m in json.loads(listed.stdout)) == sorted(ids)


def test_a_usage_error_keeps_its_exit_code_and_message(env: dict[str, str]) -> None:
    done = octobrain("memory", "--scope", "github.com/acme/api", "remember", "x", env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "error: query: must be 2–500 bytes of UTF-8 after trimming, got 1\n"


def _exit_now(body: str, tmp_path: Path, **run: object) -> subprocess.CompletedProcess[str]:
    script = "import atexit, sys, threading, time\nfrom octobrain.cli.launch import exit_now\n"
    return subprocess.run(
        [sys.executable, "-c", script + textwrap.dedent(body)],
        cwd=tmp_path,
        text=True,
        timeout=60,
        check=False,
        **run,  # type: ignore[call-overload]
    )


def test_exit_now_waits_for_threads_then_runs_exit_handlers(tmp_path: Path) -> None:
    body = """
        def late():
            time.sleep(0.3)
            open("thread", "w").write("done")
        threading.Thread(target=late).start()
        atexit.register(lambda: open("atexit", "w").write(open("thread").read()))
        print("answer")
        exit_now(3)
    """
    done = _exit_now(body, tmp_path, capture_output=True)
    assert done.returncode == 3 and done.stdout == "answer\n"
    # The handler ran after the thread had finished, as in an interpreter's own exit.
    assert (tmp_path / "atexit").read_text() == "done"


def test_exit_now_reports_as_the_interpreter_does(tmp_path: Path) -> None:
    message = _exit_now("exit_now('cannot go on')", tmp_path, capture_output=True)
    assert message.returncode == 1 and message.stderr == "cannot go on\n"
    # Output still buffered that cannot be written (a full disk) fails the exit, not 0: with
    # one line saying so (it was the interpreter's silent 120).
    body = """
        sys.stdout = open("/dev/full", "w", buffering=65536)
        print("answer")
        exit_now(0)
    """
    lost = _exit_now(body, tmp_path, capture_output=True)
    assert lost.returncode == 1
    assert lost.stderr == "error: output: cannot be written (No space left on device)\n"


def test_a_new_process_answers_with_the_bundled_model_it_loaded_ahead(env: dict[str, str]) -> None:
    env = {**env, "OCTOBRAIN_EMBEDDING_MODEL": "minilm"}
    scope = ["memory", "--scope", "github.com/acme/api"]
    content = "API clients are throttled with a token bucket per key: 100 requests a minute."
    made = octobrain(*scope, "memorize", "-t", "Rate limiting decision", "-c", content,
                     "--format", "json", env=env)  # fmt: skip
    assert made.returncode == 0, made.stderr
    found = octobrain(*scope, "remember", "how do we throttle clients", "--format", "json", env=env)
    assert found.returncode == 0, found.stderr
    assert [r["id"] for r in json.loads(found.stdout)["results"]] == [json.loads(made.stdout)["id"]]


def test_a_hook_with_no_transcript_to_digest_does_not_load_the_model_ahead(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Before: `hook session-end` (and `pre-compact`) loaded the bundled model ahead whatever
    # its input, 75 MB and CPU for nothing when its transcript is gone (nothing to embed).
    script = (
        "import sys; from octobrain.cli import launch; "
        "launch._load_model_ahead = lambda: print('loads ahead', file=sys.stderr); "
        "launch.main(['hook', 'session-end'], prog_name='octobrain')"
    )
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("")
    said = []
    for path in (tmp_path / "gone.jsonl", transcript):
        hook = {"session_id": "s1", "transcript_path": str(path), "cwd": str(tmp_path)}
        done = subprocess.run(
            [sys.executable, "-c", script], input=json.dumps(hook), capture_output=True,
            text=True, env=env, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        said.append("loads ahead" in done.stderr)
    assert said == [False, True]  # (a transcript there: it embeds its digest)
    # Read as the hook reads it: JSON nested past the recursion limit was a RecursionError
    # traceback from the launcher, exit 1, before the hook could say what is wrong.
    nested = subprocess.run(
        [sys.executable, "-c", script], input="[" * 200_000, capture_output=True, text=True,
        env=env, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert nested.returncode == 0 and "Traceback" not in nested.stderr, nested.stderr
    assert "nested too deeply" in nested.stderr


def test_the_config_is_read_ahead_without_a_second_warning_or_error(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The thread loading the model ahead reads the config too: what is wrong with it is the
    # command's to say, once.
    config = tmp_path / "config.toml"
    env = {**env, "OCTOBRAIN_CONFIG_PATH": str(config)}
    config.write_text("[search]\nbogus_key = 1\n")
    for group in ("memory", "knowledge"):  # (`knowledge search` loads the model ahead too)
        command = "remember" if group == "memory" else "search"
        warned = octobrain(group, "--scope", "github.com/acme/api", command, "postgres", env=env)
        assert warned.returncode == 0, warned.stderr
        assert warned.stderr == f"{config}: unknown config key 'search.bogus_key' is ignored\n"
    config.write_text("[search\n")
    broken = octobrain("memory", "--scope", "github.com/acme/api", "remember", "postgres", env=env)
    assert broken.returncode == 2 and broken.stderr.count("\n") == 1, broken.stderr
    assert broken.stderr.startswith(f"error: {config}: invalid TOML")


def test_a_profiled_command_still_writes_its_profile(env: dict[str, str], tmp_path: Path) -> None:
    # cProfile (and a debugger, coverage) report once the command returns: such a process exits
    # the interpreter's usual way.
    out = tmp_path / "stats.prof"
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "octobrain", "memory", "stats"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0


def test_a_ctrl_c_in_the_import_system_waits_until_it_is_out(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Once the model loads ahead, two threads import. A Ctrl-C raised inside importlib's own
    # locking (between taking its global lock and the `try` giving it back) left that lock held,
    # and the process hung. Here the Ctrl-C lands in one of importlib's frames, as it can: it is
    # sent again, lands outside, and the command is interrupted as before.
    script = """
        import signal, sys
        # As a command started at a terminal has it (the suite may run as a background job,
        # whose SIGINT is ignored and stays ignored: the check after this one).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from octobrain.cli import launch

        frames = []
        class Spy:
            def find_spec(self, name, path=None, target=None):
                frames.append(sys._getframe(1))  # importlib's own frame, running this finder
        sys.meta_path.insert(0, Spy())
        try:
            import octobrain_no_such_module
        except ImportError:
            pass
        del sys.meta_path[0]
        assert frames[0].f_code.co_filename.startswith("<frozen importlib.")
        launch._load_model_ahead()
        try:
            signal.getsignal(signal.SIGINT)(signal.SIGINT, frames[0])
        except KeyboardInterrupt:
            sys.exit("raised inside importlib")
        try:
            while True:  # (sent again a moment later: the loop is where it lands)
                pass
        except KeyboardInterrupt:
            print("raised outside")
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "raised outside\n", "")
    # An ignored SIGINT (a command started in the background) stays ignored.
    ignored = subprocess.run(
        [sys.executable, "-c", "import signal; from octobrain.cli import launch; "
         "signal.signal(signal.SIGINT, signal.SIG_IGN); launch._load_model_ahead(); "
         "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert ignored.stdout == "True\n", ignored.stderr


def test_a_ctrl_c_while_a_command_starts_ends_it_in_one_line(env: dict[str, str]) -> None:
    # Sent while the command's modules were imported (or the service asked), it printed a
    # traceback of 20–50 lines of wherever it landed, and the process died of the signal.
    # Landing in a module's own code as it was imported (lancedb's), it left the module, a
    # class or an event loop half made: "module 'lancedb' has no attribute 'connect'", a
    # traceback, "Exception ignored … _ssock" (3 of 80 such Ctrl-Cs).
    import signal
    import time

    # Timed from the entry point's first line (what the `octobrain` script calls once it has
    # imported `cli.launch`): before it, the interpreter's own start, which no handler of ours
    # can cover, took over 0.15 s on a loaded machine, and the test's Ctrl-C landed there.
    for delay in (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.35):
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys, octobrain.cli.launch as l; print('entered', "
             "flush=True); l.main(['memory', '--scope', 'acme/api', 'remember', 'how do we "
             "deploy'])"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline() == "entered\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err, (delay, err)
        assert proc.returncode in (0, 1), (delay, proc.returncode, err)  # (0: it was done)
        assert err in ("", "\nAborted!\n") or proc.returncode == 0, (delay, err)


# Sends the process a Ctrl-C as the launcher's own modules are imported: a finder that the
# interpreter asks before its own, once, for `octobrain.cli.service_client`.
_CTRL_C_AS_LAUNCH_IMPORTS = """
import os, signal, sys

class CtrlC:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "octobrain.cli.service_client":
            sys.meta_path.remove(CtrlC)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlC)
"""


@pytest.mark.parametrize("how", ["script", "-m"])
def test_a_ctrl_c_while_the_launcher_is_imported_ends_it_in_one_line(
    env: dict[str, str], tmp_path: Path, how: str
) -> None:
    # The first ~30 ms: the launcher's imports, before its `main` can catch anything. A
    # Ctrl-C there printed a traceback of the import and the process died of the signal
    # (exit 130): 39 of 60 Ctrl-Cs sent 0-30 ms into `memory remember`.
    (tmp_path / "sitecustomize.py").write_text(_CTRL_C_AS_LAUNCH_IMPORTS, encoding="utf-8")
    script = Path(sys.executable).with_name("octobrain")
    command = [str(script)] if how == "script" else [sys.executable, "-m", "octobrain"]
    done = subprocess.run(
        [*command, "memory", "--scope", "acme/api", "remember", "how do we deploy"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**env, "PYTHONPATH": str(tmp_path)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "\nAborted!\n")
    # `import octobrain` in a program of its own keeps the interpreter's Ctrl-C.
    kept = subprocess.run(
        [sys.executable, "-c", "import signal, octobrain; "
         "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # (pytest run with &)
    )  # fmt: skip
    assert kept.stdout == "True\n", kept.stderr


def test_each_kind_of_failure_exits_with_the_code_help_gives(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Scripts tell a mistake (2) from a failure that is not theirs (1) by the code `--help`
    # gives, whichever command it was: `memory migrate` of a damaged store was LanceDB's
    # 30-line traceback (`ValueError: Table 'memories' was not found`).
    from click.testing import CliRunner

    from octobrain.cli.main import main

    def run(*args: str) -> tuple[int, str]:
        done = CliRunner().invoke(main, list(args), env=env)
        assert isinstance(done.exception, SystemExit | None), done.exception  # no traceback
        assert done.stderr.startswith("error: ") or done.exit_code == 0, done.stderr
        return done.exit_code, done.stdout

    helped = octobrain("--help", env=env).stdout
    assert "Exit codes, the same for every command:" in helped
    assert "\n    2    bad input" in helped and "\n    143  ended by SIGTERM" in helped
    # Declining at a terminal is no failure (test_cli_streams: exit 0, nothing changed).
    assert 'or a question answered "no"\n' in helped and ": nothing changed\n" in helped
    scope = ["--scope", "github.com/acme/api"]
    missing = str(tmp_path / "missing.jsonl")
    assert run("memory", *scope, "memorize", "-t", "Primary database", "-c", "Postgres 16.")[0] == 0
    not_found = [
        ("memory", *scope, "get", "deadbeef"),
        ("memory", *scope, "update", "deadbeef", "-t", "A new title"),
        ("memory", *scope, "graph", "deadbeef"),
        ("memory", *scope, "relate", "deadbeef", "cafebabe"),
        ("memory", *scope, "unconsolidate", "deadbeef"),
        ("memory", *scope, "forget", "deadbeef", "--yes"),
        ("memory", "restore", "999", "--yes"),
        ("memory", *scope, "import", missing),
        ("knowledge", *scope, "read", missing),
        ("knowledge", *scope, "delete", "no-such-note"),
        ("knowledge", *scope, "delete-source", missing),
        ("no-such-command",),
        ("memory", "recent", "--no-such-option"),
    ]
    for args in not_found:
        assert run(*args, "--format", "json") == (2, ""), args
    shutil.rmtree(Path(env["OCTOBRAIN_DATA_DIR"]) / "db" / "memories.lance" / "_versions")
    damaged = [
        ("memory", *scope, "stats"),
        ("memory", *scope, "remember", "postgres"),
        ("memory", "migrate", "--to", str(tmp_path / "copy")),
        ("brief", *scope),
    ]
    for args in damaged:
        assert run(*args, "--format", "json") == (1, ""), args
    doctor = CliRunner().invoke(main, ["doctor", "--format", "json"], env=env)
    assert doctor.exit_code == 1 and json.loads(doctor.stdout)["ok"] is False  # (a report)


def test_a_failure_that_is_not_the_command_lines_exits_1_and_a_mistake_2(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--help`: 1 for "a failure that is not the command line's", 2 for bad input. An export
    # onto a full disk and a URL whose server failed or is down exited 2, as mistakes.
    import errno
    import http.server
    import threading

    from click.testing import CliRunner

    from octobrain.cli.main import main

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503 if self.path == "/down" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    env = {**env, "OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS": "127.0.0.1"}

    def run(*args: str) -> tuple[int, str]:
        done = CliRunner().invoke(main, list(args), env=env)
        assert isinstance(done.exception, SystemExit | None), done.exception  # no traceback
        last = done.stderr.splitlines()[-1]  # (after a progress line)
        assert done.stdout == "" and last.startswith("error: "), done.stderr
        return done.exit_code, last

    scope = ("--scope", "github.com/acme/api")
    assert CliRunner().invoke(main, ["memory", *scope, "memorize", "-t", "Primary database",
                                     "-c", "Postgres 16."], env=env).exit_code == 0  # fmt: skip
    try:
        assert run("knowledge", *scope, "index", f"{base}/down")[0] == 1
        assert run("knowledge", *scope, "index", f"{base}/missing")[0] == 2  # (a 404: not found)
        with socket_closed() as port:
            assert run("knowledge", *scope, "index", f"http://127.0.0.1:{port}/")[0] == 1
    finally:
        server.shutdown()
        server.server_close()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = tmp_path / "out.jsonl"
    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", full)
        code, said = run("memory", *scope, "export", str(out))
    assert (code, said) == (
        1, f"error: output: cannot write {out}: No space left on device; nothing was written"
    )  # fmt: skip
    assert not out.exists()
    assert run("memory", *scope, "export", str(tmp_path / "no-such-dir" / "out.jsonl"))[0] == 2


@contextlib.contextmanager
def socket_closed() -> Iterator[int]:
    """A loopback port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield port


def test_knowledge_tables_that_cannot_be_made_are_one_line_not_a_traceback(
    env: dict[str, str],
) -> None:
    # Their lock file could not be made (a read-only store, or a folder in its place): the
    # first `knowledge` command on the store was a traceback ending in IsADirectoryError.
    (Path(env["OCTOBRAIN_DATA_DIR"]) / "db" / ".knowledge.lock").mkdir(parents=True)
    done = octobrain("knowledge", "--scope", "github.com/acme/api", "search", "deploys", env=env)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert (
        done.stderr.startswith("error: store: cannot write to ") and "Traceback" not in done.stderr
    )
    assert done.stderr.count("\n") == 1
