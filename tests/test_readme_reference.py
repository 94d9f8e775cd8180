"""The README's reference parts agree with the program, both ways: the options table names
options the commands have, every option is named somewhere, every setting it names exists with
the default it states, and every `OCTOBRAIN_*` variable it names is one octobrain reads.

(`test_readme_commands.py` runs the README's command lines; this file reads its lists.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import click

from octobrain.cli.main import main
from octobrain.config import Config, ignored_env
from octobrain.server.schemas import TOOLS_BY_NAME
from tests.test_config import leaf_keys
from tests.test_readme_commands import README

PACKAGE = README.parent / "python" / "octobrain"
OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")


def readme() -> str:
    return README.read_text(encoding="utf-8")


def commands(group: click.Group = main, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path under `group`, groups included (they take options too)."""
    for name, command in group.commands.items():
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


def command_at(path: tuple[str, ...]) -> click.Command | None:
    command: click.Command = main
    for word in path:
        if not isinstance(command, click.Group) or word not in command.commands:
            return None
        command = command.commands[word]
    return command


def option_names(path: tuple[str, ...]) -> set[str]:
    """The options `path` takes: its own and its groups' (`memory --scope`), and for a group
    named alone (`every bench`), its commands'."""
    names: set[str] = set()
    paths = [path[:i] for i in range(1, len(path) + 1)]
    paths += [sub for sub in commands() if sub[: len(path)] == path]
    for each in paths:
        for param in command_at(each).params:  # type: ignore[union-attr]
            if isinstance(param, click.Option):
                names.update(param.opts, param.secondary_opts)
    return names


def options_table() -> list[tuple[int, list[tuple[str, ...]], str]]:
    """The rows of the table `| command | also takes |`: line, commands named, options cell.
    A row names commands as `memory recent` / `graph`: a bare name is under the group before."""
    lines = readme().splitlines()
    start = lines.index("| command | also takes |") + 2
    rows = []
    for number, line in enumerate(lines[start:], start + 1):
        if not line.startswith("| "):
            break
        first, rest = line[2:].split(" | ", 1)
        named: list[tuple[str, ...]] = []
        group: tuple[str, ...] = ()
        for quoted in re.findall(r"`([^`]+)`", first):
            words = tuple(w for w in quoted.split() if w.islower() and w.replace("-", "").isalpha())
            if len(words) > 1 and command_at(words) is not None:
                group = words[:-1]
                named.append(words)
            elif command_at((*group, *words)) is not None:
                named.append((*group, *words))
            elif command_at(words) is not None:
                named.append(words)
        rows.append((number, named, rest))
    return rows


# Options a row's prose names for another command: `memory relate`'s types are refused
# "likewise in `--related-to ID:TYPE`" (memorize's option).
ELSEWHERE = {("memory", "relate"): {"--related-to"}}


def test_the_options_table_names_real_commands_and_their_options() -> None:
    rows = options_table()
    assert len(rows) >= 15, rows
    wrong = []
    for number, named, cell in rows:
        assert named, f"README line {number}: names no command octobrain has"
        takes = set().union(*(option_names(path) for path in named))
        takes |= set().union(*(ELSEWHERE.get(path, set()) for path in named))
        wrong += [(number, option) for option in OPTION.findall(cell) if option not in takes]
    assert wrong == [], "options the README's table names that its commands do not take"


def test_every_option_of_every_command_is_named_in_the_readme() -> None:
    words = set(re.findall(r"-[\w-]+", readme()))
    unnamed = []
    for path in commands():
        for param in command_at(path).params:  # type: ignore[union-attr]
            names = {*param.opts, *param.secondary_opts}
            if isinstance(param, click.Option) and not names & words and "--help" not in names:
                unnamed.append((" ".join(path), sorted(names)))
    assert unnamed == [], "options a user can find only in --help"


def _named_settings() -> Iterator[tuple[int, str, str | None]]:
    """`section.key` in backticks (a key, else a module or a tool's argument, skipped), with
    the parenthesis right after it, if any: line, key, what the parenthesis says."""
    sections = "|".join({f.split(".")[0] for f in leaf_keys()})
    pattern = re.compile(rf"`((?:{sections})(?:\.\w+)+)`(?: \(([^)]*)\))?")
    for number, line in enumerate(readme().splitlines(), 1):
        for match in pattern.finditer(line):
            dotted = match.group(1)
            first, *rest = dotted.split(".")
            module = PACKAGE.joinpath(first, *rest[:1]).with_suffix(".py")
            tool = TOOLS_BY_NAME.get(first)
            if module.exists() or (tool is not None and rest[0] in tool.properties):
                continue
            yield number, dotted, match.group(2)


UNITS = {"": 1, "KiB": 1024, "MiB": 1024 * 1024}
# `(64)`, `(1,000)`, `(default 200,000)`, `(64 KiB, about 16k tokens …)`.
DEFAULT = re.compile(r"(?:default )?([\d,]+(?:\.\d+)?)(?: (KiB|MiB))?(?:,.*)?")


def test_every_setting_the_readme_names_exists_with_the_default_it_states() -> None:
    defaults = {key: _value(Config(), key) for key in leaf_keys()}
    named = list(_named_settings())
    assert len(named) >= 20, named
    unknown = [(number, key) for number, key, _ in named if key not in defaults]
    assert unknown == [], "settings the README names that octobrain has not"
    stated = []
    for number, key, said in named:
        number_said = re.fullmatch(DEFAULT, said or "")
        if number_said is None:
            continue  # an example, a list, a note: not a default
        value = float(number_said.group(1).replace(",", "")) * UNITS[number_said.group(2) or ""]
        stated.append(key)
        assert value == defaults[key], f"README line {number}: {key} ({said}) is {defaults[key]}"
    assert len(stated) >= 10, stated


def _value(config: object, dotted: str) -> object:
    for part in dotted.split("."):
        config = getattr(config, part)
    return config


def test_every_octobrain_variable_the_readme_names_is_read() -> None:
    named = set(re.findall(r"OCTOBRAIN_[A-Z][A-Z0-9_]*[A-Z0-9]", readme()))
    assert len(named) >= 10, named
    # The README's own example of a misspelt setting, which `config show` flags.
    assert ignored_env(named) == ["OCTOBRAIN_BRIEF_MAXTOKENS"]


def test_the_readme_lists_the_tools_the_server_serves() -> None:
    listed = re.search(r"`octobrain mcp` serves (\w+) tools — (.*?) —", readme(), flags=re.S)
    assert listed is not None
    names = re.findall(r"`(\w+)`", listed.group(2))
    assert sorted(names) == sorted(TOOLS_BY_NAME)
    assert listed.group(1) == ["four", "five", "six", "seven"][len(names) - 4]


def test_every_option_says_in_its_help_what_it_takes() -> None:
    # `memory relate --help` showed -t, -s and -d with no word: which link types exist was
    # found only by giving a wrong one; nor did `memorize --help` list the memory types.
    from octobrain.models import LINK_TYPES, MemoryType

    silent = [
        (" ".join(path), param.opts)
        for path in commands()
        for param in command_at(path).params  # type: ignore[union-attr]
        if isinstance(param, click.Option) and not param.hidden and not param.help
    ]
    assert silent == []
    for command, option, values in [
        ("memory relate", "--relationship-type", LINK_TYPES),
        ("memory memorize", "--memory-type", [t.value for t in MemoryType]),
    ]:
        (param,) = [p for p in command_at(tuple(command.split())).params if option in p.opts]  # type: ignore[union-attr]
        assert all(value in (param.help or "") for value in values), (command, param.help)


def test_from_python_names_every_name_octobrain_exports() -> None:
    import octobrain

    text = readme()
    section = text[text.index("### From Python") : text.index("### Knowledge: documents")]
    named = set(re.findall(r"`(\w+)`", section))
    assert sorted(set(octobrain.__all__) - named) == []
